"""Keyed deadlines, soft state of the coordinator: scheduling a key again replaces it; expiry hands the
due keys back in deadline order (ties in scheduling order), and the caller turns each into a write."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable


class Timers:
    def __init__(self) -> None:
        self._deadline: dict[Hashable, tuple[int, int]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        seq = next(self._seq)
        self._deadline[key] = (deadline_ms, seq)
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._deadline.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        entry = self._deadline.get(key)
        return None if entry is None else entry[0]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadline

    def _clean_top(self) -> None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            if self._deadline.get(key) == (deadline, seq):
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        self._clean_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Hashable | None:
        """Remove and return the earliest key due at ``now_ms``, or None."""
        self._clean_top()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._deadline[key]
        return key
