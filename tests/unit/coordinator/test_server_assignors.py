"""K23 and K04 of docs/protocol.md: KIP-848 server-side assignors by name. Besides Kafka's ``uniform`` and
``range``, a broker may offer regroup's ``optimal`` and ``consistent-hash`` (``group.consumer.assignors``); a
member names one with ServerAssignor (``group.remote.assignor``) and the group's target is that assignor's,
exactly. A name the broker does not offer is Kafka's UNSUPPORTED_ASSIGNOR, before anything is written."""

from __future__ import annotations

import pytest

from regroup.assignors import registry
from regroup.assignors.consistent_hash import ConsistentHashAssignor
from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.coordinator.consumer.target import RACK_AWARE_SERVER_ASSIGNORS, SERVER_ASSIGNORS
from regroup.model.errors import ErrorCode
from tests.unit.coordinator.consumer_racks import RackHarness, named

ALL_FOUR = ("uniform", "range", "optimal", "consistent-hash")


def test_the_server_side_names() -> None:
    """Every name regroup maps to a server-side assignor is one the coordinator runs; Kafka's class names of
    its built-in two stand for them; the client-side-only strategies name none."""
    assert {registry.wire_name(name) for name in registry.SERVER_SIDE} == set(SERVER_ASSIGNORS)
    assert registry.server_side_name("optimal") == registry.wire_name("optimal") == "optimal"
    assert registry.server_side_name("consistent-hash") == registry.wire_name("consistent-hash") == "consistent-hash"
    assert registry.server_side_name("org.apache.kafka.coordinator.group.assignor.UniformAssignor") == "uniform"
    assert registry.server_side_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == "server-range"
    assert registry.wire_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == "range"
    for name in ("sticky", "cooperative-sticky", "roundrobin", "redundant", "copartitioned", "no-such"):
        assert registry.server_side_name(name) is None, name
    assert {"uniform", "range", "optimal"} == RACK_AWARE_SERVER_ASSIGNORS


@pytest.mark.parametrize(
    ("assignor", "a_target", "b_target"),
    [
        # balance, then stickiness: A keeps its lowest partition; B takes the other, off its rack
        ("optimal", "foo=0", "foo=1"),
        # balance, then partitions kept on their owner's rack: A keeps foo-1 (on r1), B gets foo-0 (on r2)
        ("uniform", "foo=1", "foo=0"),
    ],
)
def test_k23_a_group_asking_for_optimal_gets_the_optimal_engine(assignor: str, a_target: str, b_target: str) -> None:
    """Given a broker offering all four assignors and topic foo with partition 0 on rack r2 and 1 on r1;
    when A (rack r1) joins naming ``assignor`` and then B (rack r2) joins naming it too;
    then A first gets both; B's join bumps the epoch to 2 and the target splits one each: ``optimal`` keeps
    A's lowest partition (balance, then stickiness; racks only place moved partitions), ``uniform`` keeps the
    one on A's rack."""
    h = RackHarness(consumer_group_assignors=ALL_FOUR)
    h.racked(foo=["r2", "r1"])
    a = h.hb("", 0, topics=["foo"], rack_id="r1", assignor=assignor)
    assert (a.error, a.member_epoch, named(a.assignment)) == (ErrorCode.NONE, 1, {"foo": [0, 1]})
    b = h.hb("", 0, topics=["foo"], rack_id="r2", assignor=assignor)
    assert (b.error, b.member_epoch) == (ErrorCode.NONE, 2)
    assert h.written({a.member_id: "A", b.member_id: "B"}) == [
        "member B foo",
        "epoch 2",
        f"target A {a_target}",
        f"target B {b_target}",
        "target-epoch 2",
        "current B epoch=2 prev=0 unreleased_partitions assigned=- revoking=-",
    ]
    assert h.cg().preferred_assignor("uniform") == assignor


def test_k23_optimal_settles_balanced_and_sticky() -> None:
    """Given A owning foo's 6 partitions under ``optimal`` (the broker's default: listed first);
    when B and C join (naming no assignor) and everyone acknowledges;
    then B's join splits 3/3 (A keeps foo-0..2, B gets foo-3..5) and C's 2/2/2, each keeping its lowest: A
    gives up foo-2, B foo-5, and C gets exactly those two."""
    h = RackHarness(consumer_group_assignors=("optimal", "uniform"))
    h.topics(foo=6)
    a = h.join_cg().member_id
    b = h.join_cg().member_id
    c = h.join_cg().member_id
    assert a and b and c
    h.settle([a, b, c])
    assert {m: named(h.cmember(m).assigned) for m in (a, b, c)} == {
        a: {"foo": [0, 1]},
        b: {"foo": [3, 4]},
        c: {"foo": [2, 5]},
    }
    assert h.cg().group_epoch == 3


def test_k23_consistent_hash_by_name_is_the_hash_ring() -> None:
    """Given a broker offering ``consistent-hash``;
    when two static members join naming it;
    then the target is exactly the ring's assignment of the two instance ids (not balanced by design), and
    it is the same again once a third member has joined and left."""
    h = RackHarness(consumer_group_assignors=ALL_FOUR)
    h.topics(foo=8)
    x = h.join_cg(instance_id="x", assignor="consistent-hash").member_id
    y = h.join_cg(instance_id="y", assignor="consistent-hash").member_id
    assert x and y
    spec = GroupSpec(
        topics={"foo": 8},
        members={
            x: MemberSubscription.of(["foo"], instance_id="x"),
            y: MemberSubscription.of(["foo"], instance_id="y"),
        },
    )
    ring = ConsistentHashAssignor().assign(spec)
    expected = {m: dict(ps) for m, ps in ring.items()}
    assert h.targets() == expected
    z = h.join_cg(instance_id="z", assignor="consistent-hash").member_id
    assert z
    assert h.targets() != expected
    h.hb(z, -1, instance_id="z")  # leaves for good
    h.hb(x, h.cmember(x).member_epoch)  # the next heartbeat computes the target without z
    assert h.targets() == expected


@pytest.mark.parametrize("name", ["optimal", "consistent-hash", "sticky"])
def test_k04_a_name_the_broker_does_not_offer_is_unsupported_assignor(name: str) -> None:
    """Given a broker with the default list (uniform, range);
    when a member joins naming an assignor the broker does not offer;
    then Kafka's UNSUPPORTED_ASSIGNOR with Kafka's message, and nothing is written (no group)."""
    h = RackHarness()
    h.topics(foo=2)
    response = h.hb("", 0, topics=["foo"], assignor=name)
    assert response.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert response.error_message == f"ServerAssignor {name} is not supported. Supported assignors: uniform, range."
    assert h.written() == []


def test_k04_the_broker_lists_what_it_offers_in_the_message() -> None:
    h = RackHarness(consumer_group_assignors=("optimal", "range"))
    h.topics(foo=2)
    response = h.hb("", 0, topics=["foo"], assignor="uniform")
    assert response.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert response.error_message == "ServerAssignor uniform is not supported. Supported assignors: optimal, range."
