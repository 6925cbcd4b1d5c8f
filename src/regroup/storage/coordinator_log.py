"""The coordinator's records on disk: serialises core records into the ``RecordLog``, rebuilds a
``GroupCoordinator`` from snapshot + tail on start, and compacts by writing snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.ids import IdSource
from regroup.records import serde
from regroup.records.model import Record
from regroup.storage.record_log import FsyncPolicy, RecordLog

SNAPSHOT_SEPARATOR = b"\n"


class CoordinatorLog:
    """Durable home of one coordinator's records."""

    def __init__(self, log: RecordLog, snapshot_every: int = 100_000) -> None:
        self.log = log
        self.snapshot_every = snapshot_every
        self._since_snapshot = 0

    @classmethod
    def open(
        cls, directory: Path, *, fsync: FsyncPolicy = FsyncPolicy.ALWAYS, snapshot_every: int = 100_000
    ) -> CoordinatorLog:
        return cls(RecordLog.open(directory, fsync=fsync), snapshot_every)

    def append(self, records: Sequence[Record]) -> int | None:
        """Append (and, with the default policy, fsync) a batch; returns the last offset, or None if empty."""
        if not records:
            return None
        self._since_snapshot += len(records)
        return self.log.append([serde.encode(r) for r in records])

    def records(self) -> Iterator[Record]:
        """Snapshot records followed by every record after the snapshot."""
        _, state, tail = self.log.load()
        if state:
            for line in state.split(SNAPSHOT_SEPARATOR):
                if line:
                    yield serde.decode(line)
        for _, payload in tail:
            yield serde.decode(payload)

    def load(
        self, now_ms: int, config: CoordinatorConfig | None = None, ids: IdSource | None = None
    ) -> GroupCoordinator:
        """Rebuild the coordinator that wrote this log."""
        return GroupCoordinator.from_records(self.records(), now_ms, config, ids)

    def maybe_snapshot(self, coordinator: GroupCoordinator) -> bool:
        """Write a snapshot of the coordinator's hard state once enough records accumulated."""
        if self._since_snapshot < self.snapshot_every or self.log.next_offset == 0:
            return False
        self.snapshot(coordinator.snapshot_records())
        return True

    def snapshot(self, records: Iterable[Record]) -> None:
        state = SNAPSHOT_SEPARATOR.join(serde.encode(r) for r in records)
        self.log.snapshot(self.log.next_offset - 1, state)
        self._since_snapshot = 0

    def close(self) -> None:
        self.log.close()
