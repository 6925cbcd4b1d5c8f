"""Machinery of the KIP-932 share-group tests (confluent-kafka / librdkafka 2.16 ``ShareConsumer``).

* ``prepare``: a topic, and its share group's ``share.auto.offset.reset`` set (earliest) before any member
  subscribes, so the group starts at the beginning of the log;
* ``Sender``: a producer (acks=all) that returns where each record landed;
* ``Member``: one ShareConsumer that keeps every record handed to the test (``Delivery``: partition, offset,
  value, delivery count, when) and every acknowledgement the broker confirmed or failed (the client's
  acknowledgement-commit callback, which covers acknowledgements sent with a poll as well as commits);
* ``poll_until`` / ``poll_for``: polling with a deadline; ``assert_drained``: nothing arrives for a while, then a
  record produced afterwards does, and it is the only one (so the member really was fetching).

confluent_kafka is imported lazily so that a missing library skips the tests instead of failing collection.
Every client is closed by whoever created it, failures included.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.server.conftest import ServerProcess

#: a child process that joins a share group in explicit mode, polls until it gets records, prints them as one
#: JSON line ``[[partition, offset, value, delivery count], ...]`` and then sits on them (without acknowledging,
#: polling or closing) until it is killed. argv: bootstrap, group, topic.
HOLDER_SCRIPT = """
import json, sys, time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "client.id": "holder", "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    got = [m for m in consumer.poll(0.2)]
    if got:
        print(json.dumps([[m.partition(), m.offset(), m.value().decode() if m.error() is None else str(m.error()),
                           m.delivery_count() if m.error() is None else -1] for m in got]), flush=True)
        break
time.sleep(3600)
"""


def bootstrap(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.port}"


def prepare(server: ServerProcess, topic: str, partitions: int, group: str, reset: str = "earliest") -> None:
    """Create ``topic`` and set ``share.auto.offset.reset`` of the share group ``group`` (a GROUP config)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap(server)})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)
    entry = ConfigEntry("share.auto.offset.reset", reset, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("GROUP", group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


class Sender:
    """A producer with acks=all; ``send`` returns once every record is acknowledged."""

    def __init__(self, server: ServerProcess, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap(server), "acks": "all", "linger.ms": 2})

    def send(self, records: Sequence[tuple[int, bytes]]) -> dict[bytes, tuple[int, int]]:
        """Produce ``(partition, value)`` records; value → (partition, offset) where it landed."""
        placed: dict[bytes, tuple[int, int]] = {}
        failed: list[str] = []

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(f"{msg.value()!r}: {err}")
            else:
                placed[msg.value()] = (msg.partition(), msg.offset())

        for partition, value in records:
            self.producer.produce(self.topic, value=value, partition=partition, on_delivery=report)
        left = self.producer.flush(20)
        assert left == 0 and not failed and len(placed) == len(records), (left, failed, len(placed))
        return placed

    def close(self) -> None:
        self.producer.flush(5)


@dataclass(frozen=True, slots=True)
class Delivery:
    member: str
    partition: int
    offset: int
    value: bytes
    count: int  # the record's delivery count as the broker reported it
    at: float  # time.monotonic() when poll() returned it
    poll: int  # which of the member's polls returned it (1, 2, ...)


class Member:
    """One ShareConsumer subscribed to ``topic``.

    ``deliveries``: every record poll() returned, in order. ``confirmed``: (partition, offset) → how many times the
    broker confirmed an acknowledgement of it; ``ack_failures``: acknowledgements it refused. A poll that hands
    out an error (instead of a record) fails the test. In explicit mode the test must ``ack`` every record of a
    poll before the next one (librdkafka refuses to poll otherwise)."""

    def __init__(self, server: ServerProcess, group: str, topic: str, *, mode: str, name: str, **config: Any) -> None:
        from confluent_kafka import ShareConsumer

        self.name, self.mode = name, mode
        self.deliveries: list[Delivery] = []
        self.confirmed: Counter[tuple[int, int]] = Counter()
        self.ack_failures: list[str] = []
        self._pending: dict[tuple[int, int], Any] = {}  # explicit mode: the messages not yet acknowledged
        self._held: list[Delivery] = []  # records kept unacknowledged for good (no more polls then)
        self._closed = False
        self._polls = 0
        self.consumer = ShareConsumer(
            {
                "bootstrap.servers": bootstrap(server),
                "group.id": group,
                "client.id": name,
                "share.acknowledgement.mode": mode,
                **config,
            }
        )
        self.consumer.set_acknowledgement_commit_callback(self._acknowledged)
        self.consumer.subscribe([topic])

    def _acknowledged(self, offsets: dict[Any, set[int]], exc: Any) -> None:
        if exc is not None:
            self.ack_failures.append(f"{sorted((tp.partition, sorted(os)) for tp, os in offsets.items())}: {exc}")
            return
        for tp, offs in offsets.items():
            for offset in offs:
                self.confirmed[(tp.partition, offset)] += 1

    def poll(self, timeout: float = 0.2) -> list[Delivery]:
        assert not self._pending, f"{self.name}: records of the last poll not acknowledged: {sorted(self._pending)}"
        assert not self._held, f"{self.name}: holds records unacknowledged, must not poll again"
        got = []
        self._polls += 1
        for msg in self.consumer.poll(timeout):
            assert msg.error() is None, f"{self.name}: poll returned an error: {msg.error()}"
            delivery = Delivery(
                self.name,
                msg.partition(),
                msg.offset(),
                msg.value(),
                msg.delivery_count(),
                time.monotonic(),
                self._polls,
            )
            got.append(delivery)
            if self.mode == "explicit":
                self._pending[(delivery.partition, delivery.offset)] = msg
        self.deliveries.extend(got)
        return got

    def ack(self, delivery: Delivery, kind: Any = None) -> None:
        """Acknowledge (explicit mode) one record of the last poll: ACCEPT unless ``kind`` says otherwise."""
        from confluent_kafka import AcknowledgeType

        msg = self._pending.pop((delivery.partition, delivery.offset))
        self.consumer.acknowledge(msg, AcknowledgeType.ACCEPT if kind is None else kind)

    def hold(self, delivery: Delivery) -> None:
        """Keep a record of the last poll unacknowledged for good: the member must not poll again."""
        self._pending.pop((delivery.partition, delivery.offset))
        self._held.append(delivery)

    def commit(self) -> None:
        """commit_sync: send the pending acknowledgements and fail on any partition the broker refused."""
        results = self.consumer.commit_sync(10.0)
        refused = {(tp.topic, tp.partition): str(err) for tp, err in results.items() if err is not None}
        assert not refused, f"{self.name}: commit_sync refused: {refused}"

    def values(self) -> list[bytes]:
        return [d.value for d in self.deliveries]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.consumer.close()

    def __enter__(self) -> Member:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def accept(member: Member) -> Callable[[Delivery], None]:
    """An ``on_delivery`` for ``poll_until`` that accepts every record (explicit mode; a no-op in implicit)."""
    return (lambda d: member.ack(d)) if member.mode == "explicit" else (lambda d: None)


def poll_until(
    member: Member,
    done: Callable[[], bool],
    timeout: float,
    what: str,
    on_delivery: Callable[[Delivery], None] | None = None,
) -> None:
    """Poll ``member`` (handing each record to ``on_delivery``) until ``done()`` or the deadline fails the test."""
    handle = on_delivery or accept(member)
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            seen = [(d.partition, d.offset, d.value, d.count) for d in member.deliveries]
            raise AssertionError(f"{member.name}: no {what} within {timeout}s; deliveries so far: {seen}")
        for delivery in member.poll():
            handle(delivery)


def poll_for(member: Member, seconds: float, on_delivery: Callable[[Delivery], None] | None = None) -> list[Delivery]:
    """Poll ``member`` for ``seconds`` (accepting what arrives unless told otherwise); what arrived meanwhile."""
    handle = on_delivery or accept(member)
    first = len(member.deliveries)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for delivery in member.poll(min(0.2, max(0.01, end - time.monotonic()))):
            handle(delivery)
    return member.deliveries[first:]


def assert_drained(member: Member, sender: Sender, partition: int, quiet_s: float, timeout: float = 15.0) -> None:
    """Nothing reaches ``member`` for ``quiet_s``; then a record produced to ``partition`` does, and it is the only
    one, delivered for the first time: the member was fetching all along and there was nothing else to get."""
    first = len(member.deliveries)
    poll_for(member, quiet_s)
    sentinel = f"sentinel-{uuid.uuid4().hex[:8]}".encode()
    sender.send([(partition, sentinel)])
    poll_until(member, lambda: sentinel in member.values()[first:], timeout, "sentinel record")
    member.commit()
    late = [(d.partition, d.offset, d.value, d.count) for d in member.deliveries[first:]]
    assert [(v, c) for _, _, v, c in late] == [(sentinel, 1)], (
        f"{member.name} got {len(late) - 1} records besides the sentinel, first ones: {late[:12]}"
    )


def read_json_line(stream: Any, timeout: float) -> Any:
    """The next line a child printed on ``stream`` (a pipe), parsed as JSON; fails after ``timeout``."""
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"the child printed nothing within {timeout}s")
    line = stream.readline()
    assert line, "the child exited without printing its records"
    return json.loads(line)
