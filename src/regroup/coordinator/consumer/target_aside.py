"""When and where a consumer group's target is computed: within the operation that moved the group epoch past
it, or beside the coordinator (``asides.py``) for a large group, as Kafka offloads the assignor
(``group.consumer.assignor.offload.enable``).

A group of at least ``consumer_group_assignor_offload_members`` members that needs a full computation (the
kept target does not apply) and has had a target before takes the computation's inputs (``target.gather``:
copies of its members, targets and regular expressions, and its soft target state) and hands out a
``TargetAside``. Until it lands, the group computes nothing else: its members heartbeat against the last
target, whose epoch a joining member takes (never 0, as the group has had a target). When it lands, its
targets are written for the epoch it was computed for, with the membership changes since ordered after it,
as Kafka orders them (``as_the_group_is``): nothing for a member that left, a static member's target under the
id of the process that replaced it, only the partitions of the topics a member subscribes to now. Dropping a
computation whenever the group moved on would leave a group whose members keep coming and going without
targets. If the group has moved on, its current epoch is computed next, starting from those targets. Only a
change of the subscribed topics themselves (partitions, topics gone or added) drops it. A computation that
failed leaves that epoch to the next heartbeat, which computes it within and answers with the error, as
without offloading.

When: with an assignment interval (KIP-1263's ``consumer.assignment.interval.ms``), no sooner than the interval
after the group's last target; an ``AssignmentIntervalTimer`` computes the one that waited when it ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass

from regroup.coordinator.assignment_interval import interval_running
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, Partitions, ResolvedRegex
from regroup.coordinator.consumer.kept_target import kept_topics
from regroup.coordinator.consumer.subscriptions import member_topics
from regroup.coordinator.consumer.target import (
    ComputedTarget,
    TargetInputs,
    apply_target,
    compute_in_full,
    compute_target,
    gather,
)
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups
from regroup.model.errors import ApiError


@dataclass(slots=True, eq=False)
class AssignmentIntervalTimer:
    """A group's assignment interval ended: its target is computed if the group epoch moved past it."""

    group_id: str

    @property
    def key(self) -> tuple[str, str]:
        return ("consumer-assignment-interval", self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = groups.typed(self.group_id, ConsumerGroup)
        if group is not None:
            with suppress(ApiError):  # (a failure writes nothing: the next heartbeat computes it and is told)
                ensure_target(ctx, ConsumerWrites(ctx, groups), group)


@dataclass(slots=True, eq=False)
class TargetAside:
    """One group's full target computation, run beside the coordinator."""

    inputs: TargetInputs
    #: the group's target epoch when the inputs were taken
    assignment_epoch: int
    #: the group object the inputs were taken from
    group: ConsumerGroup

    def run(self) -> ComputedTarget:
        return compute_in_full(self.inputs)

    def land(self, ctx: Ctx, groups: Groups, outcome: object) -> None:
        group = self.group
        if groups.typed(group.group_id, ConsumerGroup) is not group or group.target_aside is not self:
            return  # (the group was deleted or loaded anew since)
        ctx.journal.set(group, "target_aside", None)
        inputs = self.inputs
        if not isinstance(outcome, ComputedTarget):
            ctx.journal.set(group, "target_failed_epoch", inputs.group_epoch)
            return
        writes = ConsumerWrites(ctx, groups)
        source = tuple(group.subscribed_topics.values())
        if group.assignment_epoch == self.assignment_epoch and source == inputs.source:
            # written for the epoch it was computed for, even when the group has moved on since (members come and
            # go all the time in a large group: dropping it would leave the group without targets until they stop)
            apply_target(writes, group, inputs, as_the_group_is(group, inputs, outcome))
        # (else the subscribed topics changed under it: dropped.) The group's current epoch next, starting from
        # these targets; a failure writes nothing: the next heartbeat computes it within and is told
        with suppress(ApiError):
            ensure_target(ctx, writes, group)


def as_the_group_is(group: ConsumerGroup, inputs: TargetInputs, computed: ComputedTarget) -> ComputedTarget:
    """``computed``'s writes with the membership changes since ``inputs`` were taken ordered after it, as Kafka
    orders them after an offloaded assignment: a member that left gets no target; a static member's
    replacement gets the target computed for the member it replaced; a member whose topics changed gets only
    the partitions of the topics it subscribes to now. The targets stay disjoint. (The computation's state keeps
    their entries: the next computation trusts none of them, their members gone or their topics changed.)"""
    members = group.members
    names = computed.last.topics.names
    then_resolved, now_resolved = inputs.resolved, group.resolved_regexes
    changes: list[tuple[str, Partitions]] = []
    reordered = False
    for member_id, new in computed.changes:
        then = inputs.members[member_id]
        now = members.get(member_id)
        target_id = member_id
        if now is None:
            reordered = True
            holder = group.static_members.get(then.instance_id) if then.instance_id is not None else None
            if holder is None or holder in inputs.members:
                continue  # (it left)
            target_id, now = holder, members[holder]  # (replaced by a new process under the same instance id)
        wanted = _topics(now, now_resolved)
        if wanted != _topics(then, then_resolved):
            reordered = True
            keep = frozenset(wanted)
            new = {topic_id: partitions for topic_id, partitions in new.items() if names.get(topic_id) in keep}
        changes.append((target_id, new))
    if not reordered:
        return computed
    return ComputedTarget(changes=changes, last=computed.last, views=computed.views)


def _topics(member: ConsumerGroupMember, resolved: Mapping[str, ResolvedRegex]) -> tuple[str, ...]:
    """The member's topics as a computation reads them (``member_topics``, skipped without a regex)."""
    return member.subscribed_topic_names if member.subscribed_topic_regex is None else member_topics(member, resolved)


def ensure_target(ctx: Ctx, writes: ConsumerWrites, group: ConsumerGroup) -> None:
    """If something bumped the group epoch past the target epoch, compute the target for it, or hand the
    computation out (``Result.asides``) for a large group; nothing while one is out. Nor while the group's
    assignment interval (KIP-1263's ``consumer.assignment.interval.ms``) runs from its last target: then an
    ``AssignmentIntervalTimer`` computes it when the interval ends, and the members heartbeat against the last
    target meanwhile, as while a computation is out (a group whose last target's time is not known, or that
    had none, computes at once)."""
    if group.group_epoch <= group.assignment_epoch or group.target_aside is not None:
        return
    interval = ctx.consumer_assignment_interval_ms(group.group_id)
    timer = AssignmentIntervalTimer(group.group_id)
    if interval_running(ctx, group.assignment_timestamp_ms, group.assignment_epoch, interval, timer):
        return
    assignor = group.preferred_assignor(ctx.config.consumer_group_assignors[0])
    offload = ctx.config.consumer_group_assignor_offload_members
    if (
        offload is not None
        and len(group.members) >= offload
        and group.assignment_epoch > 0
        and group.target_failed_epoch != group.group_epoch
        and kept_topics(group, assignor) is None
    ):
        aside = TargetAside(gather(group, assignor, copy=True), group.assignment_epoch, group)
        ctx.journal.set(group, "target_aside", aside)
        ctx.result.asides.append(aside)
        return
    compute_target(writes, group, assignor)
