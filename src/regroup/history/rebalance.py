"""One rebalance of a group as the timeline reports it, and how its ``moved`` and ``unowned_partition_ms``
are counted from the partitions' ownership (``ownership.py``): a partition that lost its last holder counts as
unowned, within the rebalance, from the later of that moment and the rebalance's start until a member holds it
again (or the rebalance ends); it moved if the member that takes it is not one it had before."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from regroup.history.ownership import Key, Orphan, Ownership

#: the partitions one open rebalance remembers as moved (to count each once); beyond, each move counts
_MOVED_KEPT: Final = 1_000_000


@dataclass(slots=True)
class Rebalance:
    start_ms: int
    #: the generation (classic) or group epoch (consumer, share) the rebalance reached, so far
    generation: int
    reason: str
    member: str | None
    #: ``generation`` for classic groups, ``epoch`` for the others
    number_key: str = "generation"
    end_ms: int | None = None
    moved: int = 0
    unowned_partition_ms: int = 0
    _moved: set[Key] = field(default_factory=set)

    def took(self, key: Key, member_id: str, orphan: Orphan, t: int) -> None:
        """``member_id`` took ``key`` at ``t``, which had no holder since ``orphan.since``."""
        self.unowned_partition_ms += max(0, t - max(orphan.since, self.start_ms))
        if member_id not in orphan.last and key not in self._moved:
            if len(self._moved) < _MOVED_KEPT:
                self._moved.add(key)
            self.moved += 1

    def finish(self, t: int, ownership: Ownership) -> None:
        """The rebalance ended at ``t``: the partitions still without a holder count until then."""
        self.end_ms = max(t, self.start_ms)
        self.unowned_partition_ms += sum(
            max(0, self.end_ms - max(o.since, self.start_ms)) for o in ownership.orphans.values()
        )
        self._moved = set()
        ownership.age_orphans()

    def unowned_so_far(self, now: int, ownership: Ownership) -> int:
        if self.end_ms is not None:
            return self.unowned_partition_ms
        return self.unowned_partition_ms + sum(
            max(0, now - max(o.since, self.start_ms)) for o in ownership.orphans.values()
        )

    def to_json(self, now: int, ownership: Ownership) -> dict[str, Any]:
        return {
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            self.number_key: self.generation,
            "reason": self.reason,
            "member": self.member,
            "moved": self.moved,
            "unowned_partition_ms": self.unowned_so_far(now, ownership),
        }
