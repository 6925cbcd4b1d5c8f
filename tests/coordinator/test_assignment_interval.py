"""KIP-1263's assignment batching (``group.consumer.assignment.interval.ms``, a group's own
``consumer.assignment.interval.ms``): a consumer group computes its next target no sooner than the interval
after its last. Within it, a member that joins is given the last target's epoch and nothing, the members keep
reconciling to the last target, and the group epoch moves on; when the interval ends, a timer computes the
target for the group epoch reached, once, however many changes came meanwhile. A group that never had a target
(or whose last target's time is not known) computes at once, and so does every group with no interval (the
default, as before Kafka 4.3). The last target's time is in its record, so a reloaded coordinator keeps the
interval running."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.group_config import GroupConfig
from regroup.model.errors import ErrorCode
from regroup.records.consumer import ConsumerGroupTargetAssignmentMetadataValue
from tests.coordinator.consumer_harness import ConsumerHarness, named

INTERVAL = 1_000


def _harness(interval: int = INTERVAL, session_ms: int = 45_000) -> ConsumerHarness:
    h = ConsumerHarness(consumer_group_assignment_interval_ms=interval, consumer_group_session_timeout_ms=session_ms)
    h.topics(foo=6)
    h.now_ms = 10_000
    return h


def _target_epochs(h: ConsumerHarness) -> list[str]:
    return [line for line in h.written() if line.startswith("target-epoch")]


def test_within_the_interval_the_next_target_waits_for_it() -> None:
    h = _harness()
    a = h.join_cg()
    assert (a.member_epoch, named(a.assignment)) == (1, {"foo": [0, 1, 2, 3, 4, 5]})  # (no target yet: at once)
    h.now_ms += 100
    b = h.join_cg()
    assert b.error is ErrorCode.NONE
    # the group epoch moved to 2; the target stays at 1, whose epoch the new member takes, with nothing
    assert (h.cg().group_epoch, h.cg().assignment_epoch) == (2, 1)
    assert (b.member_epoch, named(b.assignment)) == (1, {})
    assert h.cg().state().value == "Assigning"
    h.now_ms += 200
    c = h.join_cg()
    assert (h.cg().group_epoch, h.cg().assignment_epoch, c.member_epoch) == (3, 1, 1)
    # the interval ends 1,000 ms after the first target: the timer computes one target, for epoch 3
    h.sleep_until(10_000 + INTERVAL - 1)
    assert h.cg().assignment_epoch == 1
    h.sleep_until(10_000 + INTERVAL)
    assert h.cg().assignment_epoch == 3 and _target_epochs(h) == ["target-epoch 3"]
    assert sorted(sum(map(len, target.values())) for target in h.cg().targets.values()) == [2, 2, 2]


def test_the_members_heartbeat_against_the_last_target_meanwhile() -> None:
    h = _harness()
    a = h.join_cg()
    h.now_ms += 10
    h.join_cg()
    again = h.hb(a.member_id, a.member_epoch, owned={"foo": [0, 1, 2, 3, 4, 5]})
    assert (again.error, again.member_epoch) == (ErrorCode.NONE, 1)
    assert h.cmember(a.member_id).state.value == "stable"


def test_a_group_without_an_interval_computes_at_once() -> None:
    h = _harness(0)
    h.join_cg()
    h.now_ms += 1
    b = h.join_cg()
    assert (h.cg().group_epoch, h.cg().assignment_epoch, b.member_epoch) == (2, 2, 2)
    # (no time kept: the records are those of a coordinator without the setting)
    epochs = [r.value for r in h.records if type(r.value).__name__ == "ConsumerGroupTargetAssignmentMetadataValue"]
    assert [(v.assignment_epoch, v.assignment_timestamp_ms) for v in epochs] == [(1, 0), (2, 0)]


def test_a_group_s_own_interval_overrides_the_broker_s() -> None:
    h = _harness(0)
    h.coordinator.group_configs["group"] = GroupConfig(consumer_assignment_interval_ms=500)
    h.join_cg()
    h.now_ms += 100
    h.join_cg()
    assert (h.cg().group_epoch, h.cg().assignment_epoch) == (2, 1)
    h.sleep(400)
    assert h.cg().assignment_epoch == 2
    h.coordinator.group_configs["group"] = GroupConfig(consumer_assignment_interval_ms=0)
    h.now_ms += 1
    h.join_cg()
    assert h.cg().assignment_epoch == 3  # (no interval any more: at once)


def test_the_interval_outlives_a_reload() -> None:
    h = _harness()
    h.join_cg()
    assert h.cg().assignment_timestamp_ms == 10_000
    h.reload()
    assert h.cg().assignment_timestamp_ms == 10_000
    h.now_ms += 300
    h.join_cg()
    assert (h.cg().group_epoch, h.cg().assignment_epoch) == (2, 1)
    h.sleep_until(10_000 + INTERVAL)
    assert h.cg().assignment_epoch == 2


def test_a_computation_after_the_interval_within_a_heartbeat() -> None:
    """A heartbeat that bumps the epoch once the interval has passed computes within, as without one."""
    h = _harness()
    h.join_cg()
    h.now_ms += INTERVAL
    b = h.join_cg()
    assert (h.cg().assignment_epoch, b.member_epoch) == (2, 2)
    assert h.cg().assignment_timestamp_ms == 10_000 + INTERVAL


def test_the_target_s_time_survives_serialization_and_an_older_record_reads_as_unknown() -> None:
    from regroup.records import serde
    from regroup.records.builders import new_consumer_group_target_assignment_epoch_record

    timed = new_consumer_group_target_assignment_epoch_record("g", 4, 1_234)
    assert serde.decode(serde.encode(timed)) == timed
    untimed = new_consumer_group_target_assignment_epoch_record("g", 4)
    encoded = serde.encode(untimed)
    assert b"at_ms" not in encoded  # (byte for byte what a coordinator without the setting wrote)
    assert serde.decode(encoded) == untimed


@st.composite
def _story(draw: st.DrawFn) -> tuple[int, list[tuple[str, int]]]:
    """An interval and steps (an action, then a wait), the waits often just short of, at or past the interval."""
    interval = draw(st.integers(1, 3_000))
    near = st.sampled_from((0, 1, interval - 1, interval, interval + 1))
    wait = st.one_of(near, st.integers(0, 1_500))
    steps = draw(st.lists(st.tuples(st.sampled_from(("join", "leave", "heartbeat", "wait")), wait), max_size=30))
    return interval, steps


@settings(max_examples=100, deadline=None)
@given(_story())
def test_targets_are_at_least_an_interval_apart_and_the_last_changes_are_assigned(
    story: tuple[int, list[tuple[str, int]]],
) -> None:
    """Over any joins, leaves, heartbeats and waits: two target computations are never closer than the interval;
    and once every member has heartbeated after the last change (a leave alone computes nothing, as without an
    interval) and an interval has passed, the target is at the group epoch."""
    interval, steps = story
    # (no member's session or revocation times out within a story: leaving is a step of its own)
    h = _harness(interval, session_ms=3_600_000)
    patient = {"rebalance_timeout_ms": 3_600_000}
    members = [h.join_cg(**patient).member_id]
    for action, wait in steps:
        if action == "join" or (action != "wait" and not members):
            members.append(h.join_cg(**patient).member_id)
        elif action == "leave":
            h.hb(members.pop(wait % len(members)), -1)
        elif action == "heartbeat":
            member_id = members[wait % len(members)]
            answer = h.hb(member_id, h.cmember(member_id).member_epoch)
            assert answer.error is ErrorCode.NONE, answer
        h.sleep(wait)
    for member_id in members:
        h.hb(member_id, h.cmember(member_id).member_epoch)
    h.sleep(interval)
    times = [
        r.value.assignment_timestamp_ms
        for r in h.records
        if isinstance(r.value, ConsumerGroupTargetAssignmentMetadataValue)
    ]
    assert times and all(b - a >= interval for a, b in itertools.pairwise(times))
    if members:
        assert h.cg().assignment_epoch == h.cg().group_epoch
