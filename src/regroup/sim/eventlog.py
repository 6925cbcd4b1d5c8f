"""The simulator's event log: one flat JSON object per line, virtual timestamps, a fixed set of keys in a
fixed order (absent values are ``null``), so the lab can load it with one schema. The schema is documented
in docs/simulator.md; keep it stable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

#: Every line has exactly these keys, in this order.
FIELDS = (
    "seq",
    "t",
    "type",
    "member",
    "member_id",
    "generation",
    "api",
    "request_id",
    "error",
    "state",
    "topic",
    "partition",
    "value",
    "detail",
)

Event = dict[str, Any]
_FIELD_SET = frozenset(FIELDS)
_BLANK: Event = dict.fromkeys(FIELDS)


class EventLog:
    """Events in the order they happened (``seq`` 0, 1, ...; ``t`` never decreases)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, t: int, type_: str, **values: Any) -> Event:
        if not _FIELD_SET.issuperset(values):
            raise ValueError(f"unknown event fields {sorted(set(values) - _FIELD_SET)}")
        event: Event = _BLANK.copy()  # every key, in order
        event.update(values)
        event["seq"] = len(self.events)
        event["t"] = t
        event["type"] = type_
        self.events.append(event)
        return event

    def of_type(self, *types: str) -> Iterator[Event]:
        return (e for e in self.events if e["type"] in types)

    def lines(self) -> Iterator[str]:
        for event in self.events:
            yield json.dumps(event, separators=(",", ":"), sort_keys=False)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines())
