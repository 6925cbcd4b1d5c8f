"""kafka-python against ``regroup serve``: a consumer group that joins, consumes (when the embedded
partition log's Produce/Fetch handlers are installed), auto-commits and commits explicit offsets, seen
through the admin client's group listing and description; commits acknowledged under ``--fsync interval`` and
``never`` read back after ``kill -9`` and a restart."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.clients.harness import KAFKA_PYTHON_POLL_MS
from tests.server.conftest import ServerProcess, served
from tests.server.wire import API_VERSIONS, WireClient

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.structs import OffsetAndMetadata, TopicPartition  # noqa: E402

PRODUCE, FETCH, METADATA, LIST_OFFSETS = 0, 1, 3, 2
TOPIC, GROUP = "kp-topic", "kp-group"


def advertised(server: ServerProcess) -> set[int]:
    with WireClient(server.port) as client:
        return {k.api_key for k in client.call(API_VERSIONS, 0).api_keys}


def offset_and_metadata(offset: int) -> Any:
    fields = OffsetAndMetadata._fields
    return OffsetAndMetadata(offset, "", -1) if "leader_epoch" in fields else OffsetAndMetadata(offset, "")


def listed_groups(admin: Any) -> dict[str, str]:
    """group id -> protocol type, from kafka-python 2.x ``list_consumer_groups`` or 3.x ``list_groups``."""
    if hasattr(admin, "list_consumer_groups"):
        return dict(admin.list_consumer_groups())
    return {g["group_id"]: g["protocol_type"] for g in admin.list_groups()}


def described_group(admin: Any, group: str) -> tuple[str, list[str]]:
    """(state, member client ids) from ``describe_consumer_groups`` (2.x) or ``describe_groups`` (3.x)."""
    if hasattr(admin, "describe_consumer_groups"):
        description = admin.describe_consumer_groups([group])[0]
        return description.state, [m.client_id for m in description.members]
    description = admin.describe_groups([group])[group]
    return description["group_state"], [m["client_id"] for m in description["members"]]


def test_consumer_group_commits_and_admin_views(server: ServerProcess) -> None:
    apis = advertised(server)
    if METADATA not in apis:
        pytest.skip("the Metadata handler (embedded partition log) is not installed")
    bootstrap = f"127.0.0.1:{server.port}"
    data_plane = {PRODUCE, FETCH, LIST_OFFSETS} <= apis
    if data_plane:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        for i in range(10):
            producer.send(TOPIC, key=b"k", value=f"m{i}".encode(), partition=0)
        producer.flush(timeout=10)
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        client_id="kp-consumer",
        enable_auto_commit=True,
        auto_commit_interval_ms=500,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        consumer_timeout_ms=500,
    )
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    try:
        # The topic's metadata first, so the first rebalance assigns its partition: kafka-python 3.0.12 starts a
        # second one when the metadata arrives after the first, and that second round is lost for good when a
        # short poll() times out while its SyncGroup is in flight (the member never takes its assignment nor
        # heartbeats again); the 1 s poll is the harness's guard against the same (tests/clients/harness.py).
        if data_plane:
            assert consumer.partitions_for_topic(TOPIC) == {0}
        consumer.subscribe([TOPIC])
        consumed: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not consumer.assignment() or (data_plane and len(consumed) < 10)):
            for records in consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS).values():
                consumed.extend(r.value for r in records)
        tp = TopicPartition(TOPIC, 0)
        assert tp in consumer.assignment()
        if data_plane:
            assert consumed == [f"m{i}".encode() for i in range(10)]
        consumer.commit({tp: offset_and_metadata(7)})
        assert consumer.committed(tp) == 7

        assert listed_groups(admin)[GROUP] == "consumer"
        state, clients = described_group(admin, GROUP)
        assert state == "Stable" and clients == ["kp-consumer"]
    finally:
        consumer.close()
    try:
        state, clients = described_group(admin, GROUP)
        assert (state, clients) == ("Empty", [])  # close() sent LeaveGroup
    finally:
        admin.close()


@pytest.mark.parametrize("fsync", ["interval", "never"])
def test_committed_offsets_outlive_a_kill_under_interval_and_never(tmp_path: Path, fsync: str) -> None:
    """Under ``--fsync interval`` and ``never`` the coordinator writes a turn's committed offsets on its event loop
    before answering them: kafka-python's commits, acknowledged, are all there after ``kill -9`` and a restart
    (the page cache outlives the process), read back by a new consumer of the group."""
    with served(tmp_path, "--fsync", fsync) as server:
        bootstrap = f"127.0.0.1:{server.port}"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
        try:
            admin.create_topics([NewTopic(name="kp-durable", num_partitions=3, replication_factor=1)])
        finally:
            admin.close()
        partitions = [TopicPartition("kp-durable", p) for p in range(3)]
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-durable-group", enable_auto_commit=False)
        try:
            consumer.assign(partitions)
            for offset in range(1, 41):  # (each commit answered before the next is sent)
                consumer.commit({tp: offset_and_metadata(offset * (tp.partition + 1)) for tp in partitions})
            assert [consumer.committed(tp) for tp in partitions] == [40, 80, 120]
        finally:
            consumer.close(autocommit=False)
        server.kill(signal.SIGKILL)
        server.start()
        reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-durable-group", enable_auto_commit=False)
        try:
            assert [reader.committed(tp) for tp in partitions] == [40, 80, 120]
        finally:
            reader.close(autocommit=False)
