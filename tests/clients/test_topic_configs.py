"""Topic configurations, the log policies they control and DeleteRecords, through real admin clients against
``regroup serve``: confluent-kafka's ``AdminClient`` (create_topics with configs, describe_configs,
alter_configs, incremental_alter_configs, delete_records) and kafka-python's ``KafkaAdminClient``
(describe_configs, alter_configs, delete_records). Results are checked the way a user would check them:
configurations read back with their source after a kill -9 and restart, records gone after retention and below
a DeleteRecords offset (a consumer starts at the new log start), the latest value per key after compaction, a
2 MB record produced and consumed once the limits are raised, LogAppendTime stamps; the broker's settings
described from its flags; bad input answered with Kafka's codes (raw frames where a library cannot ask)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServerProcess, served
from tests.server.wire import WireClient

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC = 40, 42, 3
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER, DELETE_RECORDS = 32, 33, 44, 21


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with served(tmp_path, "--log-retention-check-interval-ms", "100") as proc:
        yield proc


def _admin(server: ServerProcess) -> Any:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}"})


def _create(admin: Any, topic: str, partitions: int = 1, **config: str) -> None:
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(10)


def _describe(admin: Any, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return dict(admin.describe_configs([resource])[resource].result(10))


def _error_code(future: Any) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(10)
    return int(raised.value.args[0].code())


def _consume(server: ServerProcess, topic: str, want: int, timeout: float = 10.0, **extra: Any) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{server.port}", "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])
        got: list[Any] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(got) < want:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
        return got
    finally:
        consumer.close()


def _kafka_python_read(server: ServerProcess, topic: str, want: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) from the log start with kafka-python's consumer (empty batches stepped over)."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{server.port}", enable_auto_commit=False)
    try:
        partition = KTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(got) < want:
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.offset, r.key, r.value) for r in records]
        return got
    finally:
        consumer.close()


def _produce(server: ServerProcess, topic: str, records: list[tuple[bytes | None, bytes | None]], **extra: Any) -> None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{server.port}", "linger.ms": 0, **extra})
    errors: list[Any] = []
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=lambda e, m: errors.append(e))
        producer.flush(10)
    assert errors == [None] * len(records)


def test_topic_configs_are_validated_stored_and_described_with_their_source(server: ServerProcess) -> None:
    admin = _admin(server)
    _create(admin, "configured", **{"retention.ms": "3600000", "cleanup.policy": "compact, delete"})
    bad = admin.create_topics([NewTopic("bad-value", 1, 1, config={"retention.ms": "soon"}),
                               NewTopic("bad-name", 1, 1, config={"retention.minutes": "1"})])  # fmt: skip
    assert _error_code(bad["bad-value"]) == INVALID_CONFIG and _error_code(bad["bad-name"]) == INVALID_CONFIG
    assert set(admin.list_topics(timeout=10).topics) == {"configured"}

    described = _describe(admin, "configured")
    assert described["retention.ms"].value == "3600000"
    assert described["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["cleanup.policy"].value == "compact,delete"
    assert described["max.message.bytes"].value == "1048588"
    assert described["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not described["retention.ms"].is_read_only

    resource = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("segment.bytes", "100000", incremental_operation=AlterConfigOpType.SET),
    ])  # fmt: skip
    admin.incremental_alter_configs([resource])[resource].result(10)
    append_to_int = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.APPEND)])  # fmt: skip
    assert _error_code(admin.incremental_alter_configs([append_to_int])[append_to_int]) == INVALID_CONFIG
    too_small = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    assert _error_code(admin.incremental_alter_configs([too_small])[too_small]) == INVALID_CONFIG
    only_checked = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin.incremental_alter_configs([only_checked], validate_only=True)[only_checked].result(10)
    missing = ConfigResource(ResourceType.TOPIC, "missing", incremental_configs=[
        ConfigEntry("segment.bytes", "100000", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    assert _error_code(admin.incremental_alter_configs([missing])[missing]) == UNKNOWN_TOPIC

    server.restart()  # kill -9: what was acknowledged is on disk
    described = _describe(_admin(server), "configured")
    assert described["cleanup.policy"].value == "delete"
    assert described["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["retention.ms"].value == "604800000"
    assert described["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["segment.bytes"].value == "100000"
    assert described["min.insync.replicas"].source == ConfigSource.DEFAULT_CONFIG.value

    # AlterConfigs replaces the whole set
    admin = _admin(server)
    whole = ConfigResource(ResourceType.TOPIC, "configured", set_config={"retention.bytes": "5000"})
    admin.alter_configs([whole])[whole].result(10)
    described = _describe(admin, "configured")
    assert described["retention.bytes"].value == "5000"
    assert described["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_kafka_python_admin_describes_alters_and_deletes_records(server: ServerProcess) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewTopic as KNewTopic
    from kafka.structs import TopicPartition as KTopicPartition

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{server.port}", request_timeout_ms=10_000)
    try:
        admin.create_topics([KNewTopic("kp", 1, 1, topic_configs={"retention.bytes": "1000000"})])
        modified = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp")])["topic"]["kp"]
        assert {k: (v["value"], v["config_source"]) for k, v in modified.items()} == {
            "retention.bytes": ("1000000", "DYNAMIC_TOPIC_CONFIG")
        }
        for incremental in (False, True):
            resource = KConfigResource(ConfigResourceType.TOPIC, "kp", configs={"retention.ms": f"6000{incremental:d}"})
            assert admin.alter_configs([resource], incremental=incremental) == {"topic": {"kp": "OK"}}
        everything = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp")], config_filter="all")
        entries = everything["topic"]["kp"]
        assert entries["retention.ms"]["value"] == "60001" and entries["retention.ms"]["config_type"] == "LONG"
        assert entries["segment.ms"]["config_source"] == "DEFAULT_CONFIG"
        _produce(server, "kp", [(None, b"r%d" % i) for i in range(10)])
        deleted = admin.delete_records({KTopicPartition("kp", 0): 6})
        assert deleted[KTopicPartition("kp", 0)]["low_watermark"] == 6
    finally:
        admin.close()
    got = _consume(server, "kp", 4)
    assert [m.offset() for m in got] == [6, 7, 8, 9]


def test_delete_records_survives_a_restart_and_checks_offsets(server: ServerProcess) -> None:
    admin = _admin(server)
    _create(admin, "trimmed", 2)
    _produce(server, "trimmed", [(None, b"v%d" % i) for i in range(20)])
    result = admin.delete_records([TopicPartition("trimmed", 0, 12)])
    assert next(iter(result.values())).result(10).low_watermark == 12
    beyond = admin.delete_records([TopicPartition("trimmed", 0, 21)])
    assert _error_code(next(iter(beyond.values()))) == 1  # OFFSET_OUT_OF_RANGE
    server.restart()
    got = _consume(server, "trimmed", 8)
    assert [m.offset() for m in got] == list(range(12, 20))
    admin = _admin(server)
    everything = admin.delete_records([TopicPartition("trimmed", 0, -1)])  # -1: the high watermark
    assert next(iter(everything.values())).result(10).low_watermark == 20
    with WireClient(server.port) as wire:
        answer = wire.call(DELETE_RECORDS, 2, topics=[
            {"name": "trimmed", "partitions": [{"partition_index": 1, "offset": -5},
                                                {"partition_index": 7, "offset": 0}]},
            {"name": "nope", "partitions": [{"partition_index": 0, "offset": 0}]},
        ], timeout=1000)  # fmt: skip
    codes = [(p.partition_index, int(p.error_code), p.low_watermark) for t in answer.topics for p in t.partitions]
    assert codes == [(1, 1, -1), (7, UNKNOWN_TOPIC, -1), (0, UNKNOWN_TOPIC, -1)]


def test_retention_deletes_old_segments_and_consumers_start_at_the_new_log_start(server: ServerProcess) -> None:
    admin = _admin(server)
    _create(admin, "expiring", **{"retention.ms": "500", "segment.bytes": "400"})
    _produce(server, "expiring", [(None, b"x" * 50) for _ in range(30)])
    time.sleep(1.5)  # past retention.ms, and a few cleaning passes (every 100 ms)
    low, high = Consumer({"bootstrap.servers": f"127.0.0.1:{server.port}", "group.id": "w"}).get_watermark_offsets(
        TopicPartition("expiring", 0), timeout=10
    )
    assert high == 30 and 0 < low < 30
    got = _consume(server, "expiring", high - low)
    assert [m.offset() for m in got] == list(range(low, high))
    with WireClient(server.port) as wire:
        fetched = wire.call(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, topics=[{"topic": "expiring", "partitions": [
                                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                 "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                            forgotten_topics_data=[], rack_id="")  # fmt: skip
    assert int(fetched.responses[0].partitions[0].error_code) == 1  # OFFSET_OUT_OF_RANGE below the log start


def test_compaction_keeps_the_latest_value_per_key_and_drops_old_tombstones(server: ServerProcess) -> None:
    admin = _admin(server)
    # The tombstone's horizon is far away while the first reads run, then brought near by an AlterConfigs:
    # what is checked does not depend on how fast the machine reads.
    _create(admin, "compacted", **{"cleanup.policy": "compact", "segment.bytes": "300",
                                   "delete.retention.ms": "600000"})  # fmt: skip
    records: list[tuple[bytes | None, bytes | None]] = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(40)]
    records += [(b"k0", None)]  # a tombstone for k0
    records += [(b"filler", b"f%d" % i) for i in range(12)]  # rolls the tombstone out of the active segment
    _produce(server, "compacted", records[:41])
    _produce(server, "compacted", records[41:])
    time.sleep(0.5)
    got = _consume(server, "compacted", 10, timeout=3)
    by_key: dict[bytes, list[bytes | None]] = {}
    for m in got:
        by_key.setdefault(m.key(), []).append(m.value())
    assert by_key[b"k1"] == [b"v37"] and by_key[b"k2"] == [b"v38"] and by_key[b"k3"] == [b"v39"]
    assert by_key[b"k0"] == [None]  # the tombstone is still there (delete.retention.ms not passed)
    offsets = [m.offset() for m in got]
    assert offsets == sorted(set(offsets))
    assert _kafka_python_read(server, "compacted", len(got))[: len(got)] == [
        (m.offset(), m.key(), m.value()) for m in got
    ]
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{server.port}"})
    keyless: list[Any] = []
    producer.produce("compacted", value=b"no key", partition=0, on_delivery=lambda e, m: keyless.append(e))
    producer.flush(10)
    assert [e.code() for e in keyless] == [confluent_kafka.KafkaError.INVALID_RECORD]
    near = ConfigResource(ResourceType.TOPIC, "compacted", incremental_configs=[
        ConfigEntry("delete.retention.ms", "200", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin.incremental_alter_configs([near])[near].result(10)
    time.sleep(0.3)  # the tombstone is now older than delete.retention.ms
    _produce(server, "compacted", [(b"late", b"x" * 200) for _ in range(3)])
    time.sleep(0.6)
    later = _consume(server, "compacted", 10, timeout=3)
    assert b"k0" not in {m.key() for m in later}
    assert {m.key(): m.value() for m in later}[b"k3"] == b"v39"


def test_a_2mb_record_once_the_limits_are_raised(tmp_path: Path) -> None:
    with served(tmp_path, "--message-max-bytes", "3000000") as server:
        admin = _admin(server)
        _create(admin, "big")
        _create(admin, "small", **{"max.message.bytes": "100000"})
        described = dict(admin.describe_configs([b := ConfigResource(ResourceType.BROKER, "0")])[b].result(10))
        assert described["message.max.bytes"].value == "3000000"
        assert described["message.max.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert described["message.max.bytes"].is_read_only
        value = bytes(range(256)) * 8192  # 2 MiB
        _produce(server, "big", [(b"k", value)], **{"message.max.bytes": 4_000_000})
        [got] = _consume(server, "big", 1, **{"fetch.max.bytes": 4_000_000})
        assert got.value() == value
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{server.port}", "message.max.bytes": 4_000_000})
        refused: list[Any] = []
        producer.produce("small", value=b"y" * 200_000, partition=0, on_delivery=lambda e, m: refused.append(e))
        producer.flush(10)
        assert [e.code() for e in refused] == [confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE]


def test_log_append_time_stamps_batches_with_the_broker_clock(server: ServerProcess) -> None:
    admin = _admin(server)
    _create(admin, "stamped", **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{server.port}"})
    producer.produce("stamped", value=b"old", partition=0, timestamp=1_000)
    producer.flush(10)
    [got] = _consume(server, "stamped", 1)
    kind, stamp = got.timestamp()
    assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= int(time.time() * 1000)


def test_broker_settings_from_flags_and_refusals(tmp_path: Path) -> None:
    with served(tmp_path, "--num-partitions", "3", "--no-auto-create-topics") as server:
        admin = _admin(server)
        described = dict(admin.describe_configs([b := ConfigResource(ResourceType.BROKER, "0")])[b].result(10))
        assert described["num.partitions"].value == "3"
        assert described["auto.create.topics.enable"].value == "false"
        assert described["auto.create.topics.enable"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert described["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
        alter = ConfigResource(ResourceType.BROKER, "0", set_config={"num.partitions": "5"})
        assert _error_code(admin.alter_configs([alter])[alter]) == INVALID_REQUEST
        admin.create_topics([NewTopic("defaulted")])["defaulted"].result(10)  # no count: num.partitions
        assert len(admin.list_topics(timeout=10).topics["defaulted"].partitions) == 3
        with WireClient(server.port) as wire:
            metadata = wire.call(3, 9, topics=[{"name": "not-created"}], allow_auto_topic_creation=True,
                                 include_cluster_authorized_operations=False,
                                 include_topic_authorized_operations=False)  # fmt: skip
            assert int(metadata.topics[0].error_code) == UNKNOWN_TOPIC
            answer = wire.call(DESCRIBE_CONFIGS, 4, resources=[
                {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
                {"resource_type": 4, "resource_name": "zero", "configuration_keys": None},
                {"resource_type": 16, "resource_name": "0", "configuration_keys": None},  # CLIENT_METRICS
                {"resource_type": 2, "resource_name": "no-such-topic", "configuration_keys": None},
                {"resource_type": 2, "resource_name": "bad/name", "configuration_keys": None},
                {"resource_type": 2, "resource_name": "defaulted", "configuration_keys": ["retention.ms", "x"]},
            ], include_synonyms=True, include_documentation=True)  # fmt: skip
            codes = [int(r.error_code) for r in answer.results]
            assert codes == [INVALID_REQUEST, INVALID_REQUEST, INVALID_REQUEST, UNKNOWN_TOPIC, 17, 0]
            [entry] = answer.results[-1].configs
            assert entry.name == "retention.ms" and entry.config_type == 5 and entry.documentation
            assert [(s.name, s.source) for s in entry.synonyms] == [("log.retention.ms", 5)]
            for api, version, extra in ((ALTER_CONFIGS, 2, {}), (INCREMENTAL_ALTER, 1, {"config_operation": 9})):
                answer = wire.call(api, version, resources=[
                    {"resource_type": 2, "resource_name": "defaulted",
                     "configs": [{"name": "retention.ms", "value": "1", **extra}] * 2},
                    {"resource_type": 16, "resource_name": "g", "configs": []},  # CLIENT_METRICS: unsupported
                    {"resource_type": 2, "resource_name": "defaulted", "configs": []},
                ], validate_only=False)  # fmt: skip
                assert [int(r.error_code) for r in answer.responses] == [INVALID_REQUEST] * 3
