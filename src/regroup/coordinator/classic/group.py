"""A classic group and its members: states, the transition table, protocol selection, and conversion to
and from the group-metadata record."""

from __future__ import annotations

import enum
import operator
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from regroup.coordinator.result import RequestKey
from regroup.model.errors import CoordinatorBug
from regroup.protocol.classic import JoinGroupMember
from regroup.records.model import GroupMetadataValue, MemberMetadata

#: the protocol type of groups of Kafka consumers (their subscriptions can be decoded)
CONSUMER_PROTOCOL_TYPE: Final = "consumer"


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class ClassicStates:
    """The ``ClassicGroupState`` members as plain class attributes, for the state checks on every request: an
    ``Enum`` class's own attribute lookup (``ClassicGroupState.STABLE``) runs ``EnumType.__getattr__`` machinery
    in Python 3.11, several times slower than a plain class attribute."""

    EMPTY: Final = ClassicGroupState.EMPTY
    PREPARING_REBALANCE: Final = ClassicGroupState.PREPARING_REBALANCE
    COMPLETING_REBALANCE: Final = ClassicGroupState.COMPLETING_REBALANCE
    STABLE: Final = ClassicGroupState.STABLE
    DEAD: Final = ClassicGroupState.DEAD


VALID_PREVIOUS: Final[dict[ClassicGroupState, frozenset[ClassicGroupState]]] = {
    ClassicStates.EMPTY: frozenset({ClassicStates.PREPARING_REBALANCE}),
    ClassicStates.PREPARING_REBALANCE: frozenset(
        {ClassicStates.STABLE, ClassicStates.COMPLETING_REBALANCE, ClassicStates.EMPTY}
    ),
    ClassicStates.COMPLETING_REBALANCE: frozenset({ClassicStates.PREPARING_REBALANCE}),
    ClassicStates.STABLE: frozenset({ClassicStates.COMPLETING_REBALANCE}),
    ClassicStates.DEAD: frozenset(ClassicGroupState),
}


@dataclass(slots=True, kw_only=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join_key: RequestKey | None = None  # parked JoinGroup
    join_version: int = 9
    awaiting_sync_key: RequestKey | None = None  # parked SyncGroup
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(slots=True)
class Assigning:
    """A leader's assignment being stored a chunk at a time: the members of the group when it came, in order, the
    assignment the leader gave each (by member id), and the record entries made so far (those of the first
    ``len(stored)`` members)."""

    members: list[ClassicGroupMember]
    given: dict[str, bytes]
    stored: list[MemberMetadata]


@dataclass(slots=True)
class Listing:
    """A completed join phase's members being listed for the leader's JoinGroup answer a chunk at a time: the
    members of the new generation, in order, and the entries made so far (those of the first ``len(entries)``)."""

    members: list[ClassicGroupMember]
    entries: list[JoinGroupMember]


#: a member's rebalance timeout, read in C (the group's is the longest of 10,000 at each rebalance)
_REBALANCE_TIMEOUT_MS: Final = operator.attrgetter("rebalance_timeout_ms")


@dataclass(slots=True, kw_only=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    previous_state: ClassicGroupState | None = None
    state_timestamp_ms: int = 0
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    new_member_added: bool = False
    initial_delay_ms: int | None = None  # set while the initial-rebalance delay is running
    initial_remaining_ms: int = 0
    #: the stored assignments were cleared by a rebalance restarted from CompletingRebalance and no SyncGroup
    #: has stored new ones yet: cooperative members may own partitions the group no longer records (soft state)
    assignments_cleared: bool = False
    #: the members whose parked JoinGroup the completion of the join phase left for ``JoinAnswersTimer`` (soft
    #: state: ``CoordinatorConfig.classic_answers_per_call``)
    join_answers_left: list[str] = field(default_factory=list, repr=False, compare=False)
    #: likewise the members whose parked SyncGroup the leader's left for ``SyncAnswersTimer``
    sync_answers_left: list[str] = field(default_factory=list, repr=False, compare=False)
    #: the leader's assignment being stored a chunk at a time (soft state: ``CoordinatorConfig.
    #: classic_members_per_call``); any transition abandons it
    assigning: Assigning | None = field(default=None, repr=False, compare=False)
    #: likewise the members being listed for the leader's JoinGroup answer; any transition abandons it
    listing: Listing | None = field(default=None, repr=False, compare=False)
    # candidate_protocols' bookkeeping (derived from the members, not group state): member id -> its
    # protocol list and their names, and per protocol name the number of members supporting it
    _protocols_seen: dict[str, tuple[tuple[tuple[str, bytes], ...], frozenset[str]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _protocol_counts: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    # the members dict that bookkeeping was last brought up to date with, and the members added, removed or
    # given new protocols through this class since (``add``, ``remove``, ``set_protocols``)
    _protocols_synced: dict[str, ClassicGroupMember] | None = field(default=None, init=False, repr=False, compare=False)
    _protocols_dirty: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    # has_all_members_joined's cursor (derived, not group state): the members in the order last scanned, and
    # where the last member found not rejoined stood
    _join_scan: list[ClassicGroupMember] = field(default_factory=list, init=False, repr=False, compare=False)
    _join_scan_at: int = field(default=0, init=False, repr=False, compare=False)
    # the next leader's cursor (derived, not group state): the members in order as of the members dict
    # ``_leader_scan_of`` and no member added since (None: to be taken again), and where the first member still
    # there stood
    _leader_scan: list[ClassicGroupMember] | None = field(default=None, init=False, repr=False, compare=False)
    _leader_scan_of: dict[str, ClassicGroupMember] | None = field(default=None, init=False, repr=False, compare=False)
    _leader_scan_at: int = field(default=0, init=False, repr=False, compare=False)

    # --- state -----------------------------------------------------------------------------------------
    def transition(self, to: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            raise CoordinatorBug(f"group {self.group_id}: illegal transition {self.state.value} -> {to.value}")
        self.previous_state = self.state
        self.state = to
        self.state_timestamp_ms = now_ms
        self.assigning = None
        self.listing = None

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    # --- membership -----------------------------------------------------------------------------------
    def add(self, member: ClassicGroupMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._leader_scan = None
        self._protocols_dirty.add(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        self._protocols_dirty.add(member_id)
        self.pending_sync_members.discard(member_id)
        instance = member.group_instance_id if member is not None else None
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = self._first_member_id()
        return member

    def _first_member_id(self) -> str | None:
        """The first member in the group's order (the next leader, as in Kafka), found with a cursor: members
        leaving in the group's order (one LeaveGroup of them all) would otherwise make each pick walk the
        slots of those gone before it (a dict's deleted entries stay until it is resized), quadratic in the
        group's size."""
        members = self.members
        scan = self._leader_scan
        if scan is None or self._leader_scan_of is not members:
            scan = self._leader_scan = list(members.values())
            self._leader_scan_of, self._leader_scan_at = members, 0
        at = self._leader_scan_at
        while at < len(scan):
            member = scan[at]
            if members.get(member.member_id) is member:
                self._leader_scan_at = at
                return member.member_id
            at += 1
        self._leader_scan_at = at
        return None  # (every member of the scan gone, none added since: none left)

    def rebalance_timeout_ms(self) -> int:
        return max(map(_REBALANCE_TIMEOUT_MS, self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        """Asked on every JoinGroup of a rebalance: so, rather than walk the members each time (quadratic in a
        large group whose members rejoin in its order), a cursor moves over the members as last scanned and
        stops at one that is still a member and has not rejoined: a witness that not all have. When it has
        passed them all, every member is checked (members added, or waiting again, since): True only then."""
        if self.pending_join_members:
            return False
        members = self.members
        scan, at = self._join_scan, self._join_scan_at
        while at < len(scan):
            member = scan[at]
            if member.awaiting_join_key is None and members.get(member.member_id) is member:
                self._join_scan_at = at
                return False
            at += 1
        self._join_scan = scan = list(members.values())
        for at, member in enumerate(scan):
            if member.awaiting_join_key is None:
                self._join_scan_at = at
                return False
        self._join_scan_at = len(scan)
        return True

    def joined_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join_key is not None)

    # --- protocols -------------------------------------------------------------------------------------
    def set_protocols(self, member: ClassicGroupMember, protocols: tuple[tuple[str, bytes], ...]) -> None:
        """A known member's new protocol list (it rejoined)."""
        member.protocols = protocols
        self._protocols_dirty.add(member.member_id)

    def candidate_protocols(self, extra: tuple[str, ...] | None = None) -> set[str]:
        """The protocol names every member (and ``extra``, when given) supports."""
        members = self.members
        if not members:
            return set() if extra is None else set(extra)
        # Asked on every JoinGroup, and every JoinGroup brings a new protocol list (new metadata): so, as
        # Kafka does, count per name how many members support it, updating only the members whose list
        # changed: those added, removed or given protocols through this class since the last call. When the
        # members dict was replaced (a static member's new id) or the counts miss a member, every member
        # is compared by the identity of its protocol list instead. (A plain dict: Counter's
        # methods would run interpreted in the compiled build.)
        seen, dirty = self._protocols_seen, self._protocols_dirty
        synced = self._protocols_synced is members
        if synced:
            for member_id in dirty:
                self._count_protocols(member_id, members.get(member_id))
        if not synced or len(seen) != len(members):
            for member_id, member in members.items():
                self._count_protocols(member_id, member)
            if len(seen) > len(members):  # (every member is in ``seen`` now: more entries means some have left)
                for gone in [member_id for member_id in seen if member_id not in members]:
                    self._count_protocols(gone, None)
            self._protocols_synced = members
        dirty.clear()
        everyone = len(members)
        common = {name for name, count in self._protocol_counts.items() if count == everyone}
        return common if extra is None else common.intersection(extra)

    def _count_protocols(self, member_id: str, member: ClassicGroupMember | None) -> None:
        """Bring the counts up to date with ``member`` (None: the member left)."""
        seen, counts = self._protocols_seen, self._protocol_counts
        entry = seen.get(member_id)
        if member is not None and entry is not None and entry[0] is member.protocols:
            return
        if entry is not None:
            for name in entry[1]:
                counts[name] -= 1
            del seen[member_id]
        if member is not None:
            names = frozenset(name for name, _ in member.protocols)
            for name in names:
                counts[name] = counts.get(name, 0) + 1
            seen[member_id] = (member.protocols, names)

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Kafka's check for a joining member: an Empty group needs a type and protocols; otherwise the
        type must match and one of the member's protocols must be supported by every member. It is the
        Empty *state* that counts: a rebalancing group whose members all left keeps its protocol type."""
        names = tuple(name for name, _ in protocols)
        if self.state is ClassicStates.EMPTY:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols(names))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that everyone supports; most votes wins
        (ties: the alphabetically first name, so the choice is deterministic)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise CoordinatorBug(f"group {self.group_id}: no protocol supported by every member")
        if len(candidates) == 1:  # (every member's most preferred candidate: no vote to count)
            return next(iter(candidates))
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return min(votes, key=lambda name: (-votes[name], name))

    # --- records ---------------------------------------------------------------------------------------
    def to_record_value(self) -> GroupMetadataValue:
        return self.record_value(self.record_entries())

    def record_entries(self) -> tuple[MemberMetadata, ...]:
        """The record's entries of every member, each with its assignment."""
        return tuple(self.record_members(list(self.members.values())))

    def record_value(self, members: tuple[MemberMetadata, ...]) -> GroupMetadataValue:
        """The group's record with ``members`` as its members."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type,
            generation=self.generation,
            protocol_name=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=members,
        )

    def record_members(
        self, members: list[ClassicGroupMember], assignments: dict[str, bytes] | None = None
    ) -> list[MemberMetadata]:
        """The record's entries of ``members``, each with its assignment, or with the one ``assignments`` gives
        it (none: empty) when given."""
        protocol = self.protocol_name
        if assignments is None:
            assigned = [m.assignment for m in members]
        else:
            given = assignments.get
            assigned = [given(m.member_id, b"") for m in members]
        # (by position, from a list: half the time of keywords from a generator, at 10,000 members)
        return [
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol),
                assignment,
            )
            for m, assignment in zip(members, assigned, strict=True)
        ]

    def join_entries(self, members: list[ClassicGroupMember]) -> list[JoinGroupMember]:
        """``members`` as the leader's JoinGroup answer lists them, with their metadata of the group's protocol."""
        protocol = self.protocol_name
        # (by position, from a list: at 10,000 members half the time of keywords from a generator)
        return [JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol)) for m in members]

    @staticmethod
    def from_record(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """A group as loaded from its last record: Stable with members, Empty without."""
        group = ClassicGroup(
            group_id=group_id,
            state=ClassicGroupState.STABLE if value.members else ClassicGroupState.EMPTY,
            state_timestamp_ms=value.current_state_timestamp_ms,
            generation=value.generation,
            protocol_type=value.protocol_type,
            protocol_name=value.protocol_name,
            leader_id=value.leader,
        )
        for m in value.members:
            group.members[m.member_id] = ClassicGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=value.protocol_type or "",
                protocols=((value.protocol_name or "", m.subscription),),
                assignment=m.assignment,
            )
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        return group
