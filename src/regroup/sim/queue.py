"""The simulator's event queue: items ordered by virtual time, ties broken by insertion order."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

from regroup.client import OutgoingRequest
from regroup.sim.scenario import ScenarioEvent


@dataclass(frozen=True, slots=True)
class Wake:
    """Poll a member whose ``next_deadline()`` is due."""

    member: str


@dataclass(frozen=True, slots=True)
class CoordinatorWake:
    """Fire the coordinator's due timers."""


@dataclass(frozen=True, slots=True)
class ToCoordinator:
    """A request arriving at the coordinator from one process (incarnation) of a member."""

    member: str
    incarnation: int
    out: OutgoingRequest


@dataclass(frozen=True, slots=True)
class ToMember:
    """A response arriving at a member process."""

    member: str
    incarnation: int
    request_id: int
    api: str
    response: Any


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
