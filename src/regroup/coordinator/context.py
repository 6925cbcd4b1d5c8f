"""The per-operation context handed to handlers: settings, timers, id source, the current time, and the
result being built (records and completed responses)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.ids import IdSource
from regroup.coordinator.result import Completion, RequestKey, Result
from regroup.coordinator.timers import Timers
from regroup.records.model import Record


@dataclass(slots=True)
class Ctx:
    config: CoordinatorConfig
    timers: Timers
    ids: IdSource
    now_ms: int
    result: Result = field(default_factory=Result)

    def complete(self, key: RequestKey | None, response: Any) -> None:
        if key is not None:
            self.result.completions.append(Completion(key, response))

    def drop(self, key: RequestKey) -> None:
        """A parked request was superseded and will never be answered."""
        self.result.dropped.append(key)

    def emit(self, record: Record) -> None:
        self.result.records.append(record)


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("session", group_id, member_id)


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)
