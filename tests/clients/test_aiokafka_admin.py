"""aiokafka's admin client on the topic-admin APIs it has — ``create_partitions``, ``alter_configs``,
``describe_configs`` (a topic and the broker) and ``delete_records`` — with the results checked through the
APIs themselves and through an aiokafka consumer: the new partitions are in the metadata and consumed from,
the altered config reads back as a topic override, and the records below the new start offset are gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.clients.harness import Inspector
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(90)

TOPIC = "aio-admin"
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' source code of a topic override


def _entries(response: Any) -> dict[str, dict[str, Any]]:
    """config name -> its entry, from a DescribeConfigs response of one resource."""
    (resource,) = response.to_object()["resources"]
    assert resource["error_code"] == 0, resource
    return {entry["config_names"]: entry for entry in resource["config_entries"]}


async def _check(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.structs import TopicPartition

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await admin.start()
    await producer.start()
    try:
        created = await admin.create_partitions({TOPIC: NewPartitions(total_count=3)})
        assert [t[1] for t in created.topic_errors] == [0], created
        for partition in range(3):
            for i in range(2):
                await producer.send_and_wait(TOPIC, f"{partition}-{i}".encode(), partition=partition)

        altered = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "7200000"})]
        )
        assert [r[0] for r in altered[0].resources] == [0], altered
        (topic_configs,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
        retention = _entries(topic_configs)["retention.ms"]
        assert (retention["config_value"], retention["config_source"]) == ("7200000", DYNAMIC_TOPIC_CONFIG)
        (broker_configs,) = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])
        assert _entries(broker_configs)["num.partitions"]["read_only"] is True

        low = await admin.delete_records({TopicPartition(TOPIC, 2): RecordsToDelete(before_offset=1)})
        assert low == {TopicPartition(TOPIC, 2): 1}
    finally:
        await producer.stop()
        await admin.close()

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        parts = [TopicPartition(TOPIC, p) for p in range(3)]
        consumer.assign(parts)
        assert (await consumer.beginning_offsets(parts))[TopicPartition(TOPIC, 2)] == 1
        values: set[bytes] = set()
        deadline = asyncio.get_running_loop().time() + 20
        while len(values) < 5 and asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            values.update(m.value for messages in batch.values() for m in messages)
        assert values == {b"0-0", b"0-1", b"1-0", b"1-1", b"2-1"}  # 2-0 is below partition 2's new start
    finally:
        await consumer.stop()


def test_aiokafka_admin_grows_configures_and_trims_a_topic(server: ServerProcess) -> None:
    bootstrap = f"127.0.0.1:{server.port}"
    Inspector(bootstrap, TOPIC, 1).create_topic()
    asyncio.run(_check(bootstrap))
