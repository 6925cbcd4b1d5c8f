"""How a group commit round makes its files durable: one fsync per file, issued together on worker threads, or one
sync of the whole file system (``storage.files.sync_filesystem``), whichever has cost less lately.

On a quiet disk a sync of the whole file system costs about what one file's fsync costs, where a round of many
files' fsyncs on parallel threads costs several (measured on this project's machine, ext4 on a virtual disk: one
file 0.13 ms, 10 files together 0.5-0.7 ms, 50 files 1.8-2.0 ms; the whole file system 0.19 ms with 10 files
dirty, 0.5 ms with 50). But it also waits for whatever else is dirty on that file system, which another program
may have made large. So :class:`SyncChoice` keeps a recent cost of each (one file's fsync, from the rounds made
file by file; one whole sync, from the rounds made that way: the lower median of the last ``KEPT`` of each, so
that one slow sync, such as a first one flushing what a previous program left, does not outweigh the next ones)
and takes the whole sync for a round of ``files`` files when it costs at most what ``files`` fsyncs on parallel
threads would (about half of ``files`` single ones). Until both costs are known it tries each once; when the
whole sync has been the dearer one it is tried again ``PROBE_S`` seconds after it was last made, to notice the
disk quiet again.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["KEPT", "PARALLEL_SHARE", "PROBE_S", "WHOLE_MIN_FILES", "SyncChoice"]

#: a round of fewer files is always fsynced file by file
WHOLE_MIN_FILES = 2
#: what ``n`` fsyncs issued together on parallel threads cost, in single fsyncs: about ``n * PARALLEL_SHARE``
PARALLEL_SHARE = 0.5
#: how many of the latest measurements of each way a cost is the lower median of
KEPT = 5
#: how often the whole sync is tried again while it has been the dearer one
PROBE_S = 10.0


class SyncChoice:
    """Chooses, round by round, between one fsync per file and one sync of the whole file system (``available``:
    whether this platform and store can make the latter at all). Feed it what each round cost (:meth:`saw_files`,
    :meth:`saw_whole`); ``clock`` (seconds, monotonic) times the probes."""

    def __init__(self, available: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.available = available
        self._clock = clock
        self._files: deque[float] = deque(maxlen=KEPT)  # one file's fsync, the latest measurements
        self._wholes: deque[float] = deque(maxlen=KEPT)  # one sync of the whole file system, likewise
        self._probe_at = 0.0

    @property
    def file_s(self) -> float | None:
        """The recent cost of one file's fsync (None: not seen yet)."""
        return _lower_median(self._files)

    @property
    def whole_s(self) -> float | None:
        """The recent cost of one sync of the whole file system (None: not seen yet)."""
        return _lower_median(self._wholes)

    def whole(self, files: int) -> bool:
        """Should a round of ``files`` files (none of them settling a roll) be one sync of the file system?"""
        if not self.available or files < WHOLE_MIN_FILES:
            return False
        whole_s, file_s = self.whole_s, self.file_s
        if whole_s is None:
            return True
        if file_s is None:
            return False  # (the whole sync was tried: now one round file by file, to compare)
        if whole_s <= file_s * files * PARALLEL_SHARE:
            return True
        now = self._clock()
        if now >= self._probe_at:
            self._probe_at = now + PROBE_S
            return True
        return False

    def saw_files(self, seconds: float, files: int) -> None:
        """A worker thread fsynced ``files`` files one after another in ``seconds``."""
        if files > 0:
            self._files.append(seconds / files)

    def saw_whole(self, seconds: float) -> None:
        """A sync of the whole file system took ``seconds`` (the next probe, if it is the dearer way, comes
        ``PROBE_S`` after this one)."""
        self._wholes.append(seconds)
        self._probe_at = self._clock() + PROBE_S


def _lower_median(values: deque[float]) -> float | None:
    if not values:
        return None
    return sorted(values)[(len(values) - 1) // 2]
