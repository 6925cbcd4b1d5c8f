"""The records a real run's share members read: the scenario's ``share`` workload produced into ``regroup serve``
with a confluent-kafka producer, on the simulated log's schedule (``sim.share_log``): ``backlog`` records in every
partition before time 0, then, from ``produce_from_ms`` until ``produce_until_ms`` (or the scenario's end), the k-th
record of every partition at ``produce_from_ms + ceil(k * 1000 / rate_per_s)``, produced from a thread of the
validating process. ``ends`` gives each partition's log end offset at a time by the same schedule (so the
real timeline's end offsets are the simulator's), ``lateness_ms`` how far behind the schedule the producer fell.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

from regroup.sim.scenario import ShareSpec
from regroup.sim.share_log import ShareLog

VALUE: Final = b"regroup-lab-validate-record"


class ShareWorkload:
    def __init__(
        self,
        bootstrap: str,
        spec: ShareSpec,
        topics: Mapping[str, int],
        until_ms: int,
        logger: logging.Logger | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.spec = spec
        self.topics = dict(topics)
        self.until_ms = until_ms if spec.produce_until_ms is None else min(until_ms, spec.produce_until_ms)
        self.log = ShareLog(spec, topics)
        logs = {"logger": logger} if logger is not None else {"log_level": 4}  # librdkafka's lines: to the run's log
        self.producer: Any = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **logs})
        self.failed: list[str] = []
        self.lateness_ms = 0.0
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))

    def _produce(self, count: int) -> None:
        for topic, partitions in sorted(self.topics.items()):
            for partition in range(partitions):
                for _ in range(count):
                    while True:
                        try:
                            self.producer.produce(topic, value=VALUE, partition=partition, on_delivery=self._report)
                            break
                        except BufferError:  # (the producer's queue is full: let it drain)
                            self.producer.poll(0.05)
                    self.producer.poll(0)

    def backlog(self) -> None:
        """Produce every partition's backlog and wait until the server has it all."""
        if self.spec.backlog > 0:
            self._produce(self.spec.backlog)
            if self.producer.flush(60) or self.failed:
                raise RuntimeError(f"the backlog was not produced: {self.failed[:1] or 'timed out'}")

    def start(self, t0: float) -> None:
        """Produce on the schedule from wall-clock time ``t0`` (the scenario's 0 ms)."""
        if self.spec.rate_per_s > 0:
            self.thread = threading.Thread(target=self._run, args=(t0,), name="regroup-share-workload", daemon=True)
            self.thread.start()

    def _run(self, t0: float) -> None:
        topic, partition = next(iter(sorted(self.topics.items())))[0], 0
        now_ms = self.spec.produce_from_ms
        while not self.stopping.is_set():
            due = self.log.next_record_ms(topic, partition, now_ms)
            if due is None or due > self.until_ms:
                break
            while (left := t0 + due / 1000 - time.time()) > 0 and not self.stopping.is_set():
                self.stopping.wait(min(left, 0.05))
            self.lateness_ms = max(self.lateness_ms, (time.time() - t0) * 1000 - due)
            self._produce(self.log.end(topic, partition, due) - self.log.end(topic, partition, now_ms))
            now_ms = due
        self.producer.flush(10)

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(20)
        self.producer.flush(10)

    def ends(self, at_ms: int) -> dict[tuple[str, int], int]:
        """Every partition's log end offset at ``at_ms`` by the schedule."""
        return {
            (topic, p): self.log.end(topic, p, min(at_ms, self.until_ms))
            for topic, count in sorted(self.topics.items())
            for p in range(count)
        }
