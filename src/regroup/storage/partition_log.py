"""One topic-partition's append-only log of Kafka record batches on local disk (the embedded broker's data).

A shell (docs/architecture.md): file I/O and fsync. Batches are stored exactly as producers sent them (magic
v2 record batches, compressed or not) except for two fields outside the batch CRC: ``baseOffset`` (bytes 0–8)
becomes the log end offset and ``partitionLeaderEpoch`` (bytes 12–16) becomes -1 (no leader epochs here).
So a fetch returns the stored bytes unchanged. The full format is in ``docs/topic-data.md``::

    <dir>/00000000000000000000.log     segment files of concatenated batches, named by their first offset
    <dir>/00000000000000004096.log     the last one is the active segment, the only one written

The batch index (base offset, last offset, file position, max timestamp per batch) lives in memory: built
while recovering the active segment on open, and lazily (a header scan) for an older segment when it is
first read. Recovery verifies every batch of the active segment (length, magic, CRC-32C, contiguous
offsets) and truncates the file at the first bad one — a torn tail left by a crash. Idempotent-producer
state (the last five batches per producer id) is rebuilt from the same scan, so a retry of a batch that was
written just before a crash is recognised as a duplicate after the restart.

Not thread-safe: one owner (the server's event loop) drives it.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import struct
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from regroup.storage.batches import (
    CRC_FROM,
    HEADER,
    LOG_OVERHEAD,
    AppendRejected,
    BatchHeader,
    ProducerStates,
    Reject,
    check_header,
    parse_header,
    record_times,
    split_batches,
)
from regroup.storage.format import StorageError
from regroup.storage.record_log import FsyncPolicy, _create_file, _fsync_file, write_all_or_take_back
from regroup.storage.record_log import _fsync_dir as fsync_dir

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "AppendInfo",
    "AppendRejected",
    "OffsetOutOfRange",
    "PartitionLog",
    "Reject",
    "fsync_dir",
]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_BATCH_BYTES = 1024 * 1024 + 12  # Kafka's message.max.bytes default (1048588)
DEFAULT_FSYNC_INTERVAL_MS = 100
_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")


class OffsetOutOfRange(StorageError):
    """A read below the log start offset or beyond the log end offset."""


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Where appended records landed; ``duplicate``: an idempotent retry, answered with the first write's offsets."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(slots=True)
class _Index:
    """Per-batch columns of one segment, in file order."""

    lasts: array[int] = field(default_factory=lambda: array("q"))
    positions: array[int] = field(default_factory=lambda: array("q"))
    max_ts: array[int] = field(default_factory=lambda: array("q"))
    end: int = 0  # file position after the last indexed batch

    def add(self, h: BatchHeader, pos: int) -> None:
        self.lasts.append(h.last_offset)
        self.positions.append(pos)
        self.max_ts.append(h.max_timestamp)
        self.end = pos + h.size


@dataclass(slots=True)
class _Segment:
    base: int
    path: Path
    index: _Index | None = None


class PartitionLog:
    """The log of one partition; open it with :meth:`PartitionLog.open`."""

    def __init__(self, directory: Path, segments: list[_Segment], fd: int, leo: int, producers: ProducerStates,
                 policy: FsyncPolicy, segment_bytes: int, max_batch_bytes: int, fsync_interval_ms: float,
                 clock: Callable[[], float], truncated_bytes: int) -> None:  # fmt: skip
        """Internal: use :meth:`PartitionLog.open`."""
        self._dir = directory
        self._segments = segments
        self._bases = [s.base for s in segments]
        self._fd: int | None = fd
        self._leo = leo
        self._producers = producers
        self._policy = policy
        self._segment_bytes = segment_bytes
        self._max_batch_bytes = max_batch_bytes
        self._interval_s = fsync_interval_ms / 1000.0
        self._clock = clock
        self._last_sync = clock()
        self._dirty = False
        self._failed: BaseException | None = None
        self.truncated_bytes = truncated_bytes
        #: called after every successful append (the server wakes long-polling fetches with it).
        self.listener: Callable[[], None] | None = None

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        fsync: FsyncPolicy = FsyncPolicy.ALWAYS,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        fsync_interval_ms: float = DEFAULT_FSYNC_INTERVAL_MS,
        clock: Callable[[], float] = time.monotonic,
    ) -> PartitionLog:
        """Open (creating if needed) the partition directory and recover the active segment's tail."""
        if segment_bytes <= 0 or max_batch_bytes <= 0:
            raise ValueError("segment_bytes and max_batch_bytes must be positive")
        directory = Path(directory)
        sync = fsync is not FsyncPolicy.NEVER
        directory.mkdir(parents=True, exist_ok=True)
        bases = sorted(int(m.group(1)) for e in os.scandir(directory) if (m := _SEGMENT_RE.match(e.name)))
        if not bases:
            bases = [0]
            _create_file(directory / _segment_name(0))
            if sync:
                fsync_dir(directory)
        segments = [_Segment(b, directory / _segment_name(b)) for b in bases]
        active = segments[-1]
        fd = os.open(active.path, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        try:
            producers = ProducerStates()
            leo, cut = _recover(fd, active, producers, sync)
        except BaseException:
            os.close(fd)
            raise
        return cls(directory, segments, fd, leo, producers, fsync, segment_bytes, max_batch_bytes,
                   fsync_interval_ms, clock, cut)  # fmt: skip

    # ------------------------------------------------------------------ state

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def log_start_offset(self) -> int:
        """The first offset still in the log (always 0: no retention or DeleteRecords yet)."""
        return self._segments[0].base

    @property
    def log_end_offset(self) -> int:
        """The offset the next record gets; also the high watermark and last stable offset (single node)."""
        return self._leo

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def closed(self) -> bool:
        return self._fd is None

    # ------------------------------------------------------------------ writing

    def append(self, records: bytes, *, sync: bool = True) -> AppendInfo:
        """Validate ``records`` (one or more v2 batches), assign offsets from the log end, write them with one
        ``write``. Raises :class:`AppendRejected` (nothing written) for corrupt or invalid batches, oversize
        batches, and idempotence violations; a lone batch that repeats one of the producer's last five is not
        written again and comes back with its original offsets and ``duplicate=True``.

        ``sync=False`` (acks=0) skips the fsync; otherwise ``ALWAYS`` fsyncs before returning.
        """
        fd = self._writable()
        found = split_batches(records, self._max_batch_bytes)
        staged, duplicate = self._producers.plan([h for _, h in found], self._leo)
        if duplicate is not None:
            return AppendInfo(duplicate[0], duplicate[1], self.log_start_offset, duplicate=True)
        data = bytearray(records)
        offset = self._leo
        for pos, h in found:
            struct.pack_into(">q", data, pos, offset)
            struct.pack_into(">i", data, pos + LOG_OVERHEAD, -1)
            offset += h.record_count
        idx = self._index(self._segments[-1])
        if idx.end > 0 and idx.end + len(data) > self._segment_bytes:
            fd = self._roll()
            idx = self._index(self._segments[-1])
        start = idx.end
        self._write(fd, data, start)
        for pos, _ in found:
            idx.add(parse_header(data, pos), start + pos)
        first, self._leo = self._leo, offset
        self._producers.commit(staged)
        self._dirty = True
        if (sync and self._policy is FsyncPolicy.ALWAYS) or (
            self._policy is FsyncPolicy.INTERVAL and self._clock() - self._last_sync >= self._interval_s
        ):
            self._sync(fd)
        if self.listener is not None:
            self.listener()
        return AppendInfo(first, offset - 1, self.log_start_offset)

    def sync(self) -> None:
        """fsync what was appended since the last fsync (any policy)."""
        fd = self._writable()
        if self._dirty:
            self._sync(fd)

    # ------------------------------------------------------------------ reading

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        """Whole batches from the one containing ``offset``, at most ``max_bytes`` of them — but with
        ``min_one`` the first batch even if it is bigger (Kafka's rule, so a consumer always progresses).
        ``b""`` at the log end; :class:`OffsetOutOfRange` outside ``[log_start_offset, log_end_offset]``.
        Reads stay within one segment, like Kafka's."""
        self._open_fd()
        if not self.log_start_offset <= offset <= self._leo:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, {self._leo}]")
        si = bisect.bisect_right(self._bases, offset) - 1
        for seg in self._segments[si:]:
            idx = self._index(seg)
            i = bisect.bisect_left(idx.lasts, offset)
            if i == len(idx.lasts):
                continue  # a gap at the end of a damaged older segment: go on to the next
            start = end = idx.positions[i]
            for j in range(i, len(idx.lasts)):
                nxt = idx.positions[j + 1] if j + 1 < len(idx.lasts) else idx.end
                if nxt - start > max_bytes and not (min_one and j == i):
                    break
                end = nxt
            return self._pread(seg, start, end - start)
        return b""

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record whose timestamp is ≥ ``target``, or ``None``."""
        for seg in self._segments:
            idx = self._index(seg)
            for i, ts in enumerate(idx.max_ts):
                if ts >= target:
                    h, times = self._batch_times(seg, idx.positions[i])
                    return next(((t, o) for o, t in times if t >= target), (h.max_timestamp, h.base_offset))
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the (first) record with the largest timestamp, or ``None`` if empty."""
        best: tuple[int, _Segment, int] | None = None
        for seg in self._segments:
            idx = self._index(seg)
            for i, ts in enumerate(idx.max_ts):
                if best is None or ts > best[0]:
                    best = (ts, seg, idx.positions[i])
        if best is None:
            return None
        h, times = self._batch_times(best[1], best[2])
        return next(((t, o) for o, t in times if t == h.max_timestamp), (h.max_timestamp, h.base_offset))

    def _batch_times(self, seg: _Segment, pos: int) -> tuple[BatchHeader, list[tuple[int, int]]]:
        head = parse_header(self._pread(seg, pos, HEADER.size))
        return head, record_times(head, self._pread(seg, pos + HEADER.size, head.size - HEADER.size))

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """fsync pending appends (unless ``NEVER``) and close the file. Idempotent."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self._dirty and self._failed is None and self._policy is not FsyncPolicy.NEVER:
                _fsync_file(fd)
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"PartitionLog({str(self._dir)!r}, offsets [{self.log_start_offset}, {self._leo}))"

    # ------------------------------------------------------------------ internals

    def _open_fd(self) -> int:
        if self._fd is None:
            raise StorageError(f"{self._dir}: the partition log is closed")
        return self._fd

    def _writable(self) -> int:
        fd = self._open_fd()
        if self._failed is not None:
            raise StorageError(f"{self._dir}: an I/O error happened; reopen the log: {self._failed!r}")
        return fd

    def _write(self, fd: int, data: bytes | bytearray, start: int) -> None:
        write_all_or_take_back(fd, data, start, self._mark_failed)

    def _mark_failed(self, exc: BaseException) -> None:
        self._failed = exc

    def _sync(self, fd: int) -> None:
        try:
            _fsync_file(fd)
        except BaseException as exc:
            self._failed = exc  # the kernel may have dropped the dirty pages: the disk state is unknown
            raise
        self._dirty = False
        self._last_sync = self._clock()

    def _roll(self) -> int:
        assert self._fd is not None
        sync = self._policy is not FsyncPolicy.NEVER
        if sync and self._dirty:
            self._sync(self._fd)
        try:
            seg = _Segment(self._leo, self._dir / _segment_name(self._leo), _Index())
            _create_file(seg.path)
            if sync:
                fsync_dir(self._dir)
            fd = os.open(seg.path, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        except BaseException as exc:
            self._failed = exc
            raise
        os.close(self._fd)
        self._fd = fd
        self._segments.append(seg)
        self._bases.append(seg.base)
        return fd

    def _index(self, seg: _Segment) -> _Index:
        if seg.index is None:  # an older segment, first touched: scan its headers
            fd = os.open(seg.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
            try:
                idx, _, problem = _scan(fd, seg, verify=False)
            finally:
                os.close(fd)
            if problem:
                log.warning("%s: %s at byte %d; the rest of the segment is ignored", seg.path, problem, idx.end)
            return idx
        return seg.index

    def _pread(self, seg: _Segment, pos: int, size: int) -> bytes:
        if seg is self._segments[-1]:
            return _pread_all(self._open_fd(), pos, size)
        fd = os.open(seg.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        try:
            return _pread_all(fd, pos, size)
        finally:
            os.close(fd)


def _scan(fd: int, seg: _Segment, *, verify: bool, producers: ProducerStates | None = None) -> tuple[_Index, int, str]:
    """Index the batches of a segment file until the first unsound one: ``(index, next offset, why it stopped)``.

    ``verify`` also checks each batch's CRC and that offsets are contiguous from the segment's base (the
    active segment on recovery); ``producers`` collects idempotent-producer state on the way.
    """
    size = os.fstat(fd).st_size
    seg.index = idx = _Index()
    expected = seg.base
    while idx.end < size:
        head = _pread_all(fd, idx.end, min(HEADER.size, size - idx.end))
        if len(head) < HEADER.size:
            return idx, expected, "incomplete batch header"
        h = parse_header(head)
        problem = check_header(h, size - idx.end)
        if problem is None and verify:
            if crc32c(_pread_all(fd, idx.end + CRC_FROM, h.size - CRC_FROM)) != h.crc:
                problem = "CRC-32C mismatch"
            elif h.base_offset != expected:
                problem = f"batch has offset {h.base_offset}, expected {expected}"
        if problem:
            return idx, expected, problem
        if producers is not None:
            producers.observe(h)
        idx.add(h, idx.end)
        expected = h.last_offset + 1
    return idx, expected, ""


def _recover(fd: int, seg: _Segment, producers: ProducerStates, sync: bool) -> tuple[int, int]:
    """Index the active segment, rebuild producer state, truncate a torn tail: ``(log end offset, bytes cut)``."""
    idx, expected, problem = _scan(fd, seg, verify=True, producers=producers)
    cut = os.fstat(fd).st_size - idx.end
    if cut:
        log.warning("%s: truncating %d byte(s) of torn tail at byte %d (offset %d): %s",
                    seg.path, cut, idx.end, expected, problem)  # fmt: skip
        os.ftruncate(fd, idx.end)
        if sync:
            _fsync_file(fd)
    return expected, cut


def _segment_name(base: int) -> str:
    return f"{base:020d}.log"


def _pread_all(fd: int, pos: int, size: int) -> bytes:
    parts: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, pos)
        if not chunk:
            break
        parts.append(chunk)
        pos += len(chunk)
        size -= len(chunk)
    return b"".join(parts)
