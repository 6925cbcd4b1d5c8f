"""Real kafka-python and aiokafka group members for the adapter tests.

* ``KafkaPythonMember`` / ``AioKafkaMember``: one consumer on its own thread, configured with the assignors a test
  gives it, polling until stopped; it publishes its current assignment, records what it reads in a ``Ledger`` and
  what its rebalance listener is told in a ``Timeline`` (ownership windows on one clock);
* ``GroupWatch``: the server's view of a group (DescribeGroups through kafka-python's admin client) and the wait
  for a settled group: Stable, exactly the expected members, each member's own view equal to the server's, and
  nothing changed for ``HOLD_S``;
* ``Producer``: a thread that keeps producing numbered records and remembers the acknowledged ones.

Every wait has a deadline and polls for its condition; every client is closed by whoever created it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.clients.harness import eventually

log = logging.getLogger("tests.adapters")

TP = tuple[str, int]

SESSION_MS = 6_000  # the smallest session the coordinator accepts
HEARTBEAT_MS = 200
#: kafka-python 3.0.12 wedges a member now and then when poll() times out while its JoinGroup/SyncGroup round is in
#: flight; a 1 s poll avoids it (tests/clients/harness.py, KAFKA_PYTHON_POLL_MS)
KAFKA_PYTHON_POLL_MS = 1_000
AIOKAFKA_POLL_MS = 100
HOLD_S = 0.6  # a group counts as settled once nothing changed for this long (3 heartbeats)
SETTLE_S = 45.0  # generous: a loaded two-core machine


# ------------------------------------------------------------------------------------------------ records
@dataclass(frozen=True, slots=True)
class Window:
    member: str
    tp: TP
    start: float
    end: float


class Timeline:
    """Ownership windows on one clock (``time.monotonic``): a window opens when a member's listener is told it got
    a partition and closes when it is told it lost it, or when the member stops polling (it processes nothing
    after that)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[str, TP], float] = {}
        self._closed: list[Window] = []

    def assigned(self, member: str, tps: Iterable[TP]) -> None:
        now = time.monotonic()
        with self._lock:
            for tp in tps:
                self._open.setdefault((member, tp), now)

    def revoked(self, member: str, tps: Iterable[TP]) -> None:
        now = time.monotonic()
        with self._lock:
            for tp in tps:
                start = self._open.pop((member, tp), None)
                if start is not None:
                    self._closed.append(Window(member, tp, start, now))

    def stopped(self, member: str) -> None:
        with self._lock:
            mine = [tp for m, tp in self._open if m == member]
        self.revoked(member, mine)

    def windows(self) -> list[Window]:
        now = time.monotonic()
        with self._lock:
            return [*self._closed, *(Window(m, tp, s, now) for (m, tp), s in self._open.items())]

    def overlaps(self) -> list[str]:
        """Every pair of windows of one partition held by two members at once."""
        by_tp: dict[TP, list[Window]] = {}
        for w in self.windows():
            by_tp.setdefault(w.tp, []).append(w)
        found = []
        for tp, ws in sorted(by_tp.items()):
            ws.sort(key=lambda w: w.start)
            for before, after in itertools.pairwise(ws):
                if after.start < before.end:
                    found.append(f"{tp}: {before} overlaps {after}")
        return found


class Ledger:
    """Every record value any member read, with when it was read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads: list[tuple[float, str, bytes]] = []

    def record(self, member: str, values: Iterable[bytes]) -> None:
        now = time.monotonic()
        with self._lock:
            self._reads.extend((now, member, v) for v in values)

    def counts(self) -> Counter[bytes]:
        with self._lock:
            return Counter(v for _, _, v in self._reads)

    def times(self) -> list[float]:
        with self._lock:
            return sorted(t for t, _, _ in self._reads)


# ------------------------------------------------------------------------------------------------ members
class Member(threading.Thread):
    """One group member on its own thread: poll until stopped, publish the assignment, record reads."""

    def __init__(self, name: str, timeline: Timeline | None = None, ledger: Ledger | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.member = name
        self.timeline = timeline or Timeline()
        self.ledger = ledger or Ledger()
        self.assigned: frozenset[TP] = frozenset()
        self.error: BaseException | None = None
        self._stop_requested = threading.Event()

    def on_assigned(self, partitions: Iterable[Any]) -> None:
        self.timeline.assigned(self.member, [(str(tp.topic), int(tp.partition)) for tp in partitions])

    def on_revoked(self, partitions: Iterable[Any]) -> None:
        self.timeline.revoked(self.member, [(str(tp.topic), int(tp.partition)) for tp in partitions])

    def stop(self, timeout: float = 30.0) -> None:
        """Stop polling and close the client (a LeaveGroup); raises if the member failed."""
        self._stop_requested.set()
        self.join(timeout)
        assert not self.is_alive(), f"member {self.member} did not stop within {timeout}s"
        if self.error is not None:
            raise AssertionError(f"member {self.member} failed: {self.error!r}") from self.error

    def stopping(self) -> bool:
        return self._stop_requested.is_set()


class KafkaPythonMember(Member):
    def __init__(
        self,
        name: str,
        bootstrap: str,
        group: str,
        topics: Sequence[str],
        assignors: Sequence[Any],
        timeline: Timeline | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        super().__init__(name, timeline, ledger)
        self.bootstrap, self.group, self.topics, self.assignors = bootstrap, group, list(topics), list(assignors)

    def run(self) -> None:
        import kafka

        member = self

        class Listener(kafka.ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.on_revoked(revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.on_assigned(assigned)

        consumer = None
        try:
            consumer = kafka.KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                client_id=self.member,
                partition_assignment_strategy=self.assignors,
                enable_auto_commit=True,
                auto_commit_interval_ms=500,
                auto_offset_reset="earliest",
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                fetch_max_wait_ms=100,
                reconnect_backoff_max_ms=500,
                retry_backoff_ms=100,
            )
            # the topics' partitions before joining: a leader without them assigns nothing and rebalances again
            for topic in self.topics:
                consumer.partitions_for_topic(topic)
            consumer.subscribe(self.topics, listener=Listener())
            while not self.stopping():
                batches = consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS)
                self.ledger.record(self.member, (r.value for records in batches.values() for r in records))
                self.assigned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
        except BaseException as exc:
            log.exception("member %s failed", self.member)
            self.error = exc
        finally:
            self.timeline.stopped(self.member)
            self.assigned = frozenset()
            if consumer is not None:
                try:
                    consumer.close()
                except BaseException as exc:
                    log.exception("member %s failed to close", self.member)
                    self.error = self.error or exc


class AioKafkaMember(Member):
    def __init__(
        self,
        name: str,
        bootstrap: str,
        group: str,
        topics: Sequence[str],
        assignors: Sequence[Any],
        timeline: Timeline | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        super().__init__(name, timeline, ledger)
        self.bootstrap, self.group, self.topics, self.assignors = bootstrap, group, list(topics), tuple(assignors)

    def run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._run())
        except BaseException as exc:
            log.exception("member %s failed", self.member)
            self.error = exc
        finally:
            loop.close()

    async def _run(self) -> None:
        import aiokafka

        member = self

        class Listener(aiokafka.ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.on_revoked(revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.on_assigned(assigned)

        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.member,
            partition_assignment_strategy=self.assignors,
            enable_auto_commit=True,
            auto_commit_interval_ms=500,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            fetch_max_wait_ms=100,
            retry_backoff_ms=100,
        )
        consumer.subscribe(self.topics, listener=Listener())
        await consumer.start()
        try:
            while not self.stopping():
                batches = await consumer.getmany(timeout_ms=AIOKAFKA_POLL_MS)
                self.ledger.record(self.member, (r.value for records in batches.values() for r in records))
                self.assigned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
        finally:
            self.timeline.stopped(self.member)
            self.assigned = frozenset()
            await consumer.stop()


class Members:
    """The members a test started; stops those still running when the block exits (failures included)."""

    def __init__(self) -> None:
        self.running: dict[str, Member] = {}

    def start(self, member: Member) -> Member:
        self.running[member.member] = member
        member.start()
        return member

    def stop(self, name: str) -> None:
        self.running.pop(name).stop()

    def __enter__(self) -> Members:
        return self

    def __exit__(self, *exc: object) -> None:
        for m in self.running.values():
            m._stop_requested.set()
        for m in self.running.values():
            m.join(30)


# ------------------------------------------------------------------------------------------------- server
@dataclass(frozen=True, slots=True)
class GroupView:
    state: str
    protocol: str
    #: client id → the partitions the server says the member was assigned
    assignments: dict[str, frozenset[TP]]


class GroupWatch:
    """The server's view of one group through kafka-python's admin client."""

    def __init__(self, bootstrap: str, group: str) -> None:
        import kafka

        self.group = group
        self.admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)

    def close(self) -> None:
        self.admin.close()

    def create_topics(self, partitions: dict[str, int]) -> None:
        from kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(t, n, 1) for t, n in partitions.items()])

    def view(self) -> GroupView:
        described = self.admin.describe_groups([self.group])[self.group]
        assignments = {}
        for m in described["members"]:
            assignment = m["member_assignment"] or {"assigned_partitions": []}
            assignments[m["client_id"]] = frozenset(
                (t["topic"], p) for t in assignment["assigned_partitions"] for p in t["partitions"]
            )
        return GroupView(described["group_state"], described["protocol_data"], assignments)

    def settled(self, members: Sequence[Member], timeout: float = SETTLE_S) -> GroupView:
        """Wait until the server says Stable with exactly ``members``, each member's own assignment equals the
        server's, and the same holds ``HOLD_S`` later."""
        names = {m.member for m in members}
        candidate: list[tuple[float, GroupView]] = []
        last: list[GroupView] = []

        def current() -> GroupView | None:
            for m in members:
                if m.error is not None:
                    raise AssertionError(f"member {m.member} failed: {m.error!r}")
            view = self.view()
            last[:] = [view]
            if view.state != "Stable" or set(view.assignments) != names:
                return None
            if any(view.assignments[m.member] != m.assigned for m in members):
                return None
            return view

        def held() -> GroupView | None:
            view = current()
            if view is None:
                candidate.clear()
                return None
            if not candidate or candidate[0][1] != view:
                candidate[:] = [(time.monotonic(), view)]
                return None
            return view if time.monotonic() - candidate[0][0] >= HOLD_S else None

        try:
            return eventually(held, timeout, f"group {self.group} to settle with {sorted(names)}", interval=0.1)
        except AssertionError as exc:
            seen = {m.member: sorted(m.assigned) for m in members}
            raise AssertionError(f"{exc}; server's last view {last}, the members' own views {seen}") from None


# ------------------------------------------------------------------------------------------------ producer
class Producer(threading.Thread):
    """Keeps producing ``v-<n>`` to partition ``n % partitions`` of ``topic`` every ``interval`` seconds until
    stopped; ``acked`` holds the values the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.01) -> None:
        super().__init__(name="producer", daemon=True)
        self.bootstrap, self.topic, self.partitions, self.interval = bootstrap, topic, partitions, interval
        self.acked: set[bytes] = set()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()

    def run(self) -> None:
        import kafka

        producer = kafka.KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0)
        try:
            n = 0
            while not self._stop_requested.wait(self.interval):
                value = f"v-{n}".encode()
                future = producer.send(self.topic, value=value, partition=n % self.partitions)
                future.add_callback(lambda _metadata, v=value: self._ack(v))
                n += 1
            producer.flush(timeout=20)
        except BaseException as exc:
            log.exception("producer failed")
            self.error = exc
        finally:
            producer.close(timeout=5)

    def _ack(self, value: bytes) -> None:
        with self._lock:
            self.acked.add(value)

    def stop(self) -> set[bytes]:
        self._stop_requested.set()
        self.join(30)
        assert not self.is_alive() and self.error is None, f"producer failed: {self.error!r}"
        with self._lock:
            return set(self.acked)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)
