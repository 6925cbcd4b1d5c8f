"""The transaction coordinator's records on disk: serialises them into a ``RecordLog`` of their own
(``<data dir>/transactions/``), rebuilds a ``TransactionCoordinator`` from snapshot + tail on start, and
compacts by writing a snapshot of every transactional id's current metadata (``snapshotted_log.py``)."""

from __future__ import annotations

from regroup.storage.snapshotted_log import SnapshottedLog
from regroup.transactions import serde
from regroup.transactions.coordinator import TransactionCoordinator
from regroup.transactions.records import TxnRecord
from regroup.transactions.results import ProducerIdSource, TxnConfig

__all__ = ["TransactionLog"]


class TransactionLog(SnapshottedLog[TxnRecord]):
    """Durable home of one transaction coordinator's records."""

    def encode(self, record: TxnRecord) -> bytes:
        return serde.encode(record)

    def decode(self, data: bytes) -> TxnRecord:
        return serde.decode(data)

    def load(
        self, config: TxnConfig | None = None, producer_ids: ProducerIdSource | None = None
    ) -> TransactionCoordinator:
        """Rebuild the coordinator that wrote this log."""
        return TransactionCoordinator.from_records(self.records(), config, producer_ids)
