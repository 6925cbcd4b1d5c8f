"""What the transaction coordinator's operations return, the markers it asks the shell to write, where its
producer ids come from, and its configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from regroup.model.errors import ErrorCode
from regroup.transactions.records import TxnRecord
from regroup.transactions.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition

__all__ = [
    "DEFAULT_ID_EXPIRATION_MS",
    "DEFAULT_MAX_TIMEOUT_MS",
    "CountingProducerIds",
    "MarkerJob",
    "ProducerIdSource",
    "TxnConfig",
    "TxnResult",
]

#: Kafka's ``transaction.max.timeout.ms``: a producer may not ask for a longer transaction timeout
DEFAULT_MAX_TIMEOUT_MS: Final = 900_000
#: Kafka's ``transactional.id.expiration.ms``: an idle transactional id (no transaction open) is forgotten
DEFAULT_ID_EXPIRATION_MS: Final = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnConfig:
    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS
    #: written into every marker; one node and one coordinator, so it never changes
    coordinator_epoch: int = 0


class ProducerIdSource(Protocol):
    def next_producer_id(self) -> int:
        """A producer id never handed out before (the server's are durable across restarts)."""
        ...


class CountingProducerIds:
    """Deterministic producer ids for tests: ``start``, ``start + 1``, ..."""

    def __init__(self, start: int = 0) -> None:
        self._next = start

    def next_producer_id(self) -> int:
        pid = self._next
        self._next += 1
        return pid


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkerJob:
    """Transaction markers to write: a COMMIT or ABORT control batch of ``producer_id`` at
    ``producer_epoch`` into each partition, and the outcome delivered to each group's pending offsets.

    ``transactional_id`` is the transaction being completed; once everything is written the shell calls
    ``TransactionCoordinator.markers_written(job, now_ms)``. ``None``: a partition's open transaction the
    coordinator does not know (found on start-up after a loss), aborted on its own."""

    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]
    groups: frozenset[str]
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class TxnResult:
    """An operation's answer (``error``, and the producer id and epoch where the API returns them), the
    records it wrote (to make durable before answering) and the markers to write after those records are
    durable. An error with no records changed nothing."""

    error: ErrorCode = ErrorCode.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    records: tuple[TxnRecord, ...] = ()
    markers: tuple[MarkerJob, ...] = ()
