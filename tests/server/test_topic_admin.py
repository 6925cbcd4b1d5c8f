"""CreatePartitions (v0–3), DescribeCluster (v0–2) and DescribeTopicPartitions (v0) over the wire against a
real ``regroup serve``: Kafka's answers and error codes, ApiVersions advertising exactly these ranges, a grown
topic surviving a kill -9, the partition limits, and Metadata's authorized operations."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from regroup.server.handlers.authorized import CLUSTER_OPERATIONS, NOT_REQUESTED, TOPIC_OPERATIONS
from tests.server.conftest import ServerProcess
from tests.server.wire import API_VERSIONS, WireClient, create_topics

METADATA, CREATE_PARTITIONS, DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 3, 37, 60, 75
NONE, UNKNOWN_TOPIC, INVALID_TOPIC, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT = 0, 3, 17, 37, 39
INVALID_REQUEST, POLICY_VIOLATION, MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 42, 44, 114, 115

_names = itertools.count()


def partition_counts(client: WireClient, *names: str) -> dict[str, int]:
    response = client.call(
        METADATA,
        12,
        topics=[{"name": n, "topic_id": None} for n in names],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return {t.name: len(t.partitions) for t in response.topics if t.error_code == NONE}


def grow(
    client: WireClient, version: int, *topics: tuple[str, int, list[list[int]] | None], validate_only: bool = False
) -> list[tuple[str, int]]:
    entries = [
        {"name": name, "count": count, "assignments": None if a is None else [{"broker_ids": b} for b in a]}
        for name, count, a in topics
    ]
    response = client.call(CREATE_PARTITIONS, version, topics=entries, timeout=5000, validate_only=validate_only)
    return [(r.name, r.error_code) for r in response.results]


def test_api_versions_advertise_exactly_the_versions_served(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        advertised = {k.api_key: (k.min_version, k.max_version) for k in client.call(API_VERSIONS, 2).api_keys}
    assert advertised[CREATE_PARTITIONS] == (0, 3)
    assert advertised[DESCRIBE_CLUSTER] == (0, 2)
    assert advertised[DESCRIBE_TOPIC_PARTITIONS] == (0, 0)


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_grows_a_topic(server: ServerProcess, version: int) -> None:
    topic = f"grow-v{version}"
    with WireClient(server.port) as client:
        create_topics(client, {topic: 2})
        assert grow(client, version, (topic, 4, None), validate_only=True) == [(topic, NONE)]
        assert partition_counts(client, topic) == {topic: 2}  # validate-only changed nothing
        assert grow(client, version, (topic, 4, None)) == [(topic, NONE)]
        assert partition_counts(client, topic) == {topic: 4}
        assert grow(client, version, (topic, 6, [[0], [0]])) == [(topic, NONE)]  # a manual assignment to node 0
        assert partition_counts(client, topic) == {topic: 6}


@pytest.mark.parametrize(
    ("count", "assignments", "code"),
    [
        (3, None, INVALID_PARTITIONS),  # not an increase
        (2, None, INVALID_PARTITIONS),
        (0, None, INVALID_PARTITIONS),
        (-1, None, INVALID_PARTITIONS),
        (5, [[0]], INVALID_REPLICA_ASSIGNMENT),  # two new partitions, one replica list
        (5, [], INVALID_REPLICA_ASSIGNMENT),
        (5, [[0], [0], [0]], INVALID_REPLICA_ASSIGNMENT),
        (4, [[1]], INVALID_REPLICA_ASSIGNMENT),  # no broker 1
        (4, [[-1]], INVALID_REPLICA_ASSIGNMENT),
        (4, [[]], INVALID_REPLICA_ASSIGNMENT),
        (4, [[0, 0]], INVALID_REPLICA_ASSIGNMENT),  # broker 0 twice
        (4, [[0, 1]], INVALID_REPLICA_ASSIGNMENT),
        (2**31 - 1, None, POLICY_VIOLATION),  # more than 10,000 new partitions in one request
        (10_004, None, POLICY_VIOLATION),  # (the topic has 3: 10,001 new ones)
        (10_003, None, INVALID_PARTITIONS),  # 10,000 new ones pass the request's bound, not --max-partitions-per-topic
    ],
)
def test_create_partitions_refusals_change_nothing(
    server: ServerProcess, count: int, assignments: list[list[int]] | None, code: int
) -> None:
    topic = f"refuse-{next(_names)}"
    with WireClient(server.port) as client:
        create_topics(client, {topic: 3})
        for validate_only in (True, False):
            assert grow(client, 3, (topic, count, assignments), validate_only=validate_only) == [(topic, code)]
        assert partition_counts(client, topic) == {topic: 3}


def test_create_partitions_unknown_and_duplicate_topics(server: ServerProcess) -> None:
    """A topic named twice gets one INVALID_REQUEST result and is left alone; the others are served."""
    with WireClient(server.port) as client:
        create_topics(client, {"dup": 1, "single": 1})
        results = grow(client, 3, ("dup", 2, None), ("missing", 2, None), ("single", 2, None), ("dup", 3, None))
        assert sorted(results) == [("dup", INVALID_REQUEST), ("missing", UNKNOWN_TOPIC), ("single", NONE)]
        assert partition_counts(client, "dup", "single") == {"dup": 1, "single": 2}
        assert grow(client, 3) == []


def test_create_partitions_request_cap_counts_all_topics(server: ServerProcess) -> None:
    """The 10,000 new partitions a request may add are counted over its topics in order: the topic that
    would pass the bound is refused, the ones before it are grown."""
    with WireClient(server.port) as client:
        create_topics(client, {"cap-a": 1, "cap-b": 1, "cap-c": 1})
        results = grow(client, 3, ("cap-a", 6_001, None), ("cap-b", 6_001, None), ("cap-c", 2, None))
        assert results == [("cap-a", NONE), ("cap-b", POLICY_VIOLATION), ("cap-c", NONE)]
        assert partition_counts(client, "cap-a", "cap-b", "cap-c") == {"cap-a": 6_001, "cap-b": 1, "cap-c": 2}


def test_create_partitions_timeout_zero_still_answers_the_outcome(server: ServerProcess) -> None:
    """The change is durable before the answer, so a client that asks not to wait gets the outcome too."""
    with WireClient(server.port) as client:
        create_topics(client, {"no-wait": 1})
        entries = [{"name": "no-wait", "count": 2, "assignments": None}]
        response = client.call(CREATE_PARTITIONS, 3, topics=entries, timeout=0, validate_only=False)
        assert [(r.name, r.error_code) for r in response.results] == [("no-wait", NONE)]
        assert partition_counts(client, "no-wait") == {"no-wait": 2}


def test_partition_limits_apply_to_growth(make_server: Callable[..., ServerProcess]) -> None:
    server = make_server("--max-partitions-per-topic", "4", "--max-partitions", "6")
    with WireClient(server.port) as client:
        create_topics(client, {"lim-a": 2, "lim-b": 2})
        assert grow(client, 3, ("lim-a", 5, None)) == [("lim-a", INVALID_PARTITIONS)]  # over 4 per topic
        assert grow(client, 3, ("lim-a", 4, None), ("lim-b", 4, None)) == [("lim-a", NONE), ("lim-b", POLICY_VIOLATION)]
        assert partition_counts(client, "lim-a", "lim-b") == {"lim-a": 4, "lim-b": 2}


def test_grown_topic_survives_kill_9(make_server: Callable[..., ServerProcess]) -> None:
    server = make_server()
    with WireClient(server.port) as client:
        create_topics(client, {"durable": 1})
        before = client.call(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[{"name": "durable"}], cursor=None)
        assert grow(client, 2, ("durable", 3, None)) == [("durable", NONE)]
    server.restart()  # kill -9
    with WireClient(server.port) as client:
        assert partition_counts(client, "durable") == {"durable": 3}
        after = client.call(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[{"name": "durable"}], cursor=None)
        assert after.topics[0].topic_id == before.topics[0].topic_id
        assert [p.partition_index for p in after.topics[0].partitions] == [0, 1, 2]


# ---------------------------------------------------------------------- DescribeCluster


@pytest.mark.parametrize("version", range(3))
@pytest.mark.parametrize("operations", [True, False])
def test_describe_cluster(server: ServerProcess, version: int, operations: bool) -> None:
    fields: dict[str, Any] = {"include_cluster_authorized_operations": operations}
    if version >= 1:
        fields["endpoint_type"] = 1
    if version >= 2:
        fields["include_fenced_brokers"] = True
    with WireClient(server.port) as client:
        response = client.call(DESCRIBE_CLUSTER, version, **fields)
    assert (response.error_code, response.error_message) == (NONE, None)
    assert (response.cluster_id, response.controller_id) == ("regroup-cluster", 0)
    [node] = response.brokers
    assert (node.broker_id, node.host, node.port, node.rack) == (0, "127.0.0.1", server.port, None)
    assert getattr(node, "is_fenced", False) is False
    assert response.cluster_authorized_operations == (CLUSTER_OPERATIONS if operations else NOT_REQUESTED)
    if version >= 1:
        assert response.endpoint_type == 1


@pytest.mark.parametrize(("endpoint", "code"), [(2, MISMATCHED_ENDPOINT_TYPE), (0, UNSUPPORTED_ENDPOINT_TYPE)])
def test_describe_cluster_other_endpoint_types(server: ServerProcess, endpoint: int, code: int) -> None:
    with WireClient(server.port) as client:
        response = client.call(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True, endpoint_type=endpoint)
    assert response.error_code == code and response.error_message
    assert response.brokers == () and response.controller_id == -1


# ---------------------------------------------------------------------- DescribeTopicPartitions


def describe(client: WireClient, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    return client.call(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=[{"name": n} for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    )


def test_describe_topic_partitions_pages(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"dtp-a": 3, "dtp-b": 2})
        first = describe(client, ["dtp-b", "dtp-a", "dtp-missing", "bad name"], limit=2)
        assert [(t.name, t.error_code) for t in first.topics] == [("bad name", INVALID_TOPIC), ("dtp-a", NONE)]
        assert [p.partition_index for p in first.topics[1].partitions] == [0, 1]
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("dtp-a", 2)
        second = describe(client, ["dtp-b", "dtp-a", "dtp-missing", "bad name"], limit=2, cursor=("dtp-a", 2))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in second.topics] == [
            ("dtp-a", [2]),
            ("dtp-b", [0]),
        ]
        assert (second.next_cursor.topic_name, second.next_cursor.partition_index) == ("dtp-b", 1)
        third = describe(client, ["dtp-b", "dtp-a", "dtp-missing", "bad name"], limit=2, cursor=("dtp-b", 1))
        assert [(t.name, t.error_code, len(t.partitions)) for t in third.topics] == [
            ("dtp-b", NONE, 1),
            ("dtp-missing", UNKNOWN_TOPIC, 0),
        ]
        assert third.next_cursor is None
        for topic in (*first.topics, *second.topics, *third.topics):
            assert topic.topic_authorized_operations == TOPIC_OPERATIONS and topic.is_internal is False
        partition = first.topics[1].partitions[0]
        assert (partition.leader_id, partition.leader_epoch, partition.replica_nodes, partition.isr_nodes) == (
            0,
            -1,
            (0,),
            (0,),
        )
        assert (partition.eligible_leader_replicas, partition.last_known_elr, partition.offline_replicas) == (
            (),
            (),
            (),
        )


def test_describe_topic_partitions_of_all_topics(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"all-x": 1})
        described = describe(client, [])
        names = [t.name for t in described.topics]
        assert "all-x" in names and names == sorted(names)
        assert all(t.error_code == NONE for t in described.topics)


@pytest.mark.parametrize("cursor", [("not-listed", 0), ("cur", -1)])
def test_describe_topic_partitions_bad_cursor(server: ServerProcess, cursor: tuple[str, int]) -> None:
    """The cursor's topic must be one of those named, and its partition not negative: INVALID_REQUEST for
    every topic named."""
    with WireClient(server.port) as client:
        create_topics(client, {"cur": 2})
        response = describe(client, ["cur", "zzz"], cursor=cursor)
    assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
        ("cur", INVALID_REQUEST, ()),
        ("zzz", INVALID_REQUEST, ()),
    ]


# ---------------------------------------------------------------------- Metadata's authorized operations


@pytest.mark.parametrize("version", [8, 10, 11, 12])
def test_metadata_reports_authorized_operations_when_asked(server: ServerProcess, version: int) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"ops": 1})
        for asked in (True, False):
            response = client.call(
                METADATA,
                version,
                topics=[{"name": "ops", "topic_id": None}, {"name": "ops-missing", "topic_id": None}],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=asked,
                include_topic_authorized_operations=asked,
            )
            wanted = TOPIC_OPERATIONS if asked else NOT_REQUESTED
            assert [t.topic_authorized_operations for t in response.topics] == [wanted, wanted]
            if version <= 10:
                assert response.cluster_authorized_operations == (CLUSTER_OPERATIONS if asked else NOT_REQUESTED)


# ---------------------------------------------------------------------- many topics in one request


@pytest.mark.parametrize("api", ["CreateTopics", "DeleteTopics", "CreatePartitions", "IncrementalAlterConfigs"])
def test_a_request_naming_many_topics_is_answered_promptly(server: ServerProcess, api: str) -> None:
    """Duplicates are found by counting once, not by rescanning the request for every entry: 100,000
    entries (about a megabyte) are answered in well under the client's timeout, and every one is."""
    names = [f"many-{api}-{i % 50_000}" for i in range(100_000)]  # each name twice
    with WireClient(server.port, timeout=60.0) as client:
        if api == "CreateTopics":
            topics = [
                {"name": n, "num_partitions": 0, "replication_factor": 1, "assignments": [], "configs": []}
                for n in names
            ]
            response = client.call(19, 7, topics=topics, timeout=5000, validate_only=True)
            codes = {t.error_code for t in response.topics}
            assert len(response.topics) == len(names)
        elif api == "DeleteTopics":
            response = client.call(20, 6, topics=[{"name": n, "topic_id": None} for n in names], timeout=5000)
            codes = {t.error_code for t in response.responses}
            assert len(response.responses) == len(names)
        elif api == "CreatePartitions":
            codes = {code for _, code in grow(client, 3, *[(n, 2, None) for n in names])}
        else:
            resources = [{"resource_type": 2, "resource_name": n, "configs": []} for n in names]
            response = client.call(44, 1, resources=resources, validate_only=True)
            codes = {r.error_code for r in response.responses}
            assert len(response.responses) == len(names)
    assert codes == {INVALID_REQUEST}
