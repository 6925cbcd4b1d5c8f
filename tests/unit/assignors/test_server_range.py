"""Tests of the ``server-range`` assignor (Kafka's KIP-848 server-side ``RangeAssignor``, 3.9+ semantics):
the expectations of Kafka's RangeAssignorTest and Javadoc, what moves when members join or leave (the
current target is not used), co-partitioning, validity, per-topic balance and determinism as properties
checked against a naive reference written after Kafka's per-member loop, and scale."""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors import registry
from regroup.assignors.metrics import partitions_moved, validity_errors
from regroup.assignors.range_assignment import topic_ranges
from regroup.assignors.server_range import ServerRangeAssignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription, RebalanceProtocol

Expected = dict[str, dict[str, list[int]]]


def tps(text: str) -> dict[str, list[int]]:
    """Parse ``"t1-0, t1-1, t2-0"`` into ``{"t1": [0, 1], "t2": [0]}`` ("" is nothing)."""
    out: dict[str, list[int]] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        topic, _, partition = item.rpartition("-")
        out.setdefault(topic, []).append(int(partition))
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def member(
    topics: Sequence[str], owned: str = "", *, instance: str | None = None, rack: str | None = None
) -> MemberSubscription:
    """A member subscribed to ``topics`` whose current target is ``owned`` (in ``tps`` notation)."""
    return MemberSubscription.of(list(topics), tps(owned), instance_id=instance, rack=rack)


def run(topics: Mapping[str, int], members: Mapping[str, MemberSubscription]) -> Assignment:
    spec = GroupSpec(topics=dict(topics), members=dict(members))
    result = ServerRangeAssignor().assign(spec)
    assert validity_errors(spec, result) == []
    assert list(result) == list(members)
    return result


# --------------------------------------------------------------------------------------------------------
# A naive reference, structured like Kafka's assignor: members in order, each takes the next range of
# every topic it subscribes to, the first ``P % n`` takers of a topic one partition more.


def java_compare(a: str, b: str) -> int:
    """Java's ``String.compareTo`` sign: by UTF-16 code unit."""
    ua = [int.from_bytes(a.encode("utf-16-be", "surrogatepass")[i : i + 2], "big") for i in range(0, 2 * len(a), 2)]
    ub = [int.from_bytes(b.encode("utf-16-be", "surrogatepass")[i : i + 2], "big") for i in range(0, 2 * len(b), 2)]
    return (ua > ub) - (ua < ub)


def kafka_compare(spec: GroupSpec, m1: str, m2: str) -> int:
    i1, i2 = spec.members[m1].instance_id, spec.members[m2].instance_id
    if i1 is not None and i2 is not None:
        return java_compare(i1, i2) or java_compare(m1, m2)
    if i1 is not None:
        return -1
    if i2 is not None:
        return 1
    return java_compare(m1, m2)


def reference(spec: GroupSpec) -> Expected:
    order = sorted(spec.members, key=functools.cmp_to_key(functools.partial(kafka_compare, spec)))
    subscribed = {m: sorted({t for t in spec.members[m].topics if t in spec.topics}) for m in order}
    takers = {t: sum(t in subscribed[m] for m in order) for t in spec.topics}
    next_start = dict.fromkeys(spec.topics, 0)
    extra_left = {t: spec.topics[t] % n for t, n in takers.items() if n}
    out: Expected = {}
    for m in order:
        out[m] = {}
        for t in subscribed[m]:
            share = spec.topics[t] // takers[t]
            if extra_left[t] > 0:
                share += 1
                extra_left[t] -= 1
            start = next_start[t]
            end = min(start + share, spec.topics[t])
            next_start[t] = end
            if start < end:
                out[m][t] = list(range(start, end))
    return {m: out[m] for m in spec.members}


# --------------------------------------------------------------------------------------------------------
# The plug-in surface


def test_name_and_protocols() -> None:
    assignor = ServerRangeAssignor()
    assert assignor.name == "server-range"
    assert assignor.server_side is True
    assert assignor.supported_protocols == (RebalanceProtocol.COOPERATIVE,)


def test_registered_under_its_name() -> None:
    assert isinstance(registry.get("server-range"), ServerRangeAssignor)


def test_empty_group() -> None:
    assert ServerRangeAssignor().assign(GroupSpec(topics={"t": 3}, members={})) == {}


# --------------------------------------------------------------------------------------------------------
# Kafka's RangeAssignorTest (group-coordinator), written out as data: topics, members (subscription,
# current target, instance id) and the expected target. In Kafka the current targets are given to the
# assignor, which ignores them; so do we.

KafkaCase = tuple[dict[str, int], dict[str, MemberSubscription], Expected]

KAFKA_CASES: dict[str, KafkaCase] = {
    "one_member_no_topic": ({"topic1": 3}, {"A": member([])}, {"A": {}}),
    "first_assignment_two_members_two_topics_same_subscriptions": (
        {"topic1": 3, "topic3": 2},
        {"A": member(["topic1", "topic3"]), "B": member(["topic1", "topic3"])},
        {"A": tps("topic1-0, topic1-1, topic3-0"), "B": tps("topic1-2, topic3-1")},
    ),
    "first_assignment_three_members_three_topics_different_subscriptions": (
        {"topic1": 3, "topic2": 3, "topic3": 2},
        {"A": member(["topic1", "topic2"]), "B": member(["topic3"]), "C": member(["topic2", "topic3"])},
        {
            "A": tps("topic1-0, topic1-1, topic1-2, topic2-0, topic2-1"),
            "B": tps("topic3-0"),
            "C": tps("topic2-2, topic3-1"),
        },
    ),
    "first_assignment_num_members_greater_than_num_partitions": (
        {"topic1": 3, "topic3": 2},
        {m: member(["topic1", "topic3"]) for m in "ABC"},
        {"A": tps("topic1-0, topic3-0"), "B": tps("topic1-1, topic3-1"), "C": tps("topic1-2")},
    ),
    "reassignment_num_members_greater_than_num_partitions_when_one_member_added": (
        {"topic1": 2, "topic2": 2},
        {
            "A": member(["topic1", "topic2"], "topic1-0, topic2-0"),
            "B": member(["topic1", "topic2"], "topic1-1, topic2-1"),
            "C": member(["topic1", "topic2"]),
        },
        {"A": tps("topic1-0, topic2-0"), "B": tps("topic1-1, topic2-1"), "C": {}},
    ),
    "reassignment_when_one_partition_added_for_two_members_two_topics": (
        {"topic1": 4, "topic2": 4},
        {
            "A": member(["topic1", "topic2"], "topic1-0, topic1-1, topic2-0, topic2-1"),
            "B": member(["topic1", "topic2"], "topic1-2, topic2-2"),
        },
        {"A": tps("topic1-0, topic1-1, topic2-0, topic2-1"), "B": tps("topic1-2, topic1-3, topic2-2, topic2-3")},
    ),
    "reassignment_when_one_member_added_after_initial_assignment_with_two_members_two_topics": (
        {"topic1": 3, "topic2": 3},
        {
            "A": member(["topic1", "topic2"], "topic1-0, topic1-1, topic2-0, topic2-1"),
            "B": member(["topic1", "topic2"], "topic1-2, topic2-2"),
            "C": member(["topic1", "topic2"]),
        },
        {"A": tps("topic1-0, topic2-0"), "B": tps("topic1-1, topic2-1"), "C": tps("topic1-2, topic2-2")},
    ),
    "reassignment_when_one_member_added_and_one_partition_after_initial_assignment_with_two_members_two_topics": (
        {"topic1": 4, "topic2": 3},
        {
            "A": member(["topic1", "topic2"], "topic1-0, topic1-1, topic2-0, topic2-1"),
            "B": member(["topic1", "topic2"], "topic1-2, topic2-2"),
            "C": member(["topic1"]),
        },
        {
            "A": tps("topic1-0, topic1-1, topic2-0, topic2-1"),
            "B": tps("topic1-2, topic2-2"),
            "C": tps("topic1-3"),
        },
    ),
    "reassignment_when_one_member_removed_after_initial_assignment_with_two_members_two_topics": (
        {"topic1": 3, "topic2": 3},
        {"B": member(["topic1", "topic2"], "topic1-2, topic2-2")},
        {"B": tps("topic1-0, topic1-1, topic1-2, topic2-0, topic2-1, topic2-2")},
    ),
    "reassignment_when_multiple_subscriptions_removed_after_initial_assignment_with_three_members_two_topics": (
        {"topic1": 3, "topic2": 3, "topic3": 2},
        {
            "A": member(["topic1"], "topic1-0, topic1-1, topic1-2, topic2-0"),
            "B": member(["topic1", "topic2", "topic3"], "topic2-1"),
            "C": member(["topic2"], "topic2-2, topic3-0, topic3-1"),
        },
        {
            "A": tps("topic1-0, topic1-1"),
            "B": tps("topic1-2, topic2-0, topic2-1, topic3-0, topic3-1"),
            "C": tps("topic2-2"),
        },
    ),
}


@pytest.mark.parametrize("case", sorted(KAFKA_CASES))
def test_kafka_range_assignor_test(case: str) -> None:
    topics, members, expected = KAFKA_CASES[case]
    assert run(topics, members) == expected


def test_kafka_member_subscribed_to_nonexistent_topic_is_ignored() -> None:
    # Kafka's assignor throws here, but its coordinator resolves subscriptions against the topics that exist
    # before calling it, so a missing topic is never seen; we ignore it the same way.
    assert run({"topic1": 3}, {"A": member(["topic2"])}) == {"A": {}}
    assert run({"topic1": 3}, {"A": member(["topic1", "topic2"])}) == {"A": tps("topic1-0, topic1-1, topic1-2")}


def test_kafka_static_membership() -> None:
    topics = {"topic1": 3}
    before = run(topics, {"A": member(["topic1"], instance="instanceA"), "B": member(["topic1"], instance="instanceB")})
    assert before == {"A": tps("topic1-0, topic1-1"), "B": tps("topic1-2")}
    # A restarts with a new member id under the same instance id: nothing changes.
    after = run(
        topics, {"B": member(["topic1"], instance="instanceB"), "memberA1": member(["topic1"], instance="instanceA")}
    )
    assert after == {"memberA1": before["A"], "B": before["B"]}


def test_kafka_mixed_static_membership() -> None:
    topics = {"topic1": 5}
    members = {
        "A": member(["topic1"], instance="instanceA"),
        "C": member(["topic1"], instance="instanceC"),
        "B": member(["topic1"]),
    }
    before = run(topics, members)
    # Static members first by instance id, then the dynamic one.
    assert before == {"A": tps("topic1-0, topic1-1"), "C": tps("topic1-2, topic1-3"), "B": tps("topic1-4")}
    del members["A"]
    members["memberA1"] = member(["topic1"], instance="instanceA")
    after = run(topics, members)
    assert after == {"C": before["C"], "B": before["B"], "memberA1": before["A"]}


# --------------------------------------------------------------------------------------------------------
# Kafka's Javadoc examples


def test_javadoc_co_partitioned_example() -> None:
    result = run({"T1": 3, "T2": 3}, {"M0": member(["T1", "T2"]), "M1": member(["T1", "T2"])})
    assert result == {"M0": tps("T1-0, T1-1, T2-0, T2-1"), "M1": tps("T1-2, T2-2")}


def test_javadoc_rolling_bounce_shuffles_dynamic_members() -> None:
    # M0 -> M3 and M1 -> M2 after a bounce: the new ids' order decides, whatever the current target says.
    result = run(
        {"T1": 3, "T2": 3},
        {"M3": member(["T1", "T2"], "T1-0, T1-1, T2-0, T2-1"), "M2": member(["T1", "T2"], "T1-2, T2-2")},
    )
    assert result == {"M3": tps("T1-2, T2-2"), "M2": tps("T1-0, T1-1, T2-0, T2-1")}


@pytest.mark.parametrize(("id0", "id1"), [("M0", "M1"), ("M3", "M2"), ("z", "a")])
def test_javadoc_static_members_keep_their_share(id0: str, id1: str) -> None:
    result = run(
        {"T1": 3, "T2": 3},
        {id0: member(["T1", "T2"], instance="I0"), id1: member(["T1", "T2"], instance="I1")},
    )
    assert result == {id0: tps("T1-0, T1-1, T2-0, T2-1"), id1: tps("T1-2, T2-2")}


# --------------------------------------------------------------------------------------------------------
# Member order


def test_static_members_come_before_dynamic_ones_whatever_their_ids() -> None:
    result = run({"t": 3}, {"a": member(["t"]), "b": member(["t"]), "zzz": member(["t"], instance="x")})
    assert result == {"a": tps("t-1"), "b": tps("t-2"), "zzz": tps("t-0")}


def test_ids_compare_by_utf16_code_unit_like_java() -> None:
    # U+1F600 is a surrogate pair starting 0xD83D, below U+FF01; Python's code point order says otherwise.
    emoji, fullwidth = "\U0001f600", "\uff01"
    assert fullwidth < emoji
    result = run({"t": 2}, {fullwidth: member(["t"]), emoji: member(["t"])})
    assert result == {fullwidth: tps("t-1"), emoji: tps("t-0")}
    static = run({"t": 2}, {"a": member(["t"], instance=fullwidth), "b": member(["t"], instance=emoji)})
    assert static == {"a": tps("t-1"), "b": tps("t-0")}


def test_duplicate_instance_ids_fall_back_to_member_id() -> None:
    result = run({"t": 2}, {"y": member(["t"], instance="i"), "x": member(["t"], instance="i")})
    assert result == {"y": tps("t-1"), "x": tps("t-0")}


# --------------------------------------------------------------------------------------------------------
# Stickiness: none beyond the member order. What a member keeps when others join or leave is what the
# range formula gives it again.


def test_current_target_is_ignored() -> None:
    topics = {"t": 4}
    plain = run(topics, {"A": member(["t"]), "B": member(["t"])})
    skewed = run(topics, {"A": member(["t"], "t-3"), "B": member(["t"], "t-0, t-1, t-2")})
    assert plain == skewed == {"A": tps("t-0, t-1"), "B": tps("t-2, t-3")}


def test_garbage_in_the_current_target_is_dropped() -> None:
    spec_members = {"A": member(["t"], "t-7, gone-0, u-1"), "B": member(["t", "gone"], "t-0")}
    assert run({"t": 2, "u": 2}, spec_members) == {"A": tps("t-0"), "B": tps("t-1")}


def test_member_joining_last_shifts_the_tail() -> None:
    topics = {"t": 6}
    before = run(topics, {"A": member(["t"]), "B": member(["t"])})
    assert before == {"A": tps("t-0, t-1, t-2"), "B": tps("t-3, t-4, t-5")}
    after = run(
        topics,
        {"A": member(["t"], "t-0, t-1, t-2"), "B": member(["t"], "t-3, t-4, t-5"), "C": member(["t"])},
    )
    assert after == {"A": tps("t-0, t-1"), "B": tps("t-2, t-3"), "C": tps("t-4, t-5")}
    # A keeps t-0 and t-1, B keeps only t-3: t-2, t-4 and t-5 change owner.
    assert partitions_moved(before, after) == 3


def test_member_joining_first_shifts_everyone() -> None:
    topics = {"t": 6}
    before = run(topics, {"A": member(["t"]), "B": member(["t"])})
    after = run(topics, {"A": member(["t"], "t-0, t-1, t-2"), "B": member(["t"], "t-3, t-4, t-5"), "0": member(["t"])})
    assert after == {"A": tps("t-2, t-3"), "B": tps("t-4, t-5"), "0": tps("t-0, t-1")}
    assert partitions_moved(before, after) == 3


def test_static_member_joining_goes_first() -> None:
    after = run(
        {"t": 4}, {"A": member(["t"], "t-0, t-1"), "B": member(["t"], "t-2, t-3"), "Z": member(["t"], instance="i")}
    )
    assert after == {"A": tps("t-2"), "B": tps("t-3"), "Z": tps("t-0, t-1")}


def test_member_leaving_in_the_middle() -> None:
    topics = {"t": 6}
    before = run(topics, {m: member(["t"]) for m in "ABC"})
    assert before == {"A": tps("t-0, t-1"), "B": tps("t-2, t-3"), "C": tps("t-4, t-5")}
    after = run(topics, {"A": member(["t"], "t-0, t-1"), "C": member(["t"], "t-4, t-5")})
    assert after == {"A": tps("t-0, t-1, t-2"), "C": tps("t-3, t-4, t-5")}
    # A and C keep everything they had and split B's partitions.
    assert partitions_moved(before, after) == 2


def test_joining_member_leaves_topics_it_does_not_subscribe_to_alone() -> None:
    topics = {"t": 5, "u": 5}
    before = run(topics, {"A": member(["t", "u"]), "B": member(["t", "u"])})
    after = run(topics, {"A": member(["t", "u"]), "AA": member(["u"]), "B": member(["t", "u"])})
    assert after["A"]["t"] == before["A"]["t"] and after["B"]["t"] == before["B"]["t"]
    assert after == {"A": tps("t-0, t-1, t-2, u-0, u-1"), "AA": tps("u-2, u-3"), "B": tps("t-3, t-4, u-4")}


def test_rolling_bounce_of_static_members_changes_nothing() -> None:
    topics = {"t": 7, "u": 3}
    names = ["k", "c", "x", "a"]
    before = run(topics, {f"old-{n}": member(["t", "u"], instance=n) for n in names})
    after = run(topics, {f"new-{n}": member(["t", "u"], instance=n) for n in reversed(names)})
    for n in names:
        assert after[f"new-{n}"] == before[f"old-{n}"]


# --------------------------------------------------------------------------------------------------------
# Edge cases


def test_topics_without_partitions_and_unsubscribed_members() -> None:
    result = run({"empty": 0, "t": 2}, {"A": member(["empty", "t"]), "B": member([]), "C": member(["empty"])})
    assert result == {"A": tps("t-0, t-1"), "B": {}, "C": {}}


def test_duplicated_topics_in_a_subscription_count_once() -> None:
    members = {"A": MemberSubscription(topics=("t", "t")), "B": MemberSubscription(topics=("t",))}
    assert run({"t": 4}, members) == {"A": tps("t-0, t-1"), "B": tps("t-2, t-3")}


def test_returned_lists_are_not_shared() -> None:
    spec = GroupSpec(topics={"t": 4, "u": 4}, members={"A": member(["t", "u"]), "B": member(["t", "u"])})
    first = ServerRangeAssignor().assign(spec)
    first["A"]["t"].append(99)
    assert first["A"]["u"] == [0, 1]
    assert ServerRangeAssignor().assign(spec)["A"]["t"] == [0, 1]


@pytest.mark.parametrize(
    ("partitions", "n", "sizes"),
    [(0, 3, []), (2, 3, [1, 1]), (3, 3, [1, 1, 1]), (7, 3, [3, 2, 2]), (8, 3, [3, 3, 2]), (5, 1, [5])],
)
def test_topic_ranges(partitions: int, n: int, sizes: list[int]) -> None:
    subscribers = [f"m{i}" for i in range(n)]
    ranges = topic_ranges(partitions, subscribers)
    assert [m for m, _ in ranges] == subscribers[: len(sizes)]
    assert [len(ps) for _, ps in ranges] == sizes
    assert [p for _, ps in ranges for p in ps] == list(range(partitions))


# --------------------------------------------------------------------------------------------------------
# Properties


@st.composite
def group_specs(draw: st.DrawFn, *, homogeneous: bool = False, equal_counts: bool = False) -> GroupSpec:
    """Random specs: topics of 0-12 partitions, a "ghost" topic that does not exist, some static members,
    current targets that may be anything (including partitions and topics that do not exist)."""
    n_topics = draw(st.integers(1, 5))
    size = draw(st.integers(1, 12))
    topics = {f"t{i}": size if equal_counts else draw(st.integers(0, 12)) for i in range(n_topics)}
    names = [*topics, "ghost"]
    subscription = st.lists(st.sampled_from(names), max_size=6).map(tuple)
    shared = draw(subscription)
    ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=1, max_size=8, unique=True))
    instances = draw(st.permutations(range(len(ids))))
    owned = st.dictionaries(st.sampled_from(names), st.lists(st.integers(0, 14), max_size=4).map(tuple), max_size=3)
    members: dict[str, MemberSubscription] = {}
    for i, m in enumerate(ids):
        members[m] = MemberSubscription(
            topics=shared if homogeneous else draw(subscription),
            owned=draw(owned),
            instance_id=f"i{instances[i]}" if draw(st.booleans()) else None,
        )
    return GroupSpec(topics=topics, members=members)


def without_owned(spec: GroupSpec) -> GroupSpec:
    members = {m: MemberSubscription(topics=s.topics, instance_id=s.instance_id) for m, s in spec.members.items()}
    return GroupSpec(topics=spec.topics, members=members)


@settings(max_examples=150, deadline=None)
@given(group_specs())
def test_property_matches_reference(spec: GroupSpec) -> None:
    assert ServerRangeAssignor().assign(spec) == reference(spec)


@settings(max_examples=100, deadline=None)
@given(group_specs())
def test_property_current_target_never_matters(spec: GroupSpec) -> None:
    assert ServerRangeAssignor().assign(spec) == ServerRangeAssignor().assign(without_owned(spec))


@settings(max_examples=150, deadline=None)
@given(group_specs())
def test_property_valid_contiguous_and_balanced_per_topic(spec: GroupSpec) -> None:
    result = ServerRangeAssignor().assign(spec)
    assert validity_errors(spec, result) == []
    for topic, count in spec.topics.items():
        subscribers = [m for m, s in spec.members.items() if topic in s.topics]
        sizes = [len(result[m].get(topic, [])) for m in subscribers]
        if sizes:
            assert max(sizes) - min(sizes) <= 1
            assert sum(sizes) == count
    for per_topic in result.values():
        for ps in per_topic.values():
            assert ps and ps == list(range(ps[0], ps[0] + len(ps)))


@settings(max_examples=100, deadline=None)
@given(group_specs(homogeneous=True, equal_counts=True))
def test_property_homogeneous_equal_counts_are_co_partitioned(spec: GroupSpec) -> None:
    result = ServerRangeAssignor().assign(spec)
    subscribed = sorted({t for s in spec.members.values() for t in s.topics if t in spec.topics})
    owner = {(t, p): m for m, per_topic in result.items() for t, ps in per_topic.items() for p in ps}
    for p in range(spec.topics["t0"]):
        assert len({owner[(t, p)] for t in subscribed}) <= 1
    # Every member gets the same partition numbers from every topic.
    for per_topic in result.values():
        assert len({tuple(ps) for ps in per_topic.values()}) <= 1


@settings(max_examples=100, deadline=None)
@given(group_specs())
def test_property_topics_with_same_subscribers_and_count_are_co_partitioned(spec: GroupSpec) -> None:
    result = ServerRangeAssignor().assign(spec)
    layouts: dict[tuple[frozenset[str], int], dict[int, str]] = {}
    for topic, count in spec.topics.items():
        subscribers = frozenset(m for m, s in spec.members.items() if topic in s.topics)
        layout = {p: m for m, per_topic in result.items() for p in per_topic.get(topic, [])}
        assert layouts.setdefault((subscribers, count), layout) == layout


@settings(max_examples=100, deadline=None)
@given(group_specs(), st.randoms(use_true_random=False))
def test_property_deterministic_under_member_insertion_order(spec: GroupSpec, rng: random.Random) -> None:
    items = list(spec.members.items())
    rng.shuffle(items)
    shuffled = GroupSpec(topics=dict(reversed(list(spec.topics.items()))), members=dict(items))
    result = ServerRangeAssignor().assign(shuffled)
    assert result == ServerRangeAssignor().assign(spec)
    assert list(result) == [m for m, _ in items]
    assert all(list(per_topic) == sorted(per_topic) for per_topic in result.values())


@settings(max_examples=100, deadline=None)
@given(group_specs(), st.sampled_from(["0", "m", "zz"]), st.booleans())
def test_property_join_changes_only_topics_of_the_joiner(spec: GroupSpec, joiner: str, static: bool) -> None:
    if joiner in spec.members:
        return
    topics = tuple(sorted(spec.topics))[:2]
    grown = dict(spec.members)
    grown[joiner] = MemberSubscription(topics=topics, instance_id="j" if static else None)
    before = ServerRangeAssignor().assign(spec)
    after = ServerRangeAssignor().assign(GroupSpec(topics=spec.topics, members=grown))
    assert after == reference(GroupSpec(topics=spec.topics, members=grown))
    for m, per_topic in before.items():
        for t, ps in per_topic.items():
            if t not in topics:
                assert after[m][t] == ps


# --------------------------------------------------------------------------------------------------------
# Scale (correctness at size; timing lives in bench/)


def test_scale_ten_thousand_members_hundred_topics_thousand_partitions() -> None:
    topics = {f"topic-{i:03d}": 1000 for i in range(100)}
    everything = tuple(topics)
    members = {f"member-{i:05d}": MemberSubscription(topics=everything) for i in range(10_000)}
    spec = GroupSpec(topics=topics, members=members)
    result = ServerRangeAssignor().assign(spec)
    assert result["member-00000"] == {t: [0] for t in topics}
    assert result["member-00999"] == {t: [999] for t in topics}
    assert result["member-01000"] == {}
    assert sum(len(ps) for per_topic in result.values() for ps in per_topic.values()) == 100_000


def test_scale_heterogeneous() -> None:
    rng = random.Random(7)
    topics = {f"topic-{i:03d}": 1000 for i in range(100)}
    names = sorted(topics)
    members = {f"member-{i:05d}": MemberSubscription(topics=tuple(sorted(rng.sample(names, 20)))) for i in range(2_000)}
    spec = GroupSpec(topics=topics, members=members)
    result = ServerRangeAssignor().assign(spec)
    assert validity_errors(spec, result) == []
