"""The adapters without a broker: what their subscriptions carry (byte for byte what the libraries' own sticky
assignors write, and read back by those assignors), the conversion of the libraries' cluster metadata and members
into regroup's ``GroupSpec`` (exact expectations), the assignment objects they return, ``rolling_upgrade``'s
linking, option checks, and the ImportError without the library."""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from typing import Any

import pytest

pytest.importorskip("kafka")
pytest.importorskip("aiokafka")

from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyPartitionAssignor as AioSticky,
)
from aiokafka.structs import TopicPartition as AioTP
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.structs import TopicPartition

from regroup.adapters import aiokafka as aio
from regroup.adapters import kafka_python as kp
from regroup.adapters.common import decode_sticky, encode_sticky
from regroup.assignors import registry
from regroup.assignors.consumer_protocol import encode_sticky_user_data
from regroup.assignors.spec import AssignmentError, GroupSpec, MemberSubscription
from tests.adapters.fakes import (
    aiokafka_assignment,
    aiokafka_cluster,
    aiokafka_member,
    as_dict,
    kafka_python_assignment,
    kafka_python_cluster,
    kafka_python_member,
)

TOPICS = {"t": 4, "u": 2}
BROKERS = {0: "r0", 1: "r1", 2: None}
REPLICAS = {("t", 0): [0, 1], ("t", 1): [1], ("t", 2): [2], ("t", 3): [0, 2], ("u", 0): [1, 0], ("u", 1): [2]}
RACKS = {
    "t": (frozenset({"r0", "r1"}), frozenset({"r1"}), frozenset(), frozenset({"r0"})),
    "u": (frozenset({"r0", "r1"}), frozenset()),
}


def wire(subscription: Any) -> Any:
    return ConsumerProtocolSubscription.decode(subscription.encode())


# ---------------------------------------------------------------------------------- kafka-python: subscriptions
def test_kafka_python_sticky_user_data_is_the_librarys_own() -> None:
    ours, theirs = kp.RegroupStickyAssignor(rack="r0"), StickyPartitionAssignor()
    for assignor in (ours, theirs):
        assignor.on_assignment(kafka_python_assignment({"t": [0, 1], "u": [3]}), 7)
    mine, its = wire(ours.metadata({"u", "t"})), wire(theirs.metadata({"t", "u"}))
    # kafka-python's sticky writes Kafka's StickyAssignorUserData v1 behind its own int16 version header
    assert its.user_data == b"\x00\x01" + encode_sticky_user_data({"t": [0, 1], "u": [3]}, 7)
    assert mine.user_data == its.user_data
    assert (mine.version, mine.topics, mine.owned_partitions, mine.generation_id, mine.rack_id) == (
        3,
        ["t", "u"],
        [],
        7,
        "r0",
    )
    parsed = StickyPartitionAssignor.parse_member_metadata(mine)  # a fallback's leader reads ours
    assert (sorted(parsed.partitions), parsed.generation) == (
        [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 3)],
        7,
    )


def test_kafka_python_subscription_before_any_assignment() -> None:
    mine = wire(kp.RegroupStickyAssignor().metadata(["t"]))
    assert (mine.user_data, mine.generation_id, mine.rack_id) == (b"", -1, None)  # as kafka-python's sticky: none
    coop = wire(kp.RegroupCooperativeStickyAssignor().metadata(["t"]))
    assert (coop.owned_partitions, coop.generation_id) == ([], -1)


def test_kafka_python_cooperative_subscription_carries_owned_partitions() -> None:
    ours = kp.RegroupCooperativeStickyAssignor(rack="r1")
    ours.on_assignment(kafka_python_assignment({"u": [1], "t": [2, 0]}), 9)
    mine = wire(ours.metadata(["t", "u"]))
    assert [(e.topic, e.partitions) for e in mine.owned_partitions] == [("t", [0, 2]), ("u", [1])]
    assert (mine.version, mine.user_data, mine.generation_id, mine.rack_id) == (3, b"", 9, "r1")
    parsed = CooperativeStickyAssignor.parse_member_metadata(mine)  # and kafka-python's cooperative reads it
    assert (sorted(parsed.partitions), parsed.generation) == (
        [TopicPartition("t", 0), TopicPartition("t", 2), TopicPartition("u", 1)],
        9,
    )


def test_sticky_user_data_of_either_layout_is_read() -> None:
    kafkas = encode_sticky({"t": (0, 1)}, 7)
    assert kafkas == encode_sticky_user_data({"t": [0, 1]}, 7)
    assert decode_sticky(kafkas) == ({"t": (0, 1)}, 7)
    assert decode_sticky(encode_sticky({"t": (0, 1)}, 7, kafka_python=True)) == ({"t": (0, 1)}, 7)
    assert decode_sticky(encode_sticky_user_data({"t": [2]}, None)) == ({"t": (2,)}, -1)  # v0: no generation
    assert decode_sticky(None) == decode_sticky(b"") == decode_sticky(b"\x07") == ({}, -1)


# ------------------------------------------------------------------------------------- kafka-python: conversion
def sticky_members() -> list[Any]:
    m1, m2, m3 = kp.RegroupStickyAssignor(rack="r0"), kp.RegroupStickyAssignor(rack="r1"), kp.RegroupStickyAssignor()
    m1.on_assignment(kafka_python_assignment({"t": [0, 1]}), 5)
    m3.on_assignment(kafka_python_assignment({"u": [1]}), 4)
    return [
        kafka_python_member("m1", m1.metadata({"t", "u"}), instance_id="i1"),
        kafka_python_member("m2", m2.metadata({"t"})),
        kafka_python_member("m3", m3.metadata({"u", "missing"})),
    ]


def test_kafka_python_group_spec_sticky() -> None:
    cluster = kafka_python_cluster(TOPICS, BROKERS, REPLICAS)
    spec = kp.RegroupStickyAssignor().group_spec(cluster, sticky_members())
    assert spec == GroupSpec(
        topics={"t": 4, "u": 2},  # a topic the cluster does not know is left out
        members={
            "m1": MemberSubscription(
                topics=("t", "u"), rack="r0", instance_id="i1", user_data=encode_sticky_user_data({"t": [0, 1]}, 5)
            ),
            "m2": MemberSubscription(topics=("t",), rack="r1"),
            "m3": MemberSubscription(topics=("missing", "u"), user_data=encode_sticky_user_data({"u": [1]}, 4)),
        },
        partition_racks=RACKS,
        options={},
    )


@pytest.mark.parametrize("brokers", [BROKERS, {0: None}], ids=["racks", "no-racks"])
def test_kafka_python_assign_is_regroups(brokers: dict[int, str | None]) -> None:
    cluster = kafka_python_cluster(TOPICS, brokers, REPLICAS if len(brokers) > 1 else {})
    adapter = kp.RegroupStickyAssignor()
    members = sticky_members()
    result = adapter.assign(cluster, members)
    assert {m: (a.version, a.user_data) for m, a in result.items()} == {m: (0, b"") for m in ("m1", "m2", "m3")}
    expected = registry.get("sticky").assign(adapter.group_spec(cluster, members))
    assert as_dict(result) == {m: {t: ps for t, ps in a.items() if ps} for m, a in expected.items()}
    if len(brokers) == 1:  # without racks: balanced 2/2/2, m1 and m3 keep what they owned
        assert as_dict(result) == {"m1": {"t": [0, 1]}, "m2": {"t": [2, 3]}, "m3": {"u": [0, 1]}}


def test_kafka_python_group_spec_cooperative_and_without_racks() -> None:
    cluster = kafka_python_cluster(TOPICS, {0: None}, {})
    a, b = kp.RegroupCooperativeStickyAssignor(rack="r0"), kp.RegroupCooperativeStickyAssignor()
    a.on_assignment(kafka_python_assignment({"t": [3, 1]}), 6)
    members = [kafka_python_member("a", a.metadata(["t"])), kafka_python_member("b", b.metadata(["t", "u"]))]
    spec = a.group_spec(cluster, members)
    assert spec == GroupSpec(
        topics={"t": 4, "u": 2},
        members={
            "a": MemberSubscription(topics=("t",), owned={"t": (1, 3)}, generation=6, rack="r0"),
            "b": MemberSubscription(topics=("t", "u")),
        },
        partition_racks=None,  # no broker has a rack
    )
    # balanced 3/3, a keeps what it owns
    assert as_dict(a.assign(cluster, members)) == {"a": {"t": [0, 1, 3]}, "b": {"t": [2], "u": [0, 1]}}


def test_kafka_python_racks_only_for_rack_aware_strategies_with_member_racks() -> None:
    cluster = kafka_python_cluster(TOPICS, BROKERS, REPLICAS)
    racked = [kafka_python_member("a", kp.RegroupRangeAssignor(rack="r1").metadata(["t"]))]
    assert kp.RegroupRangeAssignor().group_spec(cluster, racked).partition_racks == {"t": RACKS["t"]}  # subscribed
    plain = [kafka_python_member("a", kp.RegroupRangeAssignor().metadata(["t"]))]
    assert kp.RegroupRangeAssignor().group_spec(cluster, plain).partition_racks is None
    hashed = [kafka_python_member("a", kp.RegroupConsistentHashAssignor().metadata(["t"]), instance_id="host-1")]
    spec = kp.RegroupConsistentHashAssignor(vnodes=7).group_spec(cluster, hashed)
    assert spec.partition_racks is None and spec.options == {"vnodes": 7}
    assert spec.members["a"].instance_id == "host-1"


def test_kafka_python_supported_protocols_and_names() -> None:
    assert kp.RegroupCooperativeStickyAssignor().supported_protocols() == [RebalanceProtocol.COOPERATIVE]
    classes = [
        kp.RegroupStickyAssignor,
        kp.RegroupCooperativeStickyAssignor,
        kp.RegroupRangeAssignor,
        kp.RegroupRedundantAssignor,
        kp.RegroupCopartitionedAssignor,
        kp.RegroupConsistentHashAssignor,
    ]
    assert [c.name for c in classes] == [
        "regroup-sticky",
        "regroup-cooperative-sticky",
        "regroup-range",
        "regroup-redundant",
        "regroup-copartitioned",
        "regroup-consistent-hash",
    ]
    for c in classes:
        if c is not kp.RegroupCooperativeStickyAssignor:
            assert c().supported_protocols() == [RebalanceProtocol.EAGER]


# ---------------------------------------------------------------------------------------------------- aiokafka
def test_aiokafka_user_data_is_the_librarys_own() -> None:
    ours = aio.RegroupStickyAssignor()
    ours.record(aiokafka_assignment({"t": [0, 1]}), 7)
    mine = ours.metadata({"t"})
    its = AioSticky._metadata(["t"], [AioTP("t", 0), AioTP("t", 1)], 7)
    assert (mine.version, mine.subscription, mine.user_data) == (0, ["t"], its.user_data)
    parsed = AioSticky.parse_member_metadata(aiokafka_member(mine))  # a fallback's leader reads ours
    assert (parsed.partitions, parsed.generation) == ([AioTP("t", 0), AioTP("t", 1)], 7)
    assert aio.RegroupStickyAssignor().metadata(["t"]).user_data == b""  # before any assignment


def test_aiokafka_conversion_and_generation_numbering() -> None:
    cluster = aiokafka_cluster(TOPICS, BROKERS, REPLICAS)
    a, b, c = (aio.RegroupRedundantAssignor(replicas=2) for _ in range(3))
    a.on_assignment(aiokafka_assignment({"t": [0, 1, 2]}, aio.encode_generation(3)))
    b.on_assignment(aiokafka_assignment({"t": [2, 3]}))  # an assignment without a number: generation -1
    members = {"a": aiokafka_member(a.metadata(["t"])), "b": aiokafka_member(b.metadata(["t", "u"]))}
    members["c"] = aiokafka_member(c.metadata(["u"]))
    spec = a.group_spec(cluster, members)
    assert spec == GroupSpec(
        topics={"t": 4, "u": 2},
        members={
            "a": MemberSubscription(topics=("t",), owned={"t": (0, 1, 2)}, generation=3),
            "b": MemberSubscription(topics=("t", "u"), owned={"t": (2, 3)}),
            "c": MemberSubscription(topics=("u",)),
        },
        options={"replicas": 2},
    )
    result = a.assign(cluster, members)
    assert {m: x.user_data for m, x in result.items()} == {m: aio.encode_generation(4) for m in "abc"}
    expected = registry.get("redundant").assign(spec)
    assert as_dict(result) == {m: {t: ps for t, ps in x.items() if ps} for m, x in expected.items()}
    c.on_assignment(result["c"])
    assert aiokafka_member(c.metadata(["u"])).user_data == encode_sticky_user_data(as_dict(result)["c"], 4)


# ------------------------------------------------------------------------------------------- rolling_upgrade
def test_kafka_python_rolling_upgrade_links_both_ways() -> None:
    ours = kp.RegroupStickyAssignor()
    first, companion = kp.rolling_upgrade(ours, StickyPartitionAssignor)
    assert first is ours and companion.name == "sticky"
    assert companion.supported_protocols() == [RebalanceProtocol.EAGER]
    companion.on_assignment(kafka_python_assignment({"t": [1]}), 3)  # the group runs kafka-python's sticky
    assert decode_sticky(wire(ours.metadata(["t"])).user_data) == ({"t": (1,)}, 3)
    ours.on_assignment(kafka_python_assignment({"t": [2]}), 4)  # the group runs ours
    assert StickyPartitionAssignor.parse_member_metadata(wire(companion.metadata(["t"]))).partitions == [
        TopicPartition("t", 2)
    ]
    with pytest.raises(ValueError, match="two different"):
        kp.rolling_upgrade(kp.RegroupStickyAssignor(), kp.RegroupStickyAssignor())


def test_aiokafka_rolling_upgrade_links_both_ways() -> None:
    theirs = type("Sticky", (AioSticky,), {})  # aiokafka's sticky keeps its state on the class: a class of its own
    ours = aio.RegroupStickyAssignor()
    first, companion = aio.rolling_upgrade(ours, theirs)
    assert first is ours and companion.name == "sticky"
    companion.on_assignment(aiokafka_assignment({"t": [1]}))
    assert decode_sticky(ours.metadata(["t"]).user_data) == ({"t": (1,)}, -1)
    ours.on_assignment(aiokafka_assignment({"t": [2]}, aio.encode_generation(5)))
    assert AioSticky.parse_member_metadata(aiokafka_member(companion.metadata(["t"]))).partitions == [AioTP("t", 2)]


# ---------------------------------------------------------------------------------------------------- options
@pytest.mark.parametrize("module", [kp, aio], ids=["kafka-python", "aiokafka"])
def test_bad_options_fail_at_construction(module: Any) -> None:
    with pytest.raises(AssignmentError, match="replicas"):
        module.RegroupRedundantAssignor(replicas=0)
    with pytest.raises(AssignmentError, match="non-empty list"):
        module.RegroupCopartitionedAssignor(copartitioned=[[]])
    with pytest.raises(AssignmentError, match="vnodes"):
        module.RegroupConsistentHashAssignor(vnodes=0)


# ----------------------------------------------------------------------------------------------- without them
class _Missing(importlib.abc.MetaPathFinder):
    """Makes a top-level package and its modules unimportable, as when it is not installed."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == self.package or name.startswith(self.package + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.mark.parametrize(
    ("adapter", "package", "named"),
    [("regroup.adapters.kafka_python", "kafka", "kafka-python"), ("regroup.adapters.aiokafka", "aiokafka", "aiokafka")],
)
def test_import_without_the_library_names_the_package(
    monkeypatch: pytest.MonkeyPatch, adapter: str, package: str, named: str
) -> None:
    for name in [n for n in sys.modules if n in (package, adapter) or n.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Missing(package), *sys.meta_path])
    with pytest.raises(ImportError, match=rf"{adapter} needs {named}: pip install 'regroup\[adapters\]'"):
        importlib.import_module(adapter)
