"""``sticky`` and ``cooperative-sticky``: KIP-54's worked examples, generation rules, cooperative safety."""

from __future__ import annotations

import pytest

from regroup.assignors import metrics
from regroup.assignors.consumer_protocol import decode_sticky_user_data, encode_sticky_user_data
from regroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription
from regroup.assignors.sticky import OptimalAssignor, StickyAssignor


def tp_sets(assignment: Assignment) -> dict[str, set[str]]:
    return {m: {f"{t}p{p}" for t, ps in per_topic.items() for p in ps} for m, per_topic in assignment.items()}


def sticky_spec(
    topics: dict[str, int], subs: dict[str, list[str]], previous: Assignment | None = None, generation: int = 1
) -> GroupSpec:
    members = {}
    for m, t in subs.items():
        prev = (previous or {}).get(m)
        user_data = encode_sticky_user_data(prev, generation) if prev is not None else None
        members[m] = MemberSubscription.of(t, user_data=user_data)
    return GroupSpec(topics=topics, members=members)


ALL4 = ["t0", "t1", "t2", "t3"]


def test_kip54_example1_fresh_then_c1_leaves() -> None:
    topics = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    first = StickyAssignor().assign(sticky_spec(topics, {"C0": ALL4, "C1": ALL4, "C2": ALL4}))
    assert tp_sets(first) == {
        "C0": {"t0p0", "t1p1", "t3p0"},
        "C1": {"t0p1", "t2p0", "t3p1"},
        "C2": {"t1p0", "t2p1"},
    }
    second = StickyAssignor().assign(sticky_spec(topics, {"C0": ALL4, "C2": ALL4}, first))
    assert tp_sets(second) == {"C0": {"t0p0", "t1p1", "t3p0", "t2p0"}, "C2": {"t1p0", "t2p1", "t0p1", "t3p1"}}


def test_kip54_example2_heterogeneous() -> None:
    topics = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    first = StickyAssignor().assign(sticky_spec(topics, subs))
    assert tp_sets(first) == {"C0": {"t0p0"}, "C1": {"t1p0", "t1p1"}, "C2": {"t2p0", "t2p1", "t2p2"}}
    del subs["C0"]
    second = StickyAssignor().assign(sticky_spec(topics, subs, first))
    assert tp_sets(second) == {"C1": {"t1p0", "t1p1", "t0p0"}, "C2": {"t2p0", "t2p1", "t2p2"}}


def test_kip54_example3_c2_joins() -> None:
    topics = {"t0": 2, "t1": 2}
    first = StickyAssignor().assign(sticky_spec(topics, {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}))
    assert tp_sets(first) == {"C0": {"t0p0", "t1p0"}, "C1": {"t0p1", "t1p1"}}
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"], "C2": ["t0", "t1"]}
    second = StickyAssignor().assign(sticky_spec(topics, subs, first))
    assert tp_sets(second) == {"C0": {"t0p0", "t1p0"}, "C1": {"t0p1"}, "C2": {"t1p1"}}


def test_sticky_reads_previous_assignment_from_user_data_only() -> None:
    # owned partitions in the subscription are ignored by the eager sticky assignor, as in Kafka
    spec = GroupSpec(
        topics={"t": 4},
        members={
            "a": MemberSubscription.of(["t"], {"t": [0, 1, 2, 3]}, generation=3),
            "b": MemberSubscription.of(["t"], user_data=encode_sticky_user_data({"t": [2, 3]}, 3)),
        },
    )
    assert StickyAssignor().assign(spec) == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}


def test_higher_generation_wins_a_conflicting_claim() -> None:
    spec = GroupSpec(
        topics={"t": 3},
        members={
            "a": MemberSubscription.of(["t"], {"t": [0, 1]}, generation=5),
            "b": MemberSubscription.of(["t"], {"t": [1, 2]}, generation=4),
            "c": MemberSubscription.of(["t"], {}, generation=5),
        },
    )
    result = OptimalAssignor().assign(spec)
    # a keeps 0 and 1 would exceed its share of 1; it keeps one of its own, b keeps 2 (its uncontested claim)
    assert result["b"] == {"t": [2]}
    assert set(result["a"]["t"]) <= {0, 1}
    assert metrics.is_valid(spec, result)


def test_same_generation_conflict_credits_nobody() -> None:
    # both claim partition 0 in generation 2: neither is credited, so balance decides and nothing is "kept"
    spec = GroupSpec(
        topics={"t": 2},
        members={
            "b": MemberSubscription.of(["t"], {"t": [0]}, generation=2),
            "a": MemberSubscription.of(["t"], {"t": [0]}, generation=2),
        },
    )
    result = OptimalAssignor().assign(spec)
    assert result == {"a": {"t": [0]}, "b": {"t": [1]}}  # fresh order: least loaded, member order


def test_stale_generation_claim_is_ignored() -> None:
    spec = GroupSpec(
        topics={"t": 2},
        members={
            "a": MemberSubscription.of(["t"], {"t": [1]}, generation=7),
            "b": MemberSubscription.of(["t"], {"t": [1]}, generation=6),
        },
    )
    assert OptimalAssignor().assign(spec) == {"a": {"t": [1]}, "b": {"t": [0]}}


def test_third_member_joins_cooperative_two_rounds() -> None:
    # topic-foo p0..p2, c0 owns p0,p1, c1 owns p2, c2 joins
    topics = {"topic-foo": 3}
    owned = {"c0": [0, 1], "c1": [2], "c2": []}
    spec = GroupSpec(
        topics=topics,
        members={m: MemberSubscription.of(["topic-foo"], {"topic-foo": ps}, generation=1) for m, ps in owned.items()},
    )
    first = CooperativeStickyAssignor().assign(spec)
    assert first == {"c0": {"topic-foo": [0]}, "c1": {"topic-foo": [2]}, "c2": {}}
    # c0 revokes p1 and rejoins; second round hands it to c2
    owned2 = {m: first[m].get("topic-foo", []) for m in owned}
    spec2 = GroupSpec(
        topics=topics,
        members={m: MemberSubscription.of(["topic-foo"], {"topic-foo": ps}, generation=2) for m, ps in owned2.items()},
    )
    second = CooperativeStickyAssignor().assign(spec2)
    assert second == {"c0": {"topic-foo": [0]}, "c1": {"topic-foo": [2]}, "c2": {"topic-foo": [1]}}


def test_sticky_user_data_round_trip_through_with_previous() -> None:
    spec = GroupSpec(topics={"t": 2}, members={"a": MemberSubscription.of(["t"], {"t": [1]}, generation=4)})
    native = StickyAssignor().with_previous(spec)
    sub = native.members["a"]
    assert sub.owned == {}
    assert sub.user_data is not None
    assert decode_sticky_user_data(sub.user_data) == ({"t": (1,)}, 4)


@pytest.mark.parametrize("strategy", [StickyAssignor, CooperativeStickyAssignor, OptimalAssignor])
def test_unknown_topics_and_partitions_are_ignored(strategy: type[StickyAssignor]) -> None:
    spec = GroupSpec(
        topics={"t": 2},
        members={
            "a": MemberSubscription.of(["t", "ghost"], {"t": [0, 7], "ghost": [0]}, generation=1),
            "b": MemberSubscription.of(["nothing-here"]),
        },
    )
    assignor = strategy()
    result = assignor.assign(assignor.with_previous(spec))
    assert result == {"a": {"t": [0, 1]}, "b": {}}
