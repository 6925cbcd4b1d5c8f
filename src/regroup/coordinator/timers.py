"""Keyed deadlines, soft state of the coordinator: scheduling a key again replaces it; expiry hands the
due keys back in deadline order (ties in scheduling order), and the caller turns each into a write."""

from __future__ import annotations

from collections.abc import Hashable
from heapq import heappop, heappush
from typing import Final

#: An entry is ``deadline * 2**64 + n`` (n: the scheduling count), so one int orders by (deadline, n).
_ORDER: Final = 2**64


class Timers:
    def __init__(self) -> None:
        self._entry: dict[Hashable, int] = {}  # key -> its current entry
        self._key: dict[int, Hashable] = {}  # current entry -> key (a heap entry not here was replaced)
        self._heap: list[int] = []  # entries, replaced ones left in place until they reach the top
        self._seq = 0

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        entry = deadline_ms * _ORDER + self._seq
        self._seq += 1
        old = self._entry.get(key)
        if old is not None:
            del self._key[old]
        self._entry[key] = entry
        self._key[entry] = key
        heappush(self._heap, entry)

    def cancel(self, key: Hashable) -> None:
        old = self._entry.pop(key, None)
        if old is not None:
            del self._key[old]

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entry.get(key)
        return None if entry is None else entry // _ORDER

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entry

    def _clean_top(self) -> None:
        heap, current = self._heap, self._key
        while heap and heap[0] not in current:
            heappop(heap)

    def next_deadline(self) -> int | None:
        self._clean_top()
        return self._heap[0] // _ORDER if self._heap else None

    def pop_due(self, now_ms: int) -> Hashable | None:
        """Remove and return the earliest key due at ``now_ms``, or None."""
        self._clean_top()
        if not self._heap or self._heap[0] // _ORDER > now_ms:
            return None
        key = self._key.pop(heappop(self._heap))
        del self._entry[key]
        return key
