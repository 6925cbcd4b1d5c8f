"""Tests of the ``roundrobin`` assignor: Kafka's documented examples (Javadoc and KIP-54), the expectations
of Kafka's RoundRobinAssignorTest, static-member ordering, and property tests against a naive circular
iteration."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.metrics import max_min_spread, validity_errors
from regroup.assignors.roundrobin import RoundRobinAssignor
from regroup.assignors.spec import GroupSpec, MemberSubscription, RebalanceProtocol


def tps(text: str) -> dict[str, list[int]]:
    """Parse ``"t0p0, t1p1"`` (KIP-54 / Javadoc notation) or ``"t0-0, t1-1"`` into topic -> partitions."""
    out: dict[str, list[int]] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        sep = "-" if "-" in item else "p"
        topic, _, partition = item.rpartition(sep)
        out.setdefault(topic, []).append(int(partition))
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def member(topics: Sequence[str], *, instance: str | None = None, rack: str | None = None) -> MemberSubscription:
    return MemberSubscription.of(list(topics), instance_id=instance, rack=rack)


def run(
    topics: Mapping[str, int],
    members: Mapping[str, MemberSubscription],
    partition_racks: Mapping[str, tuple[frozenset[str], ...]] | None = None,
) -> dict[str, dict[str, list[int]]]:
    spec = GroupSpec(topics=dict(topics), members=dict(members), partition_racks=partition_racks)
    result = RoundRobinAssignor().assign(spec)
    assert validity_errors(spec, result) == []
    return result


def expect(**assigned: str) -> dict[str, dict[str, list[int]]]:
    return {m: tps(text) for m, text in assigned.items()}


def test_name_and_protocols() -> None:
    assignor = RoundRobinAssignor()
    assert assignor.name == "roundrobin"
    assert assignor.supported_protocols == (RebalanceProtocol.EAGER,)
    assert assignor.server_side is False


# --------------------------------------------------------------------------------------------------------
# Kafka's Javadoc examples (RoundRobinAssignor)

T0_T1 = ["t0", "t1"]


def test_javadoc_two_consumers_identical_subscriptions() -> None:
    result = run({"t0": 3, "t1": 3}, {"C0": member(T0_T1), "C1": member(T0_T1)})
    assert result == expect(C0="t0p0, t0p2, t1p1", C1="t0p1, t1p0, t1p2")


def test_javadoc_different_subscriptions() -> None:
    result = run(
        {"t0": 1, "t1": 2, "t2": 3},
        {"C0": member(["t0"]), "C1": member(["t0", "t1"]), "C2": member(["t0", "t1", "t2"])},
    )
    assert result == expect(C0="t0p0", C1="t1p0", C2="t1p1, t2p0, t2p1, t2p2")


def test_javadoc_dynamic_members_reshuffled_after_rolling_bounce() -> None:
    topics = {"t0": 3, "t1": 3}
    before = run(topics, {m: member(T0_T1) for m in ("C0", "C1", "C2")})
    assert before == expect(C0="t0p0, t1p0", C1="t0p1, t1p1", C2="t0p2, t1p2")
    # C0 -> C5, C1 -> C3, C2 -> C4
    after = run(topics, {m: member(T0_T1) for m in ("C5", "C3", "C4")})
    assert after == expect(C3="t0p0, t1p0", C4="t0p1, t1p1", C5="t0p2, t1p2")


def test_javadoc_static_members_keep_their_share() -> None:
    topics = {"t0": 3, "t1": 3}
    expected_by_instance = {"I0": tps("t0p0, t1p0"), "I1": tps("t0p1, t1p1"), "I2": tps("t0p2, t1p2")}
    for ids in (("C0", "C1", "C2"), ("C5", "C3", "C4")):
        members = {m: member(T0_T1, instance=f"I{i}") for i, m in enumerate(ids)}
        result = run(topics, members)
        assert {f"I{i}": result[m] for i, m in enumerate(ids)} == expected_by_instance


# --------------------------------------------------------------------------------------------------------
# KIP-54's examples, round-robin columns

FOUR_TOPICS = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}


def test_kip54_example1() -> None:
    all_four = list(FOUR_TOPICS)
    fresh = run(FOUR_TOPICS, {m: member(all_four) for m in ("C0", "C1", "C2")})
    assert fresh == expect(C0="t0p0, t1p1, t3p0", C1="t0p1, t2p0, t3p1", C2="t1p0, t2p1")
    # C1 removed
    after = run(FOUR_TOPICS, {m: member(all_four) for m in ("C0", "C2")})
    assert after == expect(C0="t0p0, t1p0, t2p0, t3p0", C2="t0p1, t1p1, t2p1, t3p1")


def test_kip54_example2() -> None:
    topics = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": member(["t0"]), "C1": member(["t0", "t1"]), "C2": member(["t0", "t1", "t2"])}
    assert run(topics, subs) == expect(C0="t0p0", C1="t1p0", C2="t1p1, t2p0, t2p1, t2p2")
    # C0 removed
    del subs["C0"]
    assert run(topics, subs) == expect(C1="t0p0, t1p1", C2="t1p0, t2p0, t2p1, t2p2")


def test_kip54_example3() -> None:
    topics = {"t0": 2, "t1": 2}
    assert run(topics, {m: member(T0_T1) for m in ("C0", "C1")}) == expect(C0="t0p0, t1p0", C1="t0p1, t1p1")
    # C2 joins
    result = run(topics, {m: member(T0_T1) for m in ("C0", "C1", "C2")})
    assert result == expect(C0="t0p0, t1p1", C1="t0p1", C2="t1p0")


# --------------------------------------------------------------------------------------------------------
# Kafka's RoundRobinAssignorTest


def test_one_consumer_no_topic() -> None:
    assert run({}, {"consumer": member([])}) == {"consumer": {}}


def test_one_consumer_nonexistent_topic() -> None:
    assert run({}, {"consumer": member(["topic"])}) == {"consumer": {}}


def test_one_consumer_one_topic() -> None:
    assert run({"topic": 3}, {"consumer": member(["topic"])}) == expect(consumer="topic-0, topic-1, topic-2")


def test_only_assigns_partitions_from_subscribed_topics() -> None:
    result = run({"topic": 3, "other": 3}, {"consumer": member(["topic"])})
    assert result == expect(consumer="topic-0, topic-1, topic-2")


def test_one_consumer_multiple_topics() -> None:
    result = run({"topic1": 1, "topic2": 2}, {"consumer": member(["topic1", "topic2"])})
    assert result == expect(consumer="topic1-0, topic2-0, topic2-1")


def test_two_consumers_one_topic_one_partition() -> None:
    result = run({"topic": 1}, {"consumer1": member(["topic"]), "consumer2": member(["topic"])})
    assert result == {"consumer1": tps("topic-0"), "consumer2": {}}


def test_two_consumers_one_topic_two_partitions() -> None:
    result = run({"topic": 2}, {"consumer1": member(["topic"]), "consumer2": member(["topic"])})
    assert result == expect(consumer1="topic-0", consumer2="topic-1")


def test_multiple_consumers_mixed_topics() -> None:
    result = run(
        {"topic1": 3, "topic2": 2},
        {
            "consumer1": member(["topic1"]),
            "consumer2": member(["topic1", "topic2"]),
            "consumer3": member(["topic1"]),
        },
    )
    assert result == expect(consumer1="topic1-0", consumer2="topic1-1, topic2-0, topic2-1", consumer3="topic1-2")


BOTH = ["topic1", "topic2"]


def test_two_dynamic_consumers_two_topics_six_partitions() -> None:
    result = run({"topic1": 3, "topic2": 3}, {"consumer1": member(BOTH), "consumer2": member(BOTH)})
    assert result == expect(consumer1="topic1-0, topic1-2, topic2-1", consumer2="topic1-1, topic2-0, topic2-2")


def test_two_static_consumers_compare_by_instance_id() -> None:
    # "consumer-a" sorts before "consumer-b", but the instance ids decide.
    result = run(
        {"topic1": 3, "topic2": 3},
        {"consumer-b": member(BOTH, instance="instance1"), "consumer-a": member(BOTH, instance="instance2")},
    )
    assert result == {
        "consumer-b": tps("topic1-0, topic1-2, topic2-1"),
        "consumer-a": tps("topic1-1, topic2-0, topic2-2"),
    }


def test_static_consumer_before_dynamic_consumer() -> None:
    result = run(
        {"topic1": 3, "topic2": 3},
        {"consumer-b": member(BOTH, instance="instance1"), "consumer-a": member(BOTH)},
    )
    assert result == {
        "consumer-b": tps("topic1-0, topic1-2, topic2-1"),
        "consumer-a": tps("topic1-1, topic2-0, topic2-2"),
    }


def test_static_member_assignment_persistent() -> None:
    topics = {"topic1": 3, "topic2": 3}
    statics = {f"consumer{i}": member(BOTH, instance=f"instance{i}") for i in (1, 2, 3)}
    expected = expect(consumer1="topic1-0, topic2-1", consumer2="topic1-1, topic2-2", consumer3="topic1-2")
    # the dynamic member sorts last whatever its id
    for dynamic in ("consumer4", "consumer5", "a"):
        result = run(topics, {**statics, dynamic: member(BOTH)})
        assert result == {**expected, dynamic: tps("topic2-0")}


def test_static_member_assignment_persistent_after_member_id_changes() -> None:
    topics = {"topic1": 5, "topic2": 5}
    subs = [member(BOTH, instance=f"instance{i}") for i in (1, 2, 3)]
    expected_by_instance = {
        "instance1": tps("topic1-0, topic1-3, topic2-1, topic2-4"),
        "instance2": tps("topic1-1, topic1-4, topic2-2"),
        "instance3": tps("topic1-2, topic2-0, topic2-3"),
    }
    for ids in (("consumer1", "consumer2", "consumer3"), ("consumer1", "consumer5", "consumer4")):
        result = run(topics, dict(zip(ids, subs, strict=True)))
        assert {subs[i].instance_id: result[m] for i, m in enumerate(ids)} == expected_by_instance


# --------------------------------------------------------------------------------------------------------
# Behaviour beyond Kafka's tests


def test_racks_are_ignored() -> None:
    # Kafka's round-robin assignor has no rack-aware variant.
    topics = {"t0": 3, "t1": 3}
    partition_racks = {t: tuple(frozenset("abc"[p % 3]) for p in range(3)) for t in topics}
    plain = run(topics, {"C0": member(T0_T1), "C1": member(T0_T1)})
    with_racks = run(topics, {"C0": member(T0_T1, rack="b"), "C1": member(T0_T1, rack="a")}, partition_racks)
    assert with_racks == plain == expect(C0="t0p0, t0p2, t1p1", C1="t0p1, t1p0, t1p2")


def test_topics_are_dealt_in_java_string_order() -> None:
    # U+10000 is a surrogate pair in UTF-16 (0xD800...), so Java sorts it before U+FFFF; the cycle position
    # carried from the first topic dealt decides who gets the second topic's partition.
    low, high = "\U00010000", "\uffff"
    result = run({low: 1, high: 1}, {"a": member([low, high]), "b": member([low, high])})
    assert result == {"a": {low: [0]}, "b": {high: [0]}}


def test_every_member_present_and_nonexistent_or_empty_topics_ignored() -> None:
    result = run(
        {"t0": 2, "empty": 0},
        {"a": member(["t0", "ghost"]), "b": member(["ghost", "empty"]), "c": member([])},
    )
    assert result == {"a": tps("t0-0, t0-1"), "b": {}, "c": {}}


def test_cycle_continues_across_topics_and_skips_non_subscribers() -> None:
    # order a, b, c, d; t0 (a, c) 3 partitions -> a, c, a; cycle now at b; t1 (b, d) 1 -> b; at c;
    # t2 (a, d) 3 -> d, a, d
    result = run(
        {"t0": 3, "t1": 1, "t2": 3},
        {"a": member(["t0", "t2"]), "b": member(["t1"]), "c": member(["t0"]), "d": member(["t1", "t2"])},
    )
    assert result == expect(a="t0-0, t0-2, t2-1", b="t1-0", c="t0-1", d="t2-0, t2-2")


def test_empty_group() -> None:
    assert RoundRobinAssignor().assign(GroupSpec(topics={"t": 3}, members={})) == {}


# --------------------------------------------------------------------------------------------------------
# Property tests against a naive circular iteration


def reference_roundrobin(spec: GroupSpec) -> dict[str, dict[str, list[int]]]:
    def key(m: str) -> tuple[int, str, str]:
        inst = spec.members[m].instance_id
        return (0, inst, m) if inst is not None else (1, m, "")

    order = sorted(spec.members, key=key)
    out: dict[str, dict[str, list[int]]] = {m: {} for m in spec.members}
    at = 0
    for topic in sorted({t for s in spec.members.values() for t in s.topics}):
        for p in range(max(0, spec.topics.get(topic, 0))):
            while topic not in spec.members[order[at]].topics:
                at = (at + 1) % len(order)
            out[order[at]].setdefault(topic, []).append(p)
            at = (at + 1) % len(order)
    return out


@st.composite
def group_specs(draw: st.DrawFn, *, homogeneous: bool = False) -> GroupSpec:
    topics = {f"t{i}": draw(st.integers(0, 12)) for i in range(draw(st.integers(1, 5)))}
    names = [*topics, "ghost"]
    subscription = st.lists(st.sampled_from(names), max_size=6).map(tuple)
    shared = draw(subscription)
    ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=1, max_size=8, unique=True))
    instances = draw(st.permutations(range(len(ids))))
    members = {
        m: MemberSubscription(
            topics=shared if homogeneous else draw(subscription),
            instance_id=f"i{instances[i]}" if draw(st.booleans()) else None,
            rack=draw(st.sampled_from([None, "a", "b"])),
        )
        for i, m in enumerate(ids)
    }
    return GroupSpec(topics=topics, members=members)


@settings(max_examples=300, deadline=None)
@given(group_specs())
def test_property_matches_naive_circular_iteration(spec: GroupSpec) -> None:
    result = RoundRobinAssignor().assign(spec)
    assert result == reference_roundrobin(spec)
    assert validity_errors(spec, result) == []
    for per_topic in result.values():
        assert all(ps and ps == sorted(ps) for ps in per_topic.values())


@settings(max_examples=200, deadline=None)
@given(group_specs(homogeneous=True))
def test_property_homogeneous_subscriptions_are_balanced(spec: GroupSpec) -> None:
    result = RoundRobinAssignor().assign(spec)
    assert validity_errors(spec, result) == []
    assert max_min_spread(result) <= 1


@settings(max_examples=200, deadline=None)
@given(group_specs(), st.randoms(use_true_random=False))
def test_property_deterministic_under_member_insertion_order(spec: GroupSpec, rng: random.Random) -> None:
    items = list(spec.members.items())
    rng.shuffle(items)
    shuffled = GroupSpec(topics=spec.topics, members=dict(items))
    assert RoundRobinAssignor().assign(shuffled) == RoundRobinAssignor().assign(spec)


@pytest.mark.slow
def test_scale_thousand_members_hundred_thousand_partitions() -> None:
    topics = {f"topic-{i:03d}": 1000 for i in range(100)}
    everything = tuple(topics)
    members = {f"member-{i:04d}": MemberSubscription(topics=everything) for i in range(1000)}
    spec = GroupSpec(topics=topics, members=members)
    result = RoundRobinAssignor().assign(spec)
    assert validity_errors(spec, result) == []
    assert max_min_spread(result) == 0
    # generous bound against a loaded machine; typically a small fraction of this
