"""One topic-partition's append-only log of Kafka record batches on local disk (the embedded broker's data).

A shell (docs/architecture.md): file I/O and fsync. Batches are stored exactly as producers sent them (magic
v2 record batches, compressed or not) except for two fields outside the batch CRC: ``baseOffset`` (bytes 0–8)
becomes the log end offset and ``partitionLeaderEpoch`` (bytes 12–16) becomes -1 (no leader epochs here).
So a fetch returns the stored bytes unchanged. The full format is in ``docs/topic-data.md``::

    <dir>/00000000000000000000.log     segment files of concatenated batches, named by their first offset
    <dir>/00000000000000004096.log     the last one is the active segment, the only one written
    <dir>/00000000000000000030.gap     (only after ``regroup repair``) offsets up to the next file's are gone

A partition that was never written has no directory at all: the first append creates it and its first
segment, made durable by the partition's first fsync (on whatever thread runs it). The log keeps no file
descriptor of its own: it borrows one from a shared
:class:`~regroup.storage.handles.HandleCache` for each read or write, so the number of open files does not
grow with the number of partitions, while a busy partition's active segment stays open.

The batch index (last offset, file position, max timestamp per batch) lives in memory, built on open.
Recovery verifies every batch of every segment (length, magic, CRC-32C, offsets continuing from the
segment's base; an older segment must also end exactly where the next file begins). In the active segment
a torn tail — a bad batch with nothing intact after it, which is all a crash can leave — is truncated and
logged; anything else (a bad batch followed by intact ones, any damage in an older segment, a segment
missing, an unknown file such as a segment whose name was damaged) is damage to data once written in full,
and ``open`` refuses with :class:`CorruptLogError` naming the file, the byte and what is intact after it,
changing nothing (``regroup repair`` is the operator's tool, :mod:`regroup.storage.repair`). Batches read
from older segments are CRC-checked again, for damage that happens while the server runs.
Idempotent-producer state (the last five batches per producer id) is rebuilt from the active segment, so a
retry of a batch written just before a crash is recognised as a duplicate after the restart.
Transactions (:mod:`regroup.storage.partition_txns`: the open ones, the aborted-transaction index, the
last stable offset) are rebuilt from every segment during the same scan; the coordinator's shell appends
the markers that close them (:meth:`PartitionLog.append_marker`).

An owner may take fsyncs and segment deletions off its thread: :meth:`PartitionLog.begin_sync` hands the fsync
of the appends so far to another thread on a duplicate descriptor (so closing, rolling or deleting the segment
meanwhile cannot pull the descriptor from under it; a close during it fsyncs the segment on the spot), and with
:attr:`PartitionLog.defer_interval_sync` set the ``INTERVAL`` fsync due after an append is left to the owner
(:attr:`PartitionLog.sync_due`). A roll fsyncs nothing itself: an older segment must be whole on disk before
the next one exists, so while the segment it closes may not be, the new one is created as ``<base>.rolling``;
the log's next fsync (on whatever thread runs it) fsyncs the old segment, only then renames the new one to
``<base>.log`` and fsyncs the directory, and only then do records after the roll count as on disk (under
``ALWAYS``, are read). A crash in between leaves the ``.rolling`` file, which ``open`` settles: renamed if the
segment before it is whole, removed if that segment lost its tail (then nothing after it was on disk). A
segment that fills up before the last roll is settled settles that roll on the spot (the old segment's and the
directory's fsyncs, what every roll cost before), unless an fsync that settles it is under way or the owner
runs a group commit (:attr:`PartitionLog.group_commit`): then it keeps taking appends past its size (the next
roll waits for that fsync), up to ``UNSETTLED_ROLL_GROWTH`` times ``segment.bytes``. Likewise, when the handle
cache closes the active segment's descriptor while it has unsynced appends, the log keeps a duplicate for
its next fsync instead of fsyncing there. :meth:`PartitionLog.drop_oldest_segment` takes the oldest segment out of the
log at once and leaves its file for the owner to remove (:class:`DroppedSegments`, oldest first);
:meth:`PartitionLog.move_log_start` does the same for DeleteRecords once the new log start offset is durable.
A compaction's rewritten segment comes in the same way (:meth:`PartitionLog.start_rewrite`): written, fsynced
and indexed anywhere (:meth:`Rewrite.write`), renamed into place and switched to in memory on the owner's
thread (:meth:`PartitionLog.swap_rewrite`), the segments it replaces removed anywhere (after the directory's
fsync that commits it), then renamed to its final name on the owner's thread
(:meth:`PartitionLog.settle_rewrite`). Until then the new segment is read from its ``.swap`` file and is
neither dropped nor replaced: every file a read may open exists, and each step leaves the directory in a
state :func:`~regroup.storage.segment_swap.recover` knows.

Not thread-safe: one owner (the server's event loop) drives it.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from regroup.storage.batches import (
    HEADER,
    LOG_OVERHEAD,
    AppendRejected,
    BatchHeader,
    ProducerStates,
    Reject,
    check_batch,
    parse_header,
    record_times,
    split_batches,
)
from regroup.storage.damage import Unit, describe_intact, find_intact
from regroup.storage.files import CLOEXEC, read_file, rename_once, write_all_or_take_back
from regroup.storage.files import create_file as _create_file
from regroup.storage.files import fsync_dir as _fsync_dir
from regroup.storage.files import fsync_file as _fsync_file
from regroup.storage.format import CorruptLogError, StorageError
from regroup.storage.handles import HandleCache
from regroup.storage.markers import marker_batch
from regroup.storage.partition_txns import OpenTxn, PartitionTxns
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.segment_dir import ROLLING_RE, gap_name, list_dir, rolling_name, segment_name
from regroup.storage.segment_swap import (
    cleaned_name,
    commit_swap,
    expected_name,
    read_log_start,
    recover,
    settle_swap,
    write_cleaned,
    write_log_start,
)
from regroup.storage.topic_config import DEFAULT_SEGMENT_BYTES

__all__ = [
    "BATCHES",
    "DEFAULT_MAX_BATCH_BYTES",
    "AppendInfo",
    "AppendRejected",
    "DroppedSegments",
    "LeftRoll",
    "OffsetOutOfRange",
    "PartitionLog",
    "PendingSync",
    "Reject",
    "Rewrite",
    "SegmentSpan",
    "find_left_roll",
    "fsync_dir",
    "make_files",
    "settle_left_roll",
]

log = logging.getLogger(__name__)

fsync_dir = _fsync_dir

DEFAULT_MAX_BATCH_BYTES = 1024 * 1024 + 12  # Kafka's message.max.bytes default (1048588)
DEFAULT_FSYNC_INTERVAL_MS = 100
PRIVATE_HANDLES = 4  # a log opened without a shared cache gets one this size
#: a segment full while the roll that started it is not durable yet takes appends up to this many times
#: ``segment.bytes`` before that roll is settled on the appending thread (the disk is far behind)
UNSETTLED_ROLL_GROWTH = 2
#: bytes 12..17 of every stored batch: partitionLeaderEpoch -1, then magic 2 (how damage scans resynchronise)
_MARK = b"\xff\xff\xff\xff\x02"


@dataclass(frozen=True, slots=True)
class PendingSync:
    """An fsync of a partition's appends taken off the event loop (:meth:`PartitionLog.begin_sync`): ``fd`` is
    a duplicate of the active segment's descriptor, so the handle cache may close its own meanwhile; ``target``
    is the log end offset the fsync makes durable. With a roll not yet settled (``roll``), it first settles
    the roll: fsyncs the previous segment (``old_fd``, a duplicate, or -1 if it was whole on disk already),
    renames the new segment from its temporary name (``rename``) and fsyncs the directory (``directory``).
    ``created``: the directories whose new entries the partition's first append made (its directory, its first
    segment), fsynced first."""

    fd: int
    target: int
    roll: object | None = None  # the log's own record of the roll (matched by identity in finish_sync)
    old_fd: int = -1
    rename: tuple[Path, Path] | None = None
    directory: Path | None = None
    created: tuple[Path, ...] = ()

    def run(self) -> None:
        """fsync (the created directories and the roll first) and close the duplicate descriptors (on any
        thread)."""
        try:
            for directory in self.created:
                _fsync_dir(directory)
            if self.directory is not None:
                _settle_roll(self.old_fd, self.rename, self.directory)
            _fsync_file(self.fd)
        finally:
            self.close()

    @property
    def ordered(self) -> bool:
        """It settles a roll, whose steps come in an order (the old segment, the rename, the directory): a sync
        of the whole file system made before them does not cover it. A sync of the whole file system covers any
        other (the created directories' entries too)."""
        return self.directory is not None

    def close(self) -> None:
        """Close the duplicate descriptors without fsyncing (a sync of the whole file system covered them)."""
        os.close(self.fd)
        if self.old_fd >= 0:
            os.close(self.old_fd)


def _settle_roll(old_fd: int, rename: tuple[Path, Path] | None, directory: Path) -> None:
    """Make a roll durable, in this order: the previous segment whole on disk (``old_fd``), only then the new
    segment under its final name (``rename``, from its temporary one), and that name durable (the directory's
    fsync). Safe to run twice, even at once on two threads."""
    if old_fd >= 0:
        _fsync_file(old_fd)
    if rename is not None:
        rename_once(*rename)
    _fsync_dir(directory)


@dataclass(slots=True)
class DroppedSegments:
    """Segment files already taken out of their log (:meth:`PartitionLog.drop_oldest_segment`), to remove on
    any thread: ``names``, oldest first, inside the partition directory open as ``dir_fd`` (the directory
    itself, even if it is renamed or replaced meanwhile, as a deleted and re-created topic's is)."""

    dir_fd: int
    names: list[str]
    #: fsync the directory before removing anything (what a compaction's swap needs: its rename first durable)
    sync_first: bool = False

    @classmethod
    def open(cls, directory: Path, paths: list[Path], *, sync_first: bool = False) -> DroppedSegments:
        """Hold ``directory`` open for removing ``paths`` (files in it, oldest first) later."""
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC)
        return cls(fd, [p.name for p in paths], sync_first)

    def remove(self) -> int:
        """Remove the files oldest first and close the directory; the number removed. Stops at the first
        that cannot be removed (raising its error), so the files left are always the newest of them: a log
        whose older segments continue without a hole, which opens as it is (the next cleaning pass deletes
        them again). Already gone (a topic deleted meanwhile) counts as removed."""
        try:
            if self.sync_first:
                _fsync_file(self.dir_fd)
            for i, name in enumerate(self.names):
                try:
                    os.unlink(name, dir_fd=self.dir_fd)
                except FileNotFoundError:
                    pass
                except OSError:
                    del self.names[:i]
                    raise
            return len(self.names)
        finally:
            os.close(self.dir_fd)


@dataclass(slots=True)
class Rewrite:
    """A compaction's new segment for the older segments ``bases`` (:meth:`PartitionLog.start_rewrite`).
    :meth:`write` and :meth:`discard` touch no state of the log and may run on any thread."""

    directory: Path
    bases: list[int]
    data: bytes
    sync: bool
    segment: _Segment | None = None  # once written: the new segment, indexed
    end: int = 0  # the offset after its last batch
    problem: str = ""  # why indexing it stopped early

    def write(self) -> None:
        """Write and fsync ``<base>.cleaned`` and index it (step 1 of :mod:`regroup.storage.segment_swap`)."""
        seg = _Segment(self.bases[0], write_cleaned(self.directory, self.bases[0], self.data, sync=self.sync))
        self.end, self.problem = _index(seg, self.data)
        self.segment = seg

    def discard(self) -> None:
        """Remove the ``.cleaned`` file of a rewrite that will not be swapped in."""
        (self.directory / cleaned_name(self.bases[0])).unlink(missing_ok=True)


class OffsetOutOfRange(StorageError):
    """A read below the log start offset or beyond the log end offset."""


class _BatchFormat:
    """Stored record batches as :mod:`regroup.storage.damage` scans them."""

    noun = "batch"

    def check(self, data: bytes, pos: int) -> Unit | str:
        checked = check_batch(data, pos)
        if isinstance(checked, str):
            return checked
        return Unit(pos, pos + checked.size, checked.base_offset, checked.last_offset)

    def next_candidate(self, data: bytes, pos: int) -> int:
        at = data.find(_MARK, pos + LOG_OVERHEAD)
        return at - LOG_OVERHEAD if at >= 0 else -1


BATCHES = _BatchFormat()


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Where appended records landed; ``duplicate``: an idempotent retry, answered with the first write's offsets."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class SegmentSpan:
    """An older segment as the cleaning pass sees it: offsets ``[base, end)``, bytes, newest timestamp."""

    base: int
    end: int
    path: Path
    size: int
    max_timestamp: int
    gap: bool


@dataclass(slots=True)
class _Index:
    """Per-batch columns of one segment, in file order."""

    lasts: array[int] = field(default_factory=lambda: array("q"))
    positions: array[int] = field(default_factory=lambda: array("q"))
    max_ts: array[int] = field(default_factory=lambda: array("q"))
    end: int = 0  # file position after the last indexed batch

    def add(self, h: BatchHeader, pos: int) -> None:
        self.put(h.last_offset, pos, h.max_timestamp, h.size)

    def put(self, last_offset: int, pos: int, max_timestamp: int, size: int) -> None:
        """``add`` of a batch's columns (an append knows them without parsing the header it wrote)."""
        self.lasts.append(last_offset)
        self.positions.append(pos)
        self.max_ts.append(max_timestamp)
        self.end = pos + size


@dataclass(eq=False, slots=True)
class _Segment:
    """A segment file — or a repair's gap marker (no batches). Hashed by identity: the handle cache's key."""

    base: int
    path: Path
    index: _Index = field(default_factory=_Index)
    gap: bool = False
    #: a compaction's new segment between its swap and its settling: read from its ``.swap`` file, kept
    swapping: bool = False
    #: a roll's new segment under its temporary name (``.rolling``) until the roll is settled; a worker thread
    #: may rename it meanwhile, so opening it falls back on the final name
    rolling: bool = False

    def open_read(self) -> int:
        return self._open(os.O_RDONLY | CLOEXEC)

    def open_append(self) -> int:
        return self._open(os.O_RDWR | os.O_APPEND | CLOEXEC)

    def _open(self, flags: int) -> int:
        try:
            return os.open(self.path, flags)
        except FileNotFoundError:
            if not self.rolling:
                raise
            return os.open(self.path.with_name(segment_name(self.base)), flags)  # (renamed: rename is atomic)


@dataclass(eq=False, slots=True)
class _Roll:
    """A roll not yet durable (under ``ALWAYS`` and ``INTERVAL``): the next fsync of the log settles it
    (:func:`_settle_roll`) before the records after it count as on disk. ``old_fd`` is the log's own duplicate of
    the previous segment's append descriptor, kept open until then (so no write-back error goes unseen), or -1
    if that segment was whole on disk at the roll (the new one then has its final name at once)."""

    segment: _Segment
    old_fd: int
    #: an fsync handed out by ``begin_sync`` settles it (unless that fsync fails, which fails the log)
    syncing: bool = False

    def rename(self) -> tuple[Path, Path] | None:
        seg = self.segment
        return (seg.path, seg.path.with_name(segment_name(seg.base))) if seg.rolling else None


def make_files(directory: Path, segment: Path) -> None:
    """Make what a never-written partition's first append would (:meth:`PartitionLog.unmade_files`: its
    directory and first segment), on any thread, without fsyncs; then tell the log
    (:meth:`PartitionLog.files_made`). The parent must exist: for a topic deleted meanwhile this raises
    ``FileNotFoundError`` and leaves nothing behind. What exists already is kept."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory)
    with contextlib.suppress(FileExistsError):
        _create_file(segment)


class PartitionLog:
    """The log of one partition; open it with :meth:`PartitionLog.open`."""

    def __init__(self, directory: Path, segments: list[_Segment], leo: int, producers: ProducerStates,
                 policy: FsyncPolicy, segment_bytes: int, max_batch_bytes: int, fsync_interval_ms: float,
                 clock: Callable[[], float], truncated_bytes: int, handles: HandleCache,
                 exists: bool, txns: PartitionTxns | None = None) -> None:  # fmt: skip
        """Internal: use :meth:`PartitionLog.open`."""
        self._dir = directory
        self._segments = segments
        self._bases = [s.base for s in segments]
        self._leo = leo
        #: the end readers see: under ``ALWAYS`` the end of what is on disk (an append whose fsync is still
        #: under way is not read, listed or counted in the high watermark); otherwise the log end offset
        self._visible = leo
        #: the end of what a finished fsync covered (any policy; what was on disk at open counts)
        self._fsynced = leo
        self._producers = producers
        self._txns = txns if txns is not None else PartitionTxns()
        self._policy = policy
        self._segment_bytes = segment_bytes
        self._max_batch_bytes = max_batch_bytes
        self._interval_s = fsync_interval_ms / 1000.0
        self._clock = clock
        self._last_sync = clock()
        self._dirty = False
        self._syncing = 0  # fsyncs of begin_sync under way on another thread
        self._unsettled: _Roll | None = None  # a roll its fsyncs have not made durable yet (at most one)
        #: a duplicate of the active segment's descriptor the handle cache closed while it had unsynced appends,
        #: kept for the next fsync (which reports any write-back error through it)
        self._detached = -1
        self._failed: BaseException | None = None
        self._closed = False
        self._handles = handles
        self._exists = exists  # the active segment's file (and so the directory) exists
        #: whether the directory existed when the log was opened (if not, the first append's is a new entry of
        #: the parent directory, whoever made it: ``_create`` or ``make_files`` on another thread)
        self._dir_found = True
        #: the directories whose new entries the first append made (``_create``) that no fsync has made durable
        #: yet: fsynced with the partition's next fsync, on whatever thread runs it
        self._created: tuple[Path, ...] = ()
        self.truncated_bytes = truncated_bytes
        self._start = 0  # the log start offset a DeleteRecords set (persisted in ``log-start-offset``)
        #: wall-clock ms since when the active segment is known to hold batches (segment.ms); None: not yet seen
        self.active_since_ms: int | None = None
        #: called after every successful append (the server wakes long-polling fetches with it).
        self.listener: Callable[[], None] | None = None
        #: under ``INTERVAL``: an append does not fsync when the interval has passed; the owner watches
        #: :attr:`sync_due` and fsyncs off its thread (:meth:`begin_sync`)
        self.defer_interval_sync = False
        #: the owner fsyncs this log soon after its appends, off its thread (a group commit): a segment full
        #: before its roll is settled grows rather than settling that roll here (see ``UNSETTLED_ROLL_GROWTH``)
        self.group_commit = False

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
        handles: HandleCache | None = None,
    ) -> PartitionLog:
        """Open the partition log in ``directory`` and recover it; a directory that does not exist is an empty
        log (the first append creates it). Raises :class:`CorruptLogError` for damage recovery must not cut
        away (nothing is changed then). Holds no file open when it returns."""
        if segment_bytes <= 0 or max_batch_bytes <= 0:
            raise ValueError("segment_bytes and max_batch_bytes must be positive")
        directory = Path(directory)
        # (a partition never written has no directory: nothing to recover, list or read there, one stat rather than
        # five failed calls; a Produce to a thousand new partitions opens them all on the event loop)
        found = os.path.lexists(directory)
        files: list[tuple[int, bool]] = []
        if found:
            for done in recover(directory, sync=fsync is not FsyncPolicy.NEVER):
                log.warning("%s: %s", directory, done)
            settled = _recover_roll(directory, sync=fsync is not FsyncPolicy.NEVER)
            if settled:
                log.warning("%s: %s", directory, settled)
            listing = list_dir(directory, expected_name)
            problem = listing.problem(directory, "a partition directory")
            if problem:
                raise CorruptLogError(problem)
            files = listing.files()
        segments = [_Segment(b, directory / (gap_name(b) if g else segment_name(b)), gap=g) for b, g in files]
        exists = bool(segments)
        if not exists:
            segments = [_Segment(0, directory / segment_name(0))]
        txns = PartitionTxns()
        for i, seg in enumerate(segments[:-1]):
            if not seg.gap:
                _check_older(seg, segments[i + 1].base, txns)
        producers = ProducerStates()
        leo, cut = segments[-1].base, 0
        if exists:
            leo, cut = _recover(segments[-1], producers, fsync is not FsyncPolicy.NEVER, txns)
        try:
            start = read_log_start(directory) if found else 0
        except ValueError as exc:
            raise CorruptLogError(str(exc)) from None
        plog = cls(directory, segments, leo, producers, fsync, segment_bytes, max_batch_bytes,
                   fsync_interval_ms, clock, cut, HandleCache(PRIVATE_HANDLES) if handles is None else handles,
                   exists, txns)  # fmt: skip
        plog._start = min(start, leo)
        plog._dir_found = found
        return plog

    # ------------------------------------------------------------------ state

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def log_start_offset(self) -> int:
        """The first offset of the log: the first segment's base, or above it after a DeleteRecords."""
        return max(self._start, self._segments[0].base)

    @property
    def log_end_offset(self) -> int:
        """The high watermark (single node): the offset the next record gets, except under ``ALWAYS`` while
        appends wait for their fsync (:meth:`begin_sync`): then the end of the records already on disk."""
        return self._visible

    @property
    def written_end(self) -> int:
        """The offset the next record gets (past :attr:`log_end_offset` while appends wait for their fsync)."""
        return self._leo

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return self._policy

    @property
    def failed(self) -> bool:
        """An I/O error happened: appends are refused until the log is reopened."""
        return self._failed is not None

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end offset (read_committed reads
        below it) — never below the log start offset (retention or DeleteRecords may have removed the start of
        an open transaction; Kafka then moves its first unstable offset up likewise)."""
        return max(min(self._txns.last_stable_offset(self._leo), self._visible), self.log_start_offset)

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of aborted transactions with data in ``[start, upper)``."""
        return self._txns.aborted_between(start, upper)

    def open_transactions(self) -> dict[int, OpenTxn]:
        """Producer id → its transaction open in this partition (first offset, epoch)."""
        return self._txns.open_transactions()

    @property
    def producers(self) -> ProducerStates:
        """Idempotent-producer state (rebuilt from the active segment on open)."""
        return self._producers

    @property
    def segment_count(self) -> int:
        """Segment files (gap markers not counted)."""
        return sum(not s.gap for s in self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ writing

    def append(self, records: bytes, *, sync: bool = True) -> AppendInfo:
        """Validate ``records`` (one or more v2 batches), assign offsets from the log end, write them with one
        ``write``. Raises :class:`AppendRejected` (nothing written) for corrupt or invalid batches, oversize
        batches, and idempotence violations; a lone batch that repeats one of the producer's last five is not
        written again and comes back with its original offsets and ``duplicate=True``.

        ``sync=False`` skips the fsync (acks=0, or an owner that fsyncs several partitions together with
        :meth:`begin_sync`); otherwise ``ALWAYS`` fsyncs before returning. Under ``ALWAYS`` the records are read
        (and counted in :attr:`log_end_offset`) only once fsynced.
        """
        self._check_writable()
        found = split_batches(records, self._max_batch_bytes)
        staged, duplicate = self._producers.plan([h for _, h in found], self._leo)
        if duplicate is not None:
            return AppendInfo(duplicate[0], duplicate[1], self.log_start_offset, duplicate=True)
        opened = self._txns.plan(found, self._leo)
        info = self._write(records, found, sync)
        self._producers.commit(staged)
        self._txns.commit(opened)
        self._notify()
        return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        timestamp_ms: int,
        *,
        sync: bool = True,
    ) -> AppendInfo:
        """Append a COMMIT or ABORT marker of ``producer_id`` (:mod:`regroup.storage.markers`), closing its open
        transaction here, and fsync it (any policy but ``NEVER``: the coordinator completes the transaction
        only once its markers are durable) — or, with ``sync`` False, leave the fsync to the caller, who waits
        for ``fsynced`` (the server's group commit does it on a worker thread). A marker with an epoch older than
        the producer's last here is refused (:class:`AppendRejected`, INVALID_PRODUCER_EPOCH). A marker with no
        transaction open is written all the same (a retry after a restart; Kafka tolerates them)."""
        self._check_writable()
        known = [e for e in (self._producers.epoch_of(producer_id),) if e is not None]
        txn = self._txns.open_transactions().get(producer_id)
        if txn is not None:
            known.append(txn.producer_epoch)
        if known and producer_epoch < max(known):
            raise AppendRejected(
                Reject.INVALID_PRODUCER_EPOCH, f"marker epoch {producer_epoch} < {max(known)} of producer {producer_id}"
            )
        data = marker_batch(producer_id, producer_epoch, committed, coordinator_epoch, timestamp_ms)
        info = self._write(data, [(0, parse_header(data))], sync=sync, force_sync=sync)
        self._producers.mark(producer_id, producer_epoch)
        self._txns.complete(producer_id, committed, info.base_offset)
        self._notify()
        return info

    def _write(
        self, records: bytes, found: list[tuple[int, BatchHeader]], sync: bool, force_sync: bool = False
    ) -> AppendInfo:
        """Assign offsets to the checked batches ``found`` in ``records`` and write them (one ``write``)."""
        data = bytearray(records)
        offset = self._leo
        bases: list[int] = []
        for pos, h in found:
            struct.pack_into(">q", data, pos, offset)
            struct.pack_into(">i", data, pos + LOG_OVERHEAD, -1)
            bases.append(offset)
            offset += h.record_count
        idx = self._segments[-1].index
        if idx.end > 0 and idx.end + len(data) > self._segment_bytes:
            roll = self._unsettled
            if roll is None:
                self._roll()
            elif not (self.group_commit or roll.syncing) or (
                idx.end + len(data) > self._segment_bytes * UNSETTLED_ROLL_GROWTH
            ):  # nobody settles that roll soon, or the disk is far behind: it is settled here
                self._settle_here(roll)
                self._roll()
            # else full before the last roll's fsync: the segment grows, the roll after that fsync
            idx = self._segments[-1].index
        if not self._exists:
            self._create()
        fd = self._active_fd()
        start = idx.end
        write_all_or_take_back(fd, data, start, self._mark_failed)
        # (each header as written: the base offset assigned above, the rest as checked)
        for (pos, h), base in zip(found, bases, strict=True):
            idx.put(base + h.last_offset_delta, start + pos, h.max_timestamp, h.size)
        first, self._leo = self._leo, offset
        self._dirty = True
        if self._policy is not FsyncPolicy.ALWAYS:
            self._visible = offset
        if (
            (sync and self._policy is FsyncPolicy.ALWAYS)
            or (force_sync and self._policy is not FsyncPolicy.NEVER)
            or (not self.defer_interval_sync and self.sync_due)
        ):
            self._sync(fd)
        return AppendInfo(first, offset - 1, self.log_start_offset)

    def _notify(self) -> None:
        if self.listener is not None:
            self.listener()

    @property
    def sync_due(self) -> bool:
        """Under ``INTERVAL``: no fsync is under way, and appends wait for one and the interval has passed, or a
        roll waits for one (settled at once, so that the segment is rarely full again before)."""
        return (
            self._policy is FsyncPolicy.INTERVAL
            and not self._syncing
            and (
                (self._dirty and self._clock() - self._last_sync >= self._interval_s)
                or (self._unsettled is not None and self._unsettled.old_fd >= 0)
            )
        )

    @property
    def roll_unsettled(self) -> bool:
        """The last roll is not durable yet (the log's next fsync settles it)."""
        return self._unsettled is not None

    @property
    def roll_waits(self) -> bool:
        """A roll is not durable yet and no fsync under way settles it: the next fsync should run soon (until
        it has, the segment the roll started grows past its size instead of rolling again)."""
        return self._unsettled is not None and not self._unsettled.syncing

    def sync(self) -> None:
        """fsync what was appended since the last fsync (any policy)."""
        self._check_writable()
        if self._dirty or self._unsettled is not None or self._created:
            self._sync()

    def begin_sync(self) -> PendingSync | None:
        """Hand the fsync of what was appended since the last one to another thread: run the returned
        :class:`PendingSync`, then give it to :meth:`finish_sync` on this log's own thread. ``None`` when there
        is nothing to fsync (or the log is closed or failed); appends made meanwhile wait for the next one.
        A roll not yet settled is settled by it too (:class:`PendingSync`)."""
        if (
            self._closed
            or self._failed is not None
            or not (self._dirty or self._unsettled is not None or self._created)
        ):
            return None
        kept = self._detached >= 0  # (the active segment's: fsyncing it covers the descriptor reopened since)
        fd = self._detached if kept else os.dup(self._active_fd())
        roll = self._unsettled
        if roll is None:
            pending = PendingSync(fd, self._leo, created=self._created)
        else:
            try:
                old = os.dup(roll.old_fd) if roll.old_fd >= 0 else -1
            except BaseException:
                if not kept:
                    os.close(fd)
                raise
            pending = PendingSync(fd, self._leo, roll, old, roll.rename(), self._dir, self._created)
            roll.syncing = True
        self._detached = -1
        self._dirty = False
        self._syncing += 1
        return pending

    def finish_sync(self, pending: PendingSync, error: BaseException | None) -> None:
        """The fsync of :meth:`begin_sync` ended: its records are durable and readable, or (``error``) the disk
        state is unknown and the log refuses appends until it is reopened."""
        self._syncing = max(0, self._syncing - 1)
        if error is not None:
            if self._failed is None:
                self._failed = error
            return
        self._last_sync = self._clock()
        if pending.created and pending.created is self._created:
            self._created = ()
        if self._unsettled is not None and pending.roll is self._unsettled:
            self._end_roll(self._unsettled)
        self._fsynced = max(self._fsynced, pending.target)
        if pending.target > self._visible and not self._closed:
            self._visible = pending.target
            self._notify()

    def durable(self, offset: int) -> bool:
        """Every record below ``offset`` is on disk (or the policy does not promise it)."""
        return self._policy is not FsyncPolicy.ALWAYS or self._visible >= offset

    def fsynced(self, offset: int) -> bool:
        """Every record below ``offset`` was covered by a finished fsync, whatever the policy but ``NEVER`` (under
        which nothing is fsynced, and this is always true): what a transaction marker waits for under
        ``INTERVAL`` too."""
        return self._policy is FsyncPolicy.NEVER or self._fsynced >= offset

    # ------------------------------------------------------------------ reading

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one: bool = True,
        max_offset: int | None = None,
        through_offset: int | None = None,
    ) -> bytes:
        """Whole batches from the one containing ``offset``, at most ``max_bytes`` of them — but with
        ``min_one`` the first batch even if it is bigger (Kafka's rule, so a consumer always progresses).
        ``b""`` at the log end; :class:`OffsetOutOfRange` outside ``[log_start_offset, log_end_offset]``.
        Reads stay within one segment, like Kafka's. Batches read from an older segment are CRC-checked
        (:class:`CorruptLogError` if one does not match). ``max_offset``: no batch at or past it (a
        read_committed fetch passes the last stable offset, a batch boundary). ``through_offset``: no batch after
        the one holding it (a share fetch reads what the records it may acquire need, not ``max_bytes``)."""
        self._check_open()
        if self._visible < self._leo:  # under ALWAYS, records whose fsync is under way are not read yet
            max_offset = self._visible if max_offset is None else min(max_offset, self._visible)
        if not self.log_start_offset <= offset <= self._leo:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, {self._leo}]")
        si = bisect.bisect_right(self._bases, offset) - 1
        for seg in self._segments[si:]:
            idx = seg.index
            i = bisect.bisect_left(idx.lasts, offset)
            if i == len(idx.lasts):
                continue  # a gap marker (offsets lost to a repair): go on to the next segment
            start = end = idx.positions[i]
            for j in range(i, len(idx.lasts)):
                if max_offset is not None and idx.lasts[j] >= max_offset:
                    break
                nxt = idx.positions[j + 1] if j + 1 < len(idx.lasts) else idx.end
                if nxt - start > max_bytes and not (min_one and j == i):
                    break
                end = nxt
                if through_offset is not None and idx.lasts[j] >= through_offset:
                    break
            if end == start:
                return b""
            data = self._pread(seg, start, end - start)
            if seg is not self._segments[-1]:
                _verify(seg, data, start)
            return data
        return b""

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record whose timestamp is ≥ ``target``, or ``None``."""
        self._check_open()
        start = self.log_start_offset
        for seg in self._segments:
            idx = seg.index
            for i, ts in enumerate(idx.max_ts):
                if ts >= target and idx.lasts[i] >= start:
                    h, times = self._batch_times(seg, idx.positions[i])
                    found = next(((t, o) for o, t in times if t >= target and o >= start), None)
                    if found is not None:
                        return found
                    if not times and h.record_count:  # records not decodable here: the batch's own fields
                        return h.max_timestamp, max(h.base_offset, start)
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the (first) record with the largest timestamp, or ``None`` if empty."""
        self._check_open()
        best: tuple[int, _Segment, int] | None = None
        start = self.log_start_offset
        for seg in self._segments:
            idx = seg.index
            for i, ts in enumerate(idx.max_ts):
                if idx.lasts[i] >= start and (best is None or ts > best[0]):
                    best = (ts, seg, idx.positions[i])
        if best is None:
            return None
        h, times = self._batch_times(best[1], best[2])
        return next(((t, o) for o, t in times if t == h.max_timestamp), (h.max_timestamp, h.base_offset))

    def _batch_times(self, seg: _Segment, pos: int) -> tuple[BatchHeader, list[tuple[int, int]]]:
        head = parse_header(self._pread(seg, pos, HEADER.size))
        return head, record_times(head, self._pread(seg, pos + HEADER.size, head.size - HEADER.size))

    # ------------------------------------------------------------------ closing

    def close(self, *, discard: bool = False) -> None:
        """fsync pending appends (unless ``NEVER``; also those of an fsync still under way on another thread)
        and give back its file handles. Idempotent. ``discard``: its files are being deleted, nothing is
        fsynced (a crash before the deletion is durable finds them as any crash would: what was fsynced, a
        torn tail or an unsettled roll recovered on open)."""
        if self._closed:
            return
        self._closed = True
        try:
            unsynced = self._dirty or self._syncing > 0 or self._unsettled is not None or bool(self._created)
            if (
                unsynced
                and not discard
                and self._exists
                and self._failed is None
                and self._policy is not FsyncPolicy.NEVER
            ):
                self._sync()
        finally:
            if self._unsettled is not None and self._unsettled.old_fd >= 0:
                os.close(self._unsettled.old_fd)
            self._unsettled = None
            self._close_detached()
            for seg in self._segments:
                self._handles.forget(seg)

    def __repr__(self) -> str:
        return f"PartitionLog({str(self._dir)!r}, offsets [{self.log_start_offset}, {self._leo}))"

    # ------------------------------------------------------------------ maintenance (DeleteRecords, cleaning)

    def configure(self, *, max_batch_bytes: int | None = None, segment_bytes: int | None = None) -> None:
        """Apply a topic's max.message.bytes and segment.bytes from now on."""
        if max_batch_bytes is not None:
            self._max_batch_bytes = max(0, max_batch_bytes)
        if segment_bytes is not None:
            self._segment_bytes = max(1, segment_bytes)

    @property
    def active_segment_bytes(self) -> int:
        return self._segments[-1].index.end

    @property
    def size_bytes(self) -> int:
        """Bytes of all segment files."""
        return sum(seg.index.end for seg in self._segments)

    def advance_log_start(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (DeleteRecords; never down), durably, then delete the
        older segments wholly below it. Returns the log start offset. ``offset`` must not pass the log end."""
        start, dropped = self.move_log_start(offset)
        for path in dropped:
            path.unlink(missing_ok=True)
        return start

    def move_log_start(self, offset: int) -> tuple[int, list[Path]]:
        """:meth:`advance_log_start` leaving the files to the caller: the log start offset is durable and no
        read goes below it when this returns, and the older segments wholly below it are out of the log.
        Returns the log start offset and their files, oldest first, to remove in that order
        (:class:`DroppedSegments`). Until they are removed they are older segments below the log start offset
        ``log-start-offset`` holds, which a reopened log finds again and the next call drops."""
        target = self.plan_log_start(offset)
        if target is not None:
            write_log_start(self._dir, target, sync=self.syncs_log_start)
        return self.log_start_written(offset)

    def plan_log_start(self, offset: int) -> int | None:
        """The first step of :meth:`move_log_start` done in three (the write on another thread): ``offset`` if
        ``log-start-offset`` must be written (:func:`write_log_start_up` with :attr:`syncs_log_start`), None if
        the log start is there already. Raises :class:`OffsetOutOfRange` past the log end, and what a write
        raises on a closed or failed log."""
        self._check_writable()
        if not 0 <= offset <= self._leo:
            raise OffsetOutOfRange(f"offset {offset} is outside [0, {self._leo}]")
        return offset if offset > self.log_start_offset else None

    @property
    def syncs_log_start(self) -> bool:
        return self._policy is not FsyncPolicy.NEVER

    def log_start_written(self, offset: int) -> tuple[int, list[Path]]:
        """The last step: ``log-start-offset`` holds ``offset`` or more, durably. No read goes below it from now
        on and the older segments wholly below it are out of the log: (the log start offset, their files)."""
        self._check_writable()
        if offset > self._start:
            self._start = offset
        return self.log_start_offset, self.drop_below_start()

    def drop_below_start(self) -> list[Path]:
        """Take the older segments wholly below the log start offset out of the log (:meth:`drop_oldest_segment`,
        stopping at a segment still being swapped in); their files, oldest first."""
        dropped = []
        while self.can_drop_oldest and self._segments[1].base <= self._start:
            dropped.append(self.drop_oldest_segment())
        return dropped

    def older_segments(self) -> list[SegmentSpan]:
        """Every segment but the active one, oldest first."""
        spans = []
        for i, seg in enumerate(self._segments[:-1]):
            idx = seg.index
            newest = max(idx.max_ts, default=-1)
            spans.append(SegmentSpan(seg.base, self._segments[i + 1].base, seg.path, idx.end, newest, seg.gap))
        return spans

    @property
    def can_drop_oldest(self) -> bool:
        """There is an older segment, and it is neither a compaction's new segment still being swapped in nor
        the segment before a roll not yet settled (recovery checks the roll against it)."""
        return (
            len(self._segments) > 1
            and not self._segments[0].swapping
            and not (self._unsettled is not None and len(self._segments) == 2)
        )

    def delete_oldest_segment(self) -> None:
        """Delete the oldest segment (or gap marker); never the active one. The log start offset moves to the
        next file's base. Oldest first, so a crash part-way leaves the newer segments complete."""
        self.drop_oldest_segment().unlink(missing_ok=True)

    def drop_oldest_segment(self) -> Path:
        """Take the oldest segment (or gap marker) out of the log, never the active one nor one still being
        swapped in (:attr:`can_drop_oldest`): from now on no read sees it and the log start offset is the next
        file's base. Its handle is closed; its file is left for the caller to remove (the path returned), after
        those dropped before it — until it is removed, the file is an older segment that a reopened log finds
        again, whole, below the rest."""
        self._check_writable()
        if len(self._segments) < 2:
            raise ValueError("the active segment is never deleted")
        if self._segments[0].swapping:
            raise ValueError(f"{self._segments[0].path}: a compaction is still swapping this segment in")
        if not self.can_drop_oldest:
            raise ValueError(f"{self._segments[0].path}: the roll after this segment is not durable yet")
        seg = self._segments.pop(0)
        self._bases.pop(0)
        self._handles.forget(seg)
        return seg.path

    def replace_segments(self, first: int, count: int, data: bytes) -> None:
        """Replace ``count`` older segments from index ``first`` by one segment of ``data`` — batches covering
        exactly their offsets — all at once: :meth:`start_rewrite`'s steps in a row."""
        rewrite = self.start_rewrite(self._bases[first : first + count], data)
        rewrite.write()
        try:
            replaced = self.swap_rewrite(first, rewrite)
        except BaseException:
            rewrite.discard()
            raise
        replaced.remove()
        self.settle_rewrite(rewrite)

    def start_rewrite(self, bases: list[int], data: bytes) -> Rewrite:
        """A compaction's new segment of ``data`` (batches covering exactly the offsets of the older segments
        ``bases``, consecutive, oldest first) to swap in crash-safely (:mod:`regroup.storage.segment_swap`):

        1. :meth:`Rewrite.write` (any thread) writes, fsyncs and indexes it;
        2. :meth:`swap_rewrite` (the owner's thread) renames it to ``.swap`` and puts it in the log in place
           of those segments, unless they are no longer all there (then :meth:`Rewrite.discard` it);
        3. the :class:`DroppedSegments` it returns (any thread) fsync the directory — the commit point — and
           remove the segments replaced (the first one too, unless the log does not fsync);
        4. :meth:`settle_rewrite` (the owner's thread) renames the ``.swap`` over the first one.

        The log never holds a segment whose file is gone, and a crash after any step reopens as the old
        segments or the new one."""
        if not bases:
            raise ValueError("nothing to rewrite")
        return Rewrite(self._dir, list(bases), data, self._policy is not FsyncPolicy.NEVER)

    def swap_rewrite(self, first: int, rewrite: Rewrite) -> DroppedSegments:
        """Step 2 of :meth:`start_rewrite`: the segments from index ``first`` must be ``rewrite.bases``; the
        new segment replaces them in the log (read from its ``.swap`` file, kept from retention, DeleteRecords
        and compaction until :meth:`settle_rewrite`). Returns the files to remove (step 3)."""
        self._check_writable()
        seg = rewrite.segment
        count = len(rewrite.bases)
        run = self._segments[first : first + count]
        if seg is None:
            raise ValueError("the rewrite was not written")
        if (
            not run
            or first + count >= len(self._segments)
            or self._bases[first : first + count] != rewrite.bases
            or any(s.gap or s.swapping for s in run)
        ):
            raise ValueError("only a run of older segments (no gap markers) can be replaced")
        if rewrite.problem or rewrite.end != self._segments[first + count].base:
            raise CorruptLogError(
                f"{seg.path}: the rewritten segment does not cover its offsets: {rewrite.problem or rewrite.end}"
            )
        # once the directory's fsync has made the .swap durable, the first segment's file goes too, so that the
        # rename of step 4 frees no blocks on the owner's thread; without fsyncs it stays, until that rename
        gone = run if rewrite.sync else run[1:]
        replaced = DroppedSegments.open(self._dir, [s.path for s in gone], sync_first=rewrite.sync)
        try:
            seg.path = commit_swap(self._dir, seg.base)
        except BaseException:
            os.close(replaced.dir_fd)
            raise
        seg.swapping = True
        for old in run:
            self._handles.forget(old)
        self._segments[first : first + count] = [seg]
        self._bases[first : first + count] = [seg.base]
        return replaced

    def settle_rewrite(self, rewrite: Rewrite) -> None:
        """Step 4 of :meth:`start_rewrite`, once step 3 is done: the new segment gets its final name (kept
        open meanwhile, a read is not disturbed). A closed log leaves the ``.swap`` file, finished on open."""
        seg = rewrite.segment
        if self._closed or seg is None or not seg.swapping:
            return
        seg.path = settle_swap(self._dir, seg.base)
        seg.swapping = False

    def roll_active(self) -> bool:
        """Start a new active segment if the current one holds anything (segment.ms); ``True`` if it did (not
        while the last roll is not settled: the next fsync settles it, the next call rolls)."""
        self._check_writable()
        if self._segments[-1].index.end == 0 or self._unsettled is not None:
            return False
        self._roll()
        self.active_since_ms = None
        return True

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"{self._dir}: the partition log is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._failed is not None:
            raise StorageError(f"{self._dir}: an I/O error happened; reopen the log: {self._failed!r}")

    def _active_fd(self) -> int:
        seg = self._segments[-1]
        return self._handles.get(seg, seg.open_append, self._settle)

    def _settle(self, fd: int) -> None:
        """The handle cache is about to close the active segment's descriptor while it has unsynced appends:
        keep a duplicate for the next fsync (which then reports a write-back error through it) instead of
        fsyncing here. Only while the cache gives descriptors back (``HandleCache.releasing``), or if no
        descriptor is left for a duplicate, is everything fsynced here, as :meth:`sync` does (an error fails the
        log)."""
        if not self._dirty or self._failed is not None or self._policy is FsyncPolicy.NEVER or self._detached >= 0:
            return
        if not self._handles.releasing:  # (when it is, a duplicate would give no descriptor back)
            try:
                self._detached = os.dup(fd)
                return
            except OSError as exc:
                log.warning("%s: no descriptor to keep the active segment open (%s): fsyncing it now", self._dir, exc)
        try:
            self._sync(fd)
        except OSError as exc:
            log.error("%s: fsync before closing the active segment failed: %s", self._dir, exc)

    def _close_detached(self) -> None:
        if self._detached >= 0:
            fd, self._detached = self._detached, -1
            os.close(fd)

    def _fd_for(self, seg: _Segment) -> int:
        if seg is self._segments[-1]:
            return self._active_fd()
        return self._handles.get(seg, seg.open_read)

    def _mark_failed(self, exc: BaseException) -> None:
        self._failed = exc

    def _sync(self, fd: int | None = None) -> None:
        """fsync everything appended, here: a roll not yet settled first, then the active segment (``fd``, or
        the duplicate kept when the handle cache closed it, which covers the descriptor reopened since: it was
        opened before; without either, the cache's descriptor)."""
        roll = self._unsettled
        if self._detached >= 0:
            fd = self._detached
        elif fd is None:
            fd = self._active_fd()
        created = self._created
        try:
            for directory in created:
                _fsync_dir(directory)
            if roll is not None:
                _settle_roll(roll.old_fd, roll.rename(), self._dir)
            _fsync_file(fd)
        except BaseException as exc:
            self._failed = exc  # the kernel may have dropped the dirty pages: the disk state is unknown
            raise
        if created is self._created:
            self._created = ()
        if roll is not None:
            self._end_roll(roll)
        self._close_detached()
        self._dirty = False
        self._last_sync = self._clock()
        self._visible = self._fsynced = self._leo

    def _settle_here(self, roll: _Roll) -> None:
        """Settle the roll on this thread (the segment it started is full already): the old segment's fsync,
        the rename, the directory's fsync — what a roll cost before it was left to the next fsync. The appends
        since stay unsynced (the next roll starts as ``.rolling``)."""
        try:
            _settle_roll(roll.old_fd, roll.rename(), self._dir)
        except BaseException as exc:
            self._failed = exc
            raise
        self._end_roll(roll)

    def _end_roll(self, roll: _Roll) -> None:
        """The roll is durable: the new segment has its final name, the previous one's descriptor goes."""
        self._unsettled = None
        if roll.old_fd >= 0:
            os.close(roll.old_fd)
        if roll.segment.rolling:
            roll.segment.path = roll.segment.path.with_name(segment_name(roll.segment.base))
            roll.segment.rolling = False

    def _create(self) -> None:
        """The first append: create the partition directory and the first segment. Their names are made durable
        by the partition's next fsync (``_created``: the parent's fsync for a new directory, the directory's for
        the segment), before the append is, on whatever thread runs it: a produce to a thousand new partitions
        used to fsync two thousand directories on the event loop (under ``NEVER`` nothing is fsynced)."""
        self._dir.mkdir(parents=True, exist_ok=True)
        path = self._segments[-1].path
        with contextlib.suppress(FileExistsError):
            _create_file(path)
        self.files_made()

    def unmade_files(self) -> tuple[Path, Path] | None:
        """The directory and first segment the first append would create (:func:`make_files` makes them on
        any thread), or None: they exist (or the log is closed)."""
        if self._exists or self._closed:
            return None
        return self._dir, self._segments[-1].path

    def files_made(self) -> None:
        """The files of :meth:`unmade_files` exist (made by :func:`make_files`, maybe on another thread): the
        first append writes to them, and the partition's next fsync makes their names durable."""
        if self._exists or self._closed:
            return
        if self._policy is not FsyncPolicy.NEVER:
            self._created = (self._dir.parent, self._dir) if not self._dir_found else (self._dir,)
        self._exists = True

    def _roll(self) -> None:
        """Start the next segment at the log end, with no fsync here: under ``ALWAYS`` and ``INTERVAL`` the
        roll is settled by the log's next fsync (:func:`_settle_roll`, on whatever thread runs it). An older
        segment must be whole on disk before a segment after it does (recovery refuses an older segment that
        ends short): if the previous segment may not be (unsynced appends, or an fsync under way), the new one
        is created as ``<base>.rolling`` and gets its final name only after that segment's fsync; a crash
        before leaves the temporary name, which :func:`_recover_roll` settles."""
        active = self._segments[-1]
        sync = self._policy is not FsyncPolicy.NEVER
        whole = not (self._dirty or self._visible < self._leo or self._syncing > 0)
        old_fd = -1
        try:
            if sync and not whole:
                if self._detached >= 0:  # (the previous segment's: it was the active one)
                    old_fd, self._detached = self._detached, -1
                else:
                    old_fd = os.dup(self._active_fd())
            seg = _Segment(self._leo, self._dir / segment_name(self._leo))
            if old_fd >= 0:
                seg.path, seg.rolling = self._dir / rolling_name(self._leo), True
            _create_file(seg.path)
        except BaseException as exc:
            if old_fd >= 0:
                os.close(old_fd)
            self._failed = exc
            raise
        self._handles.forget(active)
        self._segments.append(seg)
        self._bases.append(seg.base)
        if sync:
            self._unsettled = _Roll(seg, old_fd)

    def _pread(self, seg: _Segment, pos: int, size: int) -> bytes:
        return _pread_all(self._fd_for(seg), pos, size)


@dataclass(frozen=True, slots=True)
class LeftRoll:
    """A roll a crash interrupted (:meth:`PartitionLog._roll`): the file ``<base>.rolling`` (``path``) and what
    opening the log does about it (``action``, ``reason``, from :func:`find_left_roll`):

    - ``"rename"``: the segment before it is whole and ends exactly at ``base``; it is fsynced and the file
      renamed to ``<base>.log`` (:func:`settle_left_roll`);
    - ``"remove"``: the segment before it ends short (a torn tail or a short file, which only a power loss
      leaves: its fsync had not completed, so nothing in the new file was acknowledged under ``ALWAYS``, and
      under ``INTERVAL`` it is younger than that lost tail); the file is removed and that segment is recovered
      as the active one (:func:`settle_left_roll`);
    - ``"damaged"``: the segment before it is damaged, with intact data after the damage: open refuses;
    - ``"refuse"``: anything else (no segment before it, a gap marker, more than one such file, the segment
      before it running past ``base``): open refuses."""

    path: Path
    base: int
    action: str
    reason: str


def find_left_roll(directory: Path) -> LeftRoll | None:
    """The ``.rolling`` file a crash left in a partition directory, and what to do about it; ``None`` if there
    is none. Reads only."""
    try:
        names = sorted(n for n in os.listdir(directory) if ROLLING_RE.match(n))
    except FileNotFoundError:
        return None
    if not names:
        return None
    listing = list_dir(directory, lambda name: expected_name(name) or bool(ROLLING_RE.match(name)))
    files = listing.files()
    base = int(names[0].split(".", 1)[0])
    rolling = directory / names[0]
    if len(names) > 1 or not files or files[-1][0] >= base or files[-1][1]:
        reason = (
            f"a new segment not yet settled must be the only one and follow a segment; found "
            f"{', '.join(names)} after {', '.join(segment_name(b) for b, _ in files[-2:]) or 'nothing'}"
        )
        return LeftRoll(rolling, base, "refuse", reason)
    previous = _Segment(files[-1][0], directory / segment_name(files[-1][0]))
    data = read_file(previous.path)
    expected, problem = _index(previous, data)
    if not problem and expected == base:
        return LeftRoll(rolling, base, "rename", f"the segment before it ({previous.path.name}) is whole")
    where = f"{previous.path.name} ends at offset {expected}, short of {base}"
    if expected > base:
        reason = f"the segment before it ({previous.path.name}) runs past offset {base} (to offset {expected})"
        return LeftRoll(rolling, base, "refuse", reason)
    if problem and find_intact(data, previous.index.end, expected, BATCHES):
        reason = (
            f"the segment before it is damaged: {previous.path.name}: {problem} at byte {previous.index.end} "
            f"(offset {expected}), with intact data after it: damage, not a torn tail"
        )
        return LeftRoll(rolling, base, "damaged", reason)
    reason = f"{where}: its tail was lost before it was on disk, so nothing after it was"
    return LeftRoll(rolling, base, "remove", reason)


def settle_left_roll(roll: LeftRoll, *, sync: bool) -> str:
    """Do what :func:`find_left_roll` decided (``"rename"`` or ``"remove"``); what was done."""
    directory = roll.path.parent
    if roll.action == "rename":
        if sync:
            previous = _segment_before(directory, roll.base)
            fd = os.open(previous, os.O_RDONLY | CLOEXEC)
            try:
                _fsync_file(fd)
            finally:
                os.close(fd)
        rename_once(roll.path, directory / segment_name(roll.base))
        if sync:
            _fsync_dir(directory)
        return f"{roll.path.name}: {roll.reason}; renamed to {segment_name(roll.base)}"
    if roll.action == "remove":
        roll.path.unlink()
        if sync:
            _fsync_dir(directory)
        return f"{roll.path.name}: removed: {roll.reason}"
    raise ValueError(f"{roll.path}: {roll.action} is not settled automatically")


def _segment_before(directory: Path, base: int) -> Path:
    bases = [b for b, gap in list_dir(directory, lambda name: True).files() if not gap and b < base]
    return directory / segment_name(max(bases))


def _recover_roll(directory: Path, *, sync: bool) -> str:
    """Settle a roll a crash interrupted, as :func:`find_left_roll` decides; refuse (:class:`CorruptLogError`,
    changing nothing) where it does not. What was done, or ``""``."""
    roll = find_left_roll(directory)
    if roll is None:
        return ""
    if roll.action in ("refuse", "damaged"):
        raise CorruptLogError(f"{roll.path}: {roll.reason}. Nothing was changed")
    return settle_left_roll(roll, sync=sync)


def _verify(seg: _Segment, data: bytes, start: int) -> None:
    """CRC-check the whole batches of ``data``, read from ``seg`` at byte ``start``."""
    pos = 0
    while pos < len(data):
        checked = check_batch(data, pos)
        if isinstance(checked, str):
            raise CorruptLogError(
                f"{seg.path}: {checked} at byte {start + pos}: damage in an older segment, found on a read "
                "(`regroup repair` reports and repairs it while the server is stopped)"
            )
        pos += checked.size


def _index(
    seg: _Segment, data: bytes, producers: ProducerStates | None = None, txns: PartitionTxns | None = None
) -> tuple[int, str]:
    """Index the segment's batches from byte 0 while each is sound (length, magic, CRC-32C) and continues
    the offsets from its base: ``(offset after the last good batch, why the scan stopped or "")``.
    ``producers`` collects idempotent-producer state on the way, ``txns`` the transactions."""
    idx = seg.index
    expected = seg.base
    while idx.end < len(data):
        checked = check_batch(data, idx.end)
        if isinstance(checked, str):
            return expected, checked
        if checked.base_offset != expected:
            return expected, f"batch has offset {checked.base_offset}, expected {expected}"
        if producers is not None:
            producers.observe(checked)
        if txns is not None:
            txns.observe(data, idx.end, checked)
        idx.add(checked, idx.end)
        expected = checked.last_offset + 1
    return expected, ""


def _check_older(seg: _Segment, next_base: int, txns: PartitionTxns | None = None) -> None:
    """Verify and index an older segment; refuse (:class:`CorruptLogError`) unless every batch is sound,
    the offsets continue from its base and it ends exactly where the next file begins."""
    data = read_file(seg.path)
    expected, problem = _index(seg, data, txns=txns)
    pos = seg.index.end
    if problem:
        intact = find_intact(data, pos, expected, BATCHES)
        after = describe_intact(intact, "batch") if intact else "nothing intact follows"
        raise CorruptLogError(
            f"{seg.path}: {problem} at byte {pos} (offset {expected}) of an older segment; {after}; the next file "
            f"starts at offset {next_base}. An older segment was complete when the log rolled past it: this is "
            "damage, not a torn tail. Nothing was changed"
        )
    if expected < next_base:
        raise CorruptLogError(
            f"{seg.path}: the segment ends at offset {expected} (byte {pos}) but the next file starts at offset "
            f"{next_base}: offsets {expected}..{next_base - 1} are missing. Nothing was changed"
        )
    if expected > next_base:
        raise CorruptLogError(
            f"{seg.path}: the segment runs to offset {expected - 1}, past the start of the next file (offset "
            f"{next_base}): the segments overlap. Nothing was changed"
        )


def _recover(
    seg: _Segment, producers: ProducerStates, sync: bool, txns: PartitionTxns | None = None
) -> tuple[int, int]:
    """Verify and index the active segment, rebuild producer state, cut a torn tail: ``(log end offset, bytes
    cut)``. Damage followed by intact batches raises :class:`CorruptLogError` and changes nothing."""
    data = read_file(seg.path)
    expected, problem = _index(seg, data, producers, txns)
    pos = seg.index.end
    if not problem:
        return expected, 0
    intact = find_intact(data, pos, expected, BATCHES)
    if intact:
        raise CorruptLogError(
            f"{seg.path}: {problem} at byte {pos} (offset {expected}), yet {describe_intact(intact, 'batch')}: "
            "this is damage to data once written in full, not a torn tail. Nothing was changed"
        )
    cut = len(data) - pos
    log.warning("%s: truncating %d byte(s) of torn tail at byte %d (offset %d): %s",
                seg.path, cut, pos, expected, problem)  # fmt: skip
    fd = os.open(seg.path, os.O_WRONLY | CLOEXEC)
    try:
        os.ftruncate(fd, pos)
        if sync:
            _fsync_file(fd)
    finally:
        os.close(fd)
    return expected, cut


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
