"""The simulator's event log: one flat JSON object per line, virtual timestamps, a fixed set of keys in a
fixed order (absent values are ``null``), so the lab can load it with one schema. The schema is documented
in docs/simulator.md; keep it stable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

#: Every line has exactly these keys, in this order.
FIELDS: Final = (
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

#: every field null, in ``FIELDS`` order: each event starts as a copy of it
_NULLS: Final[Event] = dict.fromkeys(FIELDS)


class EventLog:
    """Events in the order they happened (``seq`` 0, 1, ...; ``t`` never decreases)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(
        self,
        t: int,
        type_: str,
        *,
        member: str | None = None,
        member_id: str | None = None,
        generation: int | None = None,
        api: str | None = None,
        request_id: int | None = None,
        error: str | None = None,
        state: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        value: int | None = None,
        detail: str | None = None,
    ) -> Event:
        """Append one event (the fields of ``FIELDS``; an unknown keyword is a TypeError)."""
        # a copy of the all-null template, then the given fields: cheaper than building 14 keys each time
        event = _NULLS.copy()
        event["seq"] = len(self.events)
        event["t"] = t
        event["type"] = type_
        if member is not None:
            event["member"] = member
        if member_id is not None:
            event["member_id"] = member_id
        if generation is not None:
            event["generation"] = generation
        if api is not None:
            event["api"] = api
        if request_id is not None:
            event["request_id"] = request_id
        if error is not None:
            event["error"] = error
        if state is not None:
            event["state"] = state
        if topic is not None:
            event["topic"] = topic
        if partition is not None:
            event["partition"] = partition
        if value is not None:
            event["value"] = value
        if detail is not None:
            event["detail"] = detail
        self.events.append(event)
        return event

    def of_type(self, *types: str) -> Iterator[Event]:
        return (e for e in self.events if e["type"] in types)

    def lines(self) -> Iterator[str]:
        for event in self.events:
            yield json.dumps(event, separators=(",", ":"), sort_keys=False)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines())
