"""Steps shared by every consumer-group operation: timers (session, revocation, and the join/sync timers of
classic-protocol members), reconciling a member and writing the result, recomputing subscription metadata,
and bumping the group epoch (``target_aside.ensure_target`` recomputes the target when it moved past it)."""

from __future__ import annotations

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupMemberState, Partitions
from regroup.coordinator.consumer.reconcile import Owned, reconcile
from regroup.coordinator.consumer.subscriptions import subscribed_names, subscription_metadata
from regroup.coordinator.consumer.target import RACK_AWARE_SERVER_ASSIGNORS
from regroup.coordinator.consumer.timers import MEMBER_TIMER_KEYS, MemberSessionTimer, RevocationTimer, revocation_key
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ApiError, ErrorCode


def session_timeout_ms(ctx: Ctx, group_id: str, member: ConsumerGroupMember) -> int:
    """A classic-protocol member's own session timeout; the group's (or the broker's) for the others."""
    if member.classic is not None:
        return member.classic.session_timeout_ms
    return ctx.consumer_session_timeout_ms(group_id)


def group_full(max_size: int) -> ApiError:
    """GROUP_MAX_SIZE_REACHED for a member joining a consumer group that has ``max_size`` members."""
    return ApiError(
        ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of {max_size} members."
    )


def schedule_session(ctx: Ctx, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    ctx.timers.schedule(
        MemberSessionTimer(group.group_id, member.member_id),
        ctx.now_ms + session_timeout_ms(ctx, group.group_id, member),
    )


def cancel_timers(ctx: Ctx, group: ConsumerGroup, member_id: str) -> None:
    for key in MEMBER_TIMER_KEYS:
        ctx.timers.cancel(key(group.group_id, member_id))


def reconcile_and_write(
    ctx: Ctx,
    writes: ConsumerWrites,
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    owned: Owned,
) -> ConsumerGroupMember:
    """Kafka's ``maybeReconcile``: move the member towards the target; persist it if it changed; arm (or
    cancel) the revocation timer of a consumer-protocol member."""
    if member.state is ConsumerGroupMemberState.STABLE and member.member_epoch == target_epoch:
        return member
    updated = reconcile(member, target_epoch, target, group.is_held, owned)
    if updated != member:
        writes.current_assignment(group.group_id, updated)
        updated = group.members[updated.member_id]
        if updated.classic is None:
            if updated.state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS:
                timer = RevocationTimer(group.group_id, updated.member_id, updated.member_epoch)
                ctx.timers.schedule(timer, ctx.now_ms + max(updated.rebalance_timeout_ms, 0))
            else:
                ctx.timers.cancel(revocation_key(group.group_id, updated.member_id))
    return updated


def starting_over(member: ConsumerGroupMember) -> ConsumerGroupMember:
    """A known member rejoining with epoch 0 has lost its partitions: it starts over with nothing owned,
    keeping its id and its place in the target assignment."""
    fresh = member.copy()
    fresh.member_epoch = fresh.previous_member_epoch = 0
    fresh.assigned = {}
    fresh.pending_revocation = {}
    return fresh


def replace_static_member(
    ctx: Ctx, writes: ConsumerWrites, group: ConsumerGroup, holder: ConsumerGroupMember, member_id: str
) -> ConsumerGroupMember:
    """A new process took over a static member's instance id: the old member's records are tombstoned and a
    copy under ``member_id`` (epoch 0, same partitions and target) is written in its place."""
    target = group.target_of(holder.member_id)
    replacement = holder.copy()
    replacement.member_id = member_id
    replacement.member_epoch = replacement.previous_member_epoch = 0
    writes.remove_member(group.group_id, holder.member_id, "replaced")
    cancel_timers(ctx, group, holder.member_id)
    writes.member_metadata(group.group_id, replacement)
    writes.target(group.group_id, member_id, target)
    writes.current_assignment(group.group_id, replacement)
    return group.members[member_id]


def refresh_subscriptions(
    writes: ConsumerWrites,
    group: ConsumerGroup,
    image: ClusterImage,
    group_epoch: int,
    force_bump: bool,
) -> int:
    """Recompute the subscription metadata of the group's members; write it and bump the group epoch if it
    changed (or if ``force_bump``). Returns the group epoch."""
    topics = subscription_metadata(subscribed_names(group), image)
    bump = force_bump
    if topics != group.subscribed_topics:
        writes.subscription_metadata(group.group_id, topics.values())
        bump = True
    if bump:
        group_epoch += 1
        writes.group_epoch(group.group_id, group_epoch)
    writes.ctx.journal.set(group, "metadata_refresh_needed", False)
    return group_epoch


def rack_change_bumps(ctx: Ctx, group: ConsumerGroup, old: ConsumerGroupMember | None, rack_id: str | None) -> bool:
    """Whether a member of ``group`` moving from ``old``'s rack to ``rack_id`` needs a new target: its rack
    changed (an empty rack is no rack; a joining member bumps anyway), some subscribed partition has replica
    racks (in the subscription metadata of the records; without any, no rack-aware assignor reads member
    racks) and the group's assignor reads racks. Everything it reads is in the group's records (and the
    broker's default assignor), so a restarted coordinator decides the same."""
    if old is None or (old.rack_id or None) == (rack_id or None):
        return False
    if not any(racks for topic in group.subscribed_topics.values() for racks in topic.racks):
        return False
    return group.preferred_assignor(ctx.config.consumer_group_assignors[0]) in RACK_AWARE_SERVER_ASSIGNORS
