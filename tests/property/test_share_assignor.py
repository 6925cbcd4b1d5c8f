"""The share group ``simple`` assignor over random groups: random members and topic names (some missing, some
with no partitions), homogeneous or mixed subscriptions, and a random current assignment that may be stale
(unknown topic ids, partitions out of range, members that left). For every input:

* every partition of a subscribed existing topic is held by at least one of its subscribers, and only
  subscribers hold a topic's partitions; held partitions exist and no partition set is empty;
* in each pool (the whole group when every member subscribes to the same existing topics, else each topic over
  its subscribers) a partition has at most ``S = ceil(M / P)`` holders, a member holds its quota or one partition
  less, and member loads differ by at most one; starting from nothing every quota is met exactly;
* the result does not depend on the insertion order of any mapping or subscription tuple;
* fed back as the current assignment with the same inputs, the result comes back unchanged.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.share.assignor import Assignment, assign, quotas

TOPIC_NAMES = ("t0", "t1", "t2", "t3")
MEMBER_IDS = ("a", "b", "c", "d", "e", "f", "g", "h")
STALE_ID = uuid.UUID(int=999)

K = TypeVar("K")
V = TypeVar("V")

Topics = dict[str, tuple[uuid.UUID, int]]
Subscriptions = dict[str, tuple[str, ...]]
Current = dict[str, dict[uuid.UUID, frozenset[int]]]
Case = tuple[Subscriptions, Topics, Current]


def topic_id(name: str) -> uuid.UUID:
    return uuid.UUID(int=TOPIC_NAMES.index(name) + 1)


@st.composite
def cases(draw: st.DrawFn, fresh: bool = False) -> Case:
    existing = draw(st.lists(st.sampled_from(TOPIC_NAMES), unique=True))
    topics = {name: (topic_id(name), draw(st.one_of(st.integers(0, 3), st.integers(0, 6)))) for name in existing}
    members = draw(st.lists(st.sampled_from(MEMBER_IDS), unique=True, max_size=8))
    names = st.lists(st.sampled_from((*TOPIC_NAMES, "ghost")), unique=True, max_size=3).map(tuple)
    if draw(st.booleans()):
        common = draw(names)
        subscriptions = {member: common for member in members}
    else:
        subscriptions = {member: draw(names) for member in members}
    current: Current = {}
    if fresh:
        pass
    elif draw(st.booleans()):
        # Dense, overlapping holdings of real partitions: members over quota and partitions over-shared, which
        # now and then leaves a partition short of holders.
        for member in members:
            current[member] = {
                tid: draw(st.frozensets(st.integers(0, count - 1)))
                for tid, count in topics.values()
                if count > 0 and draw(st.integers(0, 4)) > 0
            }
    else:
        # Anything, stale included: unknown topic ids, partitions out of range, members that left.
        ids = st.sampled_from((*(topic_id(name) for name in TOPIC_NAMES), STALE_ID))
        held = st.dictionaries(ids, st.frozensets(st.integers(-1, 8), max_size=5), max_size=3)
        for member in draw(st.lists(st.sampled_from((*members, "left")), unique=True)):
            current[member] = draw(held)
    return subscriptions, topics, current


@st.composite
def crowded(draw: st.DrawFn) -> Case:
    """More members than partitions on one or two topics everybody subscribes to, each member holding a random
    subset of the partitions: the setting where over-shared partitions are trimmed and a partition can end up
    short of holders."""
    names = draw(st.lists(st.sampled_from(TOPIC_NAMES[:2]), unique=True, min_size=1))
    topics = {name: (topic_id(name), draw(st.integers(1, 3))) for name in names}
    members = draw(st.lists(st.sampled_from(MEMBER_IDS), unique=True, min_size=3))
    subscriptions = {member: tuple(names) for member in members}
    current = {
        member: {tid: draw(st.frozensets(st.integers(0, count - 1))) for tid, count in topics.values()}
        for member in members
    }
    return subscriptions, topics, current


ANY_CASE = st.one_of(cases(), crowded())


def existing_subscriptions(subscriptions: Mapping[str, tuple[str, ...]], topics: Topics) -> dict[str, frozenset[str]]:
    return {member: frozenset(name for name in names if name in topics) for member, names in subscriptions.items()}


def pools(subscriptions: Subscriptions, topics: Topics) -> list[tuple[list[str], list[str]]]:
    """The (sorted members, topic names) groups the assignor balances over."""
    wanted = existing_subscriptions(subscriptions, topics)
    members = sorted(wanted)
    if members and all(wanted[member] == wanted[members[0]] for member in members):
        return [(members, sorted(wanted[members[0]]))]
    names = sorted(frozenset[str]().union(*wanted.values()))
    return [([member for member in members if name in wanted[member]], [name]) for name in names]


def holders(result: Assignment, members: list[str], name: str, partition: int) -> int:
    return sum(1 for member in members if partition in result[member].get(topic_id(name), frozenset()))


@settings(max_examples=150, deadline=None)
@given(ANY_CASE)
def test_every_partition_goes_to_its_subscribers_only(case: Case) -> None:
    subscriptions, topics, current = case
    result = assign(subscriptions, topics, current)
    assert set(result) == set(subscriptions)
    wanted = existing_subscriptions(subscriptions, topics)
    by_id = {topic_id(name): name for name in topics}
    for member, owned in result.items():
        for tid, partitions in owned.items():
            assert partitions, "no empty partition sets"
            name = by_id[tid]
            assert name in wanted[member], "only subscribers hold a topic's partitions"
            assert all(0 <= p < topics[name][1] for p in partitions)
    for name, (_, count) in topics.items():
        subscribers = [member for member in subscriptions if name in wanted[member]]
        if subscribers:
            for partition in range(count):
                assert holders(result, subscribers, name, partition) >= 1


@settings(max_examples=150, deadline=None)
@given(ANY_CASE)
def test_sharing_and_loads_stay_within_the_quotas(case: Case) -> None:
    subscriptions, topics, current = case
    result = assign(subscriptions, topics, current)
    for members, names in pools(subscriptions, topics):
        sharing, quota = quotas(len(members), sum(topics[name][1] for name in names))
        for name in names:
            for partition in range(topics[name][1]):
                assert holders(result, members, name, partition) <= sharing
        loads = [sum(len(result[member].get(topic_id(name), ())) for name in names) for member in members]
        for load, desired in zip(loads, quota, strict=True):
            assert desired - 1 <= load <= desired
        if loads:
            assert max(loads) - min(loads) <= 1


@settings(max_examples=150, deadline=None)
@given(cases(fresh=True))
def test_from_nothing_every_quota_is_met(case: Case) -> None:
    subscriptions, topics, current = case
    result = assign(subscriptions, topics, current)
    for members, names in pools(subscriptions, topics):
        sharing, quota = quotas(len(members), sum(topics[name][1] for name in names))
        loads = [sum(len(result[member].get(topic_id(name), ())) for name in names) for member in members]
        assert loads == quota
        for name in names:
            for partition in range(topics[name][1]):
                assert holders(result, members, name, partition) == sharing


def shuffled(mapping: Mapping[K, V], rnd: random.Random) -> dict[K, V]:
    keys = list(mapping)
    rnd.shuffle(keys)
    return {key: mapping[key] for key in keys}


@settings(max_examples=150, deadline=None)
@given(ANY_CASE, st.randoms(use_true_random=False))
def test_result_ignores_insertion_order(case: Case, rnd: random.Random) -> None:
    subscriptions, topics, current = case
    reordered_subscriptions = {
        member: tuple(rnd.sample(names, len(names))) for member, names in shuffled(subscriptions, rnd).items()
    }
    reordered_current = {member: shuffled(owned, rnd) for member, owned in shuffled(current, rnd).items()}
    result = assign(subscriptions, topics, current)
    assert assign(reordered_subscriptions, shuffled(topics, rnd), reordered_current) == result
    assert assign(subscriptions, topics, current) == result


@settings(max_examples=150, deadline=None)
@given(ANY_CASE)
def test_result_fed_back_is_unchanged(case: Case) -> None:
    subscriptions, topics, current = case
    result = assign(subscriptions, topics, current)
    assert assign(subscriptions, topics, result) == result
