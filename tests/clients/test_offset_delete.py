"""OffsetDelete (KIP-496) through the admin tools that have it — kafka-python's
``KafkaAdminClient.delete_group_offsets`` and Kafka's own ``kafka-consumer-groups --delete-offsets`` (skipped
where Kafka's Java tools are not installed; confluent-kafka's Python AdminClient has no OffsetDelete) —
on a classic group and on a KIP-848 consumer group of confluent-kafka consumers: while a member subscribes
to a topic its offsets are refused with GROUP_SUBSCRIBED_TO_TOPIC and kept; the offsets of a topic the group
does not subscribe to are deleted (a fetch then finds none); once the group is empty every offset can go;
an unknown group is GROUP_ID_NOT_FOUND."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.clients.harness import Inspector
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(90)

KEPT, DROPPED = "subscribed", "unsubscribed"


def _consumer(bootstrap: str, group: str, protocol: str) -> Any:
    from confluent_kafka import Consumer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "group.protocol": protocol,
    }
    if protocol == "classic":
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    return Consumer(config)


def _joined(consumer: Any, deadline_s: float = 30.0) -> None:
    """Poll until the consumer owns a partition of the subscribed topic."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        consumer.poll(0.2)
        if consumer.assignment():
            return
    raise AssertionError("the consumer was never assigned a partition")


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return {(tp.topic, tp.partition): meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()}
    finally:
        admin.close()


def _delete_kafka_python(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    from kafka import KafkaAdminClient
    from kafka.errors import NoError
    from kafka.structs import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        result = admin.delete_group_offsets(group, [TopicPartition(t, p) for t, p in partitions])
    finally:
        admin.close()
    return {(tp.topic, tp.partition): ("" if error is NoError else error.__name__) for tp, error in result.items()}


def _java_tool() -> list[str] | None:
    """The command line of Kafka's kafka-consumer-groups tool (its jars in ``../shared/java`` next to the
    repository, or where ``REGROUP_KAFKA_JAVA`` says), None when they or ``java`` are absent."""
    root = Path(os.environ.get("REGROUP_KAFKA_JAVA", Path(__file__).resolve().parents[2].parent / "shared" / "java"))
    jars = [root / "kafka-tools-cgc.jar", root / "kafka-clients.jar", *sorted((root / "lib").glob("*.jar"))]
    if not jars[0].is_file() or not jars[1].is_file() or shutil.which("java") is None:
        return None
    classpath = ":".join(str(j) for j in jars)
    return ["java", "-cp", classpath, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"]


def _delete_java(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """``kafka-consumer-groups --delete-offsets``: one ``--topic t:p`` per partition; the tool prints a table
    of TOPIC PARTITION STATUS ("Successful" or the error's message)."""
    tool = _java_tool()
    assert tool is not None
    args = [*tool, "--bootstrap-server", bootstrap, "--delete-offsets", "--group", group]
    for topic, partition in partitions:
        args += ["--topic", f"{topic}:{partition}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    outcome: dict[tuple[str, int], str] = {}
    for line in done.stdout.splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[1].isdigit():
            status = fields[2].strip()
            outcome[(fields[0], int(fields[1]))] = "" if status == "Successful" else status
    assert outcome, done.stdout + done.stderr
    return outcome


DELETERS = {"kafka-python": _delete_kafka_python, "java-tool": _delete_java}


def _subscribed_refusal(status: str) -> bool:
    """kafka-python names the error class, the Java tool prints the exception's message."""
    return status == "GroupSubscribedToTopicError" or "subscribed" in status.lower()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("deleter", sorted(DELETERS))
def test_offsets_of_unsubscribed_topics_are_deleted_and_subscribed_ones_refused(
    kip848_server: ServerProcess, protocol: str, deleter: str
) -> None:
    from confluent_kafka import TopicPartition

    if deleter == "java-tool" and _java_tool() is None:
        pytest.skip("Kafka's Java tools are not installed (../shared/java)")
    delete = DELETERS[deleter]
    bootstrap = f"127.0.0.1:{kip848_server.port}"
    Inspector(bootstrap, KEPT, 1).create_topic()
    Inspector(bootstrap, DROPPED, 1).create_topic()
    group = f"offset-delete-{protocol}-{deleter}"
    consumer = _consumer(bootstrap, group, protocol)
    try:
        consumer.subscribe([KEPT])
        _joined(consumer)
        consumer.commit(offsets=[TopicPartition(KEPT, 0, 3), TopicPartition(DROPPED, 0, 5)], asynchronous=False)
        assert _committed(bootstrap, group) == {(KEPT, 0): 3, (DROPPED, 0): 5}

        outcome = delete(bootstrap, group, [(KEPT, 0), (DROPPED, 0)])
        assert _subscribed_refusal(outcome[(KEPT, 0)]), outcome
        assert outcome[(DROPPED, 0)] == "", outcome
        assert _committed(bootstrap, group) == {(KEPT, 0): 3}
    finally:
        consumer.close()

    assert delete(bootstrap, group, [(KEPT, 0)]) == {(KEPT, 0): ""}  # empty now: nothing is protected
    assert _committed(bootstrap, group) == {}


def test_an_unknown_group_is_group_id_not_found(server: ServerProcess) -> None:
    from kafka.errors import GroupIdNotFoundError

    bootstrap = f"127.0.0.1:{server.port}"
    Inspector(bootstrap, KEPT, 1).create_topic()
    with pytest.raises(GroupIdNotFoundError):
        _delete_kafka_python(bootstrap, "no-such-group", [(KEPT, 0)])
