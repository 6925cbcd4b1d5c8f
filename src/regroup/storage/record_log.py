"""The coordinator's durable record log: ordered opaque byte payloads in segment files, plus snapshots.

This is a shell (docs/architecture.md): it does file I/O, fsync and may read a monotonic clock. The core
never imports it; it hands the shell records already serialised to ``bytes`` and gets ``bytes`` back.

Directory layout (full description in ``docs/storage.md``)::

    <dir>/LOCK                                  flock()ed while a RecordLog has the directory open
    <dir>/00000000000000000000.log              segment files, named by the offset of their first record
    <dir>/00000000000000001234.log              (the last one is the *active* segment, the only one written)
    <dir>/snapshot-00000000000000001000.bin     at most two snapshots: the newest and its predecessor
    <dir>/snapshot-....bin.tmp                  a snapshot being written (deleted on open)

Each ``append`` (or ``write``) writes one batch frame (:mod:`regroup.storage.format`) with a single ``write``
call: a length-prefixed, CRC-checked unit holding all records of the batch, so recovery accepts or rejects the
batch as a whole. Offsets are consecutive integers from 0 and never reused. ``append`` also fsyncs as the
policy says; ``write`` never does (except the old segment at a roll), and ``sync`` fsyncs what was written:
a pipelined owner writes the next batch while another thread's ``sync`` covers the previous ones.

Recovery on open scans the active segment: the first frame that is incomplete, fails its checksum or does
not continue the offsets is a torn tail and the file is truncated there — unless an intact frame continuing
the offsets follows it, which means damage in the middle of once-durable data: that raises
:class:`CorruptLogError` naming the file, the byte and the intact frames after it, and changes nothing (the
operator's ``regroup repair`` truncates or quarantines it, :mod:`regroup.storage.repair`). Older segments are
verified as they are read; any damage there raises :class:`CorruptLogError`. A file the log does not know
(a segment whose name was damaged, a stray file) refuses the open too. A gap marker ``<offset>.gap`` left by a
repair stands for offsets whose records were lost: reads pass over them.
"""

from __future__ import annotations

import enum
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

from regroup.storage.damage import Unit, describe_intact, find_intact
from regroup.storage.files import create_file as _create_file
from regroup.storage.files import fsync_dir as _fsync_dir
from regroup.storage.files import fsync_file as _fsync_file
from regroup.storage.files import open_append as _open_append
from regroup.storage.files import read_file, write_all_or_take_back
from regroup.storage.format import (
    FRAME_MAGIC,
    CorruptLogError,
    FormatError,
    FramedBody,
    StorageError,
    decode_frame,
    decode_snapshot,
    encode_batch,
    encode_snapshot,
    frame_header,
)
from regroup.storage.segment_dir import gap_name, list_dir, segment_name

if sys.platform != "win32":
    import fcntl

__all__ = ["RECORD_LOG_SEGMENT_BYTES", "FsyncPolicy", "LogLockedError", "RecordLog"]

log = logging.getLogger(__name__)

RECORD_LOG_SEGMENT_BYTES = 64 * 1024 * 1024
DEFAULT_FSYNC_INTERVAL_MS = 100
LOCK_NAME = "LOCK"
KEPT_SNAPSHOTS = 2

_SNAPSHOT_RE = re.compile(r"^snapshot-(\d{20})\.bin$")
_SNAPSHOT_TMP_RE = re.compile(r"^snapshot-\d{20}\.bin\.tmp$")


class FsyncPolicy(enum.Enum):
    """When appended records are forced to stable storage."""

    #: every append batch is fsynced before ``append`` returns (the safe default).
    ALWAYS = "always"
    #: fsync after an append when at least ``fsync_interval_ms`` passed since the last one, on ``sync()``
    #: and on ``close()``; a power loss may lose the records of the last interval.
    INTERVAL = "interval"
    #: never fsync (not even snapshots or recovery truncations); the OS decides. Survives a process crash,
    #: not a power loss. For tests and benchmarks.
    NEVER = "never"


class LogLockedError(StorageError):
    """Another ``RecordLog`` (in this or another process) has the directory open."""


class _FrameFormat:
    """Batch frames as :mod:`regroup.storage.damage` scans them."""

    noun = "frame"

    def check(self, data: bytes, pos: int) -> Unit | str:
        try:
            frame = decode_frame(data, pos)
        except FormatError as exc:
            return exc.reason
        return Unit(pos, frame.end, frame.base_offset, frame.next_offset - 1)

    def next_candidate(self, data: bytes, pos: int) -> int:
        return data.find(FRAME_MAGIC, pos)


FRAMES = _FrameFormat()


def expected_name(name: str) -> bool:
    """Names a coordinator log directory holds besides segments and gap markers."""
    return name == LOCK_NAME or bool(_SNAPSHOT_RE.match(name) or _SNAPSHOT_TMP_RE.match(name))


def snapshot_floor(names: list[str]) -> int:
    """The offset the log must reach for the newest of the snapshots ``names`` to be usable (its offset + 1)."""
    return max((int(m.group(1)) + 1 for name in names if (m := _SNAPSHOT_RE.match(name))), default=0)


def snapshot_name(offset: int) -> str:
    """File name of the snapshot of the state as of record ``offset``."""
    return f"snapshot-{offset:020d}.bin"


class RecordLog:
    """An append-only log of opaque byte records with snapshots; open it with :meth:`RecordLog.open`.

    One owner (one asyncio task) calls it, one call at a time, with one exception: :meth:`write` (one call at
    a time) and :meth:`sync` (from any number of threads) may run at the same time; an fsync covers the
    writes that returned before it started. (The fsync of the active segment, a roll, :meth:`snapshot` and
    :meth:`close` take a lock: fsyncs run one after another, and a roll never closes the descriptor an
    fsync is using.) Iterators returned by :meth:`read` and
    :meth:`load` read lazily; consume them before the next ``snapshot`` (which may delete segments).
    """

    def __init__(
        self,
        *,
        directory: Path,
        policy: FsyncPolicy,
        segment_bytes: int,
        fsync_interval_ms: float,
        clock: Callable[[], float],
        lock_fd: int | None,
        bases: list[int],
        gaps: set[int],
        active_fd: int,
        active_size: int,
        next_offset: int,
        snapshots: list[int],
        truncated_bytes: int,
    ) -> None:
        """Internal: use :meth:`RecordLog.open`."""
        self._dir = directory
        self._policy = policy
        self._segment_bytes = segment_bytes
        self._interval_s = fsync_interval_ms / 1000.0
        self._clock = clock
        self._lock_fd = lock_fd
        self._bases = bases
        self._gaps = gaps
        self._fd: int | None = active_fd
        self._active_size = active_size
        self._next = next_offset
        self._snapshots = snapshots
        self._truncated_bytes = truncated_bytes
        self._synced = next_offset  # records below this offset are covered by an fsync (or were there at open)
        self._sync_lock = threading.Lock()  # held around every fsync of the active segment, a roll and closing
        self._last_sync = clock()
        self._failed: BaseException | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        fsync: FsyncPolicy = FsyncPolicy.ALWAYS,
        segment_bytes: int = RECORD_LOG_SEGMENT_BYTES,
        fsync_interval_ms: float = DEFAULT_FSYNC_INTERVAL_MS,
        clock: Callable[[], float] = time.monotonic,
    ) -> RecordLog:
        """Open (creating if needed) the log in ``directory`` and recover its tail.

        ``segment_bytes``: roll to a new segment before a batch that would grow the active one past this
        (a single larger batch still gets written, alone in its segment). ``fsync_interval_ms`` and
        ``clock`` (seconds, monotonic) only matter for :attr:`FsyncPolicy.INTERVAL`. Damage recovery must not
        cut away raises :class:`CorruptLogError` and changes nothing (see :mod:`regroup.storage.repair`).
        """
        if segment_bytes <= 0:
            raise ValueError("segment_bytes must be positive")
        if fsync_interval_ms < 0:
            raise ValueError("fsync_interval_ms must not be negative")
        directory = Path(directory)
        sync = fsync is not FsyncPolicy.NEVER
        if not directory.is_dir():
            directory.mkdir(parents=True)
            if sync:
                _fsync_dir(directory.parent)  # make the new directory's own entry durable
        lock_fd = _acquire_lock(directory)
        active_fd: int | None = None
        try:
            listing = list_dir(directory, expected_name)
            problem = listing.problem(directory, "the coordinator log's directory")
            if problem:
                raise CorruptLogError(problem)
            snapshots: list[int] = []
            for name in listing.other:
                if m := _SNAPSHOT_RE.match(name):
                    snapshots.append(int(m.group(1)))
                elif _SNAPSHOT_TMP_RE.match(name):
                    os.unlink(directory / name)  # a snapshot that never got renamed into place
            snapshots.sort()
            bases = [base for base, _ in listing.files()]
            gaps = set(listing.gaps)
            truncated = 0
            if bases:
                base = bases[-1]
                must_reach = snapshots[-1] + 1 if snapshots else 0
                next_offset, size, truncated = _recover_active(directory / segment_name(base), base, sync, must_reach)
            elif snapshots:
                raise CorruptLogError(f"{directory}: snapshots but no segment files (the active one is never deleted)")
            else:
                bases, next_offset, size = [0], 0, 0
                _create_file(directory / segment_name(0))
                if sync:
                    _fsync_dir(directory)
            if snapshots and snapshots[-1] >= next_offset:
                raise CorruptLogError(
                    f"{directory}: {snapshot_name(snapshots[-1])} is ahead of the log, which ends before offset "
                    f"{next_offset}; records the snapshot covered are missing"
                )
            active_fd = _open_append(directory / segment_name(bases[-1]))
            return cls(
                directory=directory,
                policy=fsync,
                segment_bytes=segment_bytes,
                fsync_interval_ms=fsync_interval_ms,
                clock=clock,
                lock_fd=lock_fd,
                bases=bases,
                gaps=gaps,
                active_fd=active_fd,
                active_size=size,
                next_offset=next_offset,
                snapshots=snapshots,
                truncated_bytes=truncated,
            )
        except BaseException:
            if active_fd is not None:
                os.close(active_fd)
            if lock_fd is not None:
                os.close(lock_fd)
            raise

    # ------------------------------------------------------------------ properties

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return self._policy

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets (the number of records ever appended)."""
        return self._next

    @property
    def first_offset(self) -> int:
        """The lowest offset still readable (records below it were compacted into a snapshot)."""
        return self._bases[0]

    @property
    def segment_count(self) -> int:
        """Segment files (gap markers not counted)."""
        return len(self._bases) - len(self._gaps)

    @property
    def snapshot_offsets(self) -> tuple[int, ...]:
        """Offsets of the snapshot files present, oldest first (their validity is checked by :meth:`load`)."""
        return tuple(self._snapshots)

    @property
    def size_bytes(self) -> int:
        """Bytes on disk of all segments and snapshots."""
        paths = [self._dir / segment_name(b) for b in self._bases]
        paths += [self._dir / snapshot_name(s) for s in self._snapshots]
        return sum(p.stat().st_size for p in paths if p.exists())

    @property
    def truncated_bytes(self) -> int:
        """Bytes of torn tail discarded from the active segment when this log was opened."""
        return self._truncated_bytes

    @property
    def closed(self) -> bool:
        return self._fd is None

    # ------------------------------------------------------------------ writing

    def append(self, payloads: Sequence[bytes] | FramedBody) -> int:
        """Append ``payloads`` as one batch and return the offset of the last record in the log.

        The batch is one frame written with one ``write`` (two, header then body, for a body made ahead): after
        a crash it is recovered whole or not at all.
        With :attr:`FsyncPolicy.ALWAYS` it is on stable storage when this returns. An empty batch writes
        nothing and returns ``next_offset - 1``. On an I/O error the partial write is rolled back (or, if
        even that fails, the log refuses further writes until reopened) and the error propagates. ``payloads``
        may be given as their frame's body made ahead (``format.frame_body``, on any thread): the frame is the
        same, its header joined to it here, and the body written as it is (a large batch's copy and checksum
        then cost nothing while the log is held).
        """
        last = self.write(payloads)
        if payloads and (
            self._policy is FsyncPolicy.ALWAYS
            or (self._policy is FsyncPolicy.INTERVAL and self._clock() - self._last_sync >= self._interval_s)
        ):
            self.sync()
        return last

    def write(self, payloads: Sequence[bytes] | FramedBody) -> int:
        """Write ``payloads`` as one batch, as :meth:`append` does, but without the fsync (whatever the
        policy): the batch is durable once a :meth:`sync` that started after this returned has returned. A
        roll still fsyncs the old segment (unless ``NEVER``) before the next one is created."""
        last = self._write_batch(payloads, roll=True)
        assert last is not None
        return last

    def write_unless_full(self, payloads: Sequence[bytes] | FramedBody) -> int | None:
        """:meth:`write` when the batch fits in the active segment, so that the call neither fsyncs nor creates a
        file (an owner writing on its event loop); None, having written nothing, when it would start a new one."""
        return self._write_batch(payloads, roll=False)

    def _write_batch(self, payloads: Sequence[bytes] | FramedBody, *, roll: bool) -> int | None:
        fd = self._writable_fd()
        if isinstance(payloads, bytes | bytearray | memoryview):
            raise TypeError("append() takes a sequence of payloads, not a single payload")
        pieces: tuple[bytes, ...]
        if isinstance(payloads, FramedBody):
            pieces, count = (frame_header(self._next, payloads), payloads.data), payloads.count
        else:
            if not payloads:
                return self._next - 1
            pieces, count = (encode_batch(self._next, payloads),), len(payloads)
        size = sum(map(len, pieces))
        if self._active_size > 0 and self._active_size + size > self._segment_bytes:
            if not roll:
                return None
            fd = self._roll()  # (the next offset stays: the frame made above is the one to write)
        self._write(fd, *pieces)
        self._next += count
        return self._next - 1

    def sync(self, through: int | None = None) -> None:
        """fsync what was written since the last fsync (any policy). An ``INTERVAL`` owner may call this on a
        timer so that the loss window stays bounded when appends stop; a pipelined owner calls it (on a thread
        of its own) to make the batches :meth:`write` returned from durable, with ``through``, the last offset
        of its batch: an fsync that began after that write returned covers it already, and then there is none
        to do (so that batches written while an fsync runs share the next one, whatever their count)."""
        with self._sync_lock:
            if through is not None and self._synced > through:
                return
            fd = self._writable_fd()
            if self._dirty:
                self._sync_active(fd)

    @property
    def _dirty(self) -> bool:
        """Records were written that no fsync covers yet."""
        return self._synced < self._next

    def snapshot(self, offset: int, state: bytes) -> None:
        """Store ``state``, the full state as of record ``offset``, then compact.

        Steps, each safe to crash after: fsync the active segment (so the records the snapshot covers are
        durable first); write ``snapshot-<offset>.bin.tmp``, fsync, rename into place, fsync the directory;
        delete all but the two newest snapshots; delete the segments wholly covered by the *older* of the two
        kept snapshots, so that a damaged newest snapshot can still fall back to its predecessor plus the
        records after it. (With ``NEVER`` no fsyncs happen.) The active segment is never deleted.
        """
        fd = self._writable_fd()
        if not 0 <= offset < self._next:
            raise ValueError(f"snapshot offset {offset} is not a record in the log (next offset {self._next})")
        if self._snapshots and offset < self._snapshots[-1]:
            raise ValueError(f"snapshot offset {offset} is older than the newest snapshot ({self._snapshots[-1]})")
        sync = self._policy is not FsyncPolicy.NEVER
        if sync:
            with self._sync_lock:
                if self._dirty:
                    self._sync_active(fd)
        final = self._dir / snapshot_name(offset)
        tmp = final.with_name(final.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(encode_snapshot(offset, state))
                f.flush()
                if sync:
                    _fsync_file(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if sync:
            _fsync_dir(self._dir)
        if not self._snapshots or self._snapshots[-1] != offset:
            self._snapshots.append(offset)
        while len(self._snapshots) > KEPT_SNAPSHOTS:
            (self._dir / snapshot_name(self._snapshots.pop(0))).unlink(missing_ok=True)
        if len(self._snapshots) == KEPT_SNAPSHOTS:
            covered = self._snapshots[0]
            # Oldest first, so a crash part-way leaves a contiguous run of segments. A segment's records end
            # just before the next segment's base; deleting its file needs no fsync (if it reappears after a
            # power loss it is merely kept a little longer).
            while len(self._bases) > 1 and self._bases[1] <= covered + 1:
                base = self._bases.pop(0)
                if base in self._gaps:
                    self._gaps.discard(base)
                    (self._dir / gap_name(base)).unlink(missing_ok=True)
                else:
                    (self._dir / segment_name(base)).unlink(missing_ok=True)

    # ------------------------------------------------------------------ reading

    def read(self, from_offset: int = 0) -> Iterator[tuple[int, bytes]]:
        """``(offset, payload)`` for every record from ``from_offset`` up to the current end, in order.

        Every frame read is checksum-verified, and segment boundaries must continue the offsets exactly;
        otherwise the iterator raises :class:`CorruptLogError`. ``from_offset`` must lie within
        ``[first_offset, next_offset]``.
        """
        self._open_or_raise()
        if not self.first_offset <= from_offset <= self._next:
            raise ValueError(f"offset {from_offset} is outside the readable range [{self.first_offset}, {self._next}]")
        return self._records(from_offset, self._next, list(self._bases), set(self._gaps))

    def load(self) -> tuple[int | None, bytes | None, Iterator[tuple[int, bytes]]]:
        """What a restart needs: ``(snapshot offset, snapshot state, records after it)``.

        Uses the newest snapshot that is intact and whose following records are all still present; falls back
        to the previous one, then to ``(None, None, every record)`` when no compaction has happened yet. If no
        such starting point exists, raises :class:`CorruptLogError`.
        """
        self._open_or_raise()
        for offset in reversed(self._snapshots):
            path = self._dir / snapshot_name(offset)
            try:
                state = decode_snapshot(path.read_bytes(), offset)
            except FileNotFoundError:
                log.warning("%s: snapshot file vanished", path)
                continue
            except FormatError as exc:
                log.warning("%s: ignoring damaged snapshot: %s", path, exc.reason)
                continue
            if offset + 1 < self.first_offset:
                log.warning("%s: records after this snapshot were already compacted", path)
                continue
            return offset, state, self.read(offset + 1)
        if self.first_offset == 0:
            return None, None, self.read(0)
        raise CorruptLogError(
            f"{self._dir}: no intact snapshot, and records before offset {self.first_offset} were compacted "
            f"(snapshots present: {self._snapshots or 'none'})"
        )

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """fsync pending appends (unless ``NEVER``) and release the directory. Idempotent."""
        with self._sync_lock:
            if self._fd is None:
                return
            fd, self._fd = self._fd, None
            try:
                if self._dirty and self._failed is None and self._policy is not FsyncPolicy.NEVER:
                    _fsync_file(fd)
                    self._synced = self._next
            finally:
                os.close(fd)
                if self._lock_fd is not None:
                    os.close(self._lock_fd)
                    self._lock_fd = None

    def __enter__(self) -> RecordLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._fd is None else f"offsets [{self.first_offset}, {self._next})"
        return f"RecordLog({str(self._dir)!r}, {self._policy.name}, {state}, {len(self._bases)} segment(s))"

    # ------------------------------------------------------------------ internals

    def _open_or_raise(self) -> int:
        if self._fd is None:
            raise StorageError("the record log is closed")
        return self._fd

    def _writable_fd(self) -> int:
        fd = self._open_or_raise()
        if self._failed is not None:
            raise StorageError(
                f"the record log hit an I/O error and refuses writes until reopened: {self._failed!r}"
            ) from self._failed
        return fd

    def _write(self, fd: int, *data: bytes) -> None:
        write_all_or_take_back(fd, data, self._active_size, self._mark_failed)
        self._active_size += sum(map(len, data))

    def _mark_failed(self, exc: BaseException) -> None:
        self._failed = exc

    def _sync_active(self, fd: int) -> None:
        """fsync the active segment; the caller holds ``_sync_lock``. It covers the records whose write
        returned before it started: those below ``_next`` as read now."""
        covers = self._next
        try:
            _fsync_file(fd)
        except BaseException as exc:
            # After a failed fsync the kernel may have dropped the dirty pages: what is on disk is unknown.
            self._failed = exc
            raise
        self._synced = max(self._synced, covers)
        self._last_sync = self._clock()

    def _roll(self) -> int:
        """Close the active segment (fsynced unless ``NEVER``) and start one at ``next_offset``. Holds
        ``_sync_lock`` throughout: a concurrent :meth:`sync` finishes with the old descriptor first, or starts
        with the new one."""
        with self._sync_lock:
            assert self._fd is not None
            sync = self._policy is not FsyncPolicy.NEVER
            if sync and self._dirty:
                self._sync_active(self._fd)
            try:
                path = self._dir / segment_name(self._next)
                _create_file(path)
                if sync:
                    _fsync_dir(self._dir)
                fd = _open_append(path)
            except BaseException as exc:
                self._failed = exc
                raise
            os.close(self._fd)
            self._fd = fd
            self._bases.append(self._next)
            self._active_size = 0
            return fd

    def _records(self, from_offset: int, end: int, bases: list[int], gaps: set[int]) -> Iterator[tuple[int, bytes]]:
        for i, base in enumerate(bases):
            seg_end = bases[i + 1] if i + 1 < len(bases) else end
            if seg_end <= from_offset or base in gaps:
                continue  # (a gap marker: a repair lost these records)
            path = self._dir / segment_name(base)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise CorruptLogError(f"{path}: segment file missing (deleted while being read?)") from None
            pos, expected = 0, base
            while expected < seg_end and pos < len(data):
                try:
                    frame = decode_frame(data, pos)
                except FormatError as exc:
                    raise CorruptLogError(_damage(path, exc.reason, data, pos, expected)) from None
                if frame.base_offset != expected:
                    reason = f"frame has offset {frame.base_offset}, expected {expected}"
                    raise CorruptLogError(_damage(path, reason, data, pos, expected))
                for k, payload in enumerate(frame.payloads):
                    if expected + k >= from_offset:
                        yield expected + k, payload
                pos, expected = frame.end, frame.next_offset
            if expected != seg_end or (i + 1 < len(bases) and pos != len(data)):
                raise CorruptLogError(
                    f"{path}: records end before offset {expected} at byte {pos} of {len(data)}, but the next "
                    f"segment starts at offset {seg_end}"
                )


def _recover_active(path: Path, base: int, sync: bool, must_reach: int = 0) -> tuple[int, int, int]:
    """Scan the active segment; truncate a torn tail — unless the log would then end before ``must_reach``
    (the newest snapshot's offset + 1: records it covers would be missing), which the caller refuses.
    Returns ``(next offset, file size, bytes cut)``."""
    data = read_file(path)
    pos, expected = 0, base
    reason = ""
    while pos < len(data):
        try:
            frame = decode_frame(data, pos)
        except FormatError as exc:
            reason = exc.reason
            break
        if frame.base_offset != expected:
            reason = f"frame has offset {frame.base_offset}, expected {expected}"
            break
        pos, expected = frame.end, frame.next_offset
    if pos == len(data):
        return expected, pos, 0
    intact = find_intact(data, pos, expected, FRAMES)
    if intact:
        raise CorruptLogError(
            f"{path}: {reason} at byte {pos} (offset {expected}), yet {describe_intact(intact, 'frame')}: this "
            "is damage to data once written in full, not a torn tail. Nothing was changed"
        )
    if expected < must_reach:
        return expected, len(data), 0  # (the caller raises: nothing is cut)
    cut = len(data) - pos
    log.warning("%s: truncating %d byte(s) of torn tail at byte %d (offset %d): %s", path, cut, pos, expected, reason)
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.ftruncate(fd, pos)
        if sync:
            _fsync_file(fd)
    finally:
        os.close(fd)
    return expected, pos, cut


def _damage(path: Path, reason: str, data: bytes, pos: int, expected: int) -> str:
    """The message for damage found while reading a segment."""
    intact = find_intact(data, pos, expected, FRAMES)
    after = describe_intact(intact, "frame") if intact else "nothing intact follows in this segment"
    return f"{path}: {reason} at byte {pos} (offset {expected}); {after}"


def lock_directory(directory: Path, owner: str = "RecordLog") -> int | None:
    """``flock`` (exclusive, non-blocking) ``directory/LOCK``: the descriptor to close to release it. Raises
    :class:`LogLockedError` when an ``owner`` in this or another process holds it."""
    if sys.platform == "win32":
        return None
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogLockedError(f"{directory} is already open by another {owner}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _acquire_lock(directory: Path) -> int | None:
    return lock_directory(directory)
