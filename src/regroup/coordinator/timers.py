"""Keyed deadlines, soft state of the coordinator: scheduling a key again replaces it; expiry hands the
due keys back in deadline order (ties in scheduling order), and the caller turns each into a write."""

from __future__ import annotations

from collections.abc import Hashable
from heapq import heappop, heappush
from typing import Final

#: An entry is ``deadline * 2**64 + n`` (n: the scheduling count), so one int orders by (deadline, n).
_ORDER: Final = 2**64


class Timers:
    """Most rescheduling moves a deadline later (each heartbeat extends its member's session), so the heap
    is lazy: it holds one entry per key that is never later than the key's current entry. Moving a deadline
    later only records the new entry; when the older one reaches the top of the heap it is replaced by the
    key's current entry. Moving it earlier pushes the new entry and disowns the old one. The top, once
    cleaned, is therefore the earliest current entry."""

    def __init__(self) -> None:
        self._entry: dict[Hashable, int] = {}  # key -> its current entry
        self._queued: dict[Hashable, int] = {}  # key -> the heap entry standing for it (<= its current entry)
        self._key: dict[int, Hashable] = {}  # heap entry standing for a key -> that key (others are disowned)
        self._heap: list[int] = []
        self._seq = 0

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        entry = deadline_ms * _ORDER + self._seq
        self._seq += 1
        self._entry[key] = entry
        queued = self._queued.get(key)
        if queued is not None:
            if queued <= entry:
                return  # (replaced by ``entry`` when it reaches the top)
            del self._key[queued]
        self._queue(key, entry)

    def _queue(self, key: Hashable, entry: int) -> None:
        self._queued[key] = entry
        self._key[entry] = key
        heappush(self._heap, entry)

    def cancel(self, key: Hashable) -> None:
        if self._entry.pop(key, None) is not None:
            del self._key[self._queued.pop(key)]

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entry.get(key)
        return None if entry is None else entry // _ORDER

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entry

    def _clean_top(self) -> None:
        """Drop disowned entries from the top and replace outdated ones, until the top is a current entry."""
        heap, owners = self._heap, self._key
        while heap:
            top = heap[0]
            key = owners.get(top)
            if key is None:
                heappop(heap)
                continue
            current = self._entry[key]
            if current == top:
                return
            heappop(heap)
            del owners[top]
            self._queue(key, current)

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
        del self._queued[key]
        return key
