"""Invariants of the balanced-sticky family (``sticky``, ``cooperative-sticky``, ``optimal``, ``uniform``)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors import metrics, registry
from regroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription

FAMILY = ["sticky", "optimal", "uniform"]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None) -> GroupSpec:
    n_topics = draw(st.integers(1, 5))
    topics = {f"t{i}": draw(st.integers(0, 12)) for i in range(n_topics)}
    n_members = draw(st.integers(1, 8))
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    shared = draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True))
    members = {}
    for i in range(n_members):
        subs = shared if same else draw(st.lists(st.sampled_from(sorted(topics)), min_size=0, unique=True))
        owned: dict[str, list[int]] = {}
        for t in subs:
            if topics[t]:
                owned[t] = draw(st.lists(st.integers(0, topics[t] - 1), unique=True, max_size=topics[t]))
        members[f"m{i:02d}"] = MemberSubscription.of(subs, owned, generation=draw(st.integers(-1, 3)))
    return GroupSpec(topics=topics, members=members)


def run(strategy: str, spec: GroupSpec) -> Assignment:
    assignor = registry.get(strategy)
    return assignor.assign(assignor.with_previous(spec))


@settings(max_examples=150, deadline=None)
@given(groups(), st.sampled_from(FAMILY))
def test_valid_and_kip54_balanced(spec: GroupSpec, strategy: str) -> None:
    result = run(strategy, spec)
    assert metrics.validity_errors(spec, result) == []
    assert metrics.kip54_balanced(spec, result)


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=True), st.sampled_from(FAMILY))
def test_homogeneous_spread_at_most_one_and_quota_kept(spec: GroupSpec, strategy: str) -> None:
    result = run(strategy, spec)
    assert metrics.max_min_spread(result) <= 1
    # every member keeps min(credited, floor quota) of the partitions it is credited with: a claim counts
    # when it is the only one at the highest generation claiming that partition (uniform ignores generations)
    topics = next(iter(spec.members.values())).topics
    total = sum(spec.topics[t] for t in topics)
    quota = total // len(spec.members)
    claims: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for m, sub in spec.members.items():
        generation = -1 if strategy == "uniform" else sub.generation
        for t, ps in sub.owned.items():
            for p in ps:
                claims.setdefault((t, p), []).append((generation, m))
    credited: dict[str, list[tuple[str, int]]] = {m: [] for m in spec.members}
    for tp, claimers in claims.items():
        top = max(g for g, _ in claimers)
        winners = [m for g, m in claimers if g == top]
        if len(winners) == 1:
            credited[winners[0]].append(tp)
    for m, mine in credited.items():
        kept = sum(1 for t, p in mine if p in result[m].get(t, []))
        assert kept >= min(len(mine), quota)


@settings(max_examples=100, deadline=None)
@given(groups(), st.sampled_from(FAMILY), st.randoms(use_true_random=False))
def test_member_order_does_not_matter(spec: GroupSpec, strategy: str, rnd: random.Random) -> None:
    items = list(spec.members.items())
    rnd.shuffle(items)
    shuffled = GroupSpec(topics=dict(reversed(list(spec.topics.items()))), members=dict(items))
    assert run(strategy, spec) == run(strategy, shuffled)


@settings(max_examples=150, deadline=None)
@given(groups())
def test_cooperative_never_moves_a_partition_directly(spec: GroupSpec) -> None:
    result = CooperativeStickyAssignor().assign(spec)
    for member, per_topic in result.items():
        for topic, partitions in per_topic.items():
            mine = set(spec.members[member].owned.get(topic, ()))
            for p in partitions:
                if p in mine:
                    continue
                others = [o for o, sub in spec.members.items() if o != member and p in sub.owned.get(topic, ())]
                assert others == [], f"{topic}-{p} handed to {member} while {others} still own it"


@settings(max_examples=100, deadline=None)
@given(groups())
def test_cooperative_converges_in_a_second_round(spec: GroupSpec) -> None:
    """After members drop what was revoked, the follow-up round hands out every withheld partition."""
    first = CooperativeStickyAssignor().assign(spec)
    followup = GroupSpec(
        topics=spec.topics,
        members={m: MemberSubscription.of(sub.topics, first[m], generation=10) for m, sub in spec.members.items()},
    )
    second = CooperativeStickyAssignor().assign(followup)
    assert metrics.validity_errors(spec, second) == []
    assert metrics.kip54_balanced(spec, second)
