"""A refused request changes nothing: the cases where the coordinator used to change a group (and write
records) before finding that it had to refuse the request. The general property is held by
tests/property/test_refused_requests.py."""

from __future__ import annotations

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.model.errors import ErrorCode
from tests.coordinator.consumer_harness import ConsumerHarness
from tests.coordinator.test_migration import classic_group
from tests.group_views import consumer_groups


def test_a_consumer_join_on_a_full_classic_group_is_refused_before_the_upgrade() -> None:
    """Given a Stable classic group with exactly ``consumer_group_max_size`` (2) members;
    when a new member joins with ConsumerGroupHeartbeat (epoch 0);
    then GROUP_MAX_SIZE_REACHED with Kafka's message, no record is written, and the group is still the same
    classic group: same members, generation, state and timers (Kafka checks the size right after its
    conversion, whose records are never appended when the request fails)."""
    h = ConsumerHarness(consumer_group_max_size=2)
    formed = classic_group(h, 2)
    group = h.group()
    generation, members = group.generation, dict(group.members)
    timers = h.coordinator.timers.scheduled()
    mark = h.mark()

    response = h.hb("", 0, topics=["foo"])

    assert response.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert response.error_message == "The consumer group has reached its maximum capacity of 2 members."
    assert h.records_since(mark) == []
    assert consumer_groups(h.coordinator) == {}
    assert h.group() is group
    assert group.state is ClassicGroupState.STABLE
    assert (group.generation, group.members) == (generation, members)
    assert sorted(group.members) == sorted(formed.members)
    assert h.coordinator.timers.scheduled() == timers


def test_a_classic_member_of_the_full_group_still_heartbeats_after_the_refusal() -> None:
    """Given the refused consumer join above;
    when the classic members heartbeat;
    then they are answered NONE: their group did not change under them."""
    h = ConsumerHarness(consumer_group_max_size=2)
    formed = classic_group(h, 2)
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    for member_id in formed.members:
        assert h.heartbeat(member_id, formed.generation) is ErrorCode.NONE


def test_a_consumer_join_with_room_left_still_upgrades() -> None:
    """Given a classic group of 2 members and ``consumer_group_max_size`` 3;
    when a new member joins with ConsumerGroupHeartbeat;
    then the group is upgraded: the classic group's tombstone comes first, the consumer group's records
    follow, and the joiner is a member."""
    h = ConsumerHarness(consumer_group_max_size=3)
    classic_group(h, 2)
    mark = h.mark()
    response = h.hb("", 0, topics=["foo"])
    assert response.error is ErrorCode.NONE
    records = h.records_since(mark)
    assert records[0].key.group_id == h.group_id and records[0].value is None
    assert h.has_group() is False
    assert response.member_id in h.cg().members


def test_a_refused_join_creates_no_group() -> None:
    """Given no group;
    when a JoinGroup for it is refused (no protocols: INCONSISTENT_GROUP_PROTOCOL);
    then no group exists afterwards and nothing was written."""
    h = ConsumerHarness()
    mark = h.mark()
    assert h.join("", group_id="fresh", protocols=()).response.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert not h.has_group("fresh")
    assert h.records_since(mark) == []
