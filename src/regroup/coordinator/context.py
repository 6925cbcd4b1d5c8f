"""The per-operation context handed to handlers: settings, timers, id source, the current time, the result
being built (records, completed responses and events) and the operation's undo journal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.events import Event
from regroup.coordinator.ids import IdSource
from regroup.coordinator.journal import Journal
from regroup.coordinator.result import Completion, RequestKey, Result
from regroup.coordinator.timers import Timers
from regroup.records.model import Record


@dataclass(slots=True, kw_only=True)
class Ctx:
    config: CoordinatorConfig
    timers: Timers
    ids: IdSource
    now_ms: int
    result: Result = field(default_factory=Result)
    journal: Journal = field(default_factory=Journal)

    def complete(self, key: RequestKey | None, response: Any) -> None:
        if key is not None:
            self.result.completions.append(Completion(key, response))

    def drop(self, key: RequestKey) -> None:
        """A parked request was superseded and will never be answered."""
        self.result.dropped.append(key)

    def emit(self, record: Record) -> None:
        self.result.records.append(record)

    def event(self, event: Event) -> None:
        """Say what happened (``events.py``)."""
        self.result.events.append(event)
