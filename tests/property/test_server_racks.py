"""The server-side assignors with racks.

``uniform``: valid, as balanced as without racks, and lexicographically optimal on (balance, partitions kept
by a current owner they are not cross-rack for, cross-rack placements, other partitions kept), checked by
brute force; a target it computes is a fixed point (recomputing from it changes nothing); without a member
rack holding a replica it is exactly the rack-blind result.

``server-range``: exactly the client-side ``range`` (KIP-881 when racks apply), with per-topic counts as
without racks and co-partitioning kept.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors import metrics
from regroup.assignors.racks import uniform_racks
from regroup.assignors.range import RangeAssignor
from regroup.assignors.server_range import ServerRangeAssignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription
from regroup.assignors.uniform import UniformAssignor

RACKS = ("a", "b", "c")
Placement = tuple[str, str, int]
Value = tuple[list[int], int, int, int]


@st.composite
def groups(draw: st.DrawFn, *, small: bool = False, targets: bool = True) -> GroupSpec:
    """Groups with differing replica racks, members on racks (or not) and current targets (disjoint, as the
    coordinator's targets always are; some on topics the member no longer subscribes to)."""
    topics = {f"t{i}": draw(st.integers(1, 3 if small else 6)) for i in range(draw(st.integers(1, 2 if small else 3)))}
    names = sorted(topics)
    replica_sets = st.frozensets(st.sampled_from(RACKS), max_size=2)
    partition_racks = {t: tuple(draw(replica_sets) for _ in range(n)) for t, n in topics.items()}
    homogeneous = draw(st.booleans())
    n_members = draw(st.integers(1, 3 if small else 6))
    owner = {(t, p): draw(st.integers(-1, n_members - 1)) if targets else -1 for t in names for p in range(topics[t])}
    members = {}
    for i in range(n_members):
        subscribed = names if homogeneous else draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        owned: dict[str, list[int]] = {}
        for (t, p), o in owner.items():
            if o == i:
                owned.setdefault(t, []).append(p)
        rack = draw(st.sampled_from((None, *RACKS)))
        members[f"m{i}"] = MemberSubscription.of(subscribed, owned, rack=rack)
    return GroupSpec(topics=topics, members=members, partition_racks=partition_racks)


def placements(assignment: Assignment) -> set[Placement]:
    return {(m, t, p) for m, per in assignment.items() for t, ps in per.items() for p in ps}


def counts(assignment: Assignment) -> list[int]:
    return sorted((sum(len(ps) for ps in per.values()) for per in assignment.values()), reverse=True)


def cross_rack(spec: GroupSpec, member: str, topic: str, partition: int) -> bool:
    rack = spec.members[member].rack
    assert spec.partition_racks is not None
    return rack is not None and rack not in spec.partition_racks[topic][partition]


def value(spec: GroupSpec, assignment: Assignment) -> Value:
    """(counts decreasing, -kept on the owner's rack, cross-rack placements, -other kept): smaller is better."""
    matched = other = crossed = 0
    for m, t, p in placements(assignment):
        miss = cross_rack(spec, m, t, p)
        crossed += miss
        if p in spec.members[m].owned.get(t, ()):
            if miss:
                other += 1
            else:
                matched += 1
    return counts(assignment), -matched, crossed, -other


def brute_force_best(spec: GroupSpec) -> Value:
    parts = [(t, p) for t in sorted(spec.topics) for p in range(spec.topics[t])]
    parts = [(t, p) for t, p in parts if any(t in s.topics for s in spec.members.values())]
    choices = [[m for m in sorted(spec.members) if t in spec.members[m].topics] for t, _ in parts]
    best: Value | None = None
    for pick in itertools.product(*choices):
        assignment: Assignment = {m: {} for m in spec.members}
        for (t, p), m in zip(parts, pick, strict=True):
            assignment[m].setdefault(t, []).append(p)
        v = value(spec, assignment)
        if best is None or v < best:
            best = v
    assert best is not None
    return best


def without_racks(spec: GroupSpec) -> GroupSpec:
    return GroupSpec(topics=spec.topics, members=spec.members)


# ------------------------------------------------------------------------------------------------ uniform


@settings(max_examples=200, deadline=None)
@given(groups())
def test_uniform_is_valid_and_as_balanced_as_without_racks(spec: GroupSpec) -> None:
    result = UniformAssignor().assign(spec)
    assert metrics.validity_errors(spec, result) == []
    assert list(result) == list(spec.members)
    assert counts(result) == counts(UniformAssignor().assign(without_racks(spec)))
    if uniform_racks(spec) is None:
        assert result == UniformAssignor().assign(without_racks(spec))


@settings(max_examples=150, deadline=None)
@given(groups(small=True))
def test_uniform_is_lexicographically_optimal(spec: GroupSpec) -> None:
    subscribed = sum(n for t, n in spec.topics.items() if any(t in s.topics for s in spec.members.values()))
    if uniform_racks(spec) is None or len(spec.members) ** subscribed > 20_000:
        return
    assert value(spec, UniformAssignor().assign(spec)) == brute_force_best(spec)


@settings(max_examples=150, deadline=None)
@given(groups())
def test_uniform_rack_matched_whenever_balance_allows(spec: GroupSpec) -> None:
    """A cross-rack placement on m means every subscriber on a replica rack has at least as many partitions
    (taking it over would not keep the balance); with the same subscriptions, every member keeps as many of
    its current partitions on its rack as its quota ⌊N/M⌋ allows."""
    result = UniformAssignor().assign(spec)
    if uniform_racks(spec) is None:
        return
    size = metrics.loads(result)
    assert spec.partition_racks is not None
    for m, t, p in placements(result):
        if cross_rack(spec, m, t, p):
            for other, sub in spec.members.items():
                if t in sub.topics and sub.rack in spec.partition_racks[t][p]:
                    assert size[other] >= size[m], (m, other, t, p)
    if len({sub.topics for sub in spec.members.values()}) > 1:
        return
    topics = next(iter(spec.members.values())).topics
    quota = sum(spec.topics[t] for t in topics) // len(spec.members)
    for m, sub in spec.members.items():
        mine = [(t, p) for t, ps in sub.owned.items() if t in topics for p in ps if not cross_rack(spec, m, t, p)]
        kept = [(t, p) for t, p in mine if p in result[m].get(t, [])]
        assert len(kept) >= min(len(mine), quota), (m, mine, kept)


@settings(max_examples=150, deadline=None)
@given(groups())
def test_uniform_target_is_a_fixed_point(spec: GroupSpec) -> None:
    """The coordinator recomputes the target at every epoch: with nothing else changed, the target it just
    computed comes back unchanged."""
    first = UniformAssignor().assign(spec)
    again = GroupSpec(
        topics=spec.topics,
        members={m: MemberSubscription.of(sub.topics, first[m], rack=sub.rack) for m, sub in spec.members.items()},
        partition_racks=spec.partition_racks,
    )
    assert UniformAssignor().assign(again) == first


@settings(max_examples=100, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_uniform_member_order_does_not_matter(spec: GroupSpec, rnd: random.Random) -> None:
    items = list(spec.members.items())
    rnd.shuffle(items)
    shuffled = GroupSpec(topics=spec.topics, members=dict(items), partition_racks=spec.partition_racks)
    assert UniformAssignor().assign(shuffled) == UniformAssignor().assign(spec)


# ------------------------------------------------------------------------------------------- server-range


@settings(max_examples=200, deadline=None)
@given(groups(targets=False), st.booleans())
def test_server_range_is_the_client_range(spec: GroupSpec, static: bool) -> None:
    if static:  # some static members: the order puts them first
        spec = GroupSpec(
            topics=spec.topics,
            members={
                m: MemberSubscription.of(sub.topics, rack=sub.rack, instance_id=f"i{9 - k}" if k % 2 else None)
                for k, (m, sub) in enumerate(spec.members.items())
            },
            partition_racks=spec.partition_racks,
        )
    result = ServerRangeAssignor().assign(spec)
    assert result == RangeAssignor().assign(spec)
    assert metrics.validity_errors(spec, result) == []
    plain = ServerRangeAssignor().assign(without_racks(spec))
    for topic in spec.topics:
        per_member = Counter(len(result[m].get(topic, [])) for m in spec.members)
        assert per_member == Counter(len(plain[m].get(topic, [])) for m in spec.members), topic
    # co-partitioned: topics with the same subscribers and partition count give partition p to one member
    subscribers = {t: frozenset(m for m, s in spec.members.items() if t in s.topics) for t in spec.topics}
    for t1, t2 in itertools.combinations(sorted(spec.topics), 2):
        if subscribers[t1] == subscribers[t2] and spec.topics[t1] == spec.topics[t2] and subscribers[t1]:
            owner1 = {p: m for m in spec.members for p in result[m].get(t1, [])}
            owner2 = {p: m for m in spec.members for p in result[m].get(t2, [])}
            assert owner1 == owner2, (t1, t2)
