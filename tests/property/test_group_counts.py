"""A consumer group's counts of what its members subscribe to (``ConsumerGroup.subscriptions``) and of the
assignors they name (``assignor_votes``), and what is read from them (the group's topic names, the common
topics of a kept target, the preferred assignor), against the same read member by member.

Random histories of KIP-848 heartbeats: joins and leaves, topic-name and regular-expression subscriptions
changing, assignors named, heartbeats refused for a fenced epoch or refused late (a failure injected after
the target was computed and written: the journal takes every change back), topics appearing (regular
expressions resolving to more) and restarts from the records. After every step the counts equal the
members' own, and so does everything read from them; the kept assignment's sorted members are its
members, sorted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer import target_aside
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.consumer.kept_target import common_topics
from regroup.coordinator.consumer.subscriptions import group_topic_names, member_topics, subscribed_names
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

GROUP = "g"
MEMBERS = [f"member-{i}" for i in range(6)]
TOPICS = ("t0", "t1", "t2", "x0", "x1")
REGEXES = ("x.*", "t[01]", "nothing.*")
ASSIGNORS = (None, None, None, "uniform", "optimal", "range")
#: between two steps: every regular expression may be resolved again
STEP_MS = 11_000


@contextmanager
def failing_after_target() -> Iterator[None]:
    """Every target computation fails once it has written the target (and updated the kept one)."""
    compute = target_aside.compute_target

    def compute_then_fail(*args: Any) -> None:
        compute(*args)
        raise ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "injected")

    target_aside.compute_target = compute_then_fail
    try:
        yield
    finally:
        target_aside.compute_target = compute


def image(topics: frozenset[str]) -> ClusterImage:
    return ClusterImage.of(TopicImage(topic_id=topic_id_for(n), name=n, partitions=3) for n in sorted(topics))


def reference_common_topics(group: ConsumerGroup) -> tuple[str, ...] | None:
    """``common_topics`` member by member."""
    existing = group.subscribed_topics
    common: tuple[str, ...] | None = None
    for member in group.members.values():
        topics = tuple(sorted({t for t in member_topics(member, group.resolved_regexes) if t in existing}))
        if common is None:
            common = topics
        elif topics != common:
            return None
    return common or None


def reference_assignor(group: ConsumerGroup, default: str) -> str:
    votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    return min(votes, key=lambda name: (-votes[name], name)) if votes else default


def check(group: ConsumerGroup | None) -> None:
    if group is None:
        return
    members = group.members.values()
    assert group.subscriptions == dict(Counter((m.subscribed_topic_names, m.subscribed_topic_regex) for m in members))
    assert group.assignor_votes == dict(Counter(m.server_assignor for m in members if m.server_assignor))
    assert subscribed_names(group) == group_topic_names(members, group.resolved_regexes)
    assert common_topics(group) == reference_common_topics(group)
    assert group.preferred_assignor("uniform") == reference_assignor(group, "uniform")
    if group.kept_target is not None:
        kept = group.kept_target.kept
        order = kept._order  # (the incremental state under test)
        assert order is None or order == sorted(kept.held)


class Side:
    def __init__(self) -> None:
        self.config = CoordinatorConfig(
            consumer_group_session_timeout_ms=10**9, consumer_group_assignors=("uniform", "optimal", "range")
        )
        self.topics = frozenset({"t0", "t1"})
        self.coordinator = GroupCoordinator(self.config)
        self.coordinator.update_metadata(image(self.topics), 0)
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, Any] = {}
        self.refused = 0

    def group(self) -> ConsumerGroup | None:
        return self.coordinator.groups.typed(GROUP, ConsumerGroup)

    def heartbeat(self, member: str, now: int, *, epoch: int | None = None, **fields: Any) -> None:
        if epoch is None:
            epoch = self.epochs.get(member, 0)
        joining = epoch == 0
        req = ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout_ms=10**9 if joining else -1,
            subscribed_topic_names=fields.get("names", ("t0",) if joining else None),
            subscribed_topic_regex=fields.get("regex"),
            server_assignor=fields.get("assignor"),
            topic_partitions=self.owned.get(member, ()) if epoch >= 0 else None,
        )
        result = self.coordinator.consumer_group_heartbeat(req, now, now)
        self.coordinator.advance(now)
        resp = result.response_for(now)
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        if result.refused is not None:
            self.refused += 1
        if epoch < 0 and resp.error.value == 0:
            self.epochs.pop(member, None)
            self.owned.pop(member, None)
        elif resp.error.value == 0:
            self.epochs[member] = resp.member_epoch
            if resp.assignment is not None:
                self.owned[member] = resp.assignment


#: mostly the same topics (the group homogeneous: its target kept), sometimes others
names = st.one_of(
    st.just(("t0", "t1")),
    st.just(("t0", "t1")),
    st.sets(st.sampled_from(TOPICS), max_size=3).map(lambda s: tuple(sorted(s))),
)
step = st.one_of(
    st.tuples(
        st.just("beat"),
        st.sampled_from(MEMBERS),
        st.one_of(st.none(), names),
        st.one_of(st.none(), st.none(), st.sampled_from(("", *REGEXES))),
        st.sampled_from(ASSIGNORS),
        st.booleans(),
        st.booleans(),
    ),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("fenced"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("topic"), st.sampled_from(TOPICS)),
    st.tuples(st.just("restart")),
)


@settings(max_examples=150, deadline=None)
@given(history=st.lists(step, min_size=1, max_size=50))
def test_group_counts_are_the_members_own(history: list[tuple[Any, ...]]) -> None:
    side = Side()
    for step_number, action in enumerate(history, start=1):
        now = step_number * STEP_MS
        kind = action[0]
        if kind == "beat":
            _, member, topic_names, regex, assignor, fail, twice = action
            fields: dict[str, Any] = {"regex": regex, "assignor": assignor}
            if topic_names is not None or member not in side.epochs:
                fields["names"] = topic_names if topic_names is not None else ("t0",)
            if fail:
                with failing_after_target():
                    side.heartbeat(member, now, **fields)
            else:
                side.heartbeat(member, now, **fields)
            if twice:  # (the member reconciles: the group settles on its target)
                side.heartbeat(member, now + 1)
        elif kind == "leave":
            if action[1] in side.epochs:
                side.heartbeat(action[1], now, epoch=-1)
        elif kind == "fenced":
            side.heartbeat(action[1], now, epoch=side.epochs.get(action[1], 0) + 7)
        elif kind == "topic":
            side.topics = side.topics | {action[1]}
            side.coordinator.update_metadata(image(side.topics), now)
        else:
            records = side.coordinator.snapshot_records()
            side.coordinator = GroupCoordinator.from_records(records, now, side.config)
            side.coordinator.update_metadata(image(side.topics), now)
        check(side.group())


def test_histories_reach_refusals_regexes_and_kept_targets() -> None:
    """The strategy above reaches what it is meant to check: refused joins after a write, regular
    expressions resolved, kept targets with sorted members."""
    side = Side()
    side.heartbeat("a", 1, names=("t0", "t1"), assignor="uniform")
    side.heartbeat("b", 2, names=("t0", "t1"))
    side.heartbeat("c", 3, names=("t0", "t1"))
    group = side.group()
    assert group is not None and group.kept_target is not None
    check(group)
    assert group.kept_target.kept._order == ["a", "b", "c"]
    before = dict(group.subscriptions)
    with failing_after_target():
        side.heartbeat("d", 4, names=("t1",), assignor="optimal")
    side.heartbeat("e", 5, names=("t1",), assignor="optimal")
    assert side.refused == 1 and group.subscriptions == {(("t1",), None): 1, **before}
    assert group.assignor_votes == {"uniform": 1, "optimal": 1}
    check(group)
    side.coordinator.update_metadata(image(frozenset({"t0", "t1", "x0"})), 6)
    side.heartbeat("f", 7, names=(), regex="x.*")
    side.heartbeat("f", 8)
    assert "x0" in subscribed_names(group) and group.resolved_regexes
    check(group)
    check(group)
