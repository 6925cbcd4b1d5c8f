"""Machinery shared by the real-client conformance suite.

* one consumer adapter per client library (kafka-python, aiokafka, confluent-kafka) behind the same small
  interface: ``poll()`` → ``(partition, offset, value)`` records, ``assignment()``, ``commit(offsets)`` (True
  once the broker acknowledged it), ``close()``;
* ``Member``: a thread per group member that polls, records what it read in the ``Ledger`` and commits the
  offsets it consumed after every poll (at-least-once: a record is in the ledger before its offset is
  committed), publishing its current assignment for the test to look at;
* a producer per library (``produce``, acks=all: it returns once every record is acknowledged);
* ``Inspector``: the server's view (group description with decoded assignments, committed and end offsets)
  through kafka-python's admin client, retried while the server restarts.

Every wait has a deadline; every client is closed by whoever created it, also when the test fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

log = logging.getLogger("tests.clients")

T = TypeVar("T")

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")
#: every assignment strategy each library ships (aiokafka 0.14 has no cooperative assignor; librdkafka has
#: no eager "sticky", only cooperative-sticky)
STRATEGIES = {
    "kafka-python": ("range", "roundrobin", "sticky", "cooperative-sticky"),
    "aiokafka": ("range", "roundrobin", "sticky"),
    "confluent-kafka": ("range", "roundrobin", "cooperative-sticky"),
}
MODULES = {"kafka-python": "kafka", "aiokafka": "aiokafka", "confluent-kafka": "confluent_kafka"}

SESSION_MS = 6_000  # group.min.session.timeout.ms: the smallest session the coordinator accepts
HEARTBEAT_MS = 200  # members notice a rebalance within a heartbeat
FETCH_WAIT_MS = 100  # long polls return quickly, so a member's loop turns often
POLL_MS = 100
#: kafka-python 3.0.12 wedges a member now and then (its poll() blocks for good, or its heartbeats stop while
#: it believes it is still in the group) when poll() times out while the member's JoinGroup/SyncGroup round
#: is still in flight and that round then completes on the client's IO thread — seen about once in 20
#: rebalances with a 100 ms poll, never in 160 runs with 1 s. poll() returns as soon as records arrive, so
#: the longer timeout only slows an idle member's loop (and its stop()). See tests/clients/README.md.
KAFKA_PYTHON_POLL_MS = 1_000
#: how long a kafka-python member may sit stranded after a failed join before the harness asks it to rejoin
STRANDED_S = 2.0
#: how long a member starting while the broker is down keeps trying (kafka-python's metadata lookup, aiokafka's start)
STARTUP_RETRY_S = 60.0
COMMIT_TIMEOUT_S = 5.0
RECONNECT_BACKOFF_MAX_MS = 500
STABLE_HOLD_S = 0.6  # a group counts as stable once it has not changed for this long (3 heartbeats)
#: the deadline of every wait for the group, the records or the commits to catch up. Generous on purpose: after a
#: kill -9 a slow machine may take tens of seconds (the server's start, the clients' reconnect backoff, a member
#: whose session expired while it was not polling rejoining as a new member). A passing run never waits for it:
#: every wait ends as soon as its condition holds.
CATCH_UP_S = 120.0


def eventually(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Call ``check`` until it returns something other than None (exceptions count as None)."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = check()
        except Exception as exc:
            last_error, result = exc, None
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_error!r})")
        time.sleep(interval)


# ----------------------------------------------------------------------------------------------- ledger
@dataclass(frozen=True, slots=True)
class Read:
    member: str
    partition: int
    offset: int
    value: bytes


class Ledger:
    """Every record any member read, and the highest offset per partition whose commit was acknowledged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads: list[Read] = []
        self._acked: dict[int, int] = {}

    def record(self, member: str, records: Iterable[tuple[int, int, bytes]]) -> None:
        with self._lock:
            self._reads.extend(Read(member, p, o, v) for p, o, v in records)

    def acknowledge(self, offsets: dict[int, int]) -> None:
        with self._lock:
            for partition, offset in offsets.items():
                self._acked[partition] = max(offset, self._acked.get(partition, 0))

    def reads(self) -> list[Read]:
        with self._lock:
            return list(self._reads)

    def acked(self) -> dict[int, int]:
        with self._lock:
            return dict(self._acked)

    def counts(self) -> Counter[bytes]:
        return Counter(r.value for r in self.reads())

    def missing(self, values: Iterable[bytes]) -> set[bytes]:
        counts = self.counts()
        return {v for v in values if not counts[v]}

    def readers(self, values: Iterable[bytes]) -> dict[int, set[str]]:
        """partition → the members that read any of ``values``."""
        wanted = set(values)
        out: dict[int, set[str]] = defaultdict(set)
        for r in self.reads():
            if r.value in wanted:
                out[r.partition].add(r.member)
        return dict(out)


# ------------------------------------------------------------------------------------------- consumers
class Consumer(Protocol):
    def poll(self) -> list[tuple[int, int, bytes]]: ...
    def assignment(self) -> frozenset[int]: ...
    def commit(self, offsets: dict[int, int]) -> bool: ...
    def close(self) -> None: ...


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str, client_id: str, strategy: str) -> None:
        import kafka
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

        assignors = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }
        self.topic = topic
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            partition_assignment_strategy=[assignors[strategy]],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            fetch_max_wait_ms=FETCH_WAIT_MS,
            reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
            retry_backoff_ms=100,
        )
        # Know the topic's partitions before joining; otherwise the first leader assigns nothing ("No partition
        # metadata for topic") and the group rebalances again as soon as the metadata arrives. A scenario may kill
        # the broker -9 while a member is still starting: the lookup then fails retriably (ECONNREFUSED) and is
        # asked again, as an application would, until the broker is back.
        from kafka.errors import KafkaError

        deadline = time.monotonic() + STARTUP_RETRY_S
        while True:
            try:
                self.consumer.partitions_for_topic(topic)
                break
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() >= deadline:
                    raise
                log.info("kafka-python metadata lookup failed, asking again: %r", exc)
                time.sleep(0.2)
        self.consumer.subscribe([topic])
        self.stranded_since: float | None = None

    def poll(self) -> list[tuple[int, int, bytes]]:
        from kafka.errors import KafkaError

        self.rejoin_if_stranded()
        try:
            batches = self.consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS)
        except KafkaError as exc:
            # kafka-python 3.0.12 lets a failed coordinator lookup out of poll() (KafkaConnectionError,
            # ECONNREFUSED while the broker restarts); it is retriable, and an application polls again
            if not exc.retriable:
                raise
            log.info("kafka-python poll failed, polling again: %r", exc)
            return []
        return [(tp.partition, r.offset, r.value) for tp, records in batches.items() for r in records]

    def describe(self) -> str:
        """The client's own group state, for a failure's report."""
        coordinator = self.consumer._coordinator
        task = coordinator._join_task
        return (
            f"state={coordinator.state} generation={coordinator._generation} rejoining={coordinator.rejoining} "
            f"need_rejoin={coordinator.need_rejoin()} join_task={'none' if task is None else task.is_done}"
        )

    def rejoin_if_stranded(self) -> None:
        """Work around a kafka-python 3.0.12 hang: it retries a failed join attempt only while ``need_rejoin()``
        holds. A rebalance its leader starts because its metadata changed stops needing a rejoin once the
        assignment snapshot catches up with the metadata, so when the coordinator's connection dies while that
        rebalance's SyncGroup is in flight (the server killed -9), the member stays REBALANCING with its
        heartbeats off and never joins again; the server rightly drops it after the session timeout. The same
        happens after a retriable failure of the join attempt, which drops the attempt (``_join_task = None``)
        and leaves the loop because no rejoin is needed. When that state lasts (a rebalance begun and not
        finished — heartbeats off —, no join attempt in flight, no rejoin pending) for STRANDED_S, ask for the
        rejoin the client should have made. The server's side of the rejoin is then checked as any other."""
        coordinator = self.consumer._coordinator
        task = coordinator._join_task
        stranded = coordinator.rejoining and (task is None or task.is_done) and not coordinator.need_rejoin()
        now = time.monotonic()
        if not stranded:
            self.stranded_since = None
        elif self.stranded_since is None:
            self.stranded_since = now
        elif now - self.stranded_since >= STRANDED_S:
            why = "its join attempt dropped" if task is None else repr(task.exception)
            log.warning("kafka-python member stranded after a failed join (%s): requesting a rejoin", why)
            coordinator.request_rejoin()
            self.stranded_since = None

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self, offsets: dict[int, int]) -> bool:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        try:
            self.consumer.commit(
                {TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
                timeout_ms=int(COMMIT_TIMEOUT_S * 1000),
            )
        except KafkaError as exc:
            log.info("kafka-python commit %s failed: %r", offsets, exc)
            return False
        return True

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class AioKafkaConsumer:
    """aiokafka on an event loop owned by the member's thread: the loop runs during every call, which is
    nearly all the time (the member polls in a loop), so aiokafka's heartbeat task keeps running."""

    def __init__(self, bootstrap: str, topic: str, group: str, client_id: str, strategy: str) -> None:
        self.topic = topic
        self.loop = asyncio.new_event_loop()
        try:
            self.consumer = self.loop.run_until_complete(self._start(bootstrap, group, client_id, strategy))
        except BaseException:
            self.loop.close()
            raise

    async def _start(self, bootstrap: str, group: str, client_id: str, strategy: str) -> Any:
        import aiokafka
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

        assignors = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor,
        }
        from aiokafka.errors import KafkaError

        deadline = time.monotonic() + STARTUP_RETRY_S
        while True:  # (a member starting while the broker is killed -9 finds nobody to bootstrap from: again)
            consumer = aiokafka.AIOKafkaConsumer(
                self.topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                client_id=client_id,
                partition_assignment_strategy=(assignors[strategy],),
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                fetch_max_wait_ms=FETCH_WAIT_MS,
                retry_backoff_ms=100,
            )
            try:
                await consumer.start()
                return consumer
            except KafkaError as exc:
                await consumer.stop()
                if not exc.retriable or time.monotonic() >= deadline:
                    raise
                log.info("aiokafka start failed, starting again: %r", exc)
                await asyncio.sleep(0.2)

    def poll(self) -> list[tuple[int, int, bytes]]:
        batches = self.loop.run_until_complete(self.consumer.getmany(timeout_ms=POLL_MS))
        return [(tp.partition, r.offset, r.value) for tp, records in batches.items() for r in records]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self, offsets: dict[int, int]) -> bool:
        from aiokafka.errors import KafkaError
        from aiokafka.structs import TopicPartition

        commit = self.consumer.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
        try:
            self.loop.run_until_complete(asyncio.wait_for(commit, COMMIT_TIMEOUT_S))
        except (KafkaError, TimeoutError) as exc:
            log.info("aiokafka commit %s failed: %r", offsets, exc)
            return False
        return True

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.consumer.stop())
        finally:
            self.loop.close()


class ConfluentConsumer:
    """librdkafka with explicit rebalance callbacks: ``assign``/``unassign`` for the eager strategies,
    ``incremental_assign``/``incremental_unassign`` for cooperative-sticky."""

    def __init__(self, bootstrap: str, topic: str, group: str, client_id: str, strategy: str) -> None:
        import confluent_kafka

        self.topic = topic
        self.cooperative = strategy == "cooperative-sticky"
        self.events: list[tuple[str, list[int]]] = []
        self.consumer = confluent_kafka.Consumer(confluent_config(bootstrap, group, client_id, strategy))
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.events.append(("assign", sorted(tp.partition for tp in partitions)))
        if self.cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.events.append(("revoke", sorted(tp.partition for tp in partitions)))
        if self.cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self.events.append(("lost", sorted(tp.partition for tp in partitions)))
        self._on_revoke(consumer, partitions)

    def poll(self) -> list[tuple[int, int, bytes]]:
        out = []
        for message in self.consumer.consume(num_messages=1000, timeout=POLL_MS / 1000):
            if message.error() is None:
                out.append((message.partition(), message.offset(), message.value()))
            else:
                log.info("confluent-kafka consume error: %s", message.error())
        return out

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self, offsets: dict[int, int]) -> bool:
        import confluent_kafka

        partitions = [confluent_kafka.TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        try:
            result = self.consumer.commit(offsets=partitions, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            log.info("confluent-kafka commit %s failed: %s", offsets, exc)
            return False
        return all(tp.error is None for tp in result or [])

    def close(self) -> None:
        self.consumer.close()


def confluent_config(bootstrap: str, group: str, client_id: str, strategy: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "partition.assignment.strategy": strategy,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "fetch.wait.max.ms": FETCH_WAIT_MS,
        "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
        "topic.metadata.refresh.interval.ms": 5_000,
        # "debug": "protocol,cgrp",  # only when diagnosing a failure
    }


ADAPTERS: dict[str, Callable[[str, str, str, str, str], Consumer]] = {
    "kafka-python": KafkaPythonConsumer,
    "aiokafka": AioKafkaConsumer,
    "confluent-kafka": ConfluentConsumer,
}


class Member(threading.Thread):
    """One group member on its own thread: poll, record, commit what was read, publish the assignment."""

    def __init__(self, ledger: Ledger, client: str, name: str, **params: str) -> None:
        super().__init__(name=name, daemon=True)
        self.ledger, self.client, self.member = ledger, client, name
        self.params = params
        self.assigned: frozenset[int] = frozenset()
        self.polls = 0
        #: when the poll under way began, and when the last one returned (``time.monotonic()``): a failure's
        #: report tells a member stuck inside its client's poll from one that polls and is still out of step
        self.poll_began: float | None = None
        self.poll_returned: float | None = None
        self.error: BaseException | None = None
        self.adapter: Consumer | None = None
        self._stop_requested = threading.Event()

    def run(self) -> None:
        consumer: Consumer | None = None
        try:
            p = self.params
            consumer = ADAPTERS[self.client](p["bootstrap"], p["topic"], p["group"], self.member, p["strategy"])
            self.adapter = consumer
            pending: dict[int, int] = {}
            while not self._stop_requested.is_set():
                self.poll_began = time.monotonic()
                records = consumer.poll()
                self.poll_began, self.poll_returned = None, time.monotonic()
                self.ledger.record(self.member, records)
                for partition, offset, _ in records:
                    pending[partition] = max(offset + 1, pending.get(partition, 0))
                self.assigned = consumer.assignment()
                # offsets of partitions taken away are the new owner's business now
                pending = {p: o for p, o in pending.items() if p in self.assigned}
                if pending and consumer.commit(pending):
                    self.ledger.acknowledge(pending)
                    pending = {}
                self.polls += 1
        except BaseException as exc:
            log.exception("member %s failed", self.member)
            self.error = exc
        finally:
            self.assigned = frozenset()
            if consumer is not None:
                try:
                    consumer.close()
                except BaseException as exc:
                    log.exception("member %s failed to close", self.member)
                    self.error = self.error or exc

    def polling(self) -> str:
        """Where the member's loop is: inside a poll since when, or when its last poll returned."""
        now, began, returned = time.monotonic(), self.poll_began, self.poll_returned
        if began is not None:
            return f"in poll() for {now - began:.1f}s"
        return "not polled yet" if returned is None else f"last poll() returned {now - returned:.1f}s ago"

    def stop(self, timeout: float = 60.0) -> None:
        """Stop polling and close the client (a LeaveGroup); raises if the member failed."""
        self._stop_requested.set()
        self.join(timeout)
        assert not self.is_alive(), f"member {self.member} did not stop within {timeout}s"
        if self.error is not None:
            raise AssertionError(f"member {self.member} failed: {self.error!r}") from self.error


def member_stacks(members: list[Member]) -> str:
    """Where each member's thread is right now, then every other thread but this one (a client library's own
    I/O threads): tells a client stuck inside its library from a slow server."""
    frames = sys._current_frames()
    out = []
    for m in members:
        frame = frames.get(m.ident) if m.ident is not None else None
        describe = getattr(m.adapter, "describe", None)
        state = f" ({m.polling()}{'; ' + describe() if describe is not None else ''})"
        if frame is not None:
            out.append(f"--- {m.member}{state}\n" + "".join(traceback.format_stack(frame)[-8:]))
    mine = {m.ident for m in members} | {threading.get_ident()}
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident not in mine else None
        if frame is not None:
            out.append(f"--- thread {thread.name}\n" + "".join(traceback.format_stack(frame)[-8:]))
    return "\n".join(out)


@contextlib.contextmanager
def members_stopped_at_exit(members: list[Member]) -> Iterator[list[Member]]:
    """Stop every member still running when the block exits (failures included)."""
    try:
        yield members
    finally:
        for m in members:
            m._stop_requested.set()
        for m in members:
            m.join(60)


# -------------------------------------------------------------------------------------------- producers
def produce(client: str, bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Send ``(partition, value)`` records with acks=all; return once every one of them is acknowledged."""
    if client == "kafka-python":
        _produce_kafka_python(bootstrap, topic, records)
    elif client == "aiokafka":
        asyncio.run(_produce_aiokafka(bootstrap, topic, records))
    else:
        _produce_confluent(bootstrap, topic, records)


def _produce_kafka_python(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    import kafka

    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS
    )
    try:
        futures = [producer.send(topic, value=v, partition=p) for p, v in records]
        producer.flush(timeout=20)
        for future in futures:
            future.get(timeout=1)
    finally:
        producer.close(timeout=5)


async def _produce_aiokafka(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, partition=p) for p, v in records]
        await asyncio.wait_for(asyncio.gather(*futures), 20)
    finally:
        await producer.stop()


def _produce_confluent(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    import confluent_kafka

    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for partition, value in records:
        producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
    assert producer.flush(20) == 0, "confluent-kafka producer did not deliver everything within 20s"
    assert not errors, errors


def batch(phase: str, count: int, partitions: int) -> list[tuple[int, bytes]]:
    """``count`` records spread evenly over the partitions, values unique to the phase."""
    return [(i % partitions, f"{phase}-{i}".encode()) for i in range(count)]


# ------------------------------------------------------------------------------------------- inspector
@dataclass(frozen=True, slots=True)
class GroupView:
    state: str
    protocol: str
    #: client id → partitions of the test topic the member was assigned
    assignments: dict[str, frozenset[int]]


class Inspector:
    """The server's view of a group and topic, through kafka-python's admin client; every call is retried
    (a fresh admin client each time) until it succeeds or its deadline passes."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions

    def _admin(self, action: Callable[[Any], T], timeout: float = 15.0) -> T:
        import kafka

        def attempt() -> T:
            admin = kafka.KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5_000)
            try:
                return action(admin)
            finally:
                admin.close()

        return eventually(attempt, timeout, "an admin call", interval=0.2)

    def create_topic(self) -> None:
        from kafka.admin import NewTopic

        self._admin(lambda a: a.create_topics([NewTopic(self.topic, self.partitions, 1)]))

    def group(self, group: str) -> GroupView:
        def describe(admin: Any) -> GroupView:
            described = admin.describe_groups([group])[group]
            assignments = {}
            for m in described["members"]:
                assignment = m["member_assignment"] or {"assigned_partitions": []}
                assignments[m["client_id"]] = frozenset(
                    p for t in assignment["assigned_partitions"] if t["topic"] == self.topic for p in t["partitions"]
                )
            return GroupView(described["group_state"], described["protocol_data"], assignments)

        return self._admin(describe)

    def committed(self, group: str) -> dict[int, int]:
        def fetch(admin: Any) -> dict[int, int]:
            offsets = admin.list_group_offsets(group)[group]
            return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == self.topic}

        return self._admin(fetch)

    def end_offsets(self) -> dict[int, int]:
        from kafka.protocol.consumer.offsets import OffsetSpec
        from kafka.structs import TopicPartition

        def fetch(admin: Any) -> dict[int, int]:
            specs = {TopicPartition(self.topic, p): OffsetSpec.LATEST for p in range(self.partitions)}
            return {tp.partition: o.offset for tp, o in admin.list_partition_offsets(specs).items()}

        return self._admin(fetch)

    def wait_stable(self, group: str, members: list[Member], timeout: float = CATCH_UP_S) -> GroupView:
        """Wait until the server says Stable with exactly these members and every member's own view of its
        assignment equals the server's, the assignments being disjoint and covering every partition — and
        still the same ``STABLE_HOLD_S`` later: a kafka-python leader rebalances once more right after its
        first assignment when the metadata it then receives differs from the snapshot it assigned with."""
        everything = frozenset(range(self.partitions))
        names = {m.member for m in members}

        last: list[GroupView] = []
        candidate: list[tuple[float, GroupView]] = []

        def stable() -> GroupView | None:
            view = settled()
            if view is None:
                candidate.clear()
                return None
            if not candidate or candidate[0][1] != view:
                candidate[:] = [(time.monotonic(), view)]
                return None
            return view if time.monotonic() - candidate[0][0] >= STABLE_HOLD_S else None

        def settled() -> GroupView | None:
            for m in members:
                if m.error is not None:
                    raise AssertionError(f"member {m.member} failed: {m.error!r}")
            view = self.group(group)
            last[:] = [view]
            if view.state != "Stable" or set(view.assignments) != names:
                return None
            if any(view.assignments[m.member] != m.assigned for m in members):
                return None
            owned = [p for a in view.assignments.values() for p in a]
            if len(owned) != len(set(owned)) or set(owned) != everything:
                return None
            return view

        try:
            return eventually(stable, timeout, f"group {group} to be stable with {sorted(names)}", interval=0.1)
        except AssertionError as exc:
            seen = {m.member: sorted(m.assigned) for m in members}
            stacks = member_stacks(members)
            raise AssertionError(f"{exc}; server's last view {last}, the members' own views {seen}\n{stacks}") from None

    def wait_committed_to_end(self, group: str, timeout: float = CATCH_UP_S) -> dict[int, int]:
        end = self.end_offsets()
        return eventually(
            lambda: end if self.committed(group) == end else None, timeout, f"{group}'s commits to reach {end}"
        )


def read_topic(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = CATCH_UP_S
) -> Counter[bytes]:
    """Every value in the topic's log (assigned partitions, no group), read until ``expected`` are in."""
    import kafka
    from kafka.structs import TopicPartition

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        values: Counter[bytes] = Counter()
        deadline = time.monotonic() + timeout
        while sum(values.values()) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values.update(r.value for r in records)
        return values
    finally:
        consumer.close()
