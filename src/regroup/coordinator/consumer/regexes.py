"""Regular-expression subscriptions, resolved the way Kafka resolves them (KIP-848): asynchronously.

A member that subscribes to a regular expression the group does not resolve yet gets, in that heartbeat, only what
its topic names give it; the group resolves its regular expressions in a write of its own (a ``RegexResolution``
timer due at once: the shell runs it right after the heartbeat, as Kafka's executor runs the resolution off the
request path; a first resolution over many topics, ``consumer_group_regex_offload_names`` names or more, matches
them beside the coordinator, ``RegexAside``), writes one record per regular expression (the topics it matched, and
when), and — when the resolution changed what the group subscribes to — new subscription metadata and a group epoch
bump. The member gets the matched topics' partitions in a later heartbeat, from the target computed for that epoch.

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
from regroup.coordinator.consumer.subscriptions import (
    match_names,
    matching_topics,
    remember_matches,
    unmatched_names,
)
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
        if group is None or group.regex_aside is not None:
            return  # (one is being matched beside the coordinator: its landing resolves them all)
        offload = ctx.config.consumer_group_regex_offload_names
        if offload is not None:
            unmatched = {regex: unmatched_names(regex, groups.image) for regex in sorted(group.regex_subscribers)}
            if sum(map(len, unmatched.values())) >= offload:
                aside = RegexAside(group, unmatched)
                ctx.journal.set(group, "regex_aside", aside)
                ctx.result.asides.append(aside)
                return
        resolve(ctx, groups, group)


@dataclass(slots=True, eq=False)
class RegexAside:
    """A group's regular expressions matched beside the coordinator against the topic names none of its
    resolutions matched them against before (a first resolution over thousands of topics). Its landing keeps
    what it found (``remember_matches``) and resolves the group against the cluster as it is then, matching only
    the names created since."""

    group: ConsumerGroup
    #: per regular expression, the names to match it against
    unmatched: dict[str, list[str]]

    def run(self) -> dict[str, dict[str, bool]]:
        return {regex: match_names(regex, names) for regex, names in self.unmatched.items()}

    def land(self, ctx: Ctx, groups: Groups, outcome: object) -> None:
        group = self.group
        if groups.typed(group.group_id, ConsumerGroup) is not group or group.regex_aside is not self:
            return  # (the group was deleted or loaded anew since)
        ctx.journal.set(group, "regex_aside", None)
        if isinstance(outcome, dict):  # (a failure: they are matched within the resolution, as without offloading)
            for regex, matched in outcome.items():
                remember_matches(regex, matched)
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
