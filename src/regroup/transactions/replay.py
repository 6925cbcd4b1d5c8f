"""Records → state: the only way the coordinator's hard state changes. ``Transactions`` holds the last value
per transactional id, the producer id → transactional id index and the deadlines derived from each value."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from regroup.transactions.deadlines import Deadlines, deadline_of
from regroup.transactions.records import TxnRecord
from regroup.transactions.state import TransactionMetadata

__all__ = ["Transactions"]


class Transactions:
    def __init__(self, id_expiration_ms: int) -> None:
        self._by_id: dict[str, TransactionMetadata] = {}
        self._by_pid: dict[int, str] = {}
        self._expiration_ms = id_expiration_ms
        self.deadlines = Deadlines()

    def apply(self, record: TxnRecord) -> None:
        tid, value = record.transactional_id, record.value
        old = self._by_id.get(tid)
        if old is not None and self._by_pid.get(old.producer_id) == tid:
            del self._by_pid[old.producer_id]
        if value is None:
            self._by_id.pop(tid, None)
        else:
            self._by_id[tid] = value
            self._by_pid[value.producer_id] = tid
        self.deadlines.set(tid, deadline_of(value, self._expiration_ms))

    def apply_all(self, records: Iterable[TxnRecord]) -> None:
        for record in records:
            self.apply(record)

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._by_id.get(transactional_id)

    def by_producer_id(self, producer_id: int) -> TransactionMetadata | None:
        tid = self._by_pid.get(producer_id)
        return None if tid is None else self._by_id[tid]

    def __iter__(self) -> Iterator[TransactionMetadata]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def as_dict(self) -> dict[str, TransactionMetadata]:
        return dict(self._by_id)
