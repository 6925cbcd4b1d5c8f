"""A transactional id's state (Kafka's ``TransactionMetadata``), as one immutable value: every change is a new
value carried by a record, so nothing here mutates."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Final

__all__ = [
    "MAX_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TopicPartition",
    "TransactionMetadata",
    "TxnState",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_EPOCH: Final = 2**15 - 1  # producer epochs are int16

TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    """Kafka's transaction states, by the names Kafka reports (ListTransactions, DescribeTransactions).

    ``PrepareEpochFence`` and ``Dead`` are named for completeness (ListTransactions accepts them as filters)
    but never held: fencing an ongoing transaction writes its ``PrepareAbort`` with the bumped epoch at once
    (the fence state is Kafka's in-memory pending state, never persisted), and an expired transactional id
    is deleted by a tombstone."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def preparing(self) -> bool:
        """Markers are being written: the transaction's outcome is decided but not yet complete."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def completed(self) -> bool:
        """No transaction is in progress (a new one may start)."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: an epoch this high cannot be bumped twice more."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionMetadata:
    """Everything the coordinator knows about one transactional id (what its record carries)."""

    transactional_id: str
    producer_id: int
    #: the producer id before the last rotation (an exhausted epoch), so a retried InitProducerId is recognised
    previous_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int
    #: the epoch before the last InitProducerId bump, so its retry gets the same answer (KIP-360)
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int
    state: TxnState
    #: partitions written to in the ongoing transaction (AddPartitionsToTxn)
    partitions: frozenset[TopicPartition] = frozenset()
    #: groups whose offsets the ongoing transaction commits (AddOffsetsToTxn)
    groups: frozenset[str] = frozenset()
    #: when the ongoing (or last) transaction started; -1 before the first
    start_ms: int = -1
    last_update_ms: int

    def evolve(self, **changes: object) -> TransactionMetadata:
        """A copy with ``changes`` (every transition builds its next value with this)."""
        return replace(self, **changes)  # type: ignore[arg-type]
