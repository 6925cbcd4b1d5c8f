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

__all__ = ["GROUP_ASSIGNMENT", "AssignmentRun", "Memo", "Piece"]

GROUP_ASSIGNMENT: Final = "group_assignment"
#: what a member holds (a target's partitions, a classic assignment's bytes)
H = TypeVar("H")
#: one member's rows in a piece: (client id, member id, its rows, the first of them and the end in the piece)
Span = tuple[str, str, list[tuple[str, int]], int, int]
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
    ``first_seq + i``; ``spans`` says whose rows they are: (client id, member id, that member's rows, the first
    and the end of those in this piece), in order; ``walked``: the members without rows passed over meanwhile
    (a piece may have no rows: its walk alone)."""

    t: int
    generation: int
    detail: str
    first_seq: int
    spans: list[Span]
    lines: list[str]
    walked: int = 0

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as a fresh dict with the keys of ``FIELDS`` in order (the caller's own)."""
        k = i
        for member, member_id, rows, start, end in self.spans:
            if k < end - start:
                topic, partition = rows[start + k]
                return self._row(i, member, member_id, topic, partition)
            k -= end - start
        raise IndexError(i)

    def rows(self) -> Iterator[dict[str, Any]]:
        i = 0
        for member, member_id, rows, start, end in self.spans:
            for topic, partition in rows[start:end]:
                yield self._row(i, member, member_id, topic, partition)
                i += 1

    def _row(self, i: int, member: str, member_id: str, topic: str, partition: int) -> dict[str, Any]:
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


#: what a run remembers of a member for the next run of its group: (what it held, its client id, its two ids as
#: JSON, its rows, the topic and partition as JSON of its first rows: of those handed out so far, made as they
#: are, so that a member of 10,000 partitions costs a piece only the rows it hands out)
Memo = tuple[object, str, str, list[tuple[str, int]], list[str]]


class AssignmentRun(Generic[H]):
    """The rows of ``members`` (member id, client id, what it holds), the members by member id (sorted when
    the first piece is taken) and each member's rows as ``partitions(held)`` gives them: one per (topic,
    partition).

    ``memo`` is the ``memo`` of the group's last run (with the same topic names): a member holding the very
    same object as then (a target that did not change) has its rows and their pieces of JSON taken from it.
    ``self.memo`` is filled with every member's as the rows are taken, for the next run."""

    def __init__(
        self,
        t: int,
        group_id: str,
        generation: int,
        members: Iterable[tuple[str, str, H]],
        partitions: Callable[[H], Iterable[tuple[str, int]]],
        memo: dict[str, Memo] | None = None,
    ) -> None:
        self.t = t
        self.generation = generation
        self.detail = f"group={group_id}"
        self.memo: dict[str, Memo] = {}
        self._previous = memo or {}
        self._members: Iterable[tuple[str, str, H]] | None = members
        self._order: Iterator[tuple[str, str, H]] = iter(())
        self._partitions = partitions
        #: the member whose rows are being handed out: (client id, member id, its lines' middle, its rows, their
        #: ends, how many of them were handed out)
        self._current: tuple[str, str, str, list[tuple[str, int]], list[str], int] | None = None
        self._topics: dict[str, str] = {}  # topic name -> it as JSON
        self._head = f',"t":{_json(t)},"type":"{GROUP_ASSIGNMENT}","member":'
        self._generation = (
            f',"generation":{_json(generation)},"api":null,"request_id":null,"error":null,"state":null,"topic":'
        )
        self._tail = f',"value":null,"detail":{_json(self.detail)}}}'

    def take(self, most: int, first_seq: int) -> Piece | None:
        """The next ``most`` rows at most, numbered from ``first_seq``, a member without rows passed over counting
        as a row (a group of 10,000 members, most of them assigned nothing, is walked ``most`` members at a time,
        not all at once); None once every member was walked and every row taken."""
        if self._members is not None:
            self._order = iter(sorted(self._members, key=_MEMBER_ID))
            self._members = None
        spans: list[Span] = []
        lines: list[str] = []
        append = lines.append
        seq = first_seq
        tail = self._tail
        left = most
        walked = 0
        while left > 0:
            current = self._current
            if current is None:
                current, passed = self._next_member(left)
                walked += passed
                left -= passed
                if current is None:
                    break
            member, member_id, middle, rows, ends, at = current
            end = len(rows)
            if end - at > left:
                end = at + left
                self._current = (member, member_id, middle, rows, ends, end)
            else:
                self._current = None
            if len(ends) < end:
                self._encode_ends(rows, ends, end)
            for k in range(at, end):
                append(f'{{"seq":{seq}{middle}{ends[k]}{tail}')
                seq += 1
            spans.append((member, member_id, rows, at, end))
            left -= end - at
        if not lines and not walked:
            return None
        return Piece(self.t, self.generation, self.detail, first_seq, spans, lines, walked)

    def _next_member(self, most: int) -> tuple[tuple[str, str, str, list[tuple[str, int]], list[str], int] | None, int]:
        """The next member with rows (None: there is none, or ``most`` members without rows were passed over
        first), and how many members without rows were passed over."""
        passed = 0
        for member_id, client_id, held in self._order:
            known = self._previous.get(member_id)
            if known is None or known[0] is not held or known[1] != client_id:
                known = self._remember(member_id, client_id, held)
            self.memo[member_id] = known
            _, _, ids, rows, ends = known
            if rows:
                return (client_id, member_id, f"{self._head}{ids}{self._generation}", rows, ends, 0), passed
            passed += 1
            if passed >= most:
                break
        return None, passed

    def _remember(self, member_id: str, client_id: str, held: H) -> Memo:
        given = self._partitions(held)
        rows = given if type(given) is list else list(given)
        return (held, client_id, f'{_json(client_id)},"member_id":{_json(member_id)}', rows, [])

    def _encode_ends(self, rows: list[tuple[str, int]], ends: list[str], end: int) -> None:
        """Extend ``ends`` (a member's memo) with the topic and partition as JSON of its rows up to ``end``."""
        topics = self._topics
        for topic, partition in rows[len(ends) : end]:
            encoded = topics.get(topic)
            if encoded is None:
                encoded = topics[topic] = _json(topic)
            ends.append(f'{encoded},"partition":{_json(partition)}')
