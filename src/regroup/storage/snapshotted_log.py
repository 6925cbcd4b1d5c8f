"""A coordinator's records in a ``RecordLog``: the batching of appends (whole, or split into a write and a
sync for a pipelined writer), the snapshot + tail a coordinator is rebuilt from on start, and the compaction
that writes a snapshot once enough records accumulated since the last one (``prepare_snapshot``: the state
taken on the owner's thread; a ``SnapshotJob`` builds and encodes its records on any thread while the log goes
on being written, then writes them while it is not). The group coordinator's log and
the transaction coordinator's each say how their records are encoded and how their coordinator is rebuilt
(``coordinator_log.py``, ``transaction_log.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Generic, Protocol, Self, TypeVar

from regroup.storage.encoded_ahead import EncodedAhead
from regroup.storage.format import FramedBody, frame_body, frame_size
from regroup.storage.record_log import FsyncPolicy, RecordLog

#: the snapshot is its records' encodings, one per line
SNAPSHOT_SEPARATOR = b"\n"
DEFAULT_SNAPSHOT_EVERY = 100_000

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


#: a batch of this many bytes or more is framed before the log is held (``format.frame_body``: the copy and the
#: checksum of a 10,000-member group's record, megabytes, took about half of the 10-20 ms the log was held)
FRAME_AHEAD_BYTES = 64 * 1024


def _framed_if_large(payloads: Sequence[bytes]) -> Sequence[bytes] | FramedBody:
    """``payloads`` as their frame's body when they are large (``FRAME_AHEAD_BYTES``), else as they are."""
    if frame_size(map(len, payloads)) >= FRAME_AHEAD_BYTES:
        return frame_body(payloads)
    return payloads


class Snapshotting(Protocol[R_co]):
    """A coordinator whose hard state a snapshot holds: its records now, or (``snapshot_records_later``) its state
    as of now taken in a form the returned function builds the records from, on any thread."""

    def snapshot_records(self) -> Iterable[R_co]: ...

    def snapshot_records_later(self) -> Callable[[], Iterable[R_co]]: ...


class SnapshottedLog(Generic[R]):
    """Durable home of one coordinator's records (``R``); subclasses say how a record becomes bytes."""

    def __init__(self, log: RecordLog, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY) -> None:
        self.log = log
        self.snapshot_every = snapshot_every
        self._since_snapshot = 0
        #: records encoded before they are written (``encode_ahead``), taken by ``append`` and ``write``
        self.ahead: EncodedAhead[R] = EncodedAhead(self.encode)
        #: held while a batch is written (not while it is encoded, nor, when large, framed): ``write_now`` on the
        #: owner's loop may write a small batch while the writer's thread encodes a large one, never in its write
        self._writing = threading.Lock()

    @classmethod
    def open(
        cls, directory: Path, *, fsync: FsyncPolicy = FsyncPolicy.ALWAYS, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    ) -> Self:
        return cls(RecordLog.open(directory, fsync=fsync), snapshot_every)

    def encode(self, record: R) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> R:
        raise NotImplementedError

    def encode_ahead(self, records: Iterable[R]) -> None:
        """Encode ``records`` now (on any thread), for the ``append`` or ``write`` of these very objects to take
        (``encoded_ahead.py``)."""
        self.ahead.add(records)

    def append(self, records: Sequence[R]) -> int | None:
        """Append (and, with the default policy, fsync) a batch; returns the last offset, or None if empty."""
        if not records:
            return None
        payloads = _framed_if_large(self.ahead.payloads(records))
        with self._writing:
            self._since_snapshot += len(records)
            return self.log.append(payloads)

    def write(self, records: Sequence[R]) -> int | None:
        """Write a batch without its fsync (``RecordLog.write``): durable once a :meth:`sync` started after
        this returned has returned. Returns the last offset, or None if empty."""
        if not records:
            return None
        payloads = _framed_if_large(self.ahead.payloads(records))
        with self._writing:
            self._since_snapshot += len(records)
            return self.log.write(payloads)

    def write_now(self, records: Sequence[R]) -> bool:
        """:meth:`write` unless the batch would start a new segment (``RecordLog.write_unless_full``: no fsync and
        no file made in the call), or another thread is writing a batch this moment (it never waits for one):
        whether it was written (an empty batch: nothing to write)."""
        if not records:
            return True
        if not self._writing.acquire(blocking=False):
            return False
        try:
            if self.log.write_unless_full(self.ahead.payloads(records)) is None:
                return False
            self._since_snapshot += len(records)
            return True
        finally:
            self._writing.release()

    def sync(self, through: int | None = None) -> None:
        """fsync every batch written so far (``RecordLog.sync``; ``through``: unless an fsync covers that offset
        already); may run while the next :meth:`write` does."""
        self.log.sync(through)

    @property
    def pipelined(self) -> bool:
        """Whether an owner should :meth:`write` and :meth:`sync` (pipelined) rather than :meth:`append`: when
        every batch must be fsynced before it is acknowledged (``--fsync always``)."""
        return self.log.fsync_policy is FsyncPolicy.ALWAYS

    def records(self) -> Iterator[R]:
        """Snapshot records followed by every record after the snapshot."""
        _, state, tail = self.log.load()
        if state:
            for line in state.split(SNAPSHOT_SEPARATOR):
                if line:
                    yield self.decode(line)
        for _, payload in tail:
            yield self.decode(payload)

    def maybe_snapshot(self, coordinator: Snapshotting[R]) -> bool:
        """Write a snapshot of the coordinator's hard state once enough records accumulated since the last."""
        job = self.prepare_snapshot(coordinator)
        if job is None:
            return False
        job()
        return True

    def prepare_snapshot(self, coordinator: Snapshotting[R]) -> SnapshotJob[R] | None:
        """When a snapshot is due, the coordinator's hard state as of the log's last record, taken now (on its
        owner's thread, the state consistent with the log: ``snapshot_records_later``, whose records are
        immutable values), as the job that builds its records and encodes them, then writes them; None when none
        is due. The count of records since the last snapshot restarts now."""
        if self._since_snapshot < self.snapshot_every or self.log.next_offset == 0:
            return None
        offset = self.log.next_offset - 1
        build = coordinator.snapshot_records_later()
        self._since_snapshot = 0
        return SnapshotJob(self, offset, build)

    def _write_snapshot(self, offset: int, records: Iterable[R]) -> None:
        self._store_snapshot(offset, SNAPSHOT_SEPARATOR.join(self.encode(r) for r in records))

    def _store_snapshot(self, offset: int, state: bytes) -> None:
        with self._writing:
            self.log.snapshot(offset, state)

    def snapshot(self, records: Iterable[R]) -> None:
        self._write_snapshot(self.log.next_offset - 1, records)
        self._since_snapshot = 0

    def close(self) -> None:
        self.log.close()


class SnapshotJob(Generic[R]):
    """A snapshot of a log's owner taken as of record ``offset``, in two steps: ``encode`` builds its records and
    encodes them, on any thread, and may run while the log goes on being written (what it reads was taken when
    the job was made); ``write`` stores what ``encode`` returned (``RecordLog.snapshot``: the file, its fsyncs,
    the compaction), on a thread that writes the log, while nothing else does. Called, it does both."""

    __slots__ = ("_build", "_log", "offset")

    def __init__(self, log: SnapshottedLog[R], offset: int, build: Callable[[], Iterable[R]]) -> None:
        self._log = log
        self.offset = offset
        self._build = build

    def encode(self) -> bytes:
        encode = self._log.encode
        return SNAPSHOT_SEPARATOR.join(encode(r) for r in self._build())

    def write(self, state: bytes) -> None:
        self._log._store_snapshot(self.offset, state)

    def __call__(self) -> None:
        self.write(self.encode())
