"""Tests of the ``redundant`` strategy: N distinct owners per partition, balanced by slots, sticky."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.metrics import is_valid, loads
from regroup.assignors.redundant import RedundantAssignor, replica_errors
from regroup.assignors.spec import Assignment, AssignmentError, GroupSpec, MemberSubscription

SETTINGS = settings(max_examples=60, deadline=None)


def spec_of(
    topics: dict[str, int],
    subs: dict[str, list[str]],
    *,
    replicas: Any = 2,
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
        options={"replicas": replicas},
    )


def slots(assignment: Assignment) -> set[tuple[str, str, int]]:
    return {(m, t, p) for m, per_topic in assignment.items() for t, ps in per_topic.items() for p in ps}


def owners_of(assignment: Assignment) -> dict[tuple[str, int], list[str]]:
    out: dict[tuple[str, int], list[str]] = {}
    for m, t, p in sorted(slots(assignment)):
        out.setdefault((t, p), []).append(m)
    return out


def assign(spec: GroupSpec) -> Assignment:
    return RedundantAssignor().assign(spec)


# --------------------------------------------------------------------------------------------------- examples


def test_two_replicas_over_three_members() -> None:
    spec = spec_of({"t": 6}, {m: ["t"] for m in ("a", "b", "c")})
    result = assign(spec)
    assert replica_errors(spec, result) == []
    assert loads(result) == {"a": 4, "b": 4, "c": 4}
    assert all(len(ms) == 2 for ms in owners_of(result).values())


def test_fewer_subscribers_than_replicas_gives_everyone_everything() -> None:
    spec = spec_of({"t": 3, "u": 2}, {"a": ["t", "u"], "b": ["t"]}, replicas=3)
    result = assign(spec)
    assert result == {"a": {"t": [0, 1, 2], "u": [0, 1]}, "b": {"t": [0, 1, 2]}}
    assert replica_errors(spec, result) == []


def test_default_is_two_replicas() -> None:
    spec = GroupSpec(topics={"t": 4}, members={m: MemberSubscription.of(["t"]) for m in "abcd"})
    result = assign(spec)
    assert all(len(ms) == 2 for ms in owners_of(result).values())
    assert set(loads(result).values()) == {2}


def test_one_replica_is_a_valid_single_owner_assignment() -> None:
    spec = spec_of({"t": 7, "u": 3}, {"a": ["t", "u"], "b": ["t"], "c": ["t", "u"]}, replicas=1)
    result = assign(spec)
    assert is_valid(spec, result)
    assert max(loads(result).values()) - min(loads(result).values()) <= 1


def test_every_member_present_even_without_subscriptions() -> None:
    spec = spec_of({"t": 2}, {"a": ["t"], "b": ["missing"], "c": []})
    result = assign(spec)
    assert result == {"a": {"t": [0, 1]}, "b": {}, "c": {}}


def test_heterogeneous_balance_uses_chains() -> None:
    # b can only take t, c only u; a must give way so both end with the same load as a.
    spec = spec_of({"t": 6, "u": 6}, {"a": ["t", "u"], "b": ["t"], "c": ["u"]}, replicas=1)
    result = assign(spec)
    assert loads(result) == {"a": 4, "b": 4, "c": 4}


def test_heterogeneous_chain_from_a_sticky_start() -> None:
    # a holds everything; d (only u) can only be reached through c, which holds the u partitions.
    prev: Assignment = {"a": {"t": [0, 1, 2, 3, 4, 5]}, "c": {"u": [0, 1]}}
    spec = spec_of({"t": 6, "u": 2}, {"a": ["t"], "b": ["t", "u"], "c": ["t", "u"], "d": ["u"]}, replicas=1, owned=prev)
    result = assign(spec)
    assert is_valid(spec, result)
    assert sorted(loads(result).values()) == [2, 2, 2, 2]


def test_unchanged_group_keeps_everything() -> None:
    spec = spec_of({"t": 5, "u": 4}, {m: ["t", "u"] for m in "abcd"}, replicas=3)
    first = assign(spec)
    again = assign(spec_of({"t": 5, "u": 4}, {m: ["t", "u"] for m in "abcd"}, replicas=3, owned=first))
    assert again == first


def test_member_leaving_only_moves_its_replicas() -> None:
    # Replica sets are spread out (a's copies are paired with b, c and d), so the survivors can take over
    # a's slots without giving any of their own away.
    subs = {m: ["t"] for m in "dcba"}
    first = assign(spec_of({"t": 8}, subs))
    assert len({tuple(ms) for ms in owners_of(first).values()}) > 2
    del subs["a"]
    first_without_a = {m: first[m] for m in subs}
    second = assign(spec_of({"t": 8}, subs, owned=first_without_a))
    assert slots(first_without_a) <= slots(second)
    assert len(slots(second) - slots(first_without_a)) == sum(len(ps) for ps in first["a"].values())
    assert max(loads(second).values()) - min(loads(second).values()) <= 1


def test_over_claimed_partition_keeps_the_newest_claims() -> None:
    prev: Assignment = {"a": {"t": [0]}, "b": {"t": [0]}, "c": {"t": [0]}}
    spec = spec_of({"t": 1}, {m: ["t"] for m in "abc"}, owned=prev, generations={"a": 3, "b": 5, "c": 5})
    assert owners_of(assign(spec)) == {("t", 0): ["b", "c"]}


def test_owned_partitions_that_no_longer_exist_are_ignored() -> None:
    prev: Assignment = {"a": {"t": [0, 7], "gone": [0]}, "b": {"t": [1]}}
    spec = spec_of({"t": 2}, {"a": ["t"], "b": ["t"]}, owned=prev)
    result = assign(spec)
    assert replica_errors(spec, result) == []


@pytest.mark.parametrize("bad", [0, -1, "2", 2.5, True, [2]])
def test_bad_replicas_option(bad: object) -> None:
    with pytest.raises(AssignmentError, match="replicas"):
        assign(spec_of({"t": 1}, {"a": ["t"]}, replicas=bad))


def test_replica_errors_reports_problems() -> None:
    spec = spec_of({"t": 2}, {"a": ["t"], "b": ["t"], "c": ["t"]})
    assert replica_errors(spec, {"a": {"t": [0, 1]}, "b": {"t": [0, 1]}, "c": {}}) == []
    errors = replica_errors(spec, {"a": {"t": [0, 0, 5]}, "b": {"u": [0]}})
    assert any("missing" in e for e in errors)
    assert any("twice" in e for e in errors)
    assert any("non-existent" in e for e in errors)
    assert any("without subscribing" in e for e in errors)
    assert any("t-1 has 0 owners" in e for e in errors)


# ------------------------------------------------------------------------------------------------- properties

TOPICS = ["t0", "t1", "t2", "t3"]


@st.composite
def specs(draw: st.DrawFn, *, homogeneous: bool = False, max_members: int = 7) -> GroupSpec:
    topic_names = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True))
    topics = {t: draw(st.integers(0, 9)) for t in topic_names}
    n_members = draw(st.integers(1, max_members))
    members = [f"m{i}" for i in range(n_members)]
    if homogeneous:
        subs = {m: sorted(topics) for m in members}
    else:
        subs = {m: draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True)) for m in members}
    replicas = draw(st.integers(1, 4))
    return spec_of(topics, subs, replicas=replicas)


def with_owned(spec: GroupSpec, owned: Assignment, members: dict[str, list[str]] | None = None) -> GroupSpec:
    subs = members or {m: list(s.topics) for m, s in spec.members.items()}
    return spec_of(dict(spec.topics), subs, replicas=spec.options["replicas"], owned=owned)


@SETTINGS
@given(specs())
def test_property_exact_replica_count(spec: GroupSpec) -> None:
    result = assign(spec)
    assert replica_errors(spec, result) == []
    n = spec.options["replicas"]
    for (t, _), ms in owners_of(result).items():
        subscribers = [m for m, s in spec.members.items() if t in s.topics]
        assert len(ms) == min(n, len(subscribers))
        assert set(ms) <= set(subscribers)


@SETTINGS
@given(specs(homogeneous=True))
def test_property_homogeneous_balance(spec: GroupSpec) -> None:
    counts = loads(assign(spec)).values()
    assert max(counts) - min(counts) <= 1


@SETTINGS
@given(specs(), st.randoms(use_true_random=False))
def test_property_deterministic_across_member_order(spec: GroupSpec, rnd: random.Random) -> None:
    items = list(spec.members.items())
    rnd.shuffle(items)
    shuffled = GroupSpec(topics=spec.topics, members=dict(items), options=spec.options)
    assert assign(shuffled) == assign(spec)


@SETTINGS
@given(specs(homogeneous=True, max_members=6))
def test_property_adding_a_member_moves_at_most_its_fair_share(spec: GroupSpec) -> None:
    first = assign(spec)
    subs = {m: list(s.topics) for m, s in spec.members.items()}
    subs["new"] = sorted(spec.topics)
    second = assign(with_owned(spec, first, subs))
    total = len(slots(second))
    moved = len(slots(first) - slots(second))
    assert moved <= math.ceil(total / len(subs))
    assert replica_errors(with_owned(spec, first, subs), second) == []


@SETTINGS
@given(specs())
def test_property_reassigning_own_result_is_a_fixed_point(spec: GroupSpec) -> None:
    first = assign(spec)
    assert assign(with_owned(spec, first)) == first


def best_sum_of_squares(spec: GroupSpec) -> int:
    """Brute force over every choice of owner sets (tiny specs only)."""
    n = spec.options["replicas"]
    choices: list[list[tuple[str, ...]]] = []
    for t in sorted(spec.topics):
        subscribers = sorted(m for m, s in spec.members.items() if t in s.topics)
        if not subscribers:
            continue
        k = min(n, len(subscribers))
        choices.extend(list(itertools.combinations(subscribers, k)) for _ in range(spec.topics[t]))
    best: int | None = None
    for combo in itertools.product(*choices):
        count = dict.fromkeys(spec.members, 0)
        for owner_set in combo:
            for m in owner_set:
                count[m] += 1
        value = sum(c * c for c in count.values())
        best = value if best is None else min(best, value)
    return best or 0


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.integers(0, 2), min_size=1),
    st.lists(st.lists(st.sampled_from(["t0", "t1", "t2"]), unique=True), min_size=1, max_size=4),
    st.integers(1, 2),
)
def test_property_balance_is_optimal_on_tiny_specs(
    topics: dict[str, int], member_topics: list[list[str]], replicas: int
) -> None:
    spec = spec_of(topics, {f"m{i}": ts for i, ts in enumerate(member_topics)}, replicas=replicas)
    result = assign(spec)
    assert sum(c * c for c in loads(result).values()) == best_sum_of_squares(spec)
