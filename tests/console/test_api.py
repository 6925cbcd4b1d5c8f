"""``GET /api/groups`` and ``GET /api/groups/<id>`` of ``regroup serve --http-port`` against real clients: a
classic group of confluent-kafka consumers (``range``), a KIP-848 group of confluent-kafka consumers
(``group.protocol=consumer``) and a classic group of kafka-python consumers, side by side. Offsets are committed
by the members and more records produced afterwards, so the lag is not zero: the documents are checked key by
key (types, member counts, each member's assignment as the member itself reports it, lag = produced -
committed); a share group (raw heartbeats) has an epoch and no lag; an unknown group is a 404 with a JSON error;
a 1,000-member group is answered quickly."""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.harness import KAFKA_PYTHON_POLL_MS, eventually
from tests.clients.kip848 import SERVER_ARGS, consumer_config
from tests.console.conftest import Console
from tests.server.conftest import free_port, served
from tests.server.test_consumer_wire import heartbeat
from tests.server.test_share_wire import heartbeat as share_heartbeat
from tests.server.wire import WireClient, create_topics

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

TOPIC = "orders"
PARTITIONS = 4
FIRST = 10  # records per partition before the commits
MORE = (3, 0, 5, 1)  # records per partition produced after them
COMMITTED = (4, 10, 0, 7)  # what the members commit, per partition
SETTLE_S = 60.0  # a deadline, not a wait
GROUP_KEYS = {"group_id", "type", "state", "protocol", "assignor", "members", "lag"}
DETAIL_KEYS = {"group_id", "type", "state", "generation", "epoch", "protocol", "assignor", "members", "lag"}
MEMBER_KEYS = {"member_id", "client_id", "host", "instance_id", "rack", "assignment"}


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    http_port = free_port()
    with served(tmp_path, "--http-port", str(http_port), *SERVER_ARGS) as proc:
        yield Console(proc, http_port)


def produce(port: int, per_partition: tuple[int, ...]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all"})
    for partition, count in enumerate(per_partition):
        for i in range(count):
            producer.produce(TOPIC, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(60) == 0


@contextlib.contextmanager
def confluent(port: int, group: str, protocol: str, count: int) -> Iterator[list[Any]]:
    made: list[Any] = []
    try:
        for i in range(count):
            assignor = "range" if protocol == "classic" else None
            made.append(
                confluent_kafka.Consumer(
                    consumer_config(f"127.0.0.1:{port}", group, f"{group}-c{i}", protocol, assignor)
                )
            )
            made[-1].subscribe([TOPIC])
        yield made
    finally:
        for consumer in made:
            with contextlib.suppress(Exception):
                consumer.close()


def settled(console: Console, group: str, mine: Any) -> dict[str, Any]:
    """Wait until ``/api/groups/<group>`` shows the group Stable with the assignments ``mine()`` reports (member
    id -> sorted partitions), covering the topic; the document."""

    def check() -> dict[str, Any] | None:
        doc = console.json(f"/api/groups/{group}")
        theirs = {m["member_id"]: m["assignment"].get(TOPIC, []) for m in doc["members"]}
        every = sorted(p for ps in theirs.values() for p in ps)
        reported = mine()
        assert doc["state"] == "Stable" and reported == theirs and every == list(range(PARTITIONS)), (doc, reported)
        return doc

    return eventually(check, SETTLE_S, f"group {group} to settle", interval=0.2)


def commit_confluent(members: list[Any]) -> None:
    for consumer in members:
        owned = [tp.partition for tp in consumer.assignment()]
        if owned:
            consumer.commit(
                offsets=[confluent_kafka.TopicPartition(TOPIC, p, COMMITTED[p]) for p in owned], asynchronous=False
            )


def expected_lag() -> dict[str, dict[str, int]]:
    return {TOPIC: {str(p): FIRST + MORE[p] - COMMITTED[p] for p in range(PARTITIONS)}}


def total_lag() -> int:
    return sum(FIRST + MORE[p] - COMMITTED[p] for p in range(PARTITIONS))


def check_members(doc: dict[str, Any], clients: list[str]) -> None:
    assert set(doc) == DETAIL_KEYS
    assert sorted(m["client_id"] for m in doc["members"]) == sorted(clients)
    for m in doc["members"]:
        assert set(m) == MEMBER_KEYS
        assert isinstance(m["member_id"], str) and m["member_id"]
        assert m["host"].endswith("127.0.0.1") and m["instance_id"] is None and m["rack"] is None
        assert all(isinstance(p, int) for p in m["assignment"][TOPIC])


def test_classic_and_consumer_groups_of_real_clients(console: Console) -> None:
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    produce(console.port, (FIRST,) * PARTITIONS)
    assert console.json("/api/groups") == {"groups": []}

    with (
        confluent(console.port, "classic-g", "classic", 2) as classic,
        confluent(console.port, "kip848-g", "consumer", 2) as kip848,
    ):

        def mine(members: list[Any]) -> Any:
            for consumer in classic + kip848:
                consumer.poll(0.05)
            return {c.memberid(): sorted(tp.partition for tp in c.assignment()) for c in members}

        classic_doc = settled(console, "classic-g", lambda: mine(classic))
        kip848_doc = settled(console, "kip848-g", lambda: mine(kip848))
        commit_confluent(classic)
        commit_confluent(kip848)
        produce(console.port, MORE)

        check_members(classic_doc, ["classic-g-c0", "classic-g-c1"])
        assert (classic_doc["type"], classic_doc["protocol"], classic_doc["assignor"]) == ("classic", "range", None)
        assert isinstance(classic_doc["generation"], int) and classic_doc["generation"] >= 1
        assert classic_doc["epoch"] is None
        assert sorted(m["assignment"][TOPIC] for m in classic_doc["members"]) == [[0, 1], [2, 3]]  # range

        check_members(kip848_doc, ["kip848-g-c0", "kip848-g-c1"])
        assert (kip848_doc["type"], kip848_doc["protocol"], kip848_doc["assignor"]) == ("consumer", None, "uniform")
        assert kip848_doc["generation"] is None
        assert isinstance(kip848_doc["epoch"], int) and kip848_doc["epoch"] >= 2  # one bump per member joining

        for group in ("classic-g", "kip848-g"):
            assert console.json(f"/api/groups/{group}")["lag"] == expected_lag()
        listed = console.json("/api/groups")
        assert list(listed) == ["groups"]
        assert all(set(g) == GROUP_KEYS for g in listed["groups"])
        assert listed["groups"] == [
            {
                "group_id": "classic-g",
                "type": "classic",
                "state": "Stable",
                "protocol": "range",
                "assignor": None,
                "members": 2,
                "lag": total_lag(),
            },
            {
                "group_id": "kip848-g",
                "type": "consumer",
                "state": "Stable",
                "protocol": None,
                "assignor": "uniform",
                "members": 2,
                "lag": total_lag(),
            },
        ]

    # the members gone: the classic group is Empty (no protocol, no members), its lag stays
    def empty() -> dict[str, Any] | None:
        doc = console.json("/api/groups/classic-g")
        return doc if doc["state"] == "Empty" else None

    doc = eventually(empty, SETTLE_S, "the classic group to be Empty")
    assert (doc["members"], doc["protocol"], doc["lag"]) == ([], None, expected_lag())


def test_a_kafka_python_group_and_the_404s(console: Console) -> None:
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    produce(console.port, (FIRST,) * PARTITIONS)
    group = "kp/group id"  # an id that must be percent-encoded in the path
    path = "/api/groups/" + urllib.parse.quote(group, safe="")
    members = [
        kafka.KafkaConsumer(
            TOPIC,
            bootstrap_servers=f"127.0.0.1:{console.port}",
            group_id=group,
            client_id=f"kp-{i}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            heartbeat_interval_ms=200,
            session_timeout_ms=6000,
            partition_assignment_strategy=[kafka.coordinator.assignors.roundrobin.RoundRobinPartitionAssignor],
        )
        for i in range(2)
    ]
    try:

        def check() -> dict[str, Any] | None:
            for consumer in members:  # (a 1 s poll: kafka-python 3.0.12 can lose a rebalance to a shorter one)
                consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS)
            doc = console.json(path)
            theirs = sorted(sorted(m["assignment"].get(TOPIC, [])) for m in doc["members"])
            mine = sorted(sorted(tp.partition for tp in c.assignment()) for c in members)
            every = sorted(p for ps in mine for p in ps)
            ok = doc["state"] == "Stable" and theirs == mine and every == list(range(PARTITIONS))
            return doc if ok else None

        doc = eventually(check, SETTLE_S, "the kafka-python group to settle", interval=0.2)
        check_members(doc, ["kp-0", "kp-1"])
        assert (doc["group_id"], doc["type"], doc["protocol"]) == (group, "classic", "roundrobin")
        assert sorted(m["assignment"][TOPIC] for m in doc["members"]) == [[0, 2], [1, 3]]
        assert doc["lag"] == {}  # nothing committed yet
        assert console.json("/api/groups")["groups"][0]["lag"] == 0
    finally:
        for consumer in members:
            consumer.close(autocommit=False)

    assert console.json("/api/groups/nope", 404) == {"error": "group 'nope' not found"}
    for bad in ("/api/nothing", "/api/groups/a/b/c", "/api/groups/a/other"):
        assert set(console.json(bad, 404)) == {"error"}
    assert set(console.json("/api/groups/%ff", 400)) == {"error"}


def test_a_thousand_member_group_is_described_whole(tmp_path: Path) -> None:
    """A KIP-848 group of 1,000 members (raw ConsumerGroupHeartbeats; the default 45 s session, so that the first
    members are still there on a slow machine once the last one joined): its document lists every member with
    the partitions the coordinator last handed it. (Its time is not asserted here; docs/benchmarks.md, "The
    operator's console", reports it.)"""
    http_port = free_port()
    with served(tmp_path, "--http-port", str(http_port), "--log-level", "warning") as proc:  # (1,000 joins: quiet)
        thousand_members(Console(proc, http_port))


def thousand_members(console: Console) -> None:
    group, size = "big", 1_000
    told: dict[str, list[int]] = {}
    with WireClient(console.port, client_id="many") as client:
        epochs: dict[str, int] = {}
        for round_ in range(2):  # join (the topic not there yet: nothing to assign), then one heartbeat each
            if round_ == 1:
                create_topics(client, {TOPIC: 2_000})
            for i in range(size):
                member = f"m-{i:04d}"
                fields: dict[str, Any] = {"member_epoch": epochs.get(member, 0)}
                if member not in epochs:
                    fields |= {"subscribed_topic_names": [TOPIC], "topic_partitions": []}
                answer = heartbeat(client, group_id=group, member_id=member, **fields)
                assert answer.error_code == 0, answer
                epochs[member] = answer.member_epoch
                if answer.assignment is not None:
                    told[member] = sorted(p for t in answer.assignment.topic_partitions for p in t.partitions)
    doc = console.json(f"/api/groups/{group}")
    assert len(doc["members"]) == size
    assert {m["member_id"]: m["assignment"].get(TOPIC, []) for m in doc["members"]} == {
        member: told.get(member, []) for member in epochs
    }
    listed = console.json("/api/groups")["groups"]
    assert [(g["group_id"], g["members"]) for g in listed] == [(group, size)]


def test_a_share_group(console: Console) -> None:
    """A KIP-932 share group (raw ShareGroupHeartbeats): its epoch and assignor, its member's rack and
    assignment as the heartbeat handed it, and no lag (share groups commit no offsets)."""
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
        joined = share_heartbeat(client, "sg", "share-member-1", 0, [TOPIC], rack="r1")
        assert joined.error_code == 0, joined
        answer = share_heartbeat(client, "sg", "share-member-1", joined.member_epoch)
        assert answer.error_code == 0, answer
        handed = answer.assignment or joined.assignment
        assert handed is not None
        partitions = sorted(p for t in handed.topic_partitions for p in t.partitions)
        doc = console.json("/api/groups/sg")
    assert set(doc) == DETAIL_KEYS
    assert (doc["type"], doc["generation"], doc["protocol"], doc["lag"]) == ("share", None, None, None)
    assert doc["epoch"] == answer.member_epoch and isinstance(doc["assignor"], str) and doc["assignor"]
    (member,) = doc["members"]
    assert set(member) == MEMBER_KEYS
    assert (member["member_id"], member["rack"], member["instance_id"]) == ("share-member-1", "r1", None)
    assert member["assignment"] == {TOPIC: partitions} and partitions == list(range(PARTITIONS))
    assert console.json("/api/groups")["groups"] == [
        {
            "group_id": "sg",
            "type": "share",
            "state": doc["state"],
            "protocol": None,
            "assignor": doc["assignor"],
            "members": 1,
            "lag": None,
        }
    ]
