"""The kept homogeneous assignment (``kept_assignment``) against the engine run from scratch: after any history
of joins and leaves, and from any claims, it holds exactly what ``homogeneous.assign_small`` assigns to the
same group from the same claims, and it reports exactly the members whose partitions changed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.homogeneous import assign_small
from regroup.assignors.kept_assignment import KeptAssignment
from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec, MemberSubscription

MEMBER_POOL = [f"m{i:02d}" for i in range(24)]


def engine(topics: dict[str, int], members: list[str], claims: Assignment) -> Assignment:
    spec = GroupSpec(
        topics=topics,
        members={m: MemberSubscription.of(sorted(topics), claims.get(m, {})) for m in members},
    )
    owned = {m: ({t: tuple(ps) for t, ps in claims.get(m, {}).items()}, NO_GENERATION) for m in members}
    result = assign_small(spec, owned, withhold=False)
    assert result is not None
    return result


def held(kept: KeptAssignment, members: list[str]) -> Assignment:
    return {m: kept.partitions_of(m) for m in sorted(members)}


topic_counts = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(min_value=0, max_value=40), min_size=1, max_size=5
).filter(lambda d: sum(d.values()) > 0)
member_sets = st.lists(st.sets(st.sampled_from(MEMBER_POOL), max_size=24), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(topics=topic_counts, history=member_sets)
def test_runs_match_the_engine_after_any_history(topics: dict[str, int], history: list[set[str]]) -> None:
    names = sorted(t for t, n in topics.items() if n > 0)
    sizes = {t: topics[t] for t in names}
    kept = KeptAssignment(names, [sizes[t] for t in names])
    previous: Assignment = {}
    for step in history:
        members = sorted(step)
        before = {m: kept.partitions_of(m) for m in members if m in kept.held}
        changed = kept.run(members)
        now = held(kept, members)
        if members:
            assert now == engine(sizes, members, previous)
        assert changed == {m for m in members if m not in before or before[m] != now[m]}
        previous = now


claims_st = st.dictionaries(
    st.sampled_from(MEMBER_POOL[:8]),
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "zz"]), st.lists(st.integers(min_value=-2, max_value=30), max_size=12)
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=1, max_value=25), min_size=3, max_size=3),
    claims=claims_st,
    members=st.sets(st.sampled_from(MEMBER_POOL[:10]), min_size=1),
)
def test_from_any_claims_it_matches_the_engine(counts: list[int], claims: Assignment, members: set[str]) -> None:
    """Claims on missing topics and partitions, duplicates and partitions two members claim, as the engine
    reads them."""
    sizes = dict(zip(["a", "b", "c"], counts, strict=True))
    order = sorted(members)
    kept = KeptAssignment(sorted(sizes), [sizes[t] for t in sorted(sizes)])
    kept = KeptAssignment.from_claims(kept.topics, kept.counts, {m: claims.get(m, {}) for m in order})
    kept.run(order)
    assert held(kept, order) == engine(sizes, order, {m: claims.get(m, {}) for m in order})


def test_a_join_moves_only_what_the_joiner_takes() -> None:
    kept = KeptAssignment(["t"], [12])
    kept.run(["a", "b", "c"])
    fresh = {"a": {"t": [0, 3, 6, 9]}, "b": {"t": [1, 4, 7, 10]}, "c": {"t": [2, 5, 8, 11]}}
    assert held(kept, ["a", "b", "c"]) == fresh
    changed = kept.run(["a", "b", "c", "d"])
    assert changed == {"a", "b", "c", "d"}
    after_join = {"a": {"t": [0, 3, 6]}, "b": {"t": [1, 4, 7]}, "c": {"t": [2, 5, 8]}, "d": {"t": [9, 10, 11]}}
    assert held(kept, ["a", "b", "c", "d"]) == after_join
    assert kept.run(["a", "b", "c", "d"]) == set()
    assert kept.run(["b", "c", "d"]) == {"b", "c", "d"}
    after_leave = {"b": {"t": [0, 1, 4, 7]}, "c": {"t": [2, 3, 5, 8]}, "d": {"t": [6, 9, 10, 11]}}
    assert held(kept, ["b", "c", "d"]) == after_leave
