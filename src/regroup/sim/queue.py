"""The simulator's event queue: items ordered by virtual time, ties broken by insertion order."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

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
    """A response arriving at a member process."""

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


@dataclass
class EventQueue:
    heap: list[tuple[int, int, Item]] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, at_ms: int, item: Item) -> None:
        heapq.heappush(self.heap, (at_ms, next(self.seq), item))

    def pop(self) -> tuple[int, Item]:
        at_ms, _, item = heapq.heappop(self.heap)
        return at_ms, item
