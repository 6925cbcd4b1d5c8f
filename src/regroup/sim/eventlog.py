"""The simulator's event log: one flat JSON object per line, virtual timestamps, a fixed set of keys in a
fixed order (``model.eventlog.FIELDS``; absent values are ``null``), so the lab can load it with one schema.

In memory an event is a *row*: a tuple of the ``FIELDS`` values in that order, read by index with the
constants below (``row[TYPE]``). Rows are what the simulator appends and what the summary and the lab's
metrics read; ``events`` gives the same events as dicts (the JSON objects), built on demand.

Events that differ only in their partition (a callback's ``assigned`` / ``revoked`` / ``lost`` /
``stopped`` events, a member's ``group_assignment`` events, a share member's ``share_assigned`` /
``share_unassigned`` events) are appended as one *batch row*: its ``topic``
is None and its ``partition`` holds the ``(topic, partition)`` pairs in order; its ``seq`` is the first
event's. It stands for exactly those events (``expand``), so lines and dicts are the same as if each had
been appended alone; readers of rows take a row's partitions with ``partitions_of``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from regroup.client.types import TopicPartition
from regroup.model.eventlog import FIELDS

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


def is_batch(row: Row) -> bool:
    """Whether ``row`` is a batch row (one event per partition it holds)."""
    return row[TOPIC] is None and isinstance(row[PARTITION], tuple)


#: a row's partitions as (topic, partition) pairs, for readers that index them by topic and number (the
#: compiled build then reads each pair's topic and number directly, without generic calls)
Pairs = tuple[tuple[str, int], ...]


def partitions_of(row: Row) -> tuple[Any, ...]:
    """The partitions an event names: a batch row's pairs, else the row's own (none without a topic).
    Each is a ``TopicPartition``; typed ``Any`` so that compiled readers keep the tuple objects as they are
    (a ``tuple[str, int]`` item is unboxed when read and boxed anew for every dict or set it goes into)."""
    topic = row[TOPIC]
    part = row[PARTITION]
    if topic is not None:
        return ((topic, part),)
    return part if isinstance(part, tuple) else ()


def event_count(rows: Iterable[Row]) -> int:
    """How many events ``rows`` stand for (a batch row counts once per partition)."""
    return sum(len(row[PARTITION]) if is_batch(row) else 1 for row in rows)


def expand(rows: Iterable[Row]) -> Iterator[Row]:
    """The rows with every batch row replaced by its events' rows (``seq`` counting on from the batch's)."""
    for row in rows:
        if is_batch(row):
            head, tail = row[:TOPIC], row[PARTITION + 1 :]
            seq = row[SEQ]
            for i, (topic, partition) in enumerate(row[PARTITION]):
                yield (seq + i, *head[T:], topic, partition, *tail)
        else:
            yield row


class EventLog:
    """Events in the order they happened (``seq`` 0, 1, ...; ``t`` never decreases)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.count = 0  # events so far (the next event's ``seq``)
        self._events: list[Event] = []  # ``events`` so far, extended as rows arrive
        self._expanded = 0  # rows already in ``_events``

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
        seq = self.count
        self.count = seq + 1
        self.rows.append(
            (
                seq,
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

    def emit_partitions(
        self,
        t: int,
        type_: str,
        partitions: Sequence[TopicPartition],
        *,
        member: str | None = None,
        member_id: str | None = None,
        generation: int | None = None,
        detail: str | None = None,
        error: str | None = None,
        value: int | None = None,
    ) -> None:
        """Append one event per partition, in order, as one batch row (nothing for no partitions)."""
        if not partitions:
            return
        seq = self.count
        self.count = seq + len(partitions)
        pairs = partitions if isinstance(partitions, tuple) else tuple(partitions)
        row = (seq, t, type_, member, member_id, generation, None, None, error, None, None, pairs, value, detail)
        self.rows.append(row)

    @property
    def events(self) -> list[Event]:
        """Every event as a dict (new dicts for the rows appended since the last call)."""
        done = self._expanded
        if done < len(self.rows):
            self._events.extend(as_event(row) for row in expand(self.rows[done:]))
            self._expanded = len(self.rows)
        return self._events

    def of_type(self, *types: str) -> Iterator[Event]:
        return (e for e in self.events if e["type"] in types)

    def lines(self) -> Iterator[str]:
        for row in expand(self.rows):
            yield json.dumps(as_event(row), separators=(",", ":"), sort_keys=False)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines())
