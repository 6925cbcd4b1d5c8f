"""Tests of the ``copartitioned`` strategy: partition p of grouped topics stays together; balanced; sticky."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.copartitioned import CopartitionedAssignor, copartition_groups
from regroup.assignors.metrics import fraction_kept, loads, owners, partitions_moved, validity_errors
from regroup.assignors.spec import Assignment, AssignmentError, GroupSpec, MemberSubscription

SETTINGS = settings(max_examples=60, deadline=None)


def spec_of(
    topics: dict[str, int],
    subs: dict[str, list[str]],
    groups: Any = None,
    *,
    owned: Assignment | None = None,
    generations: dict[str, int] | None = None,
) -> GroupSpec:
    owned = owned or {}
    generations = generations or {}
    return GroupSpec(
        topics=topics,
        members={
            m: MemberSubscription.of(ts, owned.get(m), generation=generations.get(m, -1)) for m, ts in subs.items()
        },
        options={} if groups is None else {"copartitioned": groups},
    )


def assign(spec: GroupSpec) -> Assignment:
    return CopartitionedAssignor().assign(spec)


def assert_copartitioned(spec: GroupSpec, assignment: Assignment) -> None:
    owner = owners(assignment)
    for group in copartition_groups(spec.options):
        present = [t for t in group if any((t, p) in owner for p in range(spec.topics.get(t, 0)))]
        for p in range(max((spec.topics[t] for t in present), default=0)):
            assert len({owner[(t, p)] for t in present}) == 1, (group, p, assignment)


def spread(assignment: Assignment) -> int:
    counts = loads(assignment).values()
    return max(counts) - min(counts)


# --------------------------------------------------------------------------------------------------- examples


def test_partition_numbers_stay_together() -> None:
    spec = spec_of({"t0": 4, "t1": 4, "u": 3}, {m: ["t0", "t1", "u"] for m in "abc"}, [["t0", "t1"]])
    result = assign(spec)
    assert validity_errors(spec, result) == []
    assert_copartitioned(spec, result)
    assert sorted(loads(result).values()) == [3, 4, 4]


def test_without_groups_it_is_a_balanced_single_owner_assignor() -> None:
    spec = spec_of({"t": 7, "u": 5}, {"a": ["t", "u"], "b": ["t"], "c": ["u"]})
    result = assign(spec)
    assert validity_errors(spec, result) == []
    assert spread(result) <= 1


def test_overlapping_groups_are_merged() -> None:
    assert copartition_groups({"copartitioned": [["b", "a"], ["c", "d"], ["d", "e"], ["a"]]}) == [
        ("a", "b"),
        ("c", "d", "e"),
    ]
    spec = spec_of({t: 3 for t in "abc"}, {m: ["a", "b", "c"] for m in "xyz"}, [["a", "b"], ["b", "c"]])
    result = assign(spec)
    assert_copartitioned(spec, result)
    assert sorted(loads(result).values()) == [3, 3, 3]
    assert all(set(per_topic) == {"a", "b", "c"} for per_topic in result.values())


def test_unequal_partition_counts_name_the_topics() -> None:
    spec = spec_of({"t0": 4, "t1": 3}, {"a": ["t0", "t1"]}, [["t0", "t1"]])
    with pytest.raises(AssignmentError, match=r"t0=4, t1=3"):
        assign(spec)


def test_unsubscribed_topics_of_a_group_are_ignored() -> None:
    # t1 has a different count but nobody subscribes to it, and "ghost" does not exist.
    spec = spec_of({"t0": 4, "t1": 3}, {"a": ["t0"], "b": ["t0"]}, [["t0", "t1", "ghost"]])
    result = assign(spec)
    assert validity_errors(spec, result) == []
    assert loads(result) == {"a": 2, "b": 2}


def test_only_members_subscribed_to_the_whole_group_are_eligible() -> None:
    spec = spec_of({"t0": 4, "t1": 4, "u": 4}, {"a": ["t0", "t1"], "b": ["t0", "u"], "c": ["t1", "u"]}, [["t0", "t1"]])
    result = assign(spec)
    assert validity_errors(spec, result) == []
    assert result["a"] == {"t0": [0, 1, 2, 3], "t1": [0, 1, 2, 3]}
    assert loads(result) == {"a": 8, "b": 2, "c": 2}


def test_no_eligible_member_is_an_error() -> None:
    spec = spec_of({"t0": 2, "t1": 2}, {"a": ["t0"], "b": ["t1"]}, [["t0", "t1"]])
    with pytest.raises(AssignmentError, match="no member subscribes to all"):
        assign(spec)


@pytest.mark.parametrize(
    "bad",
    ["t0,t1", ["t0", "t1"], [["t0", 1]], [[]], [["t0", ""]], {"g": ["t0", "t1"]}, 3, [("t0", None)]],
)
def test_bad_options(bad: object) -> None:
    with pytest.raises(AssignmentError, match="copartitioned"):
        assign(spec_of({"t0": 1, "t1": 1}, {"a": ["t0", "t1"]}, bad))


def test_tuples_are_accepted() -> None:
    spec = spec_of({"t0": 2, "t1": 2}, {"a": ["t0", "t1"], "b": ["t0", "t1"]}, (("t0", "t1"),))
    assert_copartitioned(spec, assign(spec))


def test_unit_stays_with_the_member_owning_most_of_it() -> None:
    prev: Assignment = {"a": {"t0": [0]}, "b": {"t1": [0], "t2": [0]}}
    spec = spec_of({"t0": 1, "t1": 1, "t2": 1}, {m: ["t0", "t1", "t2"] for m in "ab"}, [["t0", "t1", "t2"]], owned=prev)
    assert assign(spec) == {"a": {}, "b": {"t0": [0], "t1": [0], "t2": [0]}}


def test_ties_between_claims_go_to_the_newest_generation() -> None:
    prev: Assignment = {"a": {"t0": [0]}, "b": {"t1": [0]}}
    spec = spec_of(
        {"t0": 1, "t1": 1}, {m: ["t0", "t1"] for m in "ab"}, [["t0", "t1"]], owned=prev, generations={"b": 4}
    )
    assert assign(spec)["b"] == {"t0": [0], "t1": [0]}


def test_adding_a_member_moves_whole_units_to_it() -> None:
    topics = {"t0": 6, "t1": 6, "u": 6}
    subs = {m: sorted(topics) for m in "abc"}
    first = assign(spec_of(topics, subs, [["t0", "t1"]]))
    subs["d"] = sorted(topics)
    second = assign(spec_of(topics, subs, [["t0", "t1"]], owned=first))
    assert_copartitioned(spec_of(topics, subs, [["t0", "t1"]]), second)
    assert spread(second) <= 1
    assert partitions_moved(first, second) == loads(second)["d"] == 4


# ------------------------------------------------------------------------------------------------- properties

POOL = ["t0", "t1", "t2", "t3", "t4", "t5"]


@st.composite
def specs(draw: st.DrawFn, *, homogeneous: bool = False, max_members: int = 6) -> GroupSpec:
    names = draw(st.permutations(POOL))
    n_groups = draw(st.integers(0, 2))
    groups: list[list[str]] = []
    topics: dict[str, int] = {}
    cursor = 0
    for _ in range(n_groups):
        size = draw(st.integers(1, 3))
        group = list(names[cursor : cursor + size])
        cursor += size
        count = draw(st.integers(0, 6))
        topics.update(dict.fromkeys(group, count))
        groups.append(group)
    for t in names[cursor : cursor + draw(st.integers(0, 3))]:
        topics[t] = draw(st.integers(0, 8))
    members = [f"m{i}" for i in range(draw(st.integers(1, max_members)))]
    if homogeneous:
        subs = {m: sorted(topics) for m in members}
    else:
        # Everyone subscribes to whole groups (so each group has eligible members) plus any ungrouped topics.
        subs = {}
        for m in members:
            picked = [t for g in groups if draw(st.booleans()) for t in g]
            picked += [t for t in topics if not any(t in g for g in groups) and draw(st.booleans())]
            subs[m] = picked
        for g in groups:
            if not any(set(g) <= set(s) for s in subs.values()):
                subs[members[0]] = sorted(set(subs[members[0]]) | set(g))
    return spec_of(topics, subs, groups)


def max_unit_weight(spec: GroupSpec) -> int:
    sizes = [len(g) for g in copartition_groups(spec.options) if all(spec.topics[t] for t in g)]
    return max([1, *sizes])


@SETTINGS
@given(specs())
def test_property_valid_and_copartitioned(spec: GroupSpec) -> None:
    result = assign(spec)
    assert validity_errors(spec, result) == []
    assert_copartitioned(spec, result)


@SETTINGS
@given(specs(homogeneous=True))
def test_property_homogeneous_balance(spec: GroupSpec) -> None:
    result = assign(spec)
    assert spread(result) <= max_unit_weight(spec)
    if not spec.options["copartitioned"]:
        assert spread(result) <= 1


@SETTINGS
@given(specs(), st.randoms(use_true_random=False))
def test_property_deterministic_across_member_order(spec: GroupSpec, rnd: random.Random) -> None:
    items = list(spec.members.items())
    rnd.shuffle(items)
    shuffled = GroupSpec(topics=spec.topics, members=dict(items), options=spec.options)
    assert assign(shuffled) == assign(spec)


@SETTINGS
@given(specs())
def test_property_reassigning_own_result_is_a_fixed_point(spec: GroupSpec) -> None:
    first = assign(spec)
    again = spec_of(
        dict(spec.topics),
        {m: list(s.topics) for m, s in spec.members.items()},
        spec.options["copartitioned"],
        owned=first,
    )
    assert assign(again) == first


@SETTINGS
@given(specs(homogeneous=True, max_members=5))
def test_property_adding_a_member_moves_about_its_fair_share(spec: GroupSpec) -> None:
    first = assign(spec)
    subs = {m: list(s.topics) for m, s in spec.members.items()}
    subs["new"] = sorted(spec.topics)
    grown = spec_of(dict(spec.topics), subs, spec.options["copartitioned"], owned=first)
    second = assign(grown)
    assert validity_errors(grown, second) == []
    assert_copartitioned(grown, second)
    total = sum(loads(second).values())
    assert partitions_moved(first, second) <= math.ceil(total / len(subs)) + max_unit_weight(spec)
    if total:
        assert fraction_kept(first, second) >= 1 - (math.ceil(total / len(subs)) + max_unit_weight(spec)) / total
