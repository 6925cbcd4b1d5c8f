"""Describing the cluster and its topics, and growing topics, through the libraries' admin clients:

* confluent-kafka: ``AdminClient.describe_cluster`` and ``describe_topics`` (librdkafka sends Metadata with
  authorized operations for both), ``create_partitions`` with ``validate_only`` and its errors;
* kafka-python: ``KafkaAdminClient.describe_cluster`` (DescribeCluster), ``describe_topic_partitions``
  (DescribeTopicPartitions, paged with its cursor), ``describe_topics`` (Metadata), ``create_partitions``
  with a manual assignment and its errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(60)

TOPIC_OPERATIONS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPERATIONS = {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"} | {
    "IDEMPOTENT_WRITE"
}


def kafka_python_admin(server: ServerProcess) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{server.port}", request_timeout_ms=10_000)


def test_confluent_kafka_describes_cluster_and_topics(server: ServerProcess) -> None:
    from confluent_kafka import KafkaError, KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}"})
    admin.create_topics([NewTopic("described", 2, 1)])["described"].result(10)

    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert cluster.cluster_id == "regroup-cluster" and cluster.controller.id == 0
    assert [(n.id, n.host, n.port, n.rack) for n in cluster.nodes] == [(0, "127.0.0.1", server.port, None)]
    assert {op.name for op in cluster.authorized_operations} == CLUSTER_OPERATIONS
    assert admin.describe_cluster().result(10).authorized_operations is None

    # validate-only first (nothing changes), then for real; a smaller count is INVALID_PARTITIONS
    assert admin.create_partitions([NewPartitions("described", 3)], validate_only=True)["described"].result(10) is None
    assert admin.create_partitions([NewPartitions("described", 3, [[0]])])["described"].result(10) is None
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions("described", 2)])["described"].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    described = admin.describe_topics(TopicCollection(["described", "not-there"]), include_authorized_operations=True)
    topic = described["described"].result(10)
    assert topic.name == "described" and not topic.is_internal
    assert {op.name for op in topic.authorized_operations} == TOPIC_OPERATIONS
    assert [(p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr]) for p in topic.partitions] == [
        (0, 0, [0], [0]),
        (1, 0, [0], [0]),
        (2, 0, [0], [0]),
    ]
    with pytest.raises(KafkaException) as unknown:
        described["not-there"].result(10)
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # kafka-python's DescribeTopicPartitions names the same topic id
    client = kafka_python_admin(server)
    try:
        by_kafka_python = client.describe_topic_partitions(["described"])["topics"][0]["topic_id"]
    finally:
        client.close()
    assert str(topic.topic_id) == _base64_uuid(by_kafka_python)


def _base64_uuid(value: uuid.UUID) -> str:
    """A topic id as librdkafka prints it (URL-unsafe base64 of the 16 bytes, no padding)."""
    import base64

    return base64.b64encode(value.bytes).decode().rstrip("=")


def test_kafka_python_describes_cluster_and_topic_partitions(server: ServerProcess) -> None:
    from kafka.errors import InvalidPartitionsError, InvalidReplicationAssignmentError, UnknownTopicOrPartitionError

    client = kafka_python_admin(server)
    try:
        client.create_topics({"paged": {"num_partitions": 3}, "second": {"num_partitions": 1}})
        cluster = client.describe_cluster()
        assert (cluster["cluster_id"], cluster["controller_id"]) == ("regroup-cluster", 0)
        assert cluster["brokers"] == [
            {"broker_id": 0, "host": "127.0.0.1", "port": server.port, "rack": None, "is_fenced": False}
        ]
        assert set(cluster["authorized_operations"]) == CLUSTER_OPERATIONS

        # grow "paged" to 5 with a manual assignment to broker 0; errors as Kafka's
        response = client.create_partitions({"paged": {"count": 5, "assignments": [[0], [0]]}})
        assert [(r.name, r.error_code) for r in response.results] == [("paged", 0)]
        with pytest.raises(InvalidReplicationAssignmentError):
            client.create_partitions({"paged": {"count": 6, "assignments": [[1]]}})
        with pytest.raises(InvalidPartitionsError):
            client.create_partitions({"paged": 5})
        with pytest.raises(UnknownTopicOrPartitionError):
            client.create_partitions({"no-such-topic": 2})

        pages: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = client.describe_topic_partitions(
                ["second", "paged", "missing"], response_partition_limit=2, cursor=cursor
            )
            pages.append(page)
            cursor = page["next_cursor"]
            if cursor is None:
                break
        seen = [(t["name"], p["partition_index"]) for page in pages for t in page["topics"] for p in t["partitions"]]
        assert seen == [("paged", 0), ("paged", 1), ("paged", 2), ("paged", 3), ("paged", 4), ("second", 0)]
        errors = {t["name"]: t["error_code"] for page in pages for t in page["topics"]}
        assert errors == {"paged": 0, "second": 0, "missing": 3}
        assert [t["name"] for t in pages[0]["topics"]] == ["missing", "paged"]  # in name order
        partition = pages[0]["topics"][1]["partitions"][0]
        assert (partition["leader_id"], partition["replica_nodes"], partition["isr_nodes"]) == (0, [0], [0])

        described = {t["name"]: t for t in client.describe_topics(["paged"])}
        assert len(described["paged"]["partitions"]) == 5
    finally:
        client.close()
