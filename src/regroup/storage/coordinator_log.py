"""The coordinator's records on disk: serialises core records into the ``RecordLog``, rebuilds a
``GroupCoordinator`` from snapshot + tail on start, and compacts by writing snapshots
(``snapshotted_log.py``)."""

from __future__ import annotations

from collections.abc import Mapping

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.ids import IdSource
from regroup.records import serde
from regroup.records.model import Record
from regroup.storage.snapshotted_log import SnapshottedLog


class CoordinatorLog(SnapshottedLog[Record]):
    """Durable home of one coordinator's records."""

    def encode(self, record: Record) -> bytes:
        return serde.encode(record)

    def decode(self, data: bytes) -> Record:
        return serde.decode(data)

    def load(
        self,
        now_ms: int,
        config: CoordinatorConfig | None = None,
        ids: IdSource | None = None,
        group_configs: Mapping[str, GroupConfig] | None = None,
    ) -> GroupCoordinator:
        """Rebuild the coordinator that wrote this log (with the groups' own settings, ``group_configs``)."""
        return GroupCoordinator.from_records(self.records(), now_ms, config, ids, group_configs)
