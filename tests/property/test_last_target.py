"""A consumer group's full target computation reusing its last one (``coordinator/consumer/last_target``)
against the same computation from scratch: two coordinators take the same random history of heartbeats (joins,
leaves, reconciliation steps, heterogeneous subscriptions, rack changes, topics growing, racks appearing on
replicas, a restart from the records) and write the very same records and answers, one keeping its last
computation (and its kept target, which starts the first full computation after a homogeneous spell), the
other forgetting both before every step."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.records.consumer import ConsumerGroupTargetAssignmentMemberKey
from tests.property import test_kept_target as kept_target_test

GROUP = "g"
MEMBERS = [f"member-{i}" for i in range(7)]
TOPICS = ("t0", "t1", "t2", "t3")
RACKS = ("r0", "r1", None)


def image(sizes: dict[str, int], racked: bool) -> ClusterImage:
    def racks(n: int) -> tuple[frozenset[str], ...]:
        return tuple(frozenset({f"r{p % 2}"}) for p in range(n)) if racked else ()

    return ClusterImage.of(
        TopicImage(topic_id=topic_id_for(n), name=n, partitions=p, racks=racks(p)) for n, p in sizes.items()
    )


class Side(kept_target_test.Side):
    """One coordinator and what each member last heard; ``keeping=False`` forgets the last computation (and the
    kept target, whose state starts the first full computation) before every step."""

    def __init__(self, sizes: dict[str, int], assignor: str, keeping: bool) -> None:
        super().__init__(sizes, assignor)
        self.keeping = keeping

    def forget(self) -> None:
        if not self.keeping:
            group = self.coordinator.groups.typed(GROUP, ConsumerGroup)
            if group is not None:
                group.last_target = None
                group.kept_target = None

    def heartbeat(
        self, member: str, topics: tuple[str, ...] | None, now: int, leave: bool = False, rack: str | None = None
    ) -> Any:
        self.forget()
        return super().heartbeat(member, topics, now, leave=leave, rack=rack)

    def metadata(self, sizes: dict[str, int], racked: bool, now: int) -> None:
        self.forget()
        self.coordinator.update_metadata(image(sizes, racked), now)

    def restart(self, sizes: dict[str, int], racked: bool, now: int) -> None:
        self.coordinator = GroupCoordinator.from_records(self.coordinator.snapshot_records(), now, self.config)
        self.coordinator.update_metadata(image(sizes, racked), now)


subscription = st.sets(st.sampled_from(TOPICS), min_size=1).map(lambda s: tuple(sorted(s)))
step = st.one_of(
    st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS), subscription),
    st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS), st.none()),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("rack"), st.sampled_from(MEMBERS), st.sampled_from(RACKS)),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS), st.integers(min_value=1, max_value=6)),
    st.tuples(st.just("racks"), st.booleans()),
    st.tuples(st.just("restart")),
)


joins = st.lists(st.tuples(st.sampled_from(MEMBERS), subscription, st.sampled_from(RACKS)), min_size=2, max_size=7).map(
    lambda js: [("join", *j) for j in js]
)


@pytest.mark.parametrize("assignor", ["uniform", "optimal", "range", "consistent-hash"])
@settings(max_examples=80, deadline=None)
@given(
    start=joins,
    racked=st.booleans(),
    history=st.lists(step, min_size=1, max_size=40),
    counts=st.lists(st.integers(0, 9), min_size=4, max_size=4),
)
def test_reusing_the_last_computation_writes_what_a_fresh_one_writes(
    assignor: str, start: list[tuple[Any, ...]], racked: bool, history: list[tuple[Any, ...]], counts: list[int]
) -> None:
    sizes = {t: c for t, c in zip(TOPICS, counts, strict=True) if c}
    sizes.setdefault("t0", 1)
    racks: dict[str, str | None] = {}
    sides = [Side(dict(sizes), assignor, keeping=True), Side(dict(sizes), assignor, keeping=False)]
    for side in sides:
        side.metadata(sizes, racked, 0)
    for now, action in enumerate([*start, *history], start=1):
        kind = action[0]
        if kind == "grow":
            sizes[action[1]] = sizes.get(action[1], 0) + action[2]
        elif kind == "racks":
            racked = action[1]
        elif kind in ("rack", "join"):
            racks[action[1]] = action[-1]
        answers = []
        for side in sides:
            if kind == "join":
                answers.append(side.heartbeat(action[1], action[2], now, rack=action[3]))
            elif kind == "heartbeat":
                answers.append(side.heartbeat(action[1], action[2], now, rack=racks.get(action[1])))
            elif kind == "leave":
                answers.append(side.heartbeat(action[1], None, now, leave=True))
            elif kind == "rack":
                answers.append(side.heartbeat(action[1], None, now, rack=action[2]))
            elif kind in ("grow", "racks"):
                side.metadata(sizes, racked, now)
            else:
                side.restart(sizes, racked, now)
        assert answers[:1] == answers[1:]
        assert sides[0].records == sides[1].records


def test_a_join_into_a_heterogeneous_group_writes_only_the_targets_that_moved() -> None:
    """Forty members on two subscriptions; one more joins: the targets written are the joiner's and those of
    the members it took partitions from, and they are what a fresh computation writes."""
    sizes = {"t0": 40, "t1": 40, "t2": 40}
    kept, fresh = Side(sizes, "uniform", keeping=True), Side(sizes, "uniform", keeping=False)
    now = 0
    for i in range(40):
        topics = ("t0", "t1") if i % 2 else ("t1", "t2")
        for side in (kept, fresh):
            now += 1
            side.heartbeat(f"m{i:02d}", topics, now)
    before = len(kept.records)
    group = kept.coordinator.groups.typed(GROUP, ConsumerGroup)
    assert group is not None and group.last_target is not None
    old_targets = dict(group.targets)
    now += 1
    for side in (kept, fresh):
        side.heartbeat("joiner", ("t0", "t1", "t2"), now)
    assert kept.records == fresh.records
    moved = {m for m, t in group.targets.items() if old_targets.get(m) != t}
    written = {
        r.key.member_id for r in kept.records[before:] if isinstance(r.key, ConsumerGroupTargetAssignmentMemberKey)
    }
    assert "joiner" in moved and len(moved) > 1
    assert written == moved
