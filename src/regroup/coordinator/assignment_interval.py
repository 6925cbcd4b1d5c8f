"""KIP-1263's assignment interval, as every group type with a target shares it (consumer and share groups): a
group's next target is computed no sooner than the interval after its last; while the interval runs, a timer of
the group's type is armed for its end, and the group keeps its last target meanwhile."""

from __future__ import annotations

from regroup.coordinator.context import Ctx
from regroup.coordinator.timers import Timer


def interval_running(ctx: Ctx, last_ms: int, assignment_epoch: int, interval_ms: int, timer: Timer) -> bool:
    """Whether the interval since the group's last target (computed at ``last_ms``; 0: not known) still runs at
    ``ctx.now_ms``; if so ``timer`` is armed for its end. A group that has had no target (``assignment_epoch``
    0), or whose last target's time is not known, computes at once, as Kafka's ``canComputeNextTargetAssignment``
    lets it."""
    if last_ms <= 0 or assignment_epoch <= 0:
        return False
    due = last_ms + interval_ms
    if ctx.now_ms >= due:
        return False
    ctx.timers.schedule(timer, due)
    return True
