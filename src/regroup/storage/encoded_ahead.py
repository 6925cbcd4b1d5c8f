"""Records encoded before they are written. A shell that builds a large batch of records on a thread of its own
(the server plans a large OffsetCommit's records on the thread that decoded it) encodes them there too, and the
log's writer takes their bytes instead of encoding them again: the writer's thread, which every commit waits
for in turn, is left with the framing and the write.

Kept by the records' identity (the very objects later written; each entry holds its record, so no other object
can take its id while it is kept) and bounded: past ``capacity`` records the oldest are forgotten first. A
record forgotten, or never encoded ahead (a plan its request did not use, a refused commit), is simply encoded
when written; one encoded ahead and never written is forgotten in its turn."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar

__all__ = ["DEFAULT_CAPACITY", "EncodedAhead"]

R = TypeVar("R")

#: records kept at most (a few large commits in flight; about 0.2 KB each, with their records)
DEFAULT_CAPACITY = 100_000


class EncodedAhead(Generic[R]):
    """``add`` encodes records on any thread; ``payloads`` (the writer) returns a batch's bytes, taking those
    encoded ahead and encoding the others."""

    def __init__(self, encode: Callable[[R], bytes], capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._encode = encode
        self.capacity = capacity
        self._kept: dict[int, tuple[R, bytes]] = {}  # id(record) -> (record, its bytes), oldest first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, records: Iterable[R]) -> None:
        """Encode ``records`` now, for a later ``payloads`` of these very objects to take."""
        encode = self._encode
        entries = [(id(record), (record, encode(record))) for record in records]
        kept = self._kept
        with self._lock:
            kept.update(entries)
            while len(kept) > self.capacity:
                del kept[next(iter(kept))]

    def payloads(self, records: Sequence[R]) -> list[bytes]:
        """The bytes of ``records``, in order: each one encoded ahead is taken (and forgotten), the others encoded
        now."""
        encode, kept = self._encode, self._kept
        if not kept:  # (records added ahead of a batch were added before it was handed to the writer)
            return [encode(record) for record in records]
        out: list[bytes] = []
        take = kept.pop
        with self._lock:
            for record in records:
                entry = take(id(record), None)
                out.append(entry[1] if entry is not None and entry[0] is record else encode(record))
        return out
