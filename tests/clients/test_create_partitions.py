"""Partitions added to a topic while a group consumes it, through each library's admin client:
``AdminClient.create_partitions`` (confluent-kafka) and ``KafkaAdminClient.create_partitions``
(kafka-python).

* a classic confluent-kafka group (cooperative-sticky): the members learn the new count from a metadata
  refresh (lowered to 500 ms here), the leader rejoins and assigns the new partitions;
* a ``group.protocol=consumer`` confluent-kafka group: the server hands the coordinator the grown topic at
  once and the members get the new partitions with a heartbeat;
* a classic kafka-python group (range), ``metadata_max_age_ms`` lowered to 500 ms.

Each time the group settles on the two partitions first, then on all four after the growth (the server's
assignment covers them, without overlap, and every member's own view agrees), and every record produced to
the new partitions is read by the member the server gave that partition."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.clients.harness import batch, produce
from tests.clients.kip848 import Book, Owner, stopped_at_exit, wait_for, wait_settled
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(120)

BEFORE, AFTER = 2, 4
METADATA_REFRESH_MS = 500


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})  # (kept referenced until the result is in)
    client.create_topics([NewTopic(topic, BEFORE, 1)])[topic].result(10)


def add_partitions(admin: str, bootstrap: str, topic: str) -> None:
    if admin == "confluent-kafka":
        from confluent_kafka.admin import AdminClient, NewPartitions

        admin_client = AdminClient({"bootstrap.servers": bootstrap})
        assert admin_client.create_partitions([NewPartitions(topic, AFTER)])[topic].result(10) is None
    else:
        from kafka import KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        try:
            response = client.create_partitions({topic: AFTER})
            assert [(r.name, r.error_code) for r in response.results] == [(topic, 0)]
        finally:
            client.close()


def owner(book: Book, bootstrap: str, topic: str, group: str, name: str, protocol: str) -> Owner:
    member = Owner(book, bootstrap, topic, group, name, protocol=protocol)
    member.config["topic.metadata.refresh.interval.ms"] = METADATA_REFRESH_MS
    return member


class KafkaPythonOwner(threading.Thread):
    """A kafka-python member with the attributes ``wait_settled`` reads (``member``, ``owned``, ``error``,
    ``fatal``); it records what it reads in the ``Book`` and commits after every poll."""

    def __init__(self, book: Book, bootstrap: str, topic: str, group: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.book, self.bootstrap, self.topic, self.group, self.member = book, bootstrap, topic, group, name
        self.owned: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self.fatal: Any = None
        self._stop_requested = threading.Event()

    def run(self) -> None:
        import kafka
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        consumer = None
        try:
            consumer = kafka.KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                client_id=self.member,
                partition_assignment_strategy=[RangePartitionAssignor],
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6_000,
                heartbeat_interval_ms=200,
                fetch_max_wait_ms=100,
                metadata_max_age_ms=METADATA_REFRESH_MS,
                retry_backoff_ms=100,
            )
            consumer.partitions_for_topic(self.topic)  # (the first leader then knows the partitions)
            consumer.subscribe([self.topic])
            while not self._stop_requested.is_set():
                batches = consumer.poll(timeout_ms=1_000)  # (the harness's kafka-python poll: see its README)
                for tp, records in batches.items():
                    for r in records:
                        self.book.process(self.member, tp.partition, r.offset, r.value)
                self.owned = frozenset(tp.partition for tp in consumer.assignment())
                if batches:
                    consumer.commit()
        except BaseException as exc:
            self.error = exc
        finally:
            if consumer is not None:
                consumer.close(autocommit=False)

    def stop(self, timeout: float = 20.0) -> None:
        self._stop_requested.set()
        self.join(timeout)
        assert not self.is_alive(), f"member {self.member} did not stop within {timeout}s"
        if self.error is not None:
            raise AssertionError(f"member {self.member} failed: {self.error!r}") from self.error


@pytest.mark.parametrize(
    ("members", "admin"),
    [
        ("confluent-kafka classic", "confluent-kafka"),
        ("confluent-kafka consumer", "kafka-python"),
        ("kafka-python classic", "confluent-kafka"),
    ],
)
def test_group_takes_up_added_partitions(kip848_server: ServerProcess, members: str, admin: str) -> None:
    port = kip848_server.port
    bootstrap = f"127.0.0.1:{port}"
    topic, group = f"grown-{members.replace(' ', '-')}", f"grows-{members.replace(' ', '-')}"
    create_topic(bootstrap, topic)
    book = Book()
    running: list[Any] = []
    with stopped_at_exit(running):
        for name in ("a", "b"):
            if members == "kafka-python classic":
                member: Any = KafkaPythonOwner(book, bootstrap, topic, group, name)
            else:
                member = owner(book, bootstrap, topic, group, name, members.split()[1])
            running.append(member)
            member.start()
        first = batch("before", 20, BEFORE)
        produce("confluent-kafka", bootstrap, topic, first)
        wait_settled(port, group, topic, BEFORE, running)
        wait_for(lambda: book.values() >= {v for _, v in first}, 20, "the first records to be read")

        grown_at = time.monotonic()
        add_partitions(admin, bootstrap, topic)
        after = wait_settled(port, group, topic, AFTER, running, timeout=60)
        second = batch("after", 40, AFTER)
        produce("kafka-python", bootstrap, topic, second)
        wait_for(lambda: book.values() >= {v for _, v in second}, 20, "the records of the new partitions to be read")
        for m in list(running):
            m.stop()
            running.remove(m)

    owner_of = {p: name for name, ps in after.assignments.items() for p in ps}
    assert sorted(owner_of) == list(range(AFTER))
    readers = {(r.partition, r.member) for r in book.processed if r.t >= grown_at and r.value.startswith(b"after")}
    assert {p for p, _ in readers} == set(range(AFTER))
    assert all(owner_of[p] == m for p, m in readers), (readers, owner_of)
