"""Metadata, CreateTopics and DeleteTopics handlers at every version kio has."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from regroup.server.api import CLUSTER_ID
from regroup.server.handlers.topics import (
    SPECS,
    ZERO_UUID,
    build,
    handle_create_topics,
    handle_delete_topics,
    handle_metadata,
)
from regroup.server.topics import TopicStore
from tests.server_data.helpers import FakeBroker, call, request_module


def metadata(
    broker: FakeBroker, version: int, names: list[str] | None, *, auto: bool = True, ids: list[uuid.UUID] = ()
) -> object:  # type: ignore[assignment]
    mod = request_module("metadata", version)
    topics = None
    if names is not None or ids:
        topics = tuple(build(mod, "MetadataRequestTopic", name=n, topic_id=None) for n in names or []) + tuple(
            build(mod, "MetadataRequestTopic", name=None, topic_id=i) for i in ids
        )
    request = build(
        mod,
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=auto,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return call(handle_metadata, broker, "metadata", request)


def create(
    broker: FakeBroker,
    version: int,
    *topics: tuple[str, int, int],
    validate_only: bool = False,
    assignments: dict[int, list[int]] | None = None,
) -> list:  # type: ignore[type-arg]
    mod = request_module("create_topics", version)
    entries = tuple(
        build(
            mod,
            "CreatableTopic",
            name=name,
            num_partitions=n,
            replication_factor=rf,
            assignments=tuple(
                build(mod, "CreatableReplicaAssignment", partition_index=p, broker_ids=tuple(b))
                for p, b in (assignments or {}).items()
            ),
            configs=(),
        )
        for name, n, rf in topics
    )
    response = call(
        handle_create_topics,
        broker,
        "create_topics",
        build(mod, "CreateTopicsRequest", topics=entries, timeout=_ms(1000), validate_only=validate_only),
    )
    return list(response.topics)


def delete(broker: FakeBroker, version: int, names: list[str] = (), ids: list[uuid.UUID] = ()) -> list:  # type: ignore[assignment, type-arg]
    mod = request_module("delete_topics", version)
    if version >= 6:
        states = tuple(build(mod, "DeleteTopicState", name=n, topic_id=ZERO_UUID) for n in names) + tuple(
            build(mod, "DeleteTopicState", name=None, topic_id=i) for i in ids
        )
        request = build(mod, "DeleteTopicsRequest", topics=states, timeout=_ms(1000))
    else:
        request = build(mod, "DeleteTopicsRequest", topic_names=tuple(names), timeout=_ms(1000))
    return list(call(handle_delete_topics, broker, "delete_topics", request).responses)


def _ms(ms: int) -> object:
    import datetime

    from kio.static.primitive import i32Timedelta

    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def test_specs() -> None:
    assert {(s.api_key, s.min_version, s.max_version) for s in SPECS} == {(3, 0, 13), (19, 2, 7), (20, 1, 6)}


@pytest.mark.parametrize("version", range(14))
def test_metadata_describes_the_single_broker(broker: FakeBroker, store: TopicStore, version: int) -> None:
    info = store.create_topic("orders", 2)
    store.create_topic("other", 1)
    response = metadata(broker, version, ["orders"])
    [node] = response.brokers  # type: ignore[attr-defined]
    assert (node.node_id, node.host, node.port) == (0, "localhost", 19092)
    if version >= 2:
        assert response.cluster_id == CLUSTER_ID  # type: ignore[attr-defined]
    if version >= 1:
        assert response.controller_id == 0  # type: ignore[attr-defined]
    [topic] = response.topics  # type: ignore[attr-defined]
    assert (topic.error_code, topic.name) == (ErrorCode.none, "orders")
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
        (0, 0, (0,), (0,)),
        (1, 0, (0,), (0,)),
    ]
    if version >= 10:
        assert topic.topic_id == info.topic_id
    everything = metadata(broker, version, [] if version == 0 else None)
    assert sorted(t.name for t in everything.topics) == ["orders", "other"]  # type: ignore[attr-defined]
    if version >= 1:
        assert metadata(broker, version, []).topics == ()  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(14))
def test_metadata_auto_creates_when_allowed(broker: FakeBroker, store: TopicStore, version: int) -> None:
    [topic] = metadata(broker, version, ["fresh"]).topics  # type: ignore[attr-defined]
    assert topic.error_code == ErrorCode.none and len(topic.partitions) == 3
    assert store.topics()["fresh"].partitions == 3
    [bad] = metadata(broker, version, ["bad name!"]).topics  # type: ignore[attr-defined]
    assert bad.error_code == ErrorCode.invalid_topic_exception
    if version >= 4:
        [refused] = metadata(broker, version, ["not-asked"], auto=False).topics  # type: ignore[attr-defined]
        assert refused.error_code == ErrorCode.unknown_topic_or_partition and "not-asked" not in store.topics()
    broker.auto_create_topics = False
    [off] = metadata(broker, version, ["still-missing"]).topics  # type: ignore[attr-defined]
    assert off.error_code == ErrorCode.unknown_topic_or_partition and off.partitions == ()
    assert "still-missing" not in store.topics()


@pytest.mark.parametrize("version", [12, 13])
def test_metadata_by_topic_id(broker: FakeBroker, store: TopicStore, version: int) -> None:
    info = store.create_topic("t", 1)
    unknown = uuid.uuid4()
    found, missing = metadata(broker, version, None, ids=[info.topic_id, unknown]).topics  # type: ignore[attr-defined]
    assert (found.name, found.error_code) == ("t", ErrorCode.none)
    assert (missing.name, missing.topic_id, missing.error_code) == (None, unknown, ErrorCode.unknown_topic_id)


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics(broker: FakeBroker, store: TopicStore, version: int) -> None:
    results = create(broker, version, ("a", 4, 1), ("b", -1, -1), ("a.b", 1, 1))
    assert [(r.name, r.error_code) for r in results] == [
        ("a", ErrorCode.none),
        ("b", ErrorCode.none),
        ("a.b", ErrorCode.none),
    ]
    assert store.topics()["a"].partitions == 4 and store.topics()["b"].partitions == 3
    if version >= 5:
        assert (results[0].num_partitions, results[0].replication_factor) == (4, 1)
    if version >= 7:
        assert results[0].topic_id == store.topics()["a"].topic_id
    errors = create(
        broker,
        version,
        ("a", 1, 1),
        ("bad/name", 1, 1),
        ("z", 0, 1),
        ("y", 1, 3),
        ("x", 1, 0),
        ("dup", 1, 1),
        ("dup", 1, 1),
        ("a_b", 1, 1),
    )
    assert [(r.name, r.error_code) for r in errors] == [
        ("a", ErrorCode.topic_already_exists),
        ("bad/name", ErrorCode.invalid_topic_exception),
        ("z", ErrorCode.invalid_partitions),
        ("y", ErrorCode.invalid_replication_factor),
        ("x", ErrorCode.invalid_replication_factor),
        ("dup", ErrorCode.invalid_request),
        ("dup", ErrorCode.invalid_request),
        ("a_b", ErrorCode.invalid_topic_exception),
    ]
    assert all(r.error_message for r in errors)
    assert set(store.topics()) == {"a", "b", "a.b"}
    [checked] = create(broker, version, ("later", 2, 1), validate_only=True)
    assert checked.error_code == ErrorCode.none and "later" not in store.topics()
    [manual] = create(broker, version, ("manual", -1, -1), assignments={0: [0], 1: [0]})
    assert manual.error_code == ErrorCode.none and store.topics()["manual"].partitions == 2
    [elsewhere] = create(broker, version, ("elsewhere", -1, -1), assignments={0: [1]})
    assert elsewhere.error_code == ErrorCode.invalid_replica_assignment


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics(broker: FakeBroker, store: TopicStore, version: int) -> None:
    store.create_topic("a", 2)
    store.create_topic("b", 1)
    results = delete(broker, version, ["a", "missing"])
    assert [(r.name, r.error_code) for r in results] == [
        ("a", ErrorCode.none),
        ("missing", ErrorCode.unknown_topic_or_partition),
    ]
    assert set(store.topics()) == {"b"}
    if version >= 6:
        info = store.topics()["b"]
        [by_id, unknown] = delete(broker, version, ids=[info.topic_id, uuid.uuid4()])
        assert (by_id.name, by_id.topic_id, by_id.error_code) == ("b", info.topic_id, ErrorCode.none)
        assert unknown.error_code == ErrorCode.unknown_topic_id
        assert store.topics() == {}
