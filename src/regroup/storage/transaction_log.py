"""The transaction coordinator's records on disk: serialises them into a ``RecordLog`` of their own
(``<data dir>/transactions/``), rebuilds a ``TransactionCoordinator`` from snapshot + tail on start, and
compacts by writing a snapshot of every transactional id's current metadata."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from regroup.storage.record_log import FsyncPolicy, RecordLog
from regroup.transactions import serde
from regroup.transactions.coordinator import TransactionCoordinator
from regroup.transactions.records import TxnRecord
from regroup.transactions.results import ProducerIdSource, TxnConfig

__all__ = ["TransactionLog"]

SNAPSHOT_SEPARATOR = b"\n"
DEFAULT_SNAPSHOT_EVERY = 100_000


class TransactionLog:
    """Durable home of one transaction coordinator's records."""

    def __init__(self, log: RecordLog, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY) -> None:
        self.log = log
        self.snapshot_every = snapshot_every
        self._since_snapshot = 0

    @classmethod
    def open(
        cls, directory: Path, *, fsync: FsyncPolicy = FsyncPolicy.ALWAYS, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    ) -> TransactionLog:
        return cls(RecordLog.open(directory, fsync=fsync), snapshot_every)

    def append(self, records: Sequence[TxnRecord]) -> int | None:
        """Append (and, with the default policy, fsync) a batch; the last offset, or None if empty."""
        if not records:
            return None
        self._since_snapshot += len(records)
        return self.log.append([serde.encode(r) for r in records])

    def records(self) -> Iterator[TxnRecord]:
        """Snapshot records followed by every record after the snapshot."""
        _, state, tail = self.log.load()
        if state:
            for line in state.split(SNAPSHOT_SEPARATOR):
                if line:
                    yield serde.decode(line)
        for _, payload in tail:
            yield serde.decode(payload)

    def load(
        self, config: TxnConfig | None = None, producer_ids: ProducerIdSource | None = None
    ) -> TransactionCoordinator:
        """Rebuild the coordinator that wrote this log."""
        return TransactionCoordinator.from_records(self.records(), config, producer_ids)

    def maybe_snapshot(self, coordinator: TransactionCoordinator) -> bool:
        """Write a snapshot of the coordinator's state once enough records accumulated since the last one."""
        if self._since_snapshot < self.snapshot_every or self.log.next_offset == 0:
            return False
        self.snapshot(coordinator.snapshot_records())
        return True

    def snapshot(self, records: Iterable[TxnRecord]) -> None:
        state = SNAPSHOT_SEPARATOR.join(serde.encode(r) for r in records)
        self.log.snapshot(self.log.next_offset - 1, state)
        self._since_snapshot = 0

    def close(self) -> None:
        self.log.close()
