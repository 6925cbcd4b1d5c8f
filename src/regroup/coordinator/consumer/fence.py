"""Fencing a consumer-group member (leave with epoch -1, session or revocation timeout, a classic member's
join/sync timeout): its records are tombstoned, the subscription metadata recomputed without it and the
group epoch bumped — or, when it was the last consumer-protocol member, the group goes back to classic."""

from __future__ import annotations

from regroup.coordinator.consumer import migration
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.consumer.ops import cancel_timers
from regroup.coordinator.consumer.subscriptions import subscribed_names, subscription_metadata
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import LeaveReason
from regroup.coordinator.groups import Groups


def fence_member(ctx: Ctx, groups: Groups, group: ConsumerGroup, member_id: str, reason: LeaveReason) -> None:
    if migration.downgrade_allowed_on_fence(ctx, group, member_id):
        migration.downgrade(ctx, groups, group, leaving_member_id=member_id, reason=reason)
        return
    remove_members(ctx, groups, group, [member_id], reason)


def remove_members(ctx: Ctx, groups: Groups, group: ConsumerGroup, member_ids: list[str], reason: LeaveReason) -> None:
    """Remove members at once (for ``reason``): one subscription-metadata update and one group-epoch bump."""
    writes = ConsumerWrites(ctx, groups)
    for member_id in member_ids:
        writes.remove_member(group.group_id, member_id, reason)
        cancel_timers(ctx, group, member_id)
    for regex in sorted(set(group.resolved_regexes) - set(group.regex_subscribers)):
        writes.regex_tombstone(group.group_id, regex)  # its last subscriber left
    topics = subscription_metadata(subscribed_names(group), groups.image)
    if topics != group.subscribed_topics:
        writes.subscription_metadata(group.group_id, topics.values())
    writes.group_epoch(group.group_id, group.group_epoch + 1)
