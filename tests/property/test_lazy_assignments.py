"""Assignments read lazily (``ArrayAssignment``, ``RangeAssignment``) and previous results passed back as views
(``OwnedView``): reading members one at a time gives what reading them all at once gives, and a group assigned
from views of the previous result gets exactly what it gets from the same previous result as plain dicts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.array_assignment import ArrayAssignment, OwnedView
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from regroup.assignors.lazy_assignment import LazyAssignment
from regroup.assignors.range import RangeAssignor
from regroup.assignors.roundrobin import RoundRobinAssignor
from regroup.assignors.server_range import ServerRangeAssignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription
from regroup.assignors.sticky import OptimalAssignor
from regroup.assignors.uniform import UniformAssignor

TOPICS = ("a", "b", "c", "d")
POOL = [f"m{i}" for i in range(12)]


@st.composite
def groups(draw: st.DrawFn) -> GroupSpec:
    sizes = draw(st.lists(st.integers(0, 30), min_size=len(TOPICS), max_size=len(TOPICS)))
    names = draw(st.sets(st.sampled_from(POOL), min_size=1))
    homogeneous = draw(st.booleans())
    shared = tuple(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
    members = {}
    for name in sorted(names):
        topics = shared if homogeneous else tuple(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
        instance = draw(st.one_of(st.none(), st.sampled_from(["i1", "i2", "i3"])))
        if instance is not None and any(m.instance_id == instance for m in members.values()):
            instance = None
        members[name] = MemberSubscription(topics=topics, instance_id=instance)
    return GroupSpec(topics=dict(zip(TOPICS, sizes, strict=True)), members=members)


def one_by_one(assignment: Assignment) -> dict[str, dict[str, list[int]]]:
    return {m: dict(assignment[m]) for m in list(assignment)}


ASSIGNORS: list[PartitionAssignor] = [
    UniformAssignor(),
    OptimalAssignor(),
    CooperativeStickyAssignor(),
    ServerRangeAssignor(),
    RangeAssignor(),
    RoundRobinAssignor(),
]


@settings(max_examples=150, deadline=None)
@given(spec=groups(), which=st.integers(0, len(ASSIGNORS) - 1))
def test_members_read_one_at_a_time_are_what_reading_all_gives(spec: GroupSpec, which: int) -> None:
    first = ASSIGNORS[which].assign(spec)
    second = ASSIGNORS[which].assign(spec)
    lazy = isinstance(first, ArrayAssignment | LazyAssignment)
    assert one_by_one(first) == dict(second.items())
    assert list(first) == list(second) and len(first) == len(spec.members)
    assert all(m in first for m in spec.members) and "nobody" not in first
    if lazy:
        assert first == second.to_dict()  # type: ignore[union-attr]


@settings(max_examples=150, deadline=None)
@given(spec=groups(), leaving=st.integers(0, 11), which=st.integers(0, 2))
def test_a_previous_result_as_views_assigns_as_the_same_result_as_dicts(
    spec: GroupSpec, leaving: int, which: int
) -> None:
    assignor = ASSIGNORS[which]
    before = assignor.assign(spec)
    gone = POOL[leaving]
    members = {m: sub for m, sub in spec.members.items() if m != gone} or dict(spec.members)

    def next_spec(owned_of: object) -> GroupSpec:
        subs = {}
        for m, sub in members.items():
            owned = owned_of(m)  # type: ignore[operator]
            subs[m] = MemberSubscription(topics=sub.topics, owned=owned, generation=1, instance_id=sub.instance_id)
        return GroupSpec(topics=spec.topics, members=subs)

    as_dicts = next_spec(lambda m: {t: tuple(ps) for t, ps in before[m].items() if ps})
    after_dicts = assignor.assign(as_dicts)
    if isinstance(before, ArrayAssignment):
        as_views = next_spec(before.owned)
        assert all(isinstance(sub.owned, OwnedView) for sub in as_views.members.values())
        after_views = assignor.assign(as_views)
        assert dict(after_views.items()) == dict(after_dicts.items())
