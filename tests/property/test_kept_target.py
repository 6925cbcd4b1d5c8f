"""A consumer group's kept target (``coordinator/consumer/kept_target``) against the target computed in full:
two coordinators take the same random history of heartbeats (joins, leaves, reconciliation steps, subscription
changes that make the group heterogeneous and back, topics growing, a restart from the records) and write the
very same records and answers, one keeping its targets, the other with keeping switched off."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer import kept_target
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

GROUP = "g"
MEMBERS = [f"member-{i}" for i in range(7)]
TOPICS = ("t0", "t1", "t2")


def image(sizes: dict[str, int]) -> ClusterImage:
    return ClusterImage.of(TopicImage(topic_id=topic_id_for(n), name=n, partitions=p) for n, p in sizes.items())


@contextmanager
def keeping(on: bool) -> Iterator[None]:
    saved = kept_target.KEPT_TARGET_ASSIGNORS
    kept_target.KEPT_TARGET_ASSIGNORS = saved if on else frozenset()
    try:
        yield
    finally:
        kept_target.KEPT_TARGET_ASSIGNORS = saved


class Side:
    """One coordinator and what each member last heard."""

    def __init__(self, sizes: dict[str, int], assignor: str) -> None:
        config = CoordinatorConfig(consumer_group_session_timeout_ms=10**9, consumer_group_assignors=(assignor,))
        self.config = config
        self.coordinator = GroupCoordinator(config)
        self.coordinator.update_metadata(image(sizes), 0)
        self.records: list[Any] = []
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, Any] = {}
        #: the last heartbeat's result
        self.last: Result | None = None

    def heartbeat(
        self, member: str, topics: tuple[str, ...] | None, now: int, leave: bool = False, rack: str | None = None
    ) -> Any:
        epoch = -1 if leave else self.epochs.get(member, 0)
        req = ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=member,
            member_epoch=epoch,
            rack_id=rack,
            rebalance_timeout_ms=10**9 if epoch == 0 else -1,
            subscribed_topic_names=topics if topics is not None or epoch == 0 else None,
            topic_partitions=self.owned.get(member, ()) if epoch >= 0 else None,
        )
        result = self.coordinator.consumer_group_heartbeat(req, now, now)
        self.last = result
        self.records.extend(result.records)
        resp = result.response_for(now)
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        if leave:
            self.epochs.pop(member, None)
            self.owned.pop(member, None)
        elif resp.error.value == 0:
            self.epochs[member] = resp.member_epoch
            if resp.assignment is not None:
                self.owned[member] = resp.assignment
        return resp

    def restart(self, sizes: dict[str, int], now: int) -> None:
        self.coordinator = GroupCoordinator.from_records(self.coordinator.snapshot_records(), now, self.config)
        self.coordinator.update_metadata(image(sizes), now)


step = st.one_of(
    st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("subscribe"), st.sampled_from(MEMBERS), st.sets(st.sampled_from(TOPICS), min_size=1)),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS), st.integers(min_value=1, max_value=6)),
    st.tuples(st.just("restart")),
)


@pytest.mark.parametrize("assignor", ["uniform", "optimal"])
@settings(max_examples=120, deadline=None)
@given(history=st.lists(step, min_size=1, max_size=60), counts=st.lists(st.integers(0, 9), min_size=3, max_size=3))
def test_kept_targets_write_what_the_full_computation_writes(
    assignor: str, history: list[tuple[Any, ...]], counts: list[int]
) -> None:
    sizes = {t: c for t, c in zip(TOPICS, counts, strict=True) if c}
    sizes.setdefault("t0", 1)
    sides = {True: Side(dict(sizes), assignor), False: Side(dict(sizes), assignor)}
    for now, action in enumerate(history, start=1):
        answers = {}
        for on, side in sides.items():
            with keeping(on):
                kind = action[0]
                if kind == "heartbeat":
                    answers[on] = side.heartbeat(action[1], ("t0", "t1", "t2"), now)
                elif kind == "leave":
                    answers[on] = side.heartbeat(action[1], None, now, leave=True)
                elif kind == "subscribe":
                    answers[on] = side.heartbeat(action[1], tuple(sorted(action[2])), now)
                elif kind == "grow":
                    sizes[action[1]] = sizes.get(action[1], 0) + action[2] if on else sizes[action[1]]
                    side.coordinator.update_metadata(image(sizes), now)
                else:
                    side.restart(sizes, now)
        assert answers.get(True) == answers.get(False)
        assert sides[True].records == sides[False].records
