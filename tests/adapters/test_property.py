"""Property: an adapter's assignment, from the library's own cluster metadata and members' subscriptions as its
leader receives them, equals regroup's strategy on the group written directly as a ``GroupSpec`` (each member's
previous assignment mapped to the strategy's form by ``with_previous``) — or both refuse it with the same
``AssignmentError``. Random topics, brokers with and without racks, replicas, members with subscriptions, previous
assignments (overlapping, stale, of unsubscribed or unknown topics), generations, racks and static instance ids."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka")
pytest.importorskip("aiokafka")

from regroup.adapters import aiokafka as aio
from regroup.adapters import kafka_python as kp
from regroup.assignors import registry
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

RACK = st.sampled_from([None, "r0", "r1", "r2"])


@st.composite
def groups(draw: st.DrawFn) -> dict[str, Any]:
    topics = draw(st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.integers(1, 6), min_size=1))
    brokers = draw(st.dictionaries(st.integers(0, 2), RACK, min_size=1))
    nodes = sorted(brokers)
    replicas = {
        (t, p): draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=len(nodes), unique=True))
        for t, n in topics.items()
        for p in range(n)
    }
    partitions = sorted(replicas)
    members = {}
    for i in range(draw(st.integers(1, 4))):
        members[f"m{i}"] = {
            "topics": draw(st.lists(st.sampled_from([*sorted(topics), "ghost"]), min_size=1, unique=True)),
            "owned": draw(st.lists(st.sampled_from(partitions), unique=True, max_size=5)),
            "generation": draw(st.integers(-1, 4)),
            "rack": draw(RACK),
            "instance_id": draw(st.sampled_from([None, f"i{i}", "shared"])),
        }
    options = {
        "redundant": {"replicas": draw(st.integers(1, 3))},
        "copartitioned": {"copartitioned": [draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True))]},
        "consistent-hash": {"vnodes": draw(st.integers(1, 20))},
    }
    return {"topics": topics, "brokers": brokers, "replicas": replicas, "members": members, "options": options}


def previous(m: dict[str, Any]) -> dict[str, list[int]]:
    """A generated member's previous assignment, topic → partitions."""
    out: dict[str, list[int]] = {}
    for t, p in m["owned"]:
        out.setdefault(t, []).append(p)
    return out


def expected_spec(group: dict[str, Any], strategy: str, racks: bool, instance_ids: bool) -> GroupSpec:
    """The group written straight as regroup's spec (independently of the adapters' conversion)."""
    members = group["members"]
    subscribed = {t for m in members.values() for t in m["topics"]}
    topics = {t: n for t, n in group["topics"].items() if t in subscribed}
    partition_racks = None
    rack_aware = strategy in ("sticky", "cooperative-sticky", "range")
    if racks and rack_aware and any(m["rack"] for m in members.values()):
        brokers = group["brokers"]
        per_topic = {
            t: tuple(frozenset(r for b in group["replicas"][(t, p)] if (r := brokers[b])) for p in range(n))
            for t, n in sorted(topics.items())
        }
        if any(rs for per_partition in per_topic.values() for rs in per_partition):
            partition_racks = per_topic
    spec = GroupSpec(
        topics=topics,
        members={
            name: MemberSubscription.of(
                m["topics"],
                previous(m),
                generation=m["generation"],
                rack=m["rack"] if racks else None,
                instance_id=m["instance_id"] if instance_ids else None,
            )
            for name, m in members.items()
        },
        partition_racks=partition_racks,
        options=group["options"].get(strategy, {}),
    )
    return registry.get(strategy).with_previous(spec)


def outcome(run: Callable[[], dict[str, dict[str, list[int]]]]) -> tuple[str, Any]:
    try:
        return "assigned", run()
    except AssignmentError as exc:
        return "refused", str(exc)


def regroups(spec: GroupSpec, strategy: str) -> dict[str, dict[str, list[int]]]:
    assignment = registry.get(strategy).assign(spec)
    return {m: {t: ps for t, ps in a.items() if ps} for m, a in assignment.items()}


KAFKA_PYTHON = {
    "sticky": lambda rack, _: kp.RegroupStickyAssignor(rack=rack),
    "cooperative-sticky": lambda rack, _: kp.RegroupCooperativeStickyAssignor(rack=rack),
    "range": lambda rack, _: kp.RegroupRangeAssignor(rack=rack),
    "redundant": lambda _, o: kp.RegroupRedundantAssignor(**o),
    "copartitioned": lambda _, o: kp.RegroupCopartitionedAssignor(**o),
    "consistent-hash": lambda _, o: kp.RegroupConsistentHashAssignor(**o),
}
AIOKAFKA = {
    "sticky": lambda _: aio.RegroupStickyAssignor(),
    "range": lambda _: aio.RegroupRangeAssignor(),
    "redundant": lambda o: aio.RegroupRedundantAssignor(**o),
    "copartitioned": lambda o: aio.RegroupCopartitionedAssignor(**o),
    "consistent-hash": lambda o: aio.RegroupConsistentHashAssignor(**o),
}
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("strategy", sorted(KAFKA_PYTHON))
@SETTINGS
@given(group=groups())
def test_kafka_python_adapter_assigns_as_regroup(strategy: str, group: dict[str, Any]) -> None:
    options = group["options"].get(strategy, {})
    cluster = kafka_python_cluster(group["topics"], group["brokers"], group["replicas"])
    members, leader = [], None
    for name, m in group["members"].items():
        adapter = KAFKA_PYTHON[strategy](m["rack"], options)
        adapter.record(kafka_python_assignment(previous(m)), m["generation"])
        members.append(kafka_python_member(name, adapter.metadata(m["topics"]), m["instance_id"]))
        leader = leader or adapter
    assert leader is not None
    want = outcome(lambda: regroups(expected_spec(group, strategy, racks=True, instance_ids=True), strategy))
    assert outcome(lambda: as_dict(leader.assign(cluster, members))) == want


@pytest.mark.parametrize("strategy", sorted(AIOKAFKA))
@SETTINGS
@given(group=groups())
def test_aiokafka_adapter_assigns_as_regroup(strategy: str, group: dict[str, Any]) -> None:
    options = group["options"].get(strategy, {})
    cluster = aiokafka_cluster(group["topics"], group["brokers"], group["replicas"])
    members, leader = {}, None
    for name, m in group["members"].items():
        adapter = AIOKAFKA[strategy](options)
        adapter.record(aiokafka_assignment(previous(m)), m["generation"])
        members[name] = aiokafka_member(adapter.metadata(m["topics"]))
        leader = leader or adapter
    assert leader is not None
    want = outcome(lambda: regroups(expected_spec(group, strategy, racks=False, instance_ids=False), strategy))
    assert outcome(lambda: as_dict(leader.assign(cluster, members))) == want
