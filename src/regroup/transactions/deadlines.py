"""The coordinator's timers, soft state derived from each transactional id's metadata: an ongoing
transaction is aborted once it has run longer than its timeout (measured from its start, as Kafka), an id with
no transaction open is forgotten once idle for the expiration time.

A lazy heap of ``(deadline, id)`` beside each id's current deadline: setting a deadline only pushes, and an
entry that is no longer its id's deadline is dropped when it comes up. The heap is rebuilt from the current
deadlines whenever outdated entries outnumber them, so it stays within a constant factor of the ids."""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from regroup.transactions.state import TransactionMetadata, TxnState

__all__ = ["Deadlines", "deadline_of"]

_SLACK = 64


def deadline_of(m: TransactionMetadata | None, id_expiration_ms: int) -> int | None:
    """When the coordinator must act on ``m`` by itself, or ``None``."""
    if m is None:
        return None
    if m.state is TxnState.ONGOING:
        return m.start_ms + m.timeout_ms + 1  # Kafka: start + timeout < now
    if m.state.completed:
        return m.last_update_ms + id_expiration_ms  # Kafka: last update <= now - expiration
    return None


class Deadlines:
    def __init__(self) -> None:
        self._current: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []

    def set(self, transactional_id: str, deadline: int | None) -> None:
        if deadline is None:
            self._current.pop(transactional_id, None)
            return
        if self._current.get(transactional_id) == deadline:
            return
        self._current[transactional_id] = deadline
        heappush(self._heap, (deadline, transactional_id))
        if len(self._heap) > 2 * len(self._current) + _SLACK:
            self._heap = [(d, tid) for tid, d in self._current.items()]
            heapify(self._heap)

    def next(self) -> int | None:
        """The earliest deadline (outdated entries on top are dropped on the way)."""
        heap = self._heap
        while heap:
            deadline, tid = heap[0]
            if self._current.get(tid) == deadline:
                return deadline
            heappop(heap)
        return None

    def due(self, now_ms: int) -> list[str]:
        """The ids whose deadline is ``<= now_ms``, earliest first, taken off the schedule (acting on one
        changes its metadata, which sets its next deadline)."""
        found: list[str] = []
        while (deadline := self.next()) is not None and deadline <= now_ms:
            _, tid = heappop(self._heap)
            del self._current[tid]
            found.append(tid)
        return found

    def __len__(self) -> int:
        return len(self._heap)
