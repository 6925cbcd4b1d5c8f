"""JoinGroup: the two-phase member id, protocol checks, the group-size gate, static membership
(KIP-345 replacement without rebalance) and the per-state answers for known members."""

from __future__ import annotations

from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupMember, ClassicStates
from regroup.coordinator.classic.rebalance import (
    announce_group,
    cancel_session,
    maybe_prepare_or_complete,
    member_joined,
    member_left,
    persist,
    prepare_rebalance,
    protocols_changed,
    schedule_session,
    try_complete_join,
)
from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups
from regroup.coordinator.identity import static_holder
from regroup.coordinator.ids import member_id_for
from regroup.coordinator.result import RequestKey
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.classic import JoinGroupMember, JoinGroupRequest, JoinGroupResponse, SyncGroupResponse
from regroup.records.builders import new_group_metadata_record


def join_group(ctx: Ctx, groups: Groups, group: ClassicGroup | None, req: JoinGroupRequest, key: RequestKey) -> None:
    """Handle one JoinGroup for ``group`` (None: no group has the id yet). Errors found before any change
    raise ``ApiError``; later outcomes (waiting, completion) are completions on ``ctx``."""
    if not req.group_id:
        raise ApiError(ErrorCode.INVALID_GROUP_ID)
    cfg = ctx.config
    if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        raise ApiError(ErrorCode.INVALID_SESSION_TIMEOUT)
    if group is None:
        if req.member_id:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        group = ClassicGroup(group_id=req.group_id, state_timestamp_ms=ctx.now_ms)
        groups.add(ctx.journal, group)
        announce_group(ctx, group)
        records_before = len(ctx.result.records)
        _join(ctx, group, req, key)
        if len(ctx.result.records) == records_before:
            persist(ctx, group)  # a new group whose join wrote nothing else is persisted empty
        return
    _join(ctx, group, req, key)


def _join(ctx: Ctx, group: ClassicGroup, req: JoinGroupRequest, key: RequestKey) -> None:
    if not _accepts_joining_member(ctx, group, req.member_id):
        if req.member_id not in group.pending_join_members and req.member_id not in group.members:
            raise ApiError(ErrorCode.GROUP_MAX_SIZE_REACHED)  # a new member turned away: nothing changes
        group.pending_join_members.discard(req.member_id)
        removed = group.remove(req.member_id) if req.member_id in group.members else None
        if removed is not None:
            cancel_session(ctx, group, req.member_id)
            member_left(ctx, group, removed, "group max size")
        # like Kafka, no attempt to complete the join phase here: it completes on the next join or timer
        ctx.complete(key, JoinGroupResponse(error=ErrorCode.GROUP_MAX_SIZE_REACHED))
        return
    if not req.member_id:
        _join_new_member(ctx, group, req, key)
    else:
        _join_known_member(ctx, group, req, key)


def _accepts_joining_member(ctx: Ctx, group: ClassicGroup, member_id: str) -> bool:
    max_size = ctx.config.group_max_size
    if group.is_in(ClassicStates.EMPTY, ClassicStates.DEAD):
        return True
    if group.is_in(ClassicStates.PREPARING_REBALANCE):
        member = group.members.get(member_id)
        already_joined = member is not None and member.awaiting_join_key is not None
        # (no member to count while the group is below the limit: most of the time, and 10,000 a rebalance)
        return already_joined or len(group.members) < max_size or group.joined_count() < max_size
    return member_id in group.members or len(group.members) < max_size


def _new_member(req: JoinGroupRequest, member_id: str) -> ClassicGroupMember:
    return ClassicGroupMember(
        member_id=member_id,
        group_instance_id=req.group_instance_id,
        client_id=req.client.client_id,
        client_host=req.client.client_host,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        session_timeout_ms=req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=req.protocols,
    )


def _join_new_member(ctx: Ctx, group: ClassicGroup, req: JoinGroupRequest, key: RequestKey) -> None:
    if group.is_in(ClassicStates.DEAD):
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports(req.protocol_type, req.protocols):
        raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    member_id = member_id_for(req.group_instance_id or req.client.client_id, ctx.ids)
    if req.group_instance_id is not None:
        old_id = group.static_members.get(req.group_instance_id)
        if old_id is not None and old_id in group.members:
            _replace_static_member(ctx, group, req, key, old_id, member_id)
        else:
            _add_member_and_rebalance(ctx, group, req, key, member_id)
        return
    if req.version >= 4:
        group.pending_join_members.add(member_id)
        schedule_session(ctx, group, member_id, req.session_timeout_ms)
        ctx.complete(key, JoinGroupResponse(error=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
        return
    _add_member_and_rebalance(ctx, group, req, key, member_id)


def _add_member_and_rebalance(
    ctx: Ctx, group: ClassicGroup, req: JoinGroupRequest, key: RequestKey, member_id: str
) -> None:
    member = _new_member(req, member_id)
    member.is_new = True
    member.awaiting_join_key = key
    member.join_version = req.version
    if group.is_in(ClassicStates.PREPARING_REBALANCE) and group.previous_state is ClassicStates.EMPTY:
        group.new_member_added = True
    group.add(member)
    member_joined(ctx, group, member)
    schedule_session(ctx, group, member_id, ctx.config.new_member_join_timeout_ms)
    maybe_prepare_or_complete(ctx, group)


def check_identity(group: ClassicGroup, member_id: str, instance_id: str | None) -> None:
    """Kafka's identity validation shared by JoinGroup, SyncGroup, Heartbeat, OffsetCommit, LeaveGroup: the
    static-membership rule for a given instance id, then the member id must be a member."""
    if instance_id is not None:
        static_holder(group.static_members, instance_id, member_id)
    if member_id not in group.members:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)


def _join_known_member(ctx: Ctx, group: ClassicGroup, req: JoinGroupRequest, key: RequestKey) -> None:
    if group.is_in(ClassicStates.DEAD):
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports(req.protocol_type, req.protocols):
        raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if req.member_id in group.pending_join_members:
        group.pending_join_members.discard(req.member_id)
        _add_member_and_rebalance(ctx, group, req, key, req.member_id)
        return
    check_identity(group, req.member_id, req.group_instance_id)
    member = group.members[req.member_id]
    if group.is_in(ClassicStates.PREPARING_REBALANCE):
        _update_member(ctx, group, member, req, key)
        try_complete_join(ctx, group)
    elif group.is_in(ClassicStates.COMPLETING_REBALANCE):
        if member.protocols == req.protocols:
            ctx.complete(key, _current_generation_response(group, member, include_members=True))
        else:
            _update_member(ctx, group, member, req, key)
            prepare_rebalance(ctx, group)
    elif group.is_in(ClassicStates.STABLE):
        if member.member_id == group.leader_id or member.protocols != req.protocols:
            _update_member(ctx, group, member, req, key)
            prepare_rebalance(ctx, group)
        else:
            ctx.complete(key, _current_generation_response(group, member, include_members=False))
    else:  # Empty
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)


def _update_member(
    ctx: Ctx, group: ClassicGroup, member: ClassicGroupMember, req: JoinGroupRequest, key: RequestKey
) -> None:
    if member.awaiting_join_key is not None and member.awaiting_join_key != key:
        # a newer JoinGroup supersedes the parked one (the client retried): like Kafka, replace it silently
        ctx.drop(member.awaiting_join_key)
    protocols_changed(ctx, group, member, req.protocols)
    group.set_protocols(member, req.protocols)
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.session_timeout_ms = req.session_timeout_ms
    member.awaiting_join_key = key
    member.join_version = req.version


def _members_list(group: ClassicGroup) -> tuple[JoinGroupMember, ...]:
    return tuple(
        JoinGroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata(group.protocol_name)
        )
        for m in group.members.values()
    )


def _current_generation_response(
    group: ClassicGroup, member: ClassicGroupMember, *, include_members: bool
) -> JoinGroupResponse:
    is_leader = member.member_id == group.leader_id
    return JoinGroupResponse(
        generation_id=group.generation,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        member_id=member.member_id,
        members=_members_list(group) if include_members and is_leader else (),
    )


def _replace_static_member(
    ctx: Ctx, group: ClassicGroup, req: JoinGroupRequest, key: RequestKey, old_id: str, new_id: str
) -> None:
    """A static member restarted: its new member id takes the old one's place (assignment, leadership)."""
    old = group.members[old_id]
    # fence the zombie: answer whatever the old id had parked
    if old.awaiting_join_key is not None:
        ctx.complete(
            old.awaiting_join_key, JoinGroupResponse(error=ErrorCode.FENCED_INSTANCE_ID, member_id=old_id, leader="")
        )
        old.awaiting_join_key = None
    if old.awaiting_sync_key is not None:
        ctx.complete(old.awaiting_sync_key, SyncGroupResponse(error=ErrorCode.FENCED_INSTANCE_ID))
        old.awaiting_sync_key = None
    was_leader = group.leader_id == old_id
    cancel_session(ctx, group, old_id)
    old_protocol = group.protocol_name
    new = _new_member(req, new_id)
    new.assignment = old.assignment
    # replace in place, keeping iteration order
    group.members = {
        (new_id if mid == old_id else mid): (new if mid == old_id else m) for mid, m in group.members.items()
    }
    group.static_members[req.group_instance_id or ""] = new_id
    member_left(ctx, group, old, "replaced")
    member_joined(ctx, group, new)
    if group.pending_sync_members and old_id in group.pending_sync_members:
        group.pending_sync_members.discard(old_id)
        group.pending_sync_members.add(new_id)
    if was_leader:
        group.leader_id = new_id
    schedule_session(ctx, group, new_id, new.session_timeout_ms)

    if group.is_in(ClassicStates.STABLE):
        if group.select_protocol() == old_protocol:
            ctx.emit(new_group_metadata_record(group.group_id, group.to_record_value()))
            is_leader = new_id == group.leader_id
            skip = is_leader and req.version >= 9
            ctx.complete(
                key,
                JoinGroupResponse(
                    generation_id=group.generation,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    # v<9: a returning leader must not believe it is leader (it cannot skip assignment)
                    leader=(group.leader_id or "")
                    if req.version >= 9
                    else (old_id if was_leader else group.leader_id or ""),
                    skip_assignment=skip,
                    member_id=new_id,
                    members=_members_list(group) if skip else (),
                ),
            )
        else:
            new.awaiting_join_key = key
            new.join_version = req.version
            prepare_rebalance(ctx, group)
    elif group.is_in(ClassicStates.COMPLETING_REBALANCE):
        new.awaiting_join_key = key
        new.join_version = req.version
        prepare_rebalance(ctx, group)
    elif group.is_in(ClassicStates.PREPARING_REBALANCE):
        new.awaiting_join_key = key
        new.join_version = req.version
        try_complete_join(ctx, group)
    else:  # Empty with members cannot happen; be safe and rebalance
        new.awaiting_join_key = key
        maybe_prepare_or_complete(ctx, group)
