"""A consumer group's target computed beside the coordinator (``coordinator/consumer/target_aside``).

* Landed right after the operation that handed it out, it writes the very targets the computation within the
  heartbeat writes: two coordinators, one offloading every full computation, take the same random history
  (joins, leaves, heterogeneous subscriptions, rack changes, topics growing, restarts from records) and hold
  the same targets and target epoch after every step.
* Held while the group moves on, landed late or failed, it is written as the group now is (membership
  changes ordered after it): after every landing the targets are disjoint, only members have one, and each
  target it wrote lies within its member's topics; once everything has landed and every member has
  heartbeated, the target is the group epoch's, every subscribed partition has one owner among its topic's
  subscribers, and the records rebuild the same state.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.asides import Aside, outcome_of
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result
from regroup.model.cluster import topic_id_for
from regroup.records.consumer import ConsumerGroupTargetAssignmentMemberKey
from tests.property import test_last_target as last_target_test
from tests.property.test_last_target import GROUP, TOPICS, image, joins, step


class OffloadingSide(last_target_test.Side):
    """A coordinator handing out every full computation of a group of two or more members; ``landing`` says
    what becomes of the work it hands out: landed at once, or held until ``land_held``."""

    def __init__(self, sizes: dict[str, int], assignor: str, landing: str = "at once") -> None:
        super().__init__(sizes, assignor, keeping=True)
        self.config = dataclasses.replace(self.config, consumer_group_assignor_offload_members=2)
        self.coordinator = GroupCoordinator(self.config)
        self.coordinator.update_metadata(image(sizes, False), 0)
        self.landing = landing
        self.held: list[Aside] = []
        self.handed_out = 0

    def take(self, result: Result, now: int) -> None:
        """Land or hold the work ``result`` handed out (and what landing it hands out again)."""
        pending = list(result.asides)
        while pending:
            aside = pending.pop(0)
            self.handed_out += 1
            if self.landing == "held":
                self.held.append(aside)
                continue
            landed = self.coordinator.land(aside, outcome_of(aside), now)
            self.records.extend(landed.records)
            pending.extend(landed.asides)

    def land_held(self, now: int, fail: bool = False) -> None:
        held, self.held = self.held, []
        for aside in held:
            outcome = RuntimeError("the worker failed") if fail else outcome_of(aside)
            landed = self.coordinator.land(aside, outcome, now)
            self.records.extend(landed.records)
            self.held.extend(landed.asides)
            group = self.coordinator.groups.typed(GROUP, ConsumerGroup)
            if group is not None:
                check_landed(group, landed)

    def heartbeat(
        self, member: str, topics: tuple[str, ...] | None, now: int, leave: bool = False, rack: str | None = None
    ) -> Any:
        resp = super().heartbeat(member, topics, now, leave=leave, rack=rack)
        assert self.last is not None
        self.take(self.last, now)
        return resp

    def restart(self, sizes: dict[str, int], racked: bool, now: int) -> None:
        super().restart(sizes, racked, now)
        self.held.clear()  # (what was out belonged to the coordinator that stopped: its landing finds nothing)


def check_landed(group: ConsumerGroup, landed: Result) -> None:
    """What a landing may leave: targets only for members, pairwise disjoint, and each target it wrote within
    the topics its member subscribes to now (membership changes since the work was handed out ordered after it)."""
    assert set(group.targets) <= set(group.members)
    owners: dict[tuple[Any, int], str] = {}
    for member_id, target in group.targets.items():
        for topic_id, partitions in target.items():
            for p in partitions:
                assert owners.setdefault((topic_id, p), member_id) == member_id, (topic_id, p)
    names = {t.topic_id: t.name for t in group.subscribed_topics.values()}
    for record in landed.records:
        if isinstance(record.key, ConsumerGroupTargetAssignmentMemberKey) and record.value is not None:
            member = group.members[record.key.member_id]
            assert member.subscribed_topic_regex is None  # (the strategies subscribe by name)
            assert {names[t] for t, _ in record.value.partitions} <= set(member.subscribed_topic_names)


def group_of(side: last_target_test.Side) -> ConsumerGroup:
    group = side.coordinator.groups.typed(GROUP, ConsumerGroup)
    assert group is not None
    return group


class World:
    """The cluster as the history left it: topic sizes, whether replicas have racks, each member's rack."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.racked = False
        self.racks: dict[str, Any] = {}

    def play(self, sides: list[Any], action: tuple[Any, ...], now: int) -> None:
        kind = action[0]
        if kind == "grow":
            self.sizes[action[1]] = self.sizes.get(action[1], 0) + action[2]
        elif kind == "racks":
            self.racked = action[1]
        elif kind in ("rack", "join"):
            self.racks[action[1]] = action[-1]
        for side in sides:
            if kind == "join":
                side.heartbeat(action[1], action[2], now, rack=action[3])
            elif kind == "heartbeat":
                side.heartbeat(action[1], action[2], now, rack=self.racks.get(action[1]))
            elif kind == "leave":
                side.heartbeat(action[1], None, now, leave=True)
            elif kind == "rack":
                side.heartbeat(action[1], None, now, rack=action[2])
            elif kind in ("grow", "racks"):
                side.metadata(self.sizes, self.racked, now)
            else:
                side.restart(self.sizes, self.racked, now)


@pytest.mark.parametrize("assignor", ["uniform", "range", "consistent-hash"])
@settings(max_examples=60, deadline=None)
@given(
    start=joins,
    history=st.lists(step, min_size=1, max_size=30),
    counts=st.lists(st.integers(0, 9), min_size=4, max_size=4),
)
def test_landed_at_once_the_targets_are_those_computed_within(
    assignor: str, start: list[tuple[Any, ...]], history: list[tuple[Any, ...]], counts: list[int]
) -> None:
    sizes = {t: c for t, c in zip(TOPICS, counts, strict=True) if c}
    sizes.setdefault("t0", 1)
    world = World(sizes)
    within = last_target_test.Side(dict(sizes), assignor, keeping=True)
    beside = OffloadingSide(dict(sizes), assignor)
    sides: list[Any] = [within, beside]
    for now, action in enumerate([*start, *history], start=1):
        world.play(sides, action, now)
        if action[0] != "restart":
            a, b = (
                within.coordinator.groups.typed(GROUP, ConsumerGroup),
                beside.coordinator.groups.typed(GROUP, ConsumerGroup),
            )
            assert (a is None) == (b is None)
            if a is not None and b is not None:
                assert b.targets == a.targets
                assert (b.group_epoch, b.assignment_epoch) == (a.group_epoch, a.assignment_epoch)
                assert b.target_aside is None


@pytest.mark.parametrize("assignor", ["uniform", "range"])
@settings(max_examples=60, deadline=None)
@given(
    start=joins,
    history=st.lists(st.one_of(step, st.tuples(st.just("land")), st.tuples(st.just("fail"))), min_size=1, max_size=30),
    counts=st.lists(st.integers(0, 9), min_size=4, max_size=4),
)
def test_held_or_failed_work_lands_as_the_group_now_is(
    assignor: str, start: list[tuple[Any, ...]], history: list[tuple[Any, ...]], counts: list[int]
) -> None:
    sizes = {t: c for t, c in zip(TOPICS, counts, strict=True) if c}
    sizes.setdefault("t0", 1)
    world = World(sizes)
    side = OffloadingSide(dict(sizes), assignor, landing="held")
    now = 0
    for action in [*start, *history]:
        now += 1
        if action[0] in ("land", "fail"):
            side.land_held(now, fail=action[0] == "fail")
            continue
        world.play([side], action, now)
    # settle: land what is out (again and again while landing hands out more), every member heartbeats
    side.landing = "at once"
    for _ in range(4):
        now += 1
        side.land_held(now)
        for member in sorted(side.epochs):
            side.heartbeat(member, None, now, rack=world.racks.get(member))
    side.land_held(now)
    group = side.coordinator.groups.typed(GROUP, ConsumerGroup)
    if group is None or not group.members:
        return
    assert group.target_aside is None
    assert group.assignment_epoch == group.group_epoch
    # every subscribed partition has exactly one owner, who subscribes to its topic
    owners: dict[tuple[Any, int], str] = {}
    for member_id, target in group.targets.items():
        assert member_id in group.members
        for topic_id, partitions in target.items():
            for p in partitions:
                assert (topic_id, p) not in owners
                owners[(topic_id, p)] = member_id
    for name, topic in group.subscribed_topics.items():
        subscribers = [m for m in group.members.values() if name in m.subscribed_topic_names]
        expected = {(topic.topic_id, p) for p in range(topic.partitions)} if subscribers else set()
        assert {k for k in owners if k[0] == topic.topic_id} == expected
        for p in range(topic.partitions if subscribers else 0):
            assert name in group.members[owners[(topic_id_for(name), p)]].subscribed_topic_names
    rebuilt = GroupCoordinator.from_records(side.records, now, side.config)
    assert rebuilt.hard_state() == side.coordinator.hard_state()


def test_work_landing_after_the_group_moved_on_is_written_as_the_group_now_is() -> None:
    """A joiner's target is out; meanwhile m0 leaves and m1 drops a topic. The work lands at the epoch it was
    computed for, with no target for m0 and none of t1 for m1; the group's current epoch is handed out next
    and lands as usual."""
    sizes = {"t0": 6, "t1": 6, "t2": 6}
    side = OffloadingSide(sizes, "uniform", landing="held")
    now = 0
    for i, topics in enumerate([("t0", "t1"), ("t1", "t2"), ("t0", "t2")]):
        now += 1
        side.heartbeat(f"m{i}", topics, now)
        side.land_held(now)
    group = group_of(side)
    assert group.assignment_epoch == group.group_epoch
    now += 1
    side.heartbeat("joiner", ("t0", "t1", "t2"), now)
    computed_for = group.group_epoch
    assert side.held and group.target_aside is side.held[0]
    answered = side.heartbeat("joiner", None, now + 1)  # (within the work's flight: the last target's epoch)
    assert answered.member_epoch == group.assignment_epoch < group.group_epoch
    now += 2
    side.heartbeat("m0", None, now, leave=True)
    side.heartbeat("m1", ("t2",), now)
    assert len(side.held) == 1  # (one computation out at a time)
    side.land_held(now)
    t1 = topic_id_for("t1")
    assert group.assignment_epoch == computed_for < group.group_epoch
    assert "m0" not in group.targets and group.targets["joiner"]
    assert t1 not in group.targets["m1"] or group.targets["m1"][t1] == frozenset()
    assert len(side.held) == 1  # (the current epoch, handed out next)
    side.land_held(now)
    assert group.assignment_epoch == group.group_epoch
    assert set(group.targets) == {"m1", "m2", "joiner"} and t1 not in group.targets["m1"]


def test_a_failed_computation_is_made_within_the_next_heartbeat() -> None:
    sizes = {"t0": 4, "t1": 4}
    side = OffloadingSide(sizes, "range", landing="held")
    now = 0
    for i, topics in enumerate([("t0",), ("t1",)]):
        now += 1
        side.heartbeat(f"m{i}", topics, now)
        side.land_held(now)
    group = group_of(side)
    now += 1
    side.heartbeat("m2", ("t0", "t1"), now)
    epoch = group.group_epoch
    side.land_held(now, fail=True)
    assert group.target_aside is None and group.assignment_epoch < epoch
    handed = side.handed_out
    now += 1
    side.heartbeat("m2", None, now)
    assert side.handed_out == handed  # (computed within this heartbeat)
    assert group.assignment_epoch == epoch and group.targets["m2"]


def test_a_small_group_and_a_kept_target_are_computed_within() -> None:
    sizes = {"t0": 4, "t1": 4}
    side = OffloadingSide(sizes, "uniform", landing="held")
    side.heartbeat("m0", ("t0",), 1)  # the group's first target: within (no earlier target to stand on)
    group = group_of(side)
    assert side.handed_out == 0 and group.assignment_epoch == group.group_epoch
    side.heartbeat("m1", ("t0",), 2)  # homogeneous: the kept target, within
    assert side.handed_out == 0 and group.assignment_epoch == group.group_epoch
    side.heartbeat("m2", ("t0", "t1"), 3)  # heterogeneous: handed out
    assert side.handed_out == 1 and group.assignment_epoch < group.group_epoch
