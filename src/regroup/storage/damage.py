"""Telling a torn tail from damage, for both logs' segment files (pure functions over ``bytes``).

A segment is a run of checksummed *units* — Kafka record batches in a partition log
(:mod:`regroup.storage.batches`), ``RGB1`` frames in the coordinator log (:mod:`regroup.storage.format`) —
each carrying its first offset. A crash can only cut the last write short, so when the units read from the
start of a segment stop being valid (incomplete, checksum mismatch, offsets not continuing), what follows
decides what happened:

- no intact unit anywhere after the first bad one: a **torn tail**, which recovery may cut off;
- intact units after it (found by the format's sync marker, each candidate checked in full and holding
  offsets at or above the ones expected): **damage** to data that was once written in full. Recovery must
  refuse; only an operator's ``regroup repair`` changes such a file.

:func:`scan` reads a whole segment that way; :func:`find_intact` is the search after the first bad unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["MAX_SPAN", "Scan", "Unit", "UnitFormat", "describe_intact", "find_intact", "scan"]

MAX_SPAN = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Unit:
    """One valid batch or frame: bytes ``[pos, end)`` holding offsets ``base..last``."""

    pos: int
    end: int
    base: int
    last: int


class UnitFormat(Protocol):
    """How one log's units are checked and found."""

    #: what a unit is called in messages ("batch", "frame")
    noun: str

    def check(self, data: bytes, pos: int) -> Unit | str:
        """The complete, checksum-valid unit starting at ``data[pos]``, or why there is none."""
        ...

    def next_candidate(self, data: bytes, pos: int) -> int:
        """The first position ``>= pos`` where a unit may start (its sync marker is there), or -1."""
        ...


@dataclass(frozen=True, slots=True)
class Scan:
    """What :func:`scan` found: the valid prefix, and — if it does not reach the end — why and what follows."""

    #: bytes of the valid prefix (where a repair would cut)
    end: int
    #: the offset after the valid prefix (the first offset that is missing or damaged)
    next_offset: int
    #: units in the valid prefix
    count: int
    #: why the prefix stops ("" when it covers all the data)
    problem: str
    #: intact units after the problem, offsets increasing
    intact: tuple[Unit, ...]

    @property
    def clean(self) -> bool:
        return not self.problem

    @property
    def torn(self) -> bool:
        """A torn tail: something is wrong, and nothing intact follows it."""
        return bool(self.problem) and not self.intact


def scan(data: bytes, base: int, fmt: UnitFormat) -> Scan:
    """Read units from byte 0 while each is valid and continues the offsets from ``base``."""
    pos, expected, count, problem = 0, base, 0, ""
    while pos < len(data):
        unit = fmt.check(data, pos)
        if isinstance(unit, str):
            problem = unit
            break
        if unit.base != expected:
            problem = f"{fmt.noun} has offset {unit.base}, expected {expected}"
            break
        pos, expected, count = unit.end, unit.last + 1, count + 1
    intact = tuple(find_intact(data, pos, expected, fmt)) if problem else ()
    return Scan(pos, expected, count, problem, intact)


def find_intact(data: bytes, start: int, floor: int, fmt: UnitFormat) -> list[Unit]:
    """Intact units after the bad one at ``start``, holding offsets ``>= floor`` and increasing (a unit
    that repeats offsets already seen is stale, not intact).

    A unit that does not directly continue the previous intact one must be confirmed by the unit right
    after it, if there is one, continuing *its* offsets: a Kafka batch's ``baseOffset`` lies outside its
    CRC, so a damaged one can look intact while claiming offsets it never had. Nor may a unit claim offsets
    more than 2³¹−1 above the first one missing (Kafka's bound on offsets within one segment)."""
    found: list[Unit] = []
    pos = start + 1
    limit = floor + MAX_SPAN
    while (at := fmt.next_candidate(data, pos)) >= 0:
        unit = fmt.check(data, at)
        if isinstance(unit, Unit) and floor <= unit.base and unit.last <= limit and _trusted(data, unit, found, fmt):
            found.append(unit)
            floor, pos = unit.last + 1, unit.end
        else:
            pos = at + 1
    return found


def _trusted(data: bytes, unit: Unit, found: list[Unit], fmt: UnitFormat) -> bool:
    if found and found[-1].end == unit.pos and found[-1].last + 1 == unit.base:
        return True
    after = fmt.check(data, unit.end) if unit.end < len(data) else "end of data"
    return isinstance(after, str) or after.base == unit.last + 1


def describe_intact(intact: tuple[Unit, ...] | list[Unit], noun: str) -> str:
    """ "3 intact batches (offsets 35..176, the first at byte 1943) follow"."""
    plural = noun + ("es" if noun.endswith("ch") else "s")
    return (
        f"{len(intact)} intact {noun if len(intact) == 1 else plural} (offsets {intact[0].base}..{intact[-1].last}, "
        f"the first at byte {intact[0].pos}) follow"
    )
