"""The small-group path of the optimal engine (``homogeneous``) gives exactly the NumPy path's assignment:
same partitions, same dict order, with and without the cooperative withholding step."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.cooperative_sticky import withhold_transfers
from regroup.assignors.homogeneous import assign_small
from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.assignors.sticky import OwnedClaim, run_engine

Claims = dict[str, OwnedClaim]


@st.composite
def homogeneous_groups(draw: st.DrawFn) -> tuple[GroupSpec, Claims]:
    topics = {f"t{i}": draw(st.integers(0, 9)) for i in range(draw(st.integers(1, 4)))}
    subscribed = tuple(draw(st.lists(st.sampled_from([*sorted(topics), "gone"]), min_size=1, unique=True)))
    members: dict[str, MemberSubscription] = {}
    claims: Claims = {}
    for i in draw(st.lists(st.integers(0, 20), min_size=1, max_size=8, unique=True)):
        member = f"m{i:02d}"
        members[member] = MemberSubscription(topics=subscribed)
        owned: dict[str, tuple[int, ...]] = {}
        for t in draw(st.lists(st.sampled_from([*sorted(topics), "gone"]), unique=True)):
            # duplicates, out-of-range and negative partitions, unknown topics: all dropped by both paths
            owned[t] = tuple(draw(st.lists(st.integers(-1, 11), max_size=12)))
        claims[member] = (owned, draw(st.integers(-1, 2)))
    return GroupSpec(topics=topics, members=members), claims


@settings(max_examples=400, deadline=None)
@given(homogeneous_groups())
def test_small_path_equals_the_numpy_path(case: tuple[GroupSpec, Claims]) -> None:
    spec, claims = case
    small = assign_small(spec, claims, withhold=False)
    small_withheld = assign_small(spec, claims, withhold=True)
    if small is None:
        assert small_withheld is None
        assert not any(spec.topics.get(t, 0) for t in next(iter(spec.members.values())).topics)
        return
    run = run_engine(spec, claims)
    assert repr(small) == repr(run.layout.to_assignment(run.per_member))
    assert repr(small_withheld) == repr(run.layout.to_assignment(withhold_transfers(run)))


def test_heterogeneous_and_large_groups_go_to_the_numpy_path() -> None:
    spec = GroupSpec(
        topics={"a": 3, "b": 3},
        members={"x": MemberSubscription(topics=("a",)), "y": MemberSubscription(topics=("a", "b"))},
    )
    assert assign_small(spec, {}, withhold=False) is None
    large = GroupSpec(topics={"a": 100_000}, members={"x": MemberSubscription(topics=("a",))})
    assert assign_small(large, {}, withhold=False) is None
