"""Classic-protocol members inside a consumer group (KIP-848 migration): their JoinGroup, SyncGroup,
Heartbeat and LeaveGroup are translated onto the consumer-group model. The server-side assignor decides; a
classic member never leads, and learns of new assignments through REBALANCE_IN_PROGRESS and a rejoin."""

from __future__ import annotations

from regroup.assignors.consumer_protocol import ProtocolDecodeError, decode_subscription
from regroup.coordinator.classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroupMember
from regroup.coordinator.consumer import migration
from regroup.coordinator.consumer.fence import remove_members
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupMemberState
from regroup.coordinator.consumer.ops import (
    rack_change_bumps,
    reconcile_and_write,
    refresh_subscriptions,
    replace_static_member,
    schedule_session,
)
from regroup.coordinator.consumer.target_aside import ensure_target
from regroup.coordinator.consumer.timers import (
    ClassicMemberJoinTimer,
    ClassicMemberSyncTimer,
    classic_member_join_key,
    classic_member_sync_key,
)
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups
from regroup.coordinator.identity import static_holder
from regroup.coordinator.ids import member_id_for
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from regroup.records.consumer import ClassicProtocolMetadata


def _supports(group: ConsumerGroup, protocol_type: str, names: tuple[str, ...]) -> bool:
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    classic = [m for m in group.members.values() if m.classic is not None]
    if not classic:
        return True
    return any(all(name in m.classic_protocol_names() for m in classic) for name in names)


def join_group(ctx: Ctx, groups: Groups, group: ConsumerGroup, req: JoinGroupRequest) -> JoinGroupResponse:
    unknown = not req.member_id
    member_id = req.member_id or member_id_for(req.group_instance_id or req.client.client_id, ctx.ids)
    if len(group.members) >= ctx.config.consumer_group_max_size and member_id not in group.members:
        raise ApiError(ErrorCode.GROUP_MAX_SIZE_REACHED)
    if not _supports(group, req.protocol_type, tuple(n for n, _ in req.protocols)):
        raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if unknown and req.group_instance_id is None and req.version >= 4:
        return JoinGroupResponse(error=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
    try:
        sub = decode_subscription(req.protocols[0][1])
    except ProtocolDecodeError:
        raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL) from None
    classic_meta = ClassicProtocolMetadata(session_timeout_ms=req.session_timeout_ms, protocols=req.protocols)
    writes = ConsumerWrites(ctx, groups)

    # resolve the member
    if req.group_instance_id is None:
        existing = group.members.get(member_id)
        member = existing if existing is not None else ConsumerGroupMember(member_id=member_id)
    else:
        holder_id = group.static_members.get(req.group_instance_id)
        if unknown:
            if holder_id is None:
                member = ConsumerGroupMember(member_id=member_id)
            else:
                holder = group.members[holder_id]
                if _downgrade_by_replacement(ctx, group, holder_id):
                    return _downgrade_with(ctx, groups, group, holder_id, member_id, req, classic_meta)
                member = replace_static_member(ctx, writes, group, holder, member_id)
        else:
            member = group.members[static_holder(group.static_members, req.group_instance_id, member_id)]

    old = group.members.get(member_id)
    updated = member.copy()
    if req.group_instance_id is not None:
        updated.instance_id = req.group_instance_id
    if sub.rack is not None:
        updated.rack_id = sub.rack
    if req.rebalance_timeout_ms != -1:
        updated.rebalance_timeout_ms = req.rebalance_timeout_ms
    updated.subscribed_topic_names = tuple(sorted(set(sub.topics)))
    updated.client_id = req.client.client_id
    updated.client_host = req.client.client_host
    updated.classic = classic_meta
    subscription_changed = old is None or old.subscribed_topic_names != updated.subscribed_topic_names
    if old is None or old != updated:
        writes.member_metadata(group.group_id, updated)
    rack_bump = rack_change_bumps(ctx, group, old, updated.rack_id)
    if subscription_changed or rack_bump or group.metadata_refresh_needed:
        refresh_subscriptions(
            writes,
            group,
            groups.image,
            group.group_epoch,
            subscription_changed or rack_bump,
        )
    ensure_target(ctx, writes, group)
    owned = migration.ids_of(dict(sub.owned), groups.image)
    reconciled = reconcile_and_write(
        ctx, writes, group, group.members[member_id], group.assignment_epoch, group.target_of(member_id), owned
    )
    ctx.timers.cancel(classic_member_join_key(group.group_id, member_id))
    schedule_session(ctx, group, reconciled)
    ctx.timers.schedule(
        ClassicMemberSyncTimer(group.group_id, member_id), ctx.now_ms + max(req.rebalance_timeout_ms, 0)
    )
    return JoinGroupResponse(
        generation_id=reconciled.member_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=req.protocols[0][0],
        leader="",
        member_id=member_id,
        members=(),
    )


def _downgrade_by_replacement(ctx: Ctx, group: ConsumerGroup, replaced_id: str) -> bool:
    replaced = group.members[replaced_id]
    if replaced.classic is not None:
        return False
    others = [m for m in group.members.values() if m.member_id != replaced_id]
    if any(m.classic is None for m in others):
        return False
    return ctx.config.allows_downgrade() and len(group.members) <= ctx.config.group_max_size


def _downgrade_with(
    ctx: Ctx,
    groups: Groups,
    group: ConsumerGroup,
    replaced_id: str,
    member_id: str,
    req: JoinGroupRequest,
    classic_meta: ClassicProtocolMetadata,
) -> JoinGroupResponse:
    joining = ClassicGroupMember(
        member_id=member_id,
        group_instance_id=req.group_instance_id,
        client_id=req.client.client_id,
        client_host=req.client.client_host,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        session_timeout_ms=classic_meta.session_timeout_ms,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocols=req.protocols,
    )
    classic = migration.downgrade(ctx, groups, group, leaving_member_id=replaced_id, joining=joining)
    return JoinGroupResponse(
        generation_id=classic.generation,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=classic.protocol_name,
        leader="",
        member_id=member_id,
        members=(),
    )


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    if instance_id is not None:
        static_holder(group.static_members, instance_id, member_id)
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    return member


def _arm_join_timer(ctx: Ctx, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    timer = ClassicMemberJoinTimer(group.group_id, member.member_id)
    if timer.key not in ctx.timers:
        ctx.timers.schedule(timer, ctx.now_ms + max(member.rebalance_timeout_ms, 0))


def sync_group(ctx: Ctx, groups: Groups, group: ConsumerGroup, req: SyncGroupRequest) -> SyncGroupResponse:
    member = _classic_member(group, req.member_id, req.group_instance_id)
    if req.generation_id != member.member_epoch:
        raise ApiError(ErrorCode.ILLEGAL_GENERATION)
    first = member.classic_protocol_names()[0] if member.classic_protocol_names() else None
    if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        req.protocol_name is not None and req.protocol_name != first
    ):
        raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if group.group_epoch > member.member_epoch and member.state is not ConsumerGroupMemberState.UNREVOKED_PARTITIONS:
        _arm_join_timer(ctx, group, member)
        raise ApiError(ErrorCode.REBALANCE_IN_PROGRESS)
    ctx.timers.cancel(classic_member_sync_key(group.group_id, member.member_id))
    schedule_session(ctx, group, member)
    return SyncGroupResponse(
        protocol_type=req.protocol_type,
        protocol_name=req.protocol_name,
        assignment=migration.encode_for(member, member.assigned, groups.image),
    )


def heartbeat(ctx: Ctx, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResponse:
    member = _classic_member(group, req.member_id, req.group_instance_id)
    if req.generation_id != member.member_epoch:
        raise ApiError(ErrorCode.ILLEGAL_GENERATION)
    schedule_session(ctx, group, member)
    rejoin = (
        member.member_epoch < group.group_epoch
        or member.state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
        or (member.state is ConsumerGroupMemberState.UNRELEASED_PARTITIONS and _all_released(group, member))
    )
    if rejoin:
        _arm_join_timer(ctx, group, member)
        return HeartbeatResponse(error=ErrorCode.REBALANCE_IN_PROGRESS)
    return HeartbeatResponse()


def _all_released(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """None of the member's target partitions is still held by another member."""
    for topic_id, ps in group.target_of(member.member_id).items():
        for p in ps:
            holder = group.partition_holders.get((topic_id, p))
            if holder is not None and holder != member.member_id:
                return False
    return True


def leave_group(ctx: Ctx, groups: Groups, group: ConsumerGroup, req: LeaveGroupRequest) -> LeaveGroupResponse:
    outcomes: list[LeaveGroupMemberResponse] = []
    leaving: dict[str, None] = {}  # (in order, each once: a LeaveGroup may name thousands)
    for one in req.members:
        error = ErrorCode.NONE
        try:
            if one.group_instance_id is None:
                member = group.members.get(one.member_id)
                if member is None or member.classic is None:
                    raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
            else:
                holder = static_holder(group.static_members, one.group_instance_id, one.member_id or None)
                member = group.members[holder]
                if member.classic is None:
                    raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
            leaving[member.member_id] = None
        except ApiError as exc:
            error = exc.code
        outcomes.append(
            LeaveGroupMemberResponse(member_id=one.member_id, group_instance_id=one.group_instance_id, error=error)
        )
    if leaving:
        remove_members(ctx, groups, group, list(leaving), "leave")
    return LeaveGroupResponse(members=tuple(outcomes))
