"""The simulator's event queue: items ordered by virtual time, ties broken by insertion order."""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any, Final

from regroup.client import OutgoingRequest
from regroup.sim.scenario import ScenarioEvent


@dataclass(slots=True, init=False)
class Wake:
    """Poll a member whose ``next_deadline()`` is due."""

    member: str

    # (an explicit __init__, not frozen: the compiled build compiles it; a generated one stays interpreted)
    def __init__(self, member: str) -> None:
        self.member = member


@dataclass(frozen=True, slots=True)
class CoordinatorWake:
    """Fire the coordinator's due timers."""


@dataclass(slots=True, init=False)
class ToCoordinator:
    """A request arriving at the coordinator from one process (incarnation) of a member."""

    member: str
    incarnation: int
    out: OutgoingRequest

    def __init__(self, member: str, incarnation: int, out: OutgoingRequest) -> None:
        self.member = member
        self.incarnation = incarnation
        self.out = out


@dataclass(slots=True, init=False)
class ToMember:
    """A response on its way back to the member process (incarnation) that sent the request: what the
    coordinator endpoint hands the simulator, and the queue item that delivers it."""

    member: str
    incarnation: int
    request_id: int
    api: str
    response: Any

    def __init__(self, member: str, incarnation: int, request_id: int, api: str, response: Any) -> None:
        self.member = member
        self.incarnation = incarnation
        self.request_id = request_id
        self.api = api
        self.response = response


Item = ScenarioEvent | Wake | CoordinatorWake | ToCoordinator | ToMember


#: a queue key is ``at_ms * 2**32 + seq``: ordered as (virtual time, insertion order), compared as one int
_SEQ_LIMIT: Final = 2**32


class EventQueue:
    """Items by virtual time, ties in insertion order. The heap holds int keys (cheaper to compare than
    tuples) and ``items`` maps each key to its item."""

    def __init__(self) -> None:
        self.heap: list[int] = []
        self.items: dict[int, Item] = {}
        self._seq = 0

    def push(self, at_ms: int, item: Item) -> None:
        seq = self._seq
        if seq >= _SEQ_LIMIT:
            raise OverflowError("more than 2**32 events queued in one run")
        self._seq = seq + 1
        key = at_ms * _SEQ_LIMIT + seq
        heappush(self.heap, key)
        self.items[key] = item

    def next_at(self) -> int | None:
        """The time of the next item, if any."""
        return self.heap[0] // _SEQ_LIMIT if self.heap else None

    def pop(self) -> tuple[int, Item]:
        key = heappop(self.heap)
        return key // _SEQ_LIMIT, self.items.pop(key)
