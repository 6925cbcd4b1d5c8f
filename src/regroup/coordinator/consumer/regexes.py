"""Regular-expression subscriptions, resolved the way Kafka resolves them (KIP-848): asynchronously.

A member that subscribes to a regular expression the group does not resolve yet gets, in that heartbeat, only
what its topic names give it; the group resolves its regular expressions in a write of its own (a
``RegexResolution`` timer due at once: the shell runs it right after the heartbeat, as Kafka's executor runs
the resolution off the request path), writes one record per regular expression (the topics it matched, and
when), and — when the resolution changed what the group subscribes to — new subscription metadata and a
group epoch bump. The member gets the matched topics' partitions in a later heartbeat, from the target
computed for that epoch.

A heartbeat asks for a resolution (``update_regexes``) when a regular expression no member subscribed to
arrives (at once if the group had resolved none, else once the last resolution is 10 seconds old), or when
the group subscribes to regular expressions it has not resolved or the cluster changed since it resolved
them (also at most every 10 seconds: Kafka's ``REGEX_BATCH_REFRESH_INTERVAL_MS``), and no resolution is
already scheduled. A member that subscribes to a regular expression the group has resolved bumps the group
epoch at once. The last member leaving a regular expression deletes its resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember
from regroup.coordinator.consumer.ops import refresh_subscriptions
from regroup.coordinator.consumer.subscriptions import matching_topics
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups

#: the shortest time between two resolutions of a group's regular expressions (Kafka's)
REFRESH_INTERVAL_MS: Final = 10_000


def resolution_key(group_id: str) -> tuple[str, str]:
    return ("regex-resolution", group_id)


@dataclass(slots=True, eq=False)
class RegexResolution:
    """Resolve the group's regular expressions against the cluster as it is now."""

    group_id: Final[str]

    @property
    def key(self) -> tuple[str, str]:
        return resolution_key(self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = groups.typed(self.group_id, ConsumerGroup)
        if group is not None:
            resolve(ctx, groups, group)


def resolve(ctx: Ctx, groups: Groups, group: ConsumerGroup) -> None:
    """Match every regular expression the members subscribe to; write each resolution, and the subscription
    metadata and a group epoch bump when what the group subscribes to changed."""
    image = groups.image
    writes = ConsumerWrites(ctx, groups)
    changed = False
    for regex in sorted(group.regex_subscribers):
        topics = matching_topics(regex, image)
        before = group.resolved_regexes.get(regex)
        changed = changed or before is None or before.topics != topics
        writes.regex(group.group_id, regex, topics)
    ctx.journal.set(group, "regex_image", image)
    if group.regex_subscribers:
        refresh_subscriptions(writes, group, image, group.group_epoch, changed)


def update_regexes(
    ctx: Ctx,
    writes: ConsumerWrites,
    groups: Groups,
    group: ConsumerGroup,
    old: ConsumerGroupMember | None,
    new: ConsumerGroupMember,
) -> bool:
    """A heartbeat's part in regex subscriptions (see the module doc), before ``new`` replaces ``old`` in the
    group. Returns whether the group epoch must be bumped (``new`` subscribes to a regular expression the
    group has resolved already)."""
    old_regex = old.subscribed_topic_regex if old is not None else None
    new_regex = new.subscribed_topic_regex
    counts = dict(group.regex_subscribers)
    bump = False
    brought_new = False
    if old_regex != new_regex:
        if old_regex is not None:
            counts[old_regex] -= 1
            if not counts[old_regex]:
                del counts[old_regex]
                if old_regex in group.resolved_regexes:
                    writes.regex_tombstone(group.group_id, old_regex)
        if new_regex is not None:
            if new_regex in counts:
                bump = new_regex in group.resolved_regexes
            else:
                brought_new = True
            counts[new_regex] = counts.get(new_regex, 0) + 1
    if not counts or resolution_key(group.group_id) in ctx.timers:
        return bump
    resolved = group.resolved_regexes
    last = max((r.resolved_at_ms for r in resolved.values()), default=None)
    if last is not None and ctx.now_ms <= last + REFRESH_INTERVAL_MS:
        return bump
    unresolved = any(regex not in resolved for regex in counts)
    if brought_new or unresolved or group.regex_image is not groups.image:
        ctx.timers.schedule(RegexResolution(group.group_id), ctx.now_ms)
    return bump
