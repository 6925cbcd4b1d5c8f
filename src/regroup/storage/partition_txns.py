"""One partition's transactions as its log shows them (Kafka's ``ProducerStateManager`` transaction part and
``TransactionIndex``): which producers have a transaction open here and from which offset, the aborted
transactions, and the last stable offset.

* A producer's transaction opens at its first transactional batch and closes at its marker. The **last
  stable offset** (LSO) is the first offset of the earliest open transaction, or the log end offset when
  none is open: read_committed consumers read below it only.
* Each aborted transaction that wrote data here is kept as ``(producer id, first offset, marker offset, LSO
  when it was aborted)``, in marker order (Kafka's ``AbortedTxn``). A read_committed fetch gets those
  overlapping the offsets it returns; the stored LSO lets the search stop early, as Kafka's does: an entry
  whose LSO is at or past the fetch's upper bound means no later entry starts below it.
* Kept in memory (four ``array('q')`` columns, 32 bytes per aborted transaction, created on the first
  abort) and rebuilt when the log is opened, during the scan that verifies every segment anyway: there is no
  index file to keep consistent with the log after a crash.
* Appending: a producer with a transaction open here may not write a non-transactional batch
  (INVALID_TXN_STATE), as in Kafka's ``ProducerAppendInfo``.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from regroup.storage.batches import AppendRejected, BatchHeader, Reject
from regroup.storage.markers import CONTROL, TRANSACTIONAL, read_marker

__all__ = ["OpenTxn", "PartitionTxns"]


@dataclass(slots=True)
class OpenTxn:
    first_offset: int
    producer_epoch: int


class PartitionTxns:
    def __init__(self) -> None:
        self._open: dict[int, OpenTxn] = {}
        self._lso_cache: int | None = None  # the earliest first offset of the open transactions (None: recompute)
        # the aborted transactions: columns, created on the first abort
        self._pids: array[int] | None = None
        self._firsts = array("q")
        self._lasts = array("q")
        self._lsos = array("q")

    # ------------------------------------------------------------------ reading

    def last_stable_offset(self, log_end_offset: int) -> int:
        if not self._open:
            return log_end_offset
        if self._lso_cache is None:
            self._lso_cache = min(t.first_offset for t in self._open.values())
        return self._lso_cache

    def open_transactions(self) -> dict[int, OpenTxn]:
        """Producer id → its open transaction here."""
        return dict(self._open)

    def aborted_between(self, start: int, upper: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of the aborted transactions with data in ``[start, upper)``: those
        whose marker is at or after ``start`` and whose first offset is below ``upper``."""
        pids = self._pids
        if pids is None:
            return []
        found: list[tuple[int, int]] = []
        for i in range(bisect.bisect_left(self._lasts, start), len(pids)):
            if self._firsts[i] < upper:
                found.append((pids[i], self._firsts[i]))
            if self._lsos[i] >= upper:
                break
        return found

    @property
    def aborted_count(self) -> int:
        return 0 if self._pids is None else len(self._pids)

    # ------------------------------------------------------------------ appending

    def plan(self, batches: Sequence[tuple[int, BatchHeader]], first_offset: int) -> dict[int, OpenTxn]:
        """Check data batches about to be appended from ``first_offset``; the transactions they open (or whose
        epoch they raise), to :meth:`commit` once written. Raises :class:`AppendRejected` (INVALID_TXN_STATE)."""
        opened: dict[int, OpenTxn] = {}
        offset = first_offset
        for _, h in batches:
            pid = h.producer_id
            if pid >= 0:
                current = self._open.get(pid) or opened.get(pid)
                if h.attributes & TRANSACTIONAL:
                    if current is None:
                        opened[pid] = OpenTxn(offset, h.producer_epoch)
                    elif h.producer_epoch > current.producer_epoch:
                        opened[pid] = OpenTxn(current.first_offset, h.producer_epoch)
                elif current is not None:
                    raise AppendRejected(
                        Reject.INVALID_TXN_STATE,
                        f"producer {pid} has a transaction open from offset {current.first_offset}: "
                        "expected a transactional batch",
                    )
            offset += h.record_count
        return opened

    def commit(self, opened: dict[int, OpenTxn]) -> None:
        if opened:
            self._open.update(opened)
            self._lso_cache = None

    def complete(self, producer_id: int, committed: bool, marker_offset: int) -> None:
        """A marker of ``producer_id`` at ``marker_offset``: its open transaction (if any) closes; an aborted
        one is indexed with the last stable offset right after it."""
        txn = self._open.pop(producer_id, None)
        if txn is None:
            return
        self._lso_cache = None
        if committed:
            return
        lso = min((t.first_offset for t in self._open.values()), default=marker_offset + 1)
        if self._pids is None:
            self._pids = array("q")
        self._pids.append(producer_id)
        self._firsts.append(txn.first_offset)
        self._lasts.append(marker_offset)
        self._lsos.append(lso)

    # ------------------------------------------------------------------ recovery

    def observe(self, data: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> None:
        """Take the batch ``h`` at ``pos`` of ``data``, already in the log, into account (the log's scan on
        open)."""
        pid = h.producer_id
        if pid < 0 or not h.attributes & TRANSACTIONAL:
            return
        if h.attributes & CONTROL:
            marker = read_marker(data, pos, h)
            if marker is not None:
                self.complete(pid, marker.committed, h.base_offset)
            return
        txn = self._open.get(pid)
        if txn is None:
            self._open[pid] = OpenTxn(h.base_offset, h.producer_epoch)
            self._lso_cache = None
        else:
            txn.producer_epoch = max(txn.producer_epoch, h.producer_epoch)
