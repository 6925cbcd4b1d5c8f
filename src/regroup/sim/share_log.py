"""The log the share members read: how many records each topic partition holds at a virtual time, so that share
partitions have log end offsets. Nothing is stored per record: a partition present at the start holds
``backlog`` records then, and every partition gets ``rate_per_s`` more per second from ``produce_from_ms`` (or
from its creation, for a partition a ``partitions`` action added, which starts empty) until ``produce_until_ms``
(None: forever). Records appear one at a time at whole milliseconds: the k-th produced record (k = 1, 2, ...)
at ``start + ceil(k * 1000 / rate_per_s)``. Every log starts at offset 0 (nothing is deleted)."""

from __future__ import annotations

from collections.abc import Mapping

from regroup.sim.scenario import ShareSpec


class ShareLog:
    def __init__(self, spec: ShareSpec, topics: Mapping[str, int]) -> None:
        self.spec = spec
        #: topic -> per partition (when it starts producing, the records it held at the start)
        self.partitions: dict[str, list[tuple[int, int]]] = {
            topic: [(spec.produce_from_ms, spec.backlog)] * count for topic, count in topics.items()
        }

    def grow(self, topics: Mapping[str, int], now_ms: int) -> None:
        """Partitions added at ``now_ms`` start empty and produce from then on (or from ``produce_from_ms``)."""
        for topic, count in topics.items():
            known = self.partitions.setdefault(topic, [])
            start = max(self.spec.produce_from_ms, now_ms)
            known.extend([(start, 0)] * (count - len(known)))

    def _partition(self, topic: str, partition: int) -> tuple[int, int] | None:
        known = self.partitions.get(topic)
        return known[partition] if known is not None and 0 <= partition < len(known) else None

    def _produced(self, start: int, now_ms: int) -> int:
        until = self.spec.produce_until_ms
        end = now_ms if until is None else min(now_ms, until)
        return max(end - start, 0) * self.spec.rate_per_s // 1000

    def end(self, topic: str, partition: int, now_ms: int) -> int:
        """The log end offset at ``now_ms`` (0 for a partition that does not exist)."""
        found = self._partition(topic, partition)
        if found is None:
            return 0
        start, backlog = found
        return backlog + self._produced(start, now_ms)

    def next_record_ms(self, topic: str, partition: int, now_ms: int) -> int | None:
        """When the next record after ``now_ms`` appears (always later than ``now_ms``), or None: no more."""
        found = self._partition(topic, partition)
        rate = self.spec.rate_per_s
        if found is None or rate <= 0:
            return None
        start = found[0]
        k = self._produced(start, now_ms) + 1
        at = start + (k * 1000 + rate - 1) // rate
        until = self.spec.produce_until_ms
        return None if until is not None and at > until else at
