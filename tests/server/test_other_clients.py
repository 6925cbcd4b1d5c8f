"""aiokafka and confluent-kafka (librdkafka) against ``regroup serve``: produce, consume in a group, commit
explicit offsets, and the admin view of the group. Each test is skipped when its client is not installed
or the embedded partition log's data handlers are not registered."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.server.conftest import ServerProcess
from tests.server.wire import API_VERSIONS, WireClient

DATA_PLANE = {0, 1, 2, 3}  # Produce, Fetch, ListOffsets, Metadata


def require_data_plane(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        apis = {k.api_key for k in client.call(API_VERSIONS, 0).api_keys}
    if not DATA_PLANE.issubset(apis):
        pytest.skip("the embedded partition log's handlers are not installed")


def test_aiokafka_group_with_two_consumers(server: ServerProcess) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    require_data_plane(server)
    bootstrap = f"127.0.0.1:{server.port}"

    async def scenario() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        for i in range(10):
            await producer.send_and_wait("aio-topic", f"m{i}".encode(), partition=0)
        await producer.stop()
        first = aiokafka.AIOKafkaConsumer(
            "aio-topic", bootstrap_servers=bootstrap, group_id="aio-group", client_id="aio-1",
            auto_offset_reset="earliest", enable_auto_commit=False,
        )  # fmt: skip
        await first.start()
        consumed: list[bytes] = []
        while len(consumed) < 10:
            batch = await asyncio.wait_for(first.getmany(timeout_ms=200), 10)
            consumed += [m.value for messages in batch.values() for m in messages]
        assert consumed == [f"m{i}".encode() for i in range(10)]
        tp = TopicPartition("aio-topic", 0)
        await first.commit({tp: OffsetAndMetadata(10, "")})
        assert await first.committed(tp) == 10
        second = aiokafka.AIOKafkaConsumer("aio-topic", bootstrap_servers=bootstrap, group_id="aio-group")
        await second.start()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # the group rebalances: one partition, two members
            await first.getmany(timeout_ms=100)
            await second.getmany(timeout_ms=100)
            if len(first.assignment()) + len(second.assignment()) == 1 and first._coordinator.generation >= 2:
                break
        assert len(first.assignment()) + len(second.assignment()) == 1
        await second.stop()
        await first.stop()

    asyncio.run(scenario())


def test_confluent_kafka_group_commit_and_admin(server: ServerProcess) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    require_data_plane(server)
    bootstrap = f"127.0.0.1:{server.port}"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce("ck-topic", f"m{i}".encode(), partition=0)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "ck-group", "client.id": "ck-1",
        "auto.offset.reset": "earliest", "enable.auto.commit": True,
    })  # fmt: skip
    consumer.subscribe(["ck-topic"])
    consumed: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(consumed) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            consumed.append(message.value())
    assert consumed == [f"m{i}".encode() for i in range(10)]
    consumer.commit(offsets=[confluent_kafka.TopicPartition("ck-topic", 0, 7)], asynchronous=False)
    assert consumer.committed([confluent_kafka.TopicPartition("ck-topic", 0)], timeout=5)[0].offset == 7
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
    assert "ck-group" in listed
    described = admin.describe_consumer_groups(["ck-group"])["ck-group"].result(10)
    assert str(described.state).endswith("STABLE")
    assert [(m.client_id, m.host) for m in described.members] == [("ck-1", "/127.0.0.1")]
    consumer.close()
    assert str(admin.describe_consumer_groups(["ck-group"])["ck-group"].result(10).state).endswith("EMPTY")


def test_confluent_kafka_admin_commit_to_unknown_topics_is_refused_per_partition(server: ServerProcess) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    require_data_plane(server)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}"})
    admin.create_topics([NewTopic("ck-known", 2, 1)])["ck-known"].result(10)
    partitions = [
        confluent_kafka.TopicPartition("ck-known", 0, 5),
        confluent_kafka.TopicPartition("ck-missing", 0, 6),
        confluent_kafka.TopicPartition("ck-known", 5, 7),
    ]
    request = confluent_kafka.ConsumerGroupTopicPartitions("ck-admin", partitions)
    answered = admin.alter_consumer_group_offsets([request])["ck-admin"].result(10).topic_partitions
    errors = {(tp.topic, tp.partition): tp.error.code() if tp.error else None for tp in answered}
    unknown = confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
    assert errors == {("ck-known", 0): None, ("ck-missing", 0): unknown, ("ck-known", 5): unknown}
    listed = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions("ck-admin")])
    committed = listed["ck-admin"].result(10).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [("ck-known", 0, 5)]
