"""Work the core hands to its shell to run beside the coordinator's own thread (``Result.asides``).

An operation that would otherwise hold the caller for long (a KIP-848 group's target computed in full over
thousands of members) takes what the work reads from the coordinator at one moment and returns an ``Aside``
with its result. The shell runs ``run()`` wherever it likes (a worker thread; the simulator could run it at
once) and hands the outcome back through ``GroupCoordinator.land``, a write of its own on the coordinator's
thread, in which the aside checks that what it read still holds before it writes anything. ``run`` reads
only what the aside took, so it needs no lock; everything it decides is applied, or dropped, by ``land``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from regroup.coordinator.context import Ctx
    from regroup.coordinator.groups import Groups


class Aside(Protocol):
    """One piece of work handed out, and how its outcome comes back."""

    def run(self) -> object:
        """Do the work: reads nothing but what the aside holds; may raise (the shell passes the exception on)."""

    def land(self, ctx: Ctx, groups: Groups, outcome: object) -> None:
        """Apply ``outcome`` (what ``run`` returned, or the exception it raised) on the coordinator's thread,
        or drop it when what it was worked out from has changed since."""


def outcome_of(aside: Aside) -> object:
    """``aside.run()``, or the exception it raised: what a shell hands to ``GroupCoordinator.land``."""
    try:
        return aside.run()
    except Exception as exc:  # (handed back to the core, which decides what a failure means)
        return exc
