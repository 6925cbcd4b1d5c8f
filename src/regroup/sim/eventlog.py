"""The simulator's event log: one flat JSON object per line, virtual timestamps, a fixed set of keys in a
fixed order (absent values are ``null``), so the lab can load it with one schema. The schema is documented
in docs/simulator.md; keep it stable.

In memory an event is a *row*: a tuple of the ``FIELDS`` values in that order, read by index with the
constants below (``row[TYPE]``). Rows are what the simulator appends and what the summary and the lab's
metrics read; ``events`` gives the same events as dicts (the JSON objects), built on demand.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
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

#: the index of each field in a row
SEQ: Final = 0
T: Final = 1
TYPE: Final = 2
MEMBER: Final = 3
MEMBER_ID: Final = 4
GENERATION: Final = 5
API: Final = 6
REQUEST_ID: Final = 7
ERROR: Final = 8
STATE: Final = 9
TOPIC: Final = 10
PARTITION: Final = 11
VALUE: Final = 12
DETAIL: Final = 13

Event = dict[str, Any]
Row = tuple[Any, ...]


def as_row(event: Mapping[str, Any]) -> Row:
    """An event dict (a parsed line) as a row; a missing key reads as null."""
    return tuple(event.get(name) for name in FIELDS)


def as_rows(events: Iterable[Mapping[str, Any]]) -> list[Row]:
    return [as_row(e) for e in events]


def as_event(row: Row) -> Event:
    return dict(zip(FIELDS, row, strict=True))


class EventLog:
    """Events in the order they happened (``seq`` 0, 1, ...; ``t`` never decreases)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self._events: list[Event] = []  # ``events`` so far, extended as rows arrive

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
    ) -> None:
        """Append one event (the fields of ``FIELDS``; an unknown keyword is a TypeError)."""
        rows = self.rows
        rows.append(
            (
                len(rows),
                t,
                type_,
                member,
                member_id,
                generation,
                api,
                request_id,
                error,
                state,
                topic,
                partition,
                value,
                detail,
            )
        )

    @property
    def events(self) -> list[Event]:
        """Every event as a dict (new dicts for the rows appended since the last call)."""
        done = len(self._events)
        if done < len(self.rows):
            self._events.extend(as_event(row) for row in self.rows[done:])
        return self._events

    def of_type(self, *types: str) -> Iterator[Event]:
        return (e for e in self.events if e["type"] in types)

    def lines(self) -> Iterator[str]:
        for row in self.rows:
            yield json.dumps(as_event(row), separators=(",", ":"), sort_keys=False)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines())
