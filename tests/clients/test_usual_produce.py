"""Real producers against ``regroup serve``, where a Produce of one partition is answered at once from its bytes
(``server/at_once.py``; under ``--fsync always`` once the group commit has it on disk): confluent-kafka's
idempotent producer, kafka-python's and aiokafka's producers write side by side, one request in flight or
several, and every acknowledged record is read back in order, once, by a consumer, also after the server is
killed and started again (under ``interval`` the page cache outlives it)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.server.conftest import served

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")
pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaProducer  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import KafkaProducer  # noqa: E402

COUNT = 200


def _read_all(bootstrap: str, topic: str, partitions: int, want: int) -> dict[int, list[tuple[int, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        for _ in range(200):
            if sum(map(len, got.values())) >= want:
                break
            for message in consumer.consume(500, timeout=0.2):
                assert message.error() is None, message.error()
                got[message.partition()].append((message.offset(), message.value()))
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("fsync", ["interval", "always"])
def test_producers_of_three_clients_lose_and_repeat_nothing(tmp_path: Path, fsync: str) -> None:
    with served(tmp_path, "--fsync", fsync) as server:
        bootstrap = f"127.0.0.1:{server.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("usual", 3, 1)])["usual"].result(10)

        idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0,
                               "max.in.flight.requests.per.connection": 5})  # fmt: skip
        failures: list[object] = []
        for n in range(COUNT):
            idempotent.produce("usual", value=b"ck-%d" % n, partition=0,
                               on_delivery=lambda e, m: failures.append(e) if e else None)  # fmt: skip
            idempotent.poll(0)
        assert idempotent.flush(30) == 0 and failures == []

        plain = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        futures = [plain.send("usual", value=b"kp-%d" % n, partition=1) for n in range(COUNT)]
        plain.flush(30)
        assert [f.get(10).offset for f in futures] == list(range(COUNT))
        plain.close()

        async def aiokafka_produces() -> list[int]:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
            await producer.start()
            try:
                return [(await producer.send_and_wait("usual", b"ak-%d" % n, partition=2)).offset for n in range(50)]
            finally:
                await producer.stop()

        assert asyncio.run(aiokafka_produces()) == list(range(50))
        expected = {
            0: [(n, b"ck-%d" % n) for n in range(COUNT)],
            1: [(n, b"kp-%d" % n) for n in range(COUNT)],
            2: [(n, b"ak-%d" % n) for n in range(50)],
        }
        assert _read_all(bootstrap, "usual", 3, 2 * COUNT + 50) == expected
        server.kill(signal.SIGKILL)
        server.start()
        assert _read_all(bootstrap, "usual", 3, 2 * COUNT + 50) == expected
