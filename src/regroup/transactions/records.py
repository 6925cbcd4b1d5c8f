"""The transaction coordinator's records (Kafka's ``__transaction_state`` key and value): the key is the
transactional id, the value its whole metadata after a change, ``None`` a tombstone (the id expired). As each
record carries the full state, replaying is keeping the last value per key (``replay.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from regroup.transactions.state import TransactionMetadata

__all__ = ["TxnRecord", "new_txn_record", "new_txn_tombstone"]


@dataclass(frozen=True, slots=True)
class TxnRecord:
    transactional_id: str
    value: TransactionMetadata | None


def new_txn_record(metadata: TransactionMetadata) -> TxnRecord:
    return TxnRecord(metadata.transactional_id, metadata)


def new_txn_tombstone(transactional_id: str) -> TxnRecord:
    return TxnRecord(transactional_id, None)
