"""The simulator's event queue: items ordered by virtual time, ties broken by insertion order."""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any

from regroup.client import OutgoingRequest
from regroup.sim.scenario import ScenarioEvent


@dataclass(slots=True)
class Wake:
    """Poll a member whose ``next_deadline()`` is due."""

    member: str


@dataclass(frozen=True, slots=True)
class CoordinatorWake:
    """Fire the coordinator's due timers."""


@dataclass(slots=True)
class ToCoordinator:
    """A request arriving at the coordinator from one process (incarnation) of a member."""

    member: str
    incarnation: int
    out: OutgoingRequest


@dataclass(slots=True)
class ToMember:
    """A response on its way back to the member process (incarnation) that sent the request: what the
    coordinator endpoint hands the simulator, and the queue item that delivers it."""

    member: str
    incarnation: int
    request_id: int
    api: str
    response: Any


@dataclass(slots=True)
class Disconnect:
    """The connection of a crashed share member's process closes: the coordinator's side learns it now."""

    member: str
    member_id: str


Item = ScenarioEvent | Wake | CoordinatorWake | ToCoordinator | ToMember | Disconnect


class EventQueue:
    """Items by virtual time, ties in insertion order. Items are kept in one list per time, in insertion
    order, and a heap holds the distinct times: a run's items share few times (a bench-grid run pushes 7-10
    items per distinct time), so the heap is small and most pushes and pops never touch it."""

    def __init__(self) -> None:
        self.times: list[int] = []
        self.buckets: dict[int, list[Item]] = {}

    def push(self, at_ms: int, item: Item) -> None:
        bucket = self.buckets.get(at_ms)
        if bucket is None:
            self.buckets[at_ms] = [item]
            heappush(self.times, at_ms)
        else:
            bucket.append(item)

    def next_at(self) -> int | None:
        """The time of the next item, if any."""
        return self.times[0] if self.times else None

    def pop(self) -> tuple[int, Item]:
        at_ms = self.times[0]
        bucket = self.buckets[at_ms]
        item = bucket.pop(0)  # (a bucket holds a few items: moving them is cheaper than an index per time)
        if not bucket:
            heappop(self.times)
            del self.buckets[at_ms]
        return at_ms, item

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self.buckets.values())
