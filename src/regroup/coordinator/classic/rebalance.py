"""Preparing and completing a classic rebalance, and the liveness timers that drive it (session,
new-member join, initial delay, join phase, pending sync): ``SessionTimer``, ``JoinPhaseTimer`` and
``SyncPhaseTimer``, each firing its own handler on the group it names if that group is still there; and
``JoinAnswersTimer`` and ``SyncAnswersTimer``, answering a large group's parked JoinGroups (SyncGroups) a chunk
at a time after its join phase completed (after the leader's assignment was stored):
``CoordinatorConfig.classic_answers_per_call``; and ``ListMembersTimer`` and ``AssignTimer``, listing a large
group's members for its leader's JoinGroup answer a chunk at a time when its join phase completed, then answering
the first JoinGroups, and storing its assignment a chunk at a time after its leader's SyncGroup, then writing the
group's record (``classic_members_per_call``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from regroup.coordinator.classic.group import (
    Assigning,
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    ClassicStates,
    Listing,
)
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import (
    AssignmentStored,
    GroupCreated,
    GroupStateChanged,
    LeaveReason,
    MemberJoined,
    MemberLeft,
    MemberProtocolsChanged,
)
from regroup.coordinator.groups import Groups
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupMember, JoinGroupResponse, SyncGroupResponse
from regroup.records.builders import new_group_metadata_record
from regroup.records.model import MemberMetadata


# ------------------------------------------------------------------------------------------------ timers
def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("classic-session", group_id, member_id)


def join_phase_key(group_id: str) -> tuple[str, str]:
    return ("classic-join", group_id)


def sync_phase_key(group_id: str) -> tuple[str, str]:
    return ("classic-sync", group_id)


def join_answers_key(group_id: str) -> tuple[str, str]:
    return ("classic-join-answers", group_id)


def sync_answers_key(group_id: str) -> tuple[str, str]:
    return ("classic-sync-answers", group_id)


def assign_key(group_id: str) -> tuple[str, str]:
    return ("classic-assign", group_id)


def list_members_key(group_id: str) -> tuple[str, str]:
    return ("classic-list-members", group_id)


def _live(groups: Groups, group_id: str) -> ClassicGroup | None:
    group = groups.typed(group_id, ClassicGroup)
    return None if group is None or group.is_in(ClassicStates.DEAD) else group


@dataclass(slots=True, eq=False)
class SessionTimer:
    """A member's (or a pending member id's) session expired."""

    group_id: Final[str]
    member_id: Final[str]

    @property
    def key(self) -> tuple[str, str, str]:
        return session_key(self.group_id, self.member_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = _live(groups, self.group_id)
        if group is not None:
            on_session_timer(ctx, group, self.member_id)


@dataclass(slots=True, eq=False)
class JoinPhaseTimer:
    """The join phase (or the initial-rebalance delay) ended."""

    group_id: Final[str]

    @property
    def key(self) -> tuple[str, str]:
        return join_phase_key(self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = _live(groups, self.group_id)
        if group is not None:
            on_join_timer(ctx, group)


@dataclass(slots=True, eq=False)
class JoinAnswersTimer:
    """The next chunk of the parked JoinGroups a completed join phase left unanswered."""

    paced: ClassVar[bool] = True  # (fired only by ``advance``: ``timers.is_paced``)
    group_id: Final[str]

    @property
    def key(self) -> tuple[str, str]:
        return join_answers_key(self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = _live(groups, self.group_id)
        if group is not None:
            answer_joins_left(ctx, group)


@dataclass(slots=True, eq=False)
class SyncAnswersTimer:
    """The next chunk of the parked SyncGroups the leader's SyncGroup left unanswered."""

    paced: ClassVar[bool] = True  # (fired only by ``advance``: ``timers.is_paced``)
    group_id: Final[str]

    @property
    def key(self) -> tuple[str, str]:
        return sync_answers_key(self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = _live(groups, self.group_id)
        if group is not None:
            answer_syncs_left(ctx, group)


@dataclass(slots=True, eq=False)
class ListMembersTimer:
    """The next chunk of a large group's members to list for its leader's JoinGroup answer."""

    paced: ClassVar[bool] = True  # (fired only by ``advance``: ``timers.is_paced``)
    group_id: Final[str]

    @property
    def key(self) -> tuple[str, str]:
        return list_members_key(self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = _live(groups, self.group_id)
        if group is not None:
            list_members_chunk(ctx, group)


@dataclass(slots=True, eq=False)
class AssignTimer:
    """The next chunk of the assignment a large group's leader sent, to store."""

    paced: ClassVar[bool] = True  # (fired only by ``advance``: ``timers.is_paced``)
    group_id: Final[str]

    @property
    def key(self) -> tuple[str, str]:
        return assign_key(self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = _live(groups, self.group_id)
        if group is not None:
            store_assignment_chunk(ctx, group)


@dataclass(slots=True, eq=False)
class SyncPhaseTimer:
    """The members that have not sent SyncGroup for this generation ran out of time."""

    group_id: Final[str]

    @property
    def key(self) -> tuple[str, str]:
        return sync_phase_key(self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = _live(groups, self.group_id)
        if group is not None:
            on_sync_timer(ctx, group)


# ------------------------------------------------------------------------------------------------ events
def classic_state_changed(group: ClassicGroup) -> GroupStateChanged:
    return GroupStateChanged(
        group_id=group.group_id,
        group_type="classic",
        state=group.state.value,
        generation=group.generation,
        protocol=group.protocol_name,
        protocol_type=group.protocol_type,
        leader=group.leader_id,
        assignment_epoch=None,
        members=len(group.members),
    )


def transition(ctx: Ctx, group: ClassicGroup, to: ClassicGroupState) -> None:
    """The group's transition (the table in ``ClassicGroup.transition``), and its event."""
    group.transition(to, ctx.now_ms)
    ctx.event(classic_state_changed(group))


def assignment_stored(group: ClassicGroup, members: tuple[MemberMetadata, ...]) -> AssignmentStored:
    """The group's assignments as ``members``, the members of the record that stores them."""
    return AssignmentStored(
        group_id=group.group_id,
        generation=group.generation,
        protocol_type=group.protocol_type,
        protocol=group.protocol_name,
        members=members,
    )


def protocol_names(protocols: tuple[tuple[str, bytes], ...]) -> tuple[str, ...]:
    """The names of the protocols a JoinGroup lists, in its order."""
    return tuple([name for name, _ in protocols])


def member_joined(ctx: Ctx, group: ClassicGroup, member: ClassicGroupMember) -> None:
    ctx.event(
        MemberJoined(
            group.group_id,
            "classic",
            member.member_id,
            member.client_id,
            group.generation,
            protocol_names(member.protocols),
        )
    )


def protocols_changed(
    ctx: Ctx, group: ClassicGroup, member: ClassicGroupMember, protocols: tuple[tuple[str, bytes], ...]
) -> None:
    """A known member's JoinGroup lists ``protocols``: say so when their names are not the ones it listed before
    (``member.protocols``, not yet replaced)."""
    before = member.protocols
    if before is protocols:
        return
    if len(before) == len(protocols) and all(before[i][0] == protocols[i][0] for i in range(len(before))):
        return
    ctx.event(MemberProtocolsChanged(group.group_id, "classic", member.member_id, protocol_names(protocols)))


def member_left(ctx: Ctx, group: ClassicGroup, member: ClassicGroupMember, reason: LeaveReason) -> None:
    ctx.event(MemberLeft(group.group_id, "classic", member.member_id, member.client_id, group.generation, reason))


def announce_group(ctx: Ctx, group: ClassicGroup) -> None:
    """A group that entered the namespace as it is (not through transitions: new, or converted from a consumer
    group): created, its members joined, its state and, when Stable, its assignments."""
    ctx.event(GroupCreated(group.group_id, "classic"))
    for member in group.members.values():
        member_joined(ctx, group, member)
    ctx.event(classic_state_changed(group))
    if group.state is ClassicStates.STABLE:
        ctx.event(assignment_stored(group, group.record_entries()))


# ----------------------------------------------------------------------------------------------- helpers
def persist(ctx: Ctx, group: ClassicGroup) -> None:
    ctx.emit(new_group_metadata_record(group.group_id, group.to_record_value()))


def schedule_session(ctx: Ctx, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
    ctx.timers.schedule(SessionTimer(group.group_id, member_id), ctx.now_ms + timeout_ms)


def cancel_session(ctx: Ctx, group: ClassicGroup, member_id: str) -> None:
    ctx.timers.cancel(session_key(group.group_id, member_id))


def answer_join_with_error(ctx: Ctx, member: ClassicGroupMember, error: ErrorCode, member_id: str = "") -> None:
    if member.awaiting_join_key is not None:
        ctx.complete(member.awaiting_join_key, JoinGroupResponse(error=error, member_id=member_id))
        member.awaiting_join_key = None


def remove_member(ctx: Ctx, group: ClassicGroup, member_id: str, reason: LeaveReason) -> None:
    """Drop a member (for ``reason``): cancel its timer and answer a parked JoinGroup with UNKNOWN_MEMBER_ID."""
    member = group.remove(member_id)
    cancel_session(ctx, group, member_id)
    if member is not None:
        member_left(ctx, group, member, reason)
        answer_join_with_error(ctx, member, ErrorCode.UNKNOWN_MEMBER_ID)
        if member.awaiting_sync_key is not None:
            ctx.complete(member.awaiting_sync_key, SyncGroupResponse(error=ErrorCode.UNKNOWN_MEMBER_ID))
            member.awaiting_sync_key = None


def after_departure(ctx: Ctx, group: ClassicGroup) -> None:
    """Someone left or expired: Stable/CompletingRebalance rebalance; PreparingRebalance may complete."""
    if group.is_in(ClassicStates.STABLE, ClassicStates.COMPLETING_REBALANCE):
        prepare_rebalance(ctx, group)
    elif group.is_in(ClassicStates.PREPARING_REBALANCE):
        try_complete_join(ctx, group)


def maybe_prepare_or_complete(ctx: Ctx, group: ClassicGroup) -> None:
    if group.is_in(ClassicStates.STABLE, ClassicStates.COMPLETING_REBALANCE, ClassicStates.EMPTY):
        prepare_rebalance(ctx, group)
    elif group.is_in(ClassicStates.PREPARING_REBALANCE):
        try_complete_join(ctx, group)


def prepare_rebalance(ctx: Ctx, group: ClassicGroup) -> None:
    answer_every_sync_left(ctx, group)  # (their assignment was stored: they are told it, as they would have been)
    if group.is_in(ClassicStates.COMPLETING_REBALANCE):
        group.assignments_cleared = True
        sessions: list[tuple[SessionTimer, int]] = []
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync_key is not None:
                ctx.complete(member.awaiting_sync_key, SyncGroupResponse(error=ErrorCode.REBALANCE_IN_PROGRESS))
                member.awaiting_sync_key = None
                # as for a successful SyncGroup: its session may have lapsed while it was parked
                sessions.append(
                    (SessionTimer(group.group_id, member.member_id), ctx.now_ms + member.session_timeout_ms)
                )
        ctx.timers.schedule_all(sessions)
    ctx.timers.cancel(sync_phase_key(group.group_id))
    group.pending_sync_members.clear()
    was_empty = group.is_in(ClassicStates.EMPTY)
    transition(ctx, group, ClassicStates.PREPARING_REBALANCE)
    if was_empty:
        delay = ctx.config.group_initial_rebalance_delay_ms
        group.initial_delay_ms = delay
        group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        ctx.timers.schedule(JoinPhaseTimer(group.group_id), ctx.now_ms + delay)
        return
    group.initial_delay_ms = None
    if group.has_all_members_joined():
        complete_join(ctx, group)
    else:
        ctx.timers.schedule(JoinPhaseTimer(group.group_id), ctx.now_ms + group.rebalance_timeout_ms())


def try_complete_join(ctx: Ctx, group: ClassicGroup) -> None:
    if (
        group.is_in(ClassicStates.PREPARING_REBALANCE)
        and group.previous_state is not ClassicStates.EMPTY
        and group.has_all_members_joined()
    ):
        complete_join(ctx, group)


def on_join_timer(ctx: Ctx, group: ClassicGroup) -> None:
    """The join-phase timer (or the initial-rebalance delay) fired."""
    if not group.is_in(ClassicStates.PREPARING_REBALANCE):
        return
    if group.initial_delay_ms is not None and group.new_member_added and group.initial_remaining_ms:
        group.new_member_added = False
        new_delay = min(ctx.config.group_initial_rebalance_delay_ms, group.initial_remaining_ms)
        group.initial_remaining_ms = max(group.initial_remaining_ms - group.initial_delay_ms, 0)
        group.initial_delay_ms = new_delay
        ctx.timers.schedule(JoinPhaseTimer(group.group_id), ctx.now_ms + new_delay)
        return
    complete_join(ctx, group)


def complete_join(ctx: Ctx, group: ClassicGroup) -> None:
    ctx.timers.cancel(join_phase_key(group.group_id))
    group.initial_delay_ms = None
    group.new_member_added = False
    for member_id, member in list(group.members.items()):
        if member.awaiting_join_key is None and member.group_instance_id is None:
            remove_member(ctx, group, member_id, "join timeout")
    if group.is_in(ClassicStates.DEAD):
        return
    joined = [m for m in group.members.values() if m.awaiting_join_key is not None]
    if group.members and not joined:
        # nobody rejoined (static members keep their place): wait another rebalance timeout
        ctx.timers.schedule(JoinPhaseTimer(group.group_id), ctx.now_ms + group.rebalance_timeout_ms())
        return
    leader = group.members.get(group.leader_id or "")
    if leader is None or leader.awaiting_join_key is None:
        group.leader_id = joined[0].member_id if joined else None
    group.generation += 1
    if not group.members:
        group.protocol_name = None
        transition(ctx, group, ClassicStates.EMPTY)
        persist(ctx, group)
        return
    group.protocol_name = group.select_protocol()
    transition(ctx, group, ClassicStates.COMPLETING_REBALANCE)
    # every member of the new generation, also a static one that did not rejoin (it gets no response), has its
    # session restarted and is expected to send SyncGroup before the pending-sync timeout
    members = list(group.members.values())
    for member in members:
        member.is_new = False  # (a member whose answer waits stays parked: its session cannot expire meanwhile)
    group.pending_sync_members.update(group.members)
    chunk = ctx.config.classic_members_per_call
    if chunk is None or len(members) <= chunk:
        _answer_first_joins(ctx, group, members, tuple(group.join_entries(members)))
        return
    group.listing = Listing(members, [])
    list_members_chunk(ctx, group)


def list_members_chunk(ctx: Ctx, group: ClassicGroup) -> None:
    """The next chunk of the members of a completed join phase listed for the leader's answer (nothing once a
    transition abandoned them: the next completion answers the JoinGroups still parked); once all are, in a
    call of its own, the first JoinGroups answered, the leader's first."""
    listing = group.listing
    if listing is None:
        return
    members, entries = listing.members, listing.entries
    start = len(entries)
    if start < len(members):
        chunk = ctx.config.classic_members_per_call or len(members)
        entries.extend(group.join_entries(members[start : start + chunk]))
        ctx.timers.schedule(ListMembersTimer(group.group_id), ctx.now_ms + 1)
        return
    group.listing = None
    _answer_first_joins(ctx, group, members, tuple(entries))


def _answer_first_joins(
    ctx: Ctx, group: ClassicGroup, members: list[ClassicGroupMember], everyone: tuple[JoinGroupMember, ...]
) -> None:
    """Answer the leader's JoinGroup (with ``everyone``) and ``classic_answers_per_call`` others, the rest a
    chunk a millisecond (``JoinAnswersTimer``); the members have the rebalance timeout from now to sync."""
    # (the leader first: it assigns while the others are answered)
    members, left = first_chunk(ctx, members, group.members.get(group.leader_id or ""))
    _answer_joins(ctx, group, members, everyone)
    ctx.timers.schedule(SyncPhaseTimer(group.group_id), ctx.now_ms + group.rebalance_timeout_ms())
    group.join_answers_left = [m.member_id for m in left]
    if left:
        ctx.timers.schedule(JoinAnswersTimer(group.group_id), ctx.now_ms + 1)


def first_chunk(
    ctx: Ctx, members: list[ClassicGroupMember], first: ClassicGroupMember | None
) -> tuple[list[ClassicGroupMember], list[ClassicGroupMember]]:
    """``members`` to answer in this call and those left for later (``classic_answers_per_call``; none left when
    it is unset or not exceeded), ``first`` (one of ``members``) moved to the front when they are cut."""
    chunk = ctx.config.classic_answers_per_call
    if chunk is None or len(members) <= chunk:
        return members, []
    if first is not None:
        members.remove(first)
        members.insert(0, first)
    return members[:chunk], members[chunk:]


def _present(group: ClassicGroup, member_ids: list[str]) -> list[ClassicGroupMember]:
    """The members of ``member_ids`` still in the group, in order."""
    members = group.members
    return [m for m in (members.get(member_id) for member_id in member_ids) if m is not None]


def _answer_joins(
    ctx: Ctx, group: ClassicGroup, members: list[ClassicGroupMember], everyone: tuple[JoinGroupMember, ...]
) -> None:
    """Answer the parked JoinGroups of ``members`` with the group's generation (the leader's with ``everyone``)
    and restart their sessions."""
    now_ms = ctx.now_ms
    sessions: list[tuple[SessionTimer, int]] = []
    for member in members:
        if member.awaiting_join_key is not None:
            is_leader = member.member_id == group.leader_id
            ctx.complete(
                member.awaiting_join_key,
                JoinGroupResponse(
                    generation_id=group.generation,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=group.leader_id or "",
                    member_id=member.member_id,
                    members=everyone if is_leader else (),
                ),
            )
            member.awaiting_join_key = None
        sessions.append((SessionTimer(group.group_id, member.member_id), now_ms + member.session_timeout_ms))
    ctx.timers.schedule_all(sessions)


def answer_joins_left(ctx: Ctx, group: ClassicGroup) -> None:
    """The next chunk of the JoinGroups the completion of the group's join phase left, a millisecond later each
    (a timer due at once would fire again in the same call). When the group has moved on to another
    rebalance, the members still parked are answered by its completion instead (with its generation); a
    member gone meanwhile was answered as it left."""
    left = group.join_answers_left
    if not left:
        return
    if not group.is_in(ClassicStates.COMPLETING_REBALANCE, ClassicStates.STABLE):
        group.join_answers_left = []  # (a completion sets them anew)
        return
    chunk = ctx.config.classic_answers_per_call or len(left)
    group.join_answers_left = left[chunk:]
    _answer_joins(ctx, group, _present(group, left[:chunk]), ())
    if group.join_answers_left:
        ctx.timers.schedule(JoinAnswersTimer(group.group_id), ctx.now_ms + 1)


def answer_syncs(ctx: Ctx, group: ClassicGroup, members: list[ClassicGroupMember]) -> None:
    """Answer the parked SyncGroups of ``members`` with their stored assignments and restart their sessions (together:
    one undo entry, not one per member)."""
    now_ms = ctx.now_ms
    sessions: list[tuple[SessionTimer, int]] = []
    for member in members:
        if member.awaiting_sync_key is not None:
            ctx.complete(member.awaiting_sync_key, sync_response(group, member.assignment))
            member.awaiting_sync_key = None
            sessions.append((SessionTimer(group.group_id, member.member_id), now_ms + member.session_timeout_ms))
    ctx.timers.schedule_all(sessions)


def sync_response(group: ClassicGroup, assignment: bytes) -> SyncGroupResponse:
    return SyncGroupResponse(
        protocol_type=group.protocol_type, protocol_name=group.protocol_name, assignment=assignment
    )


def answer_syncs_left(ctx: Ctx, group: ClassicGroup) -> None:
    """The next chunk of the SyncGroups the leader's left, a millisecond later each (as ``answer_joins_left``)."""
    left = group.sync_answers_left
    if not left:
        return
    chunk = ctx.config.classic_answers_per_call or len(left)
    group.sync_answers_left = left[chunk:]
    answer_syncs(ctx, group, _present(group, left[:chunk]))
    if group.sync_answers_left:
        ctx.timers.schedule(SyncAnswersTimer(group.group_id), ctx.now_ms + 1)


def store_assignment(ctx: Ctx, group: ClassicGroup, leader: ClassicGroupMember, given: dict[str, bytes]) -> None:
    """The leader's SyncGroup gave ``given`` (member id -> its assignment): store it, in this call when the group
    has ``classic_members_per_call`` members at most, else that many members' entries of the group's record
    now and the others a chunk at a time (``AssignTimer``, 1 ms later each: a timer due at once would fire again
    in the same call); the group's record is written in the call after the last chunk."""
    chunk = ctx.config.classic_members_per_call
    members = list(group.members.values())
    if chunk is None or len(members) <= chunk:
        _stored(ctx, group, group.record_members(members, given), leader)
        return
    group.assigning = Assigning(members, given, [])
    store_assignment_chunk(ctx, group)


def store_assignment_chunk(ctx: Ctx, group: ClassicGroup) -> None:
    """The next chunk of the assignment being stored (nothing once a transition abandoned it); once every
    member's entry is made, in a call of its own, the group's record, Stable, and the parked SyncGroups
    answered."""
    assigning = group.assigning
    if assigning is None:
        return
    members, stored = assigning.members, assigning.stored
    start = len(stored)
    if start < len(members):
        chunk = ctx.config.classic_members_per_call or len(members)
        stored.extend(group.record_members(members[start : start + chunk], assigning.given))
        ctx.timers.schedule(AssignTimer(group.group_id), ctx.now_ms + 1)
        return
    group.assigning = None
    _stored(ctx, group, stored, group.members.get(group.leader_id or ""))


def _stored(ctx: Ctx, group: ClassicGroup, entries: list[MemberMetadata], leader: ClassicGroupMember | None) -> None:
    """Every member's record entry is made (``entries``, in the order of the group's members): each member holds
    its assignment, the group's record is written and the group is Stable; the parked SyncGroups are answered, the
    leader's first, ``classic_answers_per_call`` of them in this call."""
    members = tuple(entries)
    for entry, member in zip(members, group.members.values(), strict=True):
        member.assignment = entry.assignment
    group.assignments_cleared = False
    ctx.emit(new_group_metadata_record(group.group_id, group.record_value(members)))
    transition(ctx, group, ClassicStates.STABLE)
    ctx.event(assignment_stored(group, members))
    waiting = [m for m in group.members.values() if m.awaiting_sync_key is not None]
    first = leader if leader is not None and leader.awaiting_sync_key is not None else None
    waiting, left = first_chunk(ctx, waiting, first)  # (the leader first: its own answer)
    answer_syncs(ctx, group, waiting)
    group.sync_answers_left = [m.member_id for m in left]
    if left:
        ctx.timers.schedule(SyncAnswersTimer(group.group_id), ctx.now_ms + 1)


def answer_every_sync_left(ctx: Ctx, group: ClassicGroup) -> None:
    """Every SyncGroup the leader's left, now: the group is about to rebalance. (A conversion to a consumer group
    answers every parked request of the group itself.)"""
    if group.sync_answers_left:
        left, group.sync_answers_left = group.sync_answers_left, []
        answer_syncs(ctx, group, _present(group, left))


def on_sync_timer(ctx: Ctx, group: ClassicGroup) -> None:
    """Members that never sent SyncGroup for this generation are removed and the group rebalances."""
    if not group.is_in(ClassicStates.COMPLETING_REBALANCE, ClassicStates.STABLE) or not group.pending_sync_members:
        return
    for member_id in sorted(group.pending_sync_members):
        remove_member(ctx, group, member_id, "sync timeout")
    group.pending_sync_members.clear()
    if group.is_in(ClassicStates.STABLE, ClassicStates.COMPLETING_REBALANCE):
        prepare_rebalance(ctx, group)


def on_session_timer(ctx: Ctx, group: ClassicGroup, member_id: str) -> None:
    if member_id in group.pending_join_members:
        group.pending_join_members.discard(member_id)
        try_complete_join(ctx, group)
        return
    member = group.members.get(member_id)
    if member is None:
        return
    if not member.is_new and (member.awaiting_join_key is not None or member.awaiting_sync_key is not None):
        return  # awaiting a rebalance satisfies the heartbeat
    remove_member(ctx, group, member_id, "session timeout")
    after_departure(ctx, group)
