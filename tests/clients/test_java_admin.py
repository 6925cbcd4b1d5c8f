"""Kafka's own Java Admin client (``../shared/java``: built from Kafka's source) against ``regroup serve``:
incremental config changes read back with their source (a topic's and a group's), the broker's configs,
CreatePartitions, DeleteRecords, OffsetDelete and DescribeCluster, each checked by ``java/AdminChecks.java``.
Skipped where Kafka's Java client or a JDK is not installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.clients.harness import Inspector
from tests.clients.java_tools import kafka_classpath
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    classpath = kafka_classpath()
    if classpath is None:
        pytest.skip("Kafka's Java client or a JDK is not installed (../shared/java)")
    out = tmp_path_factory.mktemp("java")
    source = Path(__file__).with_name("java") / "AdminChecks.java"
    subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(source)], check=True, timeout=120)
    return classpath, out


def test_the_java_admin_client_runs_the_admin_apis(server: ServerProcess, checks: tuple[str, Path]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    classpath, classes = checks
    bootstrap = f"127.0.0.1:{server.port}"
    topic, group = "java-admin", "java-admin-group"
    Inspector(bootstrap, topic, 2).create_topic()
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    offsets = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 0)])
    admin.alter_consumer_group_offsets([offsets], request_timeout=10)[group].result(15)

    java = ["java", "-cp", f"{classes}:{classpath}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
    done = subprocess.run(
        [*java, "AdminChecks", bootstrap, topic, group],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    results = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["alter-topic-config"] == "ok", results
    assert results["describe-topic-config"] == "3600000 DYNAMIC_TOPIC_CONFIG", results
    assert results["describe-broker-config"] == "1 true", results
    assert results["create-partitions"] == "3", results
    assert results["delete-records"] == "1", results
    assert results["delete-group-offsets"] == f"{topic}-0", results  # the group kept partition 0's offset only
    assert results["group-config"] == "6000 DYNAMIC_GROUP_CONFIG", results
    assert results["describe-cluster"].endswith(" 1"), results
