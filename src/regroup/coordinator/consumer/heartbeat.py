"""ConsumerGroupHeartbeat (KIP-848): validation, joining (epoch 0), static replacement, the epoch check,
subscription, rack and group-epoch updates, target computation, reconciliation, and leaving (epochs -1 and -2)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from regroup.coordinator.classic.group import ClassicGroup
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer import migration
from regroup.coordinator.consumer.fence import fence_member
from regroup.coordinator.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupMemberState,
    to_set,
    to_tuple,
)
from regroup.coordinator.consumer.ops import (
    group_full,
    rack_change_bumps,
    reconcile_and_write,
    refresh_subscriptions,
    replace_static_member,
    schedule_session,
    starting_over,
)
from regroup.coordinator.consumer.regexes import update_regexes
from regroup.coordinator.consumer.subscriptions import compile_regex
from regroup.coordinator.consumer.target_aside import ensure_target
from regroup.coordinator.consumer.timers import member_session_key
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx, consumer_heartbeat_interval_ms, consumer_session_timeout_ms
from regroup.coordinator.events import GroupCreated
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.groups import Groups
from regroup.coordinator.identity import static_holder
from regroup.coordinator.timers import Timers
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.classic import ClientInfo
from regroup.protocol.consumer import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def validate(ctx: Ctx, req: ConsumerGroupHeartbeatRequest) -> None:
    """Kafka's request validation, in Kafka's order."""
    if not req.group_id.strip():
        raise _invalid("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id.strip():
        raise _invalid("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise _invalid("RackId can't be empty.")
    if req.subscribed_topic_regex is not None:
        if len(req.subscribed_topic_regex) > ctx.config.consumer_group_regex_max_length:
            raise ApiError(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex is longer than {ctx.config.consumer_group_regex_max_length} characters.",
            )
        compile_regex(req.subscribed_topic_regex)
    epoch = req.member_epoch
    if epoch > 0 or epoch == LEAVE_EPOCH:
        if not req.member_id.strip():
            raise _invalid("MemberId can't be empty.")
    elif epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if not req.subscribed_topic_names and req.subscribed_topic_regex is None:
            raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if not req.member_id.strip():
            raise _invalid("MemberId can't be empty.")
        if req.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid(f"MemberEpoch is invalid: {epoch}.")
    if req.server_assignor is not None and req.server_assignor not in ctx.config.consumer_group_assignors:
        supported = ", ".join(ctx.config.consumer_group_assignors)
        raise ApiError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {supported}.",
        )


def consumer_group_heartbeat(
    ctx: Ctx, groups: Groups, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    validate(ctx, req)
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _leave(ctx, groups, req)
    return _heartbeat(ctx, groups, req)


def _group(ctx: Ctx, groups: Groups, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroup:
    group = groups.typed(req.group_id, ConsumerGroup)
    if group is not None:
        return group
    create = req.member_epoch == JOIN_EPOCH
    classic = groups.typed(req.group_id, ClassicGroup)
    if classic is None and req.group_id in groups:  # a group of another type (a share group)
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
    if classic is not None:
        if not create:
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        if classic.members:
            return migration.upgrade(ctx, groups, classic, joining_member_id=req.member_id)
        migration.drop_empty_classic_group(ctx, groups, classic)
    if not create:
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
    group = ConsumerGroup(group_id=req.group_id)
    groups.add(ctx.journal, group)
    ctx.event(GroupCreated(req.group_id, "consumer"))
    return group


def _owned(req: ConsumerGroupHeartbeatRequest) -> dict[uuid.UUID, frozenset[int]] | None:
    return None if req.topic_partitions is None else to_set(req.topic_partitions)


def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: dict[uuid.UUID, frozenset[int]] | None) -> None:
    if epoch > member.member_epoch:
        raise ApiError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if epoch < member.member_epoch:
        subset = owned is not None and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
        if epoch != member.previous_member_epoch or not subset:
            raise ApiError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )


def _resolve_member(
    ctx: Ctx, writes: ConsumerWrites, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, member_id: str
) -> ConsumerGroupMember:
    """The member this request is about, as it stands before the request's changes (never mutated here)."""
    owned = _owned(req)
    joining = req.member_epoch == JOIN_EPOCH
    if req.instance_id is None:
        existing = group.members.get(member_id)
        if existing is None:
            if not joining:
                raise ApiError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                )
            return ConsumerGroupMember(member_id=member_id)
        if joining and existing.member_epoch != 0:
            return starting_over(existing)
        _check_epoch(existing, req.member_epoch, owned)
        return existing
    if joining:
        holder_id = group.static_members.get(req.instance_id)
        holder = group.members.get(holder_id) if holder_id is not None else None
        if holder is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id=member_id)
        if holder.member_id == member_id and holder.member_epoch != STATIC_LEAVE_EPOCH:
            return starting_over(holder)  # the same process rejoining after losing its partitions
        if holder.classic is None and holder.member_epoch != STATIC_LEAVE_EPOCH:
            raise ApiError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} cannot join the group because the "
                f"instance id is owned by {holder.member_id} member.",
            )
        return replace_static_member(ctx, writes, group, holder, member_id)
    holder = group.members[static_holder(group.static_members, req.instance_id, member_id)]
    _check_epoch(holder, req.member_epoch, owned)
    return holder


def _heartbeat(ctx: Ctx, groups: Groups, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    group = _group(ctx, groups, req)
    is_member = bool(req.member_id) and req.member_id in group.members
    if len(group.members) >= ctx.config.consumer_group_max_size and not is_member:
        raise group_full(ctx.config.consumer_group_max_size)
    member_id = req.member_id or str(ctx.ids.unique_suffix())
    writes = ConsumerWrites(ctx, groups)
    member = _resolve_member(ctx, writes, group, req, member_id)
    old = group.members.get(member.member_id)
    updated = member.copy()
    if req.instance_id is not None:
        updated.instance_id = req.instance_id
    if req.rack_id is not None:
        updated.rack_id = req.rack_id
    if req.rebalance_timeout_ms != -1:
        updated.rebalance_timeout_ms = req.rebalance_timeout_ms
    if req.server_assignor is not None:
        updated.server_assignor = req.server_assignor
    if req.subscribed_topic_names is not None:
        updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
    if req.subscribed_topic_regex is not None:
        updated.subscribed_topic_regex = req.subscribed_topic_regex or None
    updated.client_id = req.client.client_id
    updated.client_host = req.client.client_host
    updated.classic = None

    names_changed = old is None or old.subscribed_topic_names != updated.subscribed_topic_names
    regex_changed = old is not None and old.subscribed_topic_regex != updated.subscribed_topic_regex
    regex_bump = update_regexes(ctx, writes, groups, group, old, updated)
    if old is None or old.metadata_differs(updated):
        writes.member_metadata(group.group_id, updated)
    if old is not None and (updated.member_epoch != old.member_epoch or updated.assigned != old.assigned):
        writes.current_assignment(group.group_id, updated)  # a rejoin that starts over
    rack_bump = rack_change_bumps(ctx, group, old, updated.rack_id)
    if names_changed or regex_changed or regex_bump or rack_bump or group.metadata_refresh_needed:
        bump = names_changed or regex_bump or rack_bump
        refresh_subscriptions(writes, group, groups.image, group.group_epoch, bump)
    ensure_target(ctx, writes, group)

    current = group.members[member_id]
    reconciled = reconcile_and_write(
        ctx, writes, group, current, group.assignment_epoch, group.target_of(member_id), _owned(req)
    )
    schedule_session(ctx, group, reconciled)
    response = ConsumerGroupHeartbeatResponse(
        member_id=member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=ctx.consumer_heartbeat_interval_ms(group.group_id),
        assignment=to_tuple(reconciled.assigned)
        if req.is_full() or old is None or reconciled.assigned != old.assigned
        else None,
    )
    return response


def heartbeat_at_once(
    config: CoordinatorConfig,
    group_configs: Mapping[str, GroupConfig],
    timers: Timers,
    group: ConsumerGroup,
    req: ConsumerGroupHeartbeatRequest,
    client: ClientInfo,
    now_ms: int,
) -> ConsumerGroupHeartbeatResponse | None:
    """``consumer_group_heartbeat``'s answer to a steady member (``client``: the request's, in place of
    ``req.client``): then all a heartbeat does is move the member's session deadline. A steady member is a
    consumer-protocol member at its current epoch, reconciled to the group's target for the current group
    epoch, sending nothing it has not sent before (no owned partitions, no regular expression, every other
    field null or what the member has) in a group with no regular-expression subscriptions and no metadata to
    refresh. None (nothing changed) for every other request: ``consumer_group_heartbeat`` answers those."""
    epoch = req.member_epoch
    if epoch <= 0 or req.topic_partitions is not None or req.subscribed_topic_regex is not None:
        return None
    member = group.members.get(req.member_id)
    if (
        member is None
        or member.member_epoch != epoch
        or member.state is not ConsumerGroupMemberState.STABLE
        or member.classic is not None
        or member.subscribed_topic_regex is not None
        or epoch != group.assignment_epoch
        or group.group_epoch != epoch
        or group.metadata_refresh_needed
        or group.regex_subscribers
        or not req.group_id.strip()
        or not req.member_id.strip()
        or member.client_id != client.client_id
        or member.client_host != client.client_host
    ):
        return None
    instance_id = req.instance_id
    if instance_id is not None and (
        instance_id != member.instance_id or group.static_members.get(instance_id) != member.member_id
    ):
        return None
    if (req.rack_id is not None and req.rack_id != member.rack_id) or (
        req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms
    ):
        return None
    assignor = req.server_assignor
    if assignor is not None and (assignor != member.server_assignor or assignor not in config.consumer_group_assignors):
        return None
    names = req.subscribed_topic_names
    if names is not None and tuple(sorted(set(names))) != member.subscribed_topic_names:
        return None
    session_ms = consumer_session_timeout_ms(config, group_configs, group.group_id)
    if not timers.extend(member_session_key(group.group_id, member.member_id), now_ms + session_ms):
        return None
    return ConsumerGroupHeartbeatResponse(
        member_id=req.member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=consumer_heartbeat_interval_ms(config, group_configs, group.group_id),
    )


def _leave(ctx: Ctx, groups: Groups, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    group = groups.typed(req.group_id, ConsumerGroup)
    if group is None:
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
    if req.instance_id is None:
        member = group.members.get(req.member_id)
        if member is None:
            raise ApiError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
            )
    else:
        member = group.members[static_holder(group.static_members, req.instance_id, req.member_id)]
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            leaving = member.copy()
            leaving.member_epoch = STATIC_LEAVE_EPOCH
            leaving.pending_revocation = {}
            ConsumerWrites(ctx, groups).current_assignment(group.group_id, leaving)
            return ConsumerGroupHeartbeatResponse(member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH)
    fence_member(ctx, groups, group, member.member_id, "leave")
    return ConsumerGroupHeartbeatResponse(member_id=req.member_id, member_epoch=LEAVE_EPOCH)
