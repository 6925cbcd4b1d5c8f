"""One generation's or target's ``group_assignment`` rows as a run (``server/events.py`` hands them out): every
row of a run has the same time, generation and ``detail``, and a member's rows the same two ids, so the run
encodes those once and makes each row's event-log line from them as the rows are handed out, a ``Piece`` at a
time. A line is exactly what ``json.dumps(row, separators=(",", ":"))`` writes for its row (and so what
``model.eventlog.event_line`` writes: a run's rows hold no float): the events file, the rebalance history and
the console's stream take the lines as they are; a sink that wants the rows gets them as dicts
(``Piece.rows``). A target over 10,000 partitions is 10,000 rows: made this way, about a tenth of the work of
making each row a dict and encoding it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from operator import itemgetter
from typing import Any, Final, Generic, TypeVar

from regroup.model.eventlog import FIELDS

__all__ = ["GROUP_ASSIGNMENT", "AssignmentRun", "Piece"]

GROUP_ASSIGNMENT: Final = "group_assignment"
#: what a member holds (a target's partitions, a classic assignment's bytes)
H = TypeVar("H")
#: one row of a run: (client id, member id, topic, partition)
Cell = tuple[str, str, str, int]
_MEMBER_ID = itemgetter(0)


def _json(value: Any) -> str:
    """``value`` as ``json.dumps(value, separators=(",", ":"))`` writes it (a string or an integer quickly)."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if type(value) is int:
        return str(value)
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Piece:
    """Rows of a run handed out together: ``lines[i]`` is row ``i``'s line (no newline), whose ``seq`` is
    ``first_seq + i``."""

    t: int
    generation: int
    detail: str
    first_seq: int
    cells: list[Cell]
    lines: list[str]

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as a fresh dict with the keys of ``FIELDS`` in order (the caller's own)."""
        member, member_id, topic, partition = self.cells[i]
        row: dict[str, Any] = dict.fromkeys(FIELDS)
        row.update(
            seq=self.first_seq + i,
            t=self.t,
            type=GROUP_ASSIGNMENT,
            member=member,
            member_id=member_id,
            generation=self.generation,
            topic=topic,
            partition=partition,
            detail=self.detail,
        )
        return row

    def rows(self) -> Iterator[dict[str, Any]]:
        return (self.row(i) for i in range(len(self.cells)))


class AssignmentRun(Generic[H]):
    """The rows of ``members`` (member id, client id, what it holds), the members by member id (sorted when
    the first piece is taken) and each member's rows as ``partitions(held)`` gives them: one per (topic,
    partition)."""

    def __init__(
        self,
        t: int,
        group_id: str,
        generation: int,
        members: Iterable[tuple[str, str, H]],
        partitions: Callable[[H], Iterable[tuple[str, int]]],
    ) -> None:
        self.t = t
        self.generation = generation
        self.detail = f"group={group_id}"
        self._members: Iterable[tuple[str, str, H]] | None = members
        self._order: Iterator[tuple[str, str, H]] = iter(())
        self._partitions = partitions
        #: the member whose rows are being handed out: (client id, member id, its lines' middle, its rows, how
        #: many of them were handed out)
        self._current: tuple[str, str, str, list[tuple[str, int]], int] | None = None
        self._topics: dict[str, str] = {}  # topic name -> it as JSON
        self._head = f',"t":{_json(t)},"type":"{GROUP_ASSIGNMENT}","member":'
        self._generation = (
            f',"generation":{_json(generation)},"api":null,"request_id":null,"error":null,"state":null,"topic":'
        )
        self._tail = f',"value":null,"detail":{_json(self.detail)}}}'

    def take(self, most: int, first_seq: int) -> Piece | None:
        """The next ``most`` rows at most, numbered from ``first_seq``; None once every row was taken."""
        if self._members is not None:
            self._order = iter(sorted(self._members, key=_MEMBER_ID))
            self._members = None
        cells: list[Cell] = []
        lines: list[str] = []
        seq = first_seq
        topics, tail = self._topics, self._tail
        left = most
        while left > 0:
            current = self._current or self._next_member()
            if current is None:
                break
            member, member_id, middle, rows, at = current
            end = min(len(rows), at + left)
            for topic, partition in rows[at:end]:
                encoded = topics.get(topic)
                if encoded is None:
                    encoded = topics[topic] = _json(topic)
                number = str(partition) if type(partition) is int else _json(partition)
                lines.append(f'{{"seq":{seq}{middle}{encoded},"partition":{number}{tail}')
                cells.append((member, member_id, topic, partition))
                seq += 1
            left -= end - at
            self._current = None if end == len(rows) else (member, member_id, middle, rows, end)
        if not cells:
            return None
        return Piece(self.t, self.generation, self.detail, first_seq, cells, lines)

    def _next_member(self) -> tuple[str, str, str, list[tuple[str, int]], int] | None:
        """The next member with rows, or None."""
        for member_id, client_id, held in self._order:
            given = self._partitions(held)
            rows = given if type(given) is list else list(given)
            if rows:
                return (
                    client_id,
                    member_id,
                    f'{self._head}{_json(client_id)},"member_id":{_json(member_id)}{self._generation}',
                    rows,
                    0,
                )
        return None
