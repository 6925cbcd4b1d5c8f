"""A regular-expression subscription through confluent-kafka's KIP-848 consumer (``group.protocol=consumer``,
``subscribe(["^rx-.*"])``): the group resolves the pattern (asynchronously, as Kafka does: the core's scenario
K03 holds the order), a later heartbeat brings every partition of the matching topics and none of a topic
that does not match, and the consumer reads the records produced to them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.clients.harness import Inspector
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(90)


def _produce(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        producer.produce(topic, value=f"{topic}-{p}".encode(), partition=p)
    assert producer.flush(15) == 0


def test_a_regex_subscription_is_resolved_and_its_topics_consumed(kip848_server: ServerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = f"127.0.0.1:{kip848_server.port}"
    layout = {"rx-a": 2, "rx-b": 3, "other": 2}
    for topic, partitions in layout.items():
        Inspector(bootstrap, topic, partitions).create_topic()
        _produce(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "regex-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    seen: set[bytes] = set()
    assigned: set[tuple[str, int]] = set()
    try:
        consumer.subscribe(["^rx-.*"])
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and len(seen) < 5:
            message: Any = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
            assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        assert assigned == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-b", 1), ("rx-b", 2)}
        assert seen == {f"{t}-{p}".encode() for t, p in assigned}
        position = consumer.position([TopicPartition("rx-a", 0)])
        assert position[0].offset == 1
    finally:
        consumer.close()
