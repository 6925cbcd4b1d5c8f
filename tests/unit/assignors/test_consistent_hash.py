"""Tests of the ``consistent-hash`` strategy: valid, deterministic, per-topic independent, monotone."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.consistent_hash import (
    ConsistentHashAssignor,
    imbalance,
    partition_point,
    vnode_point,
)
from regroup.assignors.metrics import owners, validity_errors
from regroup.assignors.spec import Assignment, AssignmentError, GroupSpec, MemberSubscription

SETTINGS = settings(max_examples=50, deadline=None)


def spec_of(
    topics: dict[str, int],
    subs: dict[str, list[str]],
    *,
    vnodes: Any = 20,
    instance_ids: dict[str, str] | None = None,
) -> GroupSpec:
    instance_ids = instance_ids or {}
    return GroupSpec(
        topics=topics,
        members={m: MemberSubscription.of(ts, instance_id=instance_ids.get(m)) for m, ts in subs.items()},
        options={"vnodes": vnodes},
    )


def assign(spec: GroupSpec) -> Assignment:
    return ConsistentHashAssignor().assign(spec)


def topic_owners(assignment: Assignment, topic: str) -> dict[tuple[str, int], str]:
    return {tp: m for tp, m in owners(assignment).items() if tp[0] == topic}


# --------------------------------------------------------------------------------------------------- examples


def test_hashes_are_stable_constants() -> None:
    # Pinned values: a change here changes every consistent-hash assignment in the field.
    assert vnode_point("member-1", 0) == vnode_point("member-1", 0)
    assert vnode_point("member-1", 0) != vnode_point("member-1", 1)
    assert partition_point("t", 0) != vnode_point("t", 0)
    assert partition_point("orders", 3) == 0x3DEC44F893656F56
    assert vnode_point("consumer-a", 7) == 0x5CD0D686AD9DD746


def test_valid_and_every_member_present() -> None:
    spec = spec_of({"t": 12, "u": 5}, {"a": ["t", "u"], "b": ["t"], "c": [], "d": ["missing"]})
    result = assign(spec)
    assert validity_errors(spec, result) == []
    assert set(result) == {"a", "b", "c", "d"}
    assert result["c"] == {} and result["d"] == {}
    assert set(result["b"]) <= {"t"}


def test_default_vnodes() -> None:
    spec = GroupSpec(topics={"t": 30}, members={m: MemberSubscription.of(["t"]) for m in "abc"})
    assert assign(spec) == assign(spec_of({"t": 30}, {m: ["t"] for m in "abc"}, vnodes=100))


def test_owner_does_not_depend_on_partition_count() -> None:
    subs = {m: ["t"] for m in ("a", "b", "c", "d")}
    small = topic_owners(assign(spec_of({"t": 10}, subs)), "t")
    big = topic_owners(assign(spec_of({"t": 40}, subs)), "t")
    assert all(big[tp] == m for tp, m in small.items())


def test_static_members_keep_partitions_across_member_id_changes() -> None:
    subs = {"a-1": ["t"], "b-1": ["t"], "c-1": ["t"]}
    ids = {"a-1": "a", "b-1": "b", "c-1": "c"}
    before = assign(spec_of({"t": 24}, subs, instance_ids=ids))
    # b restarts and rejoins with a new member id but the same group.instance.id.
    subs_after = {"a-1": ["t"], "b-2": ["t"], "c-1": ["t"]}
    after = assign(spec_of({"t": 24}, subs_after, instance_ids={"a-1": "a", "b-2": "b", "c-1": "c"}))
    assert after["b-2"] == before["b-1"]
    assert after["a-1"] == before["a-1"] and after["c-1"] == before["c-1"]


@pytest.mark.parametrize("bad", [0, -3, "100", 1.5, True, 10_001, [10]])
def test_bad_vnodes_option(bad: object) -> None:
    with pytest.raises(AssignmentError, match="vnodes"):
        assign(spec_of({"t": 1}, {"a": ["t"]}, vnodes=bad))


def test_imbalance_report() -> None:
    spec = spec_of({"t": 6}, {"a": ["t"], "b": ["t"], "c": ["t"], "idle": []})
    report = imbalance(spec, {"a": {"t": [0, 1, 2, 3]}, "b": {"t": [4, 5]}, "c": {}, "idle": {}})
    assert report == {
        "members": 3,
        "partitions": 6,
        "mean_load": 2.0,
        "min_load": 0,
        "max_load": 4,
        "max_min_spread": 4,
        "max_mean_ratio": 2.0,
    }
    empty = imbalance(spec_of({}, {"a": ["t"]}), {"a": {}})
    assert empty["max_mean_ratio"] == 1.0 and empty["members"] == 0


def test_imbalance_is_moderate_with_enough_vnodes() -> None:
    subs = {f"consumer-{i}": ["t"] for i in range(8)}
    report = imbalance(spec_of({"t": 4000}, subs, vnodes=200), assign(spec_of({"t": 4000}, subs, vnodes=200)))
    assert 1.0 <= report["max_mean_ratio"] < 1.5


@pytest.mark.parametrize("m", [2, 4, 8, 16])
def test_adding_a_member_moves_about_one_over_m_plus_one(m: int) -> None:
    # Fixed names and hashes: deterministic, so this is not flaky; the bounds are loose on purpose.
    topics = {f"topic-{i}": 50 for i in range(8)}
    subs = {f"consumer-{i}": sorted(topics) for i in range(m)}
    before = owners(assign(spec_of(topics, subs, vnodes=100)))
    subs["consumer-new"] = sorted(topics)
    after = owners(assign(spec_of(topics, subs, vnodes=100)))
    moved = [tp for tp in before if after[tp] != before[tp]]
    assert all(after[tp] == "consumer-new" for tp in moved)
    share = len(moved) / len(before)
    assert 0.5 / (m + 1) <= share <= 1.6 / (m + 1)


# ------------------------------------------------------------------------------------------------- properties

TOPICS = ["t0", "t1", "t2", "t3"]
member_names = st.text(alphabet="abcdefgh-0123456789", min_size=1, max_size=8)


@st.composite
def specs(draw: st.DrawFn) -> GroupSpec:
    topics = {t: draw(st.integers(0, 12)) for t in draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))}
    names = draw(st.lists(member_names, min_size=1, max_size=6, unique=True))
    subs = {m: draw(st.lists(st.sampled_from(TOPICS), unique=True)) for m in names}
    return spec_of(topics, subs, vnodes=draw(st.integers(1, 30)))


@SETTINGS
@given(specs())
def test_property_valid(spec: GroupSpec) -> None:
    assert validity_errors(spec, assign(spec)) == []


@SETTINGS
@given(specs(), st.randoms(use_true_random=False))
def test_property_deterministic_across_member_order(spec: GroupSpec, rnd: random.Random) -> None:
    items = list(spec.members.items())
    rnd.shuffle(items)
    shuffled = GroupSpec(topics=spec.topics, members=dict(items), options=spec.options)
    assert assign(shuffled) == assign(spec)


@SETTINGS
@given(specs(), st.data())
def test_property_other_topics_do_not_matter(spec: GroupSpec, data: st.DataObject) -> None:
    """Changing who subscribes to the other topics (and their partition counts) leaves t0's owners alone."""
    before = topic_owners(assign(spec), "t0")
    subs: dict[str, list[str]] = {}
    for m, s in spec.members.items():
        others = data.draw(st.lists(st.sampled_from(TOPICS[1:]), unique=True))
        subs[m] = (["t0"] if "t0" in s.topics else []) + others
    topics = {t: data.draw(st.integers(0, 12)) for t in TOPICS[1:]}
    if "t0" in spec.topics:
        topics["t0"] = spec.topics["t0"]
    after = topic_owners(assign(spec_of(topics, subs, vnodes=spec.options["vnodes"])), "t0")
    assert after == before


@SETTINGS
@given(specs(), member_names)
def test_property_joining_member_only_takes_partitions(spec: GroupSpec, newcomer: str) -> None:
    """Monotonicity: a new member takes some partitions; nobody else's partitions change hands."""
    newcomer = "new-" + newcomer
    subs = {m: list(s.topics) for m, s in spec.members.items()}
    subs[newcomer] = list(TOPICS)
    before = owners(assign(spec))
    after = owners(assign(spec_of(dict(spec.topics), subs, vnodes=spec.options["vnodes"])))
    assert all(after[tp] in (m, newcomer) for tp, m in before.items())
