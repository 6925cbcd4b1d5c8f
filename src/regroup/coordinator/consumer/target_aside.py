"""When and where a consumer group's target is computed: within the operation that moved the group epoch past
it, or beside the coordinator (``asides.py``) for a large group, as Kafka offloads the assignor
(``group.consumer.assignor.offload.enable``).

A group of at least ``consumer_group_assignor_offload_members`` members that needs a full computation (the
kept target does not apply) and has had a target before takes the computation's inputs (``target.gather``:
copies of its members, targets and regular expressions, and its soft target state) and hands out a
``TargetAside``. Until it lands, the group computes nothing else: its members heartbeat against the last
target, whose epoch a joining member takes (never 0, as the group has had a target). When it lands, it is
written only if the group still is what it was computed from (the same group epoch, target epoch and member
ids, subscribed topics and the group object itself); otherwise it is dropped and the group's current epoch is
computed afresh. A computation that failed leaves that epoch to the next heartbeat, which computes it within
and answers with the error, as without offloading.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.consumer.kept_target import kept_topics
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
        if (
            group.group_epoch != inputs.group_epoch
            or group.assignment_epoch != self.assignment_epoch
            or len(group.members) != len(inputs.members)
            or group.members.keys() != inputs.members.keys()
            or tuple(group.subscribed_topics.values()) != inputs.source
        ):
            # the group moved on: its current epoch, afresh (a failure writes nothing: the next heartbeat
            # computes it within and is told)
            with suppress(ApiError):
                ensure_target(ctx, writes, group)
            return
        apply_target(writes, group, inputs, outcome)


def ensure_target(ctx: Ctx, writes: ConsumerWrites, group: ConsumerGroup) -> None:
    """If something bumped the group epoch past the target epoch, compute the target for it, or hand the
    computation out (``Result.asides``) for a large group; nothing while one is out."""
    if group.group_epoch <= group.assignment_epoch or group.target_aside is not None:
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
