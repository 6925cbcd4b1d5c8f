"""Rack locality of the balanced-sticky family: same counts and kept partitions as without racks, and the
most rack-local placement of the moved partitions (checked by brute force on small groups)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.rack_locality import localize
from regroup.assignors.registry import get as get_assignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription

RACKS = ("r0", "r1", "r2")


@st.composite
def specs(draw: st.DrawFn) -> GroupSpec:
    topics = {f"t{i}": draw(st.integers(1, 4)) for i in range(draw(st.integers(1, 2)))}
    names = sorted(topics)
    partition_racks = {
        t: tuple(frozenset(draw(st.sets(st.sampled_from(RACKS), max_size=2))) for _ in range(n))
        for t, n in topics.items()
    }
    members = {}
    for i in range(draw(st.integers(1, 3))):
        subscribed = draw(st.sets(st.sampled_from(names), min_size=1))
        owned = {t: tuple(sorted(draw(st.sets(st.integers(0, topics[t] - 1), max_size=2)))) for t in sorted(subscribed)}
        members[f"m{i}"] = MemberSubscription.of(sorted(subscribed), owned, rack=draw(st.sampled_from((None, *RACKS))))
    # no partition claimed twice: later members lose contested claims
    seen: set[tuple[str, int]] = set()
    for m, sub in list(members.items()):
        clean = {t: tuple(p for p in ps if (t, p) not in seen) for t, ps in sub.owned.items()}
        seen.update((t, p) for t, ps in clean.items() for p in ps)
        members[m] = MemberSubscription.of(list(sub.topics), clean, rack=sub.rack)
    return GroupSpec(topics=topics, members=members, partition_racks=partition_racks)


def _local(spec: GroupSpec, assignment: Assignment) -> int:
    assert spec.partition_racks is not None
    return sum(
        1
        for m, per_topic in assignment.items()
        for t, ps in per_topic.items()
        for p in ps
        if spec.members[m].rack is not None and spec.members[m].rack in spec.partition_racks[t][p]
    )


def _kept(spec: GroupSpec, assignment: Assignment) -> set[tuple[str, str, int]]:
    return {
        (m, t, p)
        for m, per_topic in assignment.items()
        for t, ps in per_topic.items()
        for p in ps
        if p in spec.members[m].owned.get(t, ())
    }


def _best_local(spec: GroupSpec, assignment: Assignment) -> int:
    """Brute force: the most rack-local placement of the moved partitions with the same per-member counts."""
    kept = _kept(spec, assignment)
    moved = [(t, p) for m, per in assignment.items() for t, ps in per.items() for p in ps if (m, t, p) not in kept]
    quota = {
        m: sum(len(ps) for ps in per.values()) - sum(1 for k in kept if k[0] == m) for m, per in assignment.items()
    }
    members = sorted(assignment)
    best = -1
    for choice in itertools.product(members, repeat=len(moved)):
        if any(choice.count(m) != quota[m] for m in members):
            continue
        if any(t not in spec.members[m].topics for m, (t, _) in zip(choice, moved, strict=True)):
            continue
        local = sum(
            1
            for m, (t, p) in zip(choice, moved, strict=True)
            if spec.members[m].rack is not None
            and spec.partition_racks is not None
            and spec.members[m].rack in spec.partition_racks[t][p]
        )
        best = max(best, local)
    kept_local = sum(
        1
        for m, t, p in kept
        if spec.members[m].rack is not None
        and spec.partition_racks is not None
        and spec.members[m].rack in spec.partition_racks[t][p]
    )
    return best + kept_local


@settings(max_examples=150, deadline=None)
@given(specs())
def test_optimal_keeps_balance_and_stickiness_and_is_most_local(spec: GroupSpec) -> None:
    with_racks = get_assignor("optimal").assign(spec)
    without = get_assignor("optimal").assign(GroupSpec(topics=spec.topics, members=spec.members))
    counts = {m: sum(len(ps) for ps in per.values()) for m, per in without.items()}
    assert {m: sum(len(ps) for ps in per.values()) for m, per in with_racks.items()} == counts
    assert _kept(spec, with_racks) == _kept(spec, without)
    assert _local(spec, with_racks) >= _local(spec, without)
    assert _local(spec, with_racks) == _best_local(spec, without)


def test_localize_prefers_matching_racks() -> None:
    spec = GroupSpec(
        topics={"t": 2},
        members={"a": MemberSubscription.of(["t"], rack="r1"), "b": MemberSubscription.of(["t"], rack="r0")},
        partition_racks={"t": (frozenset({"r0"}), frozenset({"r1"}))},
    )
    assert localize(spec, {"a": {"t": [0]}, "b": {"t": [1]}}, {}) == {"a": {"t": [1]}, "b": {"t": [0]}}
    # kept partitions are never moved for locality
    assert localize(spec, {"a": {"t": [0]}, "b": {"t": [1]}}, {"a": {"t": (0,)}}) == {"a": {"t": [0]}, "b": {"t": [1]}}
