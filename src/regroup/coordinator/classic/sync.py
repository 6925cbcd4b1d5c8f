"""SyncGroup, Heartbeat and LeaveGroup for classic groups."""

from __future__ import annotations

from regroup.coordinator.classic.group import ClassicGroup, ClassicStates
from regroup.coordinator.classic.join import check_identity
from regroup.coordinator.classic.rebalance import (
    after_departure,
    remove_member,
    schedule_session,
    session_key,
    store_assignment,
    sync_response,
    try_complete_join,
)
from regroup.coordinator.context import Ctx
from regroup.coordinator.identity import static_holder
from regroup.coordinator.result import RequestKey
from regroup.coordinator.timers import Timers
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
)


def _group_for_member_request(group: ClassicGroup | None, group_id: str) -> ClassicGroup:
    if not group_id:
        raise ApiError(ErrorCode.INVALID_GROUP_ID)
    if group is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    if group.state is ClassicStates.DEAD:
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return group


def sync_group(ctx: Ctx, found: ClassicGroup | None, req: SyncGroupRequest, key: RequestKey) -> None:
    """``found``: the classic group the request names, None when there is none."""
    group = _group_for_member_request(found, req.group_id)
    if group.is_in(ClassicStates.EMPTY):
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    check_identity(group, req.member_id, req.group_instance_id)
    if req.generation_id != group.generation:
        raise ApiError(ErrorCode.ILLEGAL_GENERATION)
    if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
        req.protocol_name is not None and req.protocol_name != group.protocol_name
    ):
        raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    member = group.members[req.member_id]
    if group.is_in(ClassicStates.PREPARING_REBALANCE):
        raise ApiError(ErrorCode.REBALANCE_IN_PROGRESS)
    if group.is_in(ClassicStates.STABLE):
        group.pending_sync_members.discard(req.member_id)
        schedule_session(ctx, group, member.member_id, member.session_timeout_ms)
        ctx.complete(key, sync_response(group, member.assignment))
        return
    # CompletingRebalance: park; the leader's assignment completes everyone
    if member.awaiting_sync_key is not None and member.awaiting_sync_key != key:
        ctx.drop(member.awaiting_sync_key)  # superseded by a retry: replaced silently, as Kafka does
    member.awaiting_sync_key = key
    group.pending_sync_members.discard(req.member_id)
    if req.member_id != group.leader_id or group.assigning is not None:
        return  # (a leader's retry while its assignment is being stored waits for it)
    store_assignment(ctx, group, member, dict(req.assignments))


def heartbeat(ctx: Ctx, found: ClassicGroup | None, req: HeartbeatRequest) -> HeartbeatResponse:
    group = _group_for_member_request(found, req.group_id)
    check_identity(group, req.member_id, req.group_instance_id)
    if req.generation_id != group.generation:
        raise ApiError(ErrorCode.ILLEGAL_GENERATION)
    if group.state is ClassicStates.EMPTY:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    member = group.members[req.member_id]
    schedule_session(ctx, group, member.member_id, member.session_timeout_ms)
    if group.state is ClassicStates.PREPARING_REBALANCE:
        return HeartbeatResponse(error=ErrorCode.REBALANCE_IN_PROGRESS)
    return HeartbeatResponse()


#: a known member's heartbeat at the group's generation, by the group's state: the error it is answered with
_ANSWERED_AT_ONCE = {
    ClassicStates.STABLE: ErrorCode.NONE,
    ClassicStates.COMPLETING_REBALANCE: ErrorCode.NONE,
    ClassicStates.PREPARING_REBALANCE: ErrorCode.REBALANCE_IN_PROGRESS,
}


def heartbeat_at_once(
    timers: Timers, group: ClassicGroup, req: HeartbeatRequest, now_ms: int
) -> HeartbeatResponse | None:
    """``heartbeat``'s answer for a member it knows, at the group's generation, in a group with members: then all
    a heartbeat does is move the member's session deadline. None (nothing changed) for every other request:
    ``heartbeat`` answers those (errors included)."""
    error = _ANSWERED_AT_ONCE.get(group.state)
    if error is None or req.generation_id != group.generation:
        return None
    member = group.members.get(req.member_id)
    if member is None:
        return None
    instance_id = req.group_instance_id
    if instance_id is not None and group.static_members.get(instance_id) != req.member_id:
        return None
    if not timers.extend(session_key(group.group_id, req.member_id), now_ms + member.session_timeout_ms):
        return None
    return HeartbeatResponse(error=error)


def leave_group(ctx: Ctx, group: ClassicGroup | None, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not req.group_id:
        raise ApiError(ErrorCode.INVALID_GROUP_ID)
    if group is None:
        return LeaveGroupResponse(
            members=tuple(
                LeaveGroupMemberResponse(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, error=ErrorCode.UNKNOWN_MEMBER_ID
                )
                for m in req.members
            )
        )
    if group.is_in(ClassicStates.DEAD):
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    outcomes: list[LeaveGroupMemberResponse] = []
    left = False
    for leaving in req.members:
        error = ErrorCode.NONE
        if not leaving.member_id:
            try:
                if not leaving.group_instance_id:
                    raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
                holder = static_holder(group.static_members, leaving.group_instance_id, None)
            except ApiError as exc:
                error = exc.code
            else:
                remove_member(ctx, group, holder, "leave")
                left = True
        elif leaving.member_id in group.pending_join_members:
            group.pending_join_members.discard(leaving.member_id)
            ctx.timers.cancel(session_key(group.group_id, leaving.member_id))
            left = True
        else:
            try:
                check_identity(group, leaving.member_id, leaving.group_instance_id)
            except ApiError as exc:
                error = exc.code
            else:
                remove_member(ctx, group, leaving.member_id, "leave")
                left = True
        outcomes.append(
            LeaveGroupMemberResponse(
                member_id=leaving.member_id, group_instance_id=leaving.group_instance_id, error=error
            )
        )
    if left:
        if group.is_in(ClassicStates.PREPARING_REBALANCE):
            try_complete_join(ctx, group)
        else:
            after_departure(ctx, group)
    return LeaveGroupResponse(members=tuple(outcomes))
