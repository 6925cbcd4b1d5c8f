"""A bounded, least-recently-used cache of open file descriptors shared by many logs.

A shell (docs/architecture.md). The partition logs of a topic store do not keep a descriptor each for their
lifetime: they ask this cache for one whenever they read or write, so a broker with 100,000 partitions
holds at most ``capacity`` segment files open, and the busy ones stay open (an append to a partition whose
handle is cached costs one dictionary lookup). When the cache is full, the handle used least recently is
closed, after its owner's ``before_close`` hook (a partition log with unsynced appends keeps a duplicate of
the descriptor there for its next fsync, so no write-back error can go unseen once the cache's is gone; it
fsyncs there instead while the cache gives descriptors back, ``HandleCache.releasing``).

When opening fails because the process is out of descriptors (``EMFILE``/``ENFILE``, say because many
clients are connected), the cache closes the older half of its handles and tries once more.

Not thread-safe: one owner (the server's event loop) drives it.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable

if sys.platform != "win32":
    import resource

__all__ = ["DEFAULT_CAPACITY", "HandleCache", "capacity_for_limit"]

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 256
MIN_CAPACITY = 4
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)

BeforeClose = Callable[[int], None]


def capacity_for_limit(wanted: int) -> int:
    """``wanted``, lowered to a quarter of the process's soft descriptor limit (``RLIMIT_NOFILE``) so that
    cached segment files never crowd out client connections; at least :data:`MIN_CAPACITY`."""
    if sys.platform == "win32":
        return wanted
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return wanted
    return max(MIN_CAPACITY, min(wanted, soft // 4))


class HandleCache:
    """At most ``capacity`` open descriptors, keyed by whatever the owners choose (a segment object)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"a handle cache needs room for at least one handle, not {capacity}")
        self.capacity = capacity
        self._open: OrderedDict[Hashable, tuple[int, BeforeClose | None]] = OrderedDict()
        #: descriptors opened and closed over the cache's life (for tests and metrics)
        self.opened = 0
        self.closed = 0
        #: the cache is closing handles to give descriptors back (it is out of them, or closing itself): a
        #: ``before_close`` hook must not keep a duplicate of the descriptor then
        self.releasing = False

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._open

    def get(self, key: Hashable, opener: Callable[[], int], before_close: BeforeClose | None = None) -> int:
        """The descriptor cached under ``key``, or a new one from ``opener()`` (evicting the least recently
        used handle first when the cache is full). ``before_close(fd)`` runs before the cache closes it."""
        entry = self._open.get(key)
        if entry is not None:
            self._open.move_to_end(key)
            return entry[0]
        while len(self._open) >= self.capacity:
            self._evict_oldest()
        try:
            fd = opener()
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS or not self._open:
                raise
            self.releasing = True
            try:
                for _ in range((len(self._open) + 1) // 2):
                    self._evict_oldest()
            finally:
                self.releasing = False
            fd = opener()
        self._open[key] = (fd, before_close)
        self.opened += 1
        return fd

    def peek(self, key: Hashable) -> int | None:
        """The descriptor cached under ``key`` without opening one or changing the order; ``None`` if none."""
        entry = self._open.get(key)
        return None if entry is None else entry[0]

    def discard(self, key: Hashable) -> None:
        """Close the handle cached under ``key`` (running its ``before_close``), if there is one."""
        entry = self._open.pop(key, None)
        if entry is not None:
            self._close(entry)

    def forget(self, key: Hashable) -> None:
        """Close the handle under ``key`` *without* its ``before_close`` (its owner already settled it)."""
        entry = self._open.pop(key, None)
        if entry is not None:
            self._close((entry[0], None))

    def close(self) -> None:
        """Close every handle, oldest first (each after its ``before_close``)."""
        self.releasing = True
        try:
            while self._open:
                self._evict_oldest()
        finally:
            self.releasing = False

    def _evict_oldest(self) -> None:
        _, entry = self._open.popitem(last=False)
        self._close(entry)

    def _close(self, entry: tuple[int, BeforeClose | None]) -> None:
        fd, before_close = entry
        try:
            if before_close is not None:
                before_close(fd)
        except Exception:  # the owner records its own failure; closing must go on regardless
            log.exception("settling a file before closing it failed")
        finally:
            os.close(fd)
            self.closed += 1
