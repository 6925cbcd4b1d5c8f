"""Who holds each partition of one group, over time: open intervals (member, partition, since when), closed
ones, and the partitions that lost their last holder and have no new one yet (orphans), from which a
rebalance's ``moved`` and ``unowned_partition_ms`` are counted. Bounded: at most ``cap`` intervals (open and
closed together, oldest closed dropped first) and ``cap`` orphans."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Final

#: (topic, partition)
Key = tuple[str, int]

#: how many of the latest closed intervals a new one looks through for its own, closed at that very time
_REOPEN_SCAN: Final = 4_096


@dataclass(slots=True)
class Interval:
    member_id: Final[str]
    topic: Final[str]
    partition: Final[int]
    from_ms: Final[int]
    to_ms: Final[int | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "topic": self.topic,
            "partition": self.partition,
            "from_ms": self.from_ms,
            "to_ms": self.to_ms,
        }


@dataclass(slots=True)
class Orphan:
    """A partition no member holds since ``since`` (its last holders were ``last``), for ``age`` rebalances
    that ended since then."""

    since: int
    last: frozenset[str]
    age: int = 0


class Ownership:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        #: (member id, topic, partition) -> from_ms, in the order they opened
        self.open: dict[tuple[str, str, int], int] = {}
        #: partition -> its holders (the members with an open interval on it)
        self.holders: dict[Key, set[str]] = {}
        self.closed: deque[Interval] = deque()
        self.orphans: dict[Key, Orphan] = {}

    def __len__(self) -> int:
        return len(self.open) + len(self.closed)

    def holds(self, member_id: str, key: Key) -> bool:
        return (member_id, *key) in self.open

    def assign(self, member_id: str, key: Key, t: int) -> Orphan | None:
        """``member_id`` holds ``key`` from ``t`` on (nothing if it already does); the orphan this ends, if the
        partition had none."""
        if (member_id, *key) in self.open:
            return None
        self.open[(member_id, *key)] = self._reopened(member_id, key, t)
        holders = self.holders.get(key)
        if holders is None:
            holders = self.holders[key] = set()
        holders.add(member_id)
        self._bound()
        return self.orphans.pop(key, None) if len(holders) == 1 else None

    def _reopened(self, member_id: str, key: Key, t: int) -> int:
        """Where ``member_id``'s new interval on ``key`` starts: at ``t``, or, if its last one closed at ``t``
        (a group converted to the other type hands its members what they held), where that one started (the
        interval goes on)."""
        for back, interval in enumerate(reversed(self.closed)):
            if back >= _REOPEN_SCAN or interval.to_ms is None or interval.to_ms < t:
                break
            if interval.to_ms == t and (interval.member_id, interval.topic, interval.partition) == (member_id, *key):
                del self.closed[len(self.closed) - 1 - back]
                return interval.from_ms
        return t

    def revoke(self, member_id: str, key: Key, t: int) -> None:
        """``member_id`` holds ``key`` no more from ``t`` on (nothing if it did not hold it)."""
        since = self.open.pop((member_id, *key), None)
        if since is None:
            return
        self.closed.append(Interval(member_id, key[0], key[1], since, max(t, since)))
        holders = self.holders.get(key)
        if holders is not None:
            holders.discard(member_id)
            if not holders:
                del self.holders[key]
                self.orphans.pop(key, None)
                self.orphans[key] = Orphan(max(t, since), frozenset((member_id,)))
                if len(self.orphans) > self.cap:
                    del self.orphans[next(iter(self.orphans))]
        self._bound()

    def revoke_all(self, t: int) -> None:
        for member_id, topic, partition in list(self.open):
            self.revoke(member_id, (topic, partition), t)

    def owners(self) -> dict[Key, frozenset[str]]:
        return {key: frozenset(holders) for key, holders in self.holders.items()}

    def age_orphans(self) -> None:
        """A rebalance ended: orphans that outlived two rebalances stop counting (their topic was deleted, or
        the group no longer subscribes to it, or it has no members)."""
        for key in list(self.orphans):
            orphan = self.orphans[key]
            orphan.age += 1
            if orphan.age >= 2:
                del self.orphans[key]

    def prune(self, cutoff: int) -> None:
        """Forget the intervals that closed before ``cutoff``."""
        if any(i.to_ms is not None and i.to_ms < cutoff for i in self.closed):
            self.closed = deque(i for i in self.closed if i.to_ms is not None and i.to_ms >= cutoff)

    def intervals(self, since: int | None, until: int | None) -> list[Interval]:
        """The intervals overlapping [since, until], by start, then topic, partition and member."""
        out = [
            i
            for i in self.closed
            if (since is None or (i.to_ms is not None and i.to_ms >= since)) and (until is None or i.from_ms <= until)
        ]
        out.extend(
            Interval(member_id, topic, partition, from_ms, None)
            for (member_id, topic, partition), from_ms in self.open.items()
            if until is None or from_ms <= until
        )
        out.sort(key=lambda i: (i.from_ms, i.topic, i.partition, i.member_id))
        return out

    def _bound(self) -> None:
        while len(self.open) + len(self.closed) > self.cap:
            if self.closed:
                self.closed.popleft()
            else:  # (more open intervals than the cap: the oldest is forgotten, as if it never opened)
                member_id, topic, partition = next(iter(self.open))
                del self.open[(member_id, topic, partition)]
                holders = self.holders.get((topic, partition))
                if holders is not None:
                    holders.discard(member_id)
                    if not holders:
                        del self.holders[(topic, partition)]
