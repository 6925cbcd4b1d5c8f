"""The claims read flat from a previous result's owner array (``flat_claims_from_views``) resolve to exactly what
the per-member arrays (``claims_from_views``) resolve to, whoever's view each member holds; and an outcome's
member read from its owner array is its per-member array."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.array_assignment import ArrayAssignment, claims_from_views, flat_claims_from_views
from regroup.assignors.balance import Outcome
from regroup.assignors.layout import build_layout
from regroup.assignors.ownership import Claims, resolve_claims, resolve_flat
from regroup.assignors.spec import GroupSpec, MemberSubscription

TOPICS = {"a": 3, "b": 2, "c": 4}


@st.composite
def cases(draw: st.DrawFn) -> tuple[GroupSpec, ArrayAssignment, list[int | None], list[int]]:
    """A spec, a previous result over the same topics (per-member arrays, possibly overlapping, or an owner
    array), and for each member of the spec the previous member whose view it holds (None: nothing)."""
    names = sorted(TOPICS)
    count = draw(st.integers(1, 6))
    members = {
        f"m{i}": MemberSubscription.of(draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)))
        for i in range(count)
    }
    # the previous result: every topic subscribed by someone, so that the layouts number the same partitions
    before_spec = GroupSpec(topics=TOPICS, members={f"p{i}": MemberSubscription.of(names) for i in range(4)})
    before_layout = build_layout(before_spec)
    n = before_layout.partition_total
    if draw(st.booleans()):
        owner = np.array(draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n)), dtype=np.int64)
        outcome = Outcome(4, owner=owner)
    else:
        per_member = [
            np.array(draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n)), dtype=np.int64) for _ in range(4)
        ]
        outcome = Outcome(4, per_member=per_member)
    source = ArrayAssignment(before_layout, outcome)
    viewed = draw(st.lists(st.none() | st.integers(0, 3), min_size=count, max_size=count))
    generations = draw(st.lists(st.integers(-1, 2), min_size=count, max_size=count))
    return GroupSpec(topics=TOPICS, members=members), source, viewed, generations


def same_claims(a: Claims, b: Claims) -> bool:
    return all(
        np.array_equal(x, y)
        for x, y in ((a.parts, b.parts), (a.members, b.members), (a.bounds, b.bounds), (a.contested, b.contested))
    )


@settings(max_examples=300, deadline=None)
@given(case=cases())
def test_flat_claims_resolve_as_the_per_member_claims(
    case: tuple[GroupSpec, ArrayAssignment, list[int | None], list[int]],
) -> None:
    spec, source, viewed, generations = case
    layout = build_layout(spec)
    if layout.topic_names != source.layout.topic_names:
        return  # (claims_from_views and the flat read both decline: nothing to compare)
    owned = [source.owned(f"p{v}") if v is not None else {} for v in viewed]
    raw = claims_from_views(layout, owned)
    flat = flat_claims_from_views(layout, owned)
    if raw is None:
        assert flat is None
        return
    per_member = source.outcome.per_member
    lists = [per_member[v] for v in viewed if v is not None]
    overlap = bool(lists) and len(np.unique(np.concatenate(lists))) < sum(map(len, lists))
    repeated = len({v for v in viewed if v is not None}) < sum(v is not None for v in viewed)
    if flat is None:
        assert overlap or repeated or any(len(p) != len(np.unique(p)) for p in per_member) or _overlap(per_member)
        return
    assert same_claims(resolve_flat(layout, flat[0], flat[1], generations), resolve_claims(layout, raw, generations))


def _overlap(per_member: tuple[np.ndarray, ...]) -> bool:
    flat = np.concatenate(per_member)
    return len(np.unique(flat)) < len(flat)


@settings(max_examples=200, deadline=None)
@given(owner=st.lists(st.integers(-1, 4), min_size=1, max_size=30))
def test_a_member_read_from_the_owner_array_is_its_per_member_array(owner: list[int]) -> None:
    array = np.array(owner, dtype=np.int64)
    members = 5 if len(owner) <= 20 else 8  # (both sides of the scan's limit: four partitions a member)
    lazy = Outcome(members, owner=array)
    read = [lazy.member_parts(i) for i in range(members)]
    split = Outcome(members, owner=array.copy()).per_member
    assert all(np.array_equal(a, b) for a, b in zip(read, split, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip([lazy.member_parts(i) for i in range(members)], split, strict=True))
