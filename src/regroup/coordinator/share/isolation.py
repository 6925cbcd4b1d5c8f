"""``share.isolation.level=read_committed`` (KIP-932): which batches of a read of the log belong to aborted
transactions, so that the share partition archives their records instead of delivering them.

The shell describes the batches it read (``LogBatch``, in log order) and hands over the log's aborted
transactions overlapping them, as ``(producer id, first offset)`` pairs; this module walks the batches as
Kafka's ``SharePartition`` does: an aborted transaction takes effect from the first batch whose last offset
reaches its first offset, every transactional batch of its producer is then aborted, up to that producer's
ABORT marker. The markers themselves are never aborted records: like a COMMIT marker, an ABORT marker's offset
is acquired and delivered as an offset without a record, which the client acknowledges as a gap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["LogBatch", "aborted_batches"]

#: a batch written without a producer id
NO_PRODUCER_ID = -1


@dataclass(frozen=True, slots=True)
class LogBatch:
    """One batch of a read: its offsets, its producer, whether it is transactional, and whether it is a control
    batch holding an ABORT marker."""

    first_offset: int
    last_offset: int
    producer_id: int = NO_PRODUCER_ID
    transactional: bool = False
    abort_marker: bool = False


def aborted_batches(batches: Iterable[LogBatch], aborted: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The ``(first offset, last offset)`` of each batch of ``batches`` that belongs to one of the ``aborted``
    transactions (``(producer id, first offset)``), in the order of ``batches``."""
    starts: Sequence[tuple[int, int]] = sorted(aborted, key=lambda txn: txn[1])
    next_start = 0
    aborting: set[int] = set()
    found: list[tuple[int, int]] = []
    for batch in batches:
        if batch.producer_id <= NO_PRODUCER_ID:
            continue
        while next_start < len(starts) and starts[next_start][1] <= batch.last_offset:
            aborting.add(starts[next_start][0])
            next_start += 1
        if batch.abort_marker:
            aborting.discard(batch.producer_id)
        elif batch.transactional and batch.producer_id in aborting:
            found.append((batch.first_offset, batch.last_offset))
    return tuple(found)
