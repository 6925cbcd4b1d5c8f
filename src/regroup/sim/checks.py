"""Safety checks the simulator runs at every step:

* no partition is processed by two members at the same time;
* once the group is quiescent (coordinator Stable, every running member Stable in that generation with
  nothing in flight or pending, the group's members are exactly the running ones) every subscribed
  partition has exactly one processing owner;
* generations never go back (the group's, each member's successive JoinGroup generations or KIP-848 member
  epochs, and the epoch the coordinator holds for a KIP-848 member, checked in ``endpoint``) — except when
  an empty group is replaced by a new group of the other protocol, which starts over;
* the coordinator never accepts an offset commit from a fenced member (one that is not a member of the
  group's current generation when the commit is handled).

A violation is reported once when its condition starts (and again if it clears and comes back).
"""

from __future__ import annotations

from typing import Any, Final

from regroup.client.types import TopicPartition
from regroup.sim.describe import label
from regroup.sim.eventlog import EventLog

_NOTHING: Final[frozenset[TopicPartition]] = frozenset()


class SafetyChecker:
    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.violations: list[str] = []
        self.processing: dict[TopicPartition, set[str]] = {}
        self.owned_by: dict[str, frozenset[TopicPartition]] = {}
        self.max_generation = 0
        self.join_generation: dict[str, int] = {}
        self._active: set[tuple[object, ...]] = set()
        # The last quiescent check, and whether ownership changed since: a check of the same expected set
        # over the same owners reports nothing new, so ``quiescent`` skips it.
        self._checked: frozenset[TopicPartition] | None = None
        self._owners_changed = True

    # ---------------------------------------------------------------------------------------- reports
    def violation(self, t: int, key: tuple[object, ...], detail: str) -> None:
        if key in self._active:
            return
        self._active.add(key)
        self.violations.append(f"{t} ms: {detail}")
        self.log.emit(t, "violation", detail=detail)

    def _clear(self, key: tuple[object, ...]) -> None:
        self._active.discard(key)

    # ------------------------------------------------------------------------------------- ownership
    def set_owned(self, t: int, member: str, owned: frozenset[TopicPartition]) -> None:
        before = self.owned_by.get(member, _NOTHING)
        if owned is before or owned == before:
            return
        self.owned_by[member] = owned
        self._owners_changed = True
        # (partitions typed Any: the compiled build keeps the sets' tuples instead of unboxing each one and
        # boxing a new tuple for every lookup)
        processing: dict[Any, set[str]] = self.processing
        gone: frozenset[Any] = before - owned
        active = bool(self._active)  # (no violation is active in a correct run: nothing to clear)
        for tp in gone:
            holders = processing.get(tp)
            if holders is not None:
                holders.discard(member)
                if active and len(holders) <= 1:
                    self._clear(("double", tp))
            elif active:
                self._clear(("double", tp))
        doubled: list[Any] = []
        came: frozenset[Any] = owned - before
        for tp in came:
            holders = processing.setdefault(tp, set())
            holders.add(member)
            if len(holders) > 1:
                doubled.append(tp)
        for tp in sorted(doubled):  # (each partition's holders changed only for itself: reported in order)
            who = " and ".join(sorted(self.processing[tp]))
            self.violation(t, ("double", tp), f"{label(tp)} processed by {who} at the same time")

    def owners(self, tp: TopicPartition) -> set[str]:
        return self.processing.get(tp, set())

    # ----------------------------------------------------------------------------------- generations
    def group_generation(self, t: int, generation: int) -> None:
        if generation < self.max_generation:
            self.violation(t, ("group-generation", generation), f"group generation went back to {generation}")
        self.max_generation = max(self.max_generation, generation)

    def group_replaced(self) -> None:
        """An empty group was replaced by a new group of the other protocol (docs/protocol.md, X04 and X16):
        generations and epochs start over."""
        self.max_generation = 0
        self.join_generation.clear()

    def joined(self, t: int, member: str, generation: int) -> None:
        last = self.join_generation.get(member, -1)
        if generation < last:
            self.violation(
                t, ("member-generation", member, generation), f"{member} joined generation {generation} after {last}"
            )
        self.join_generation[member] = max(last, generation)

    # ---------------------------------------------------------------------------------------- commits
    def commit(self, t: int, member: str, fenced_reason: str | None, accepted: list[TopicPartition]) -> None:
        if fenced_reason is not None and accepted:
            self.violation(
                t,
                ("fenced-commit", member, t),
                f"offsets of {','.join(label(tp) for tp in accepted)} accepted from {member}, {fenced_reason}",
            )

    # ------------------------------------------------------------------------------------ quiescence
    def quiescent(self, t: int, expected: frozenset[TopicPartition] | None) -> None:
        """``expected`` is the set of subscribed partitions when the group is quiescent, None otherwise.

        Runs at every simulator step, so it is incremental: when neither the expected set nor any member's
        partitions changed since the last check, that check's result stands and nothing is redone."""
        if expected is None:
            if self._checked is not None:
                self._active = {k for k in self._active if k[0] != "quiescent"}
                self._checked = None
            return
        if not self._owners_changed and (expected is self._checked or expected == self._checked):
            return
        self._checked = expected
        self._owners_changed = False
        # (partitions typed Any here: the compiled build keeps the set's tuples instead of unboxing each one
        # and boxing a new tuple for the lookup)
        processing: dict[Any, set[str]] = self.processing
        partitions: frozenset[Any] = expected
        wrong = [tp for tp in partitions if len(processing.get(tp, ())) != 1]
        for tp in sorted(wrong):  # (only the wrong ones sorted: reported in partition order)
            holders = self.owners(tp)
            who = ", ".join(sorted(holders)) or "nobody"
            self.violation(t, ("quiescent", tp), f"group is stable but {label(tp)} is processed by {who}")
