"""Share-group membership in the core (KIP-932's ShareGroupHeartbeat), scenario by scenario: joining, the epoch
checks, the target assignment and its records, leaving, session expiry, and the errors Kafka answers."""

from __future__ import annotations

import uuid

import pytest

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import GroupCreated, MemberJoined, MemberLeft
from regroup.coordinator.share.group import ShareGroup
from regroup.model.cluster import ClusterImage, TopicImage
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupRequest
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest
from regroup.protocol.share import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from regroup.records.model import Record
from regroup.records.share import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    SharePartitionStateKey,
)

T = uuid.UUID(int=7)
U = uuid.UUID(int=9)


def coordinator(**config: int) -> GroupCoordinator:
    c = GroupCoordinator(CoordinatorConfig(**config))  # type: ignore[arg-type]
    c.update_metadata(
        ClusterImage.of(
            [TopicImage(topic_id=T, name="orders", partitions=3), TopicImage(topic_id=U, name="audit", partitions=1)]
        ),
        0,
    )
    return c


_keys = iter(range(1_000_000))


def beat(
    c: GroupCoordinator, member: str, epoch: int = 0, topics: tuple[str, ...] | None = ("orders",), now: int = 10
) -> tuple[ShareGroupHeartbeatResponse, list[object]]:
    key = ("k", next(_keys))
    req = ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=topics)
    result = c.share_group_heartbeat(req, key, now)
    response = result.response_for(key)
    assert isinstance(response, ShareGroupHeartbeatResponse)
    return response, list(result.records)


def test_given_no_group_when_a_member_joins_then_the_group_is_created_and_the_member_gets_every_partition() -> None:
    c = coordinator()
    key = ("k", -1)
    req = ShareGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, subscribed_topic_names=("orders",))
    result = c.share_group_heartbeat(req, key, 10)
    response = result.response_for(key)
    assert response.error is ErrorCode.NONE
    assert (response.member_id, response.member_epoch, response.heartbeat_interval_ms) == ("m1", 1, 5000)
    assert response.assignment == ((T, (0, 1, 2)),)
    assert response.uninitialized == ((T, (0, 1, 2)),)
    # the records, in the order they are written
    kinds = [type(r.key) for r in result.records]
    assert kinds == [
        ShareGroupMetadataKey,  # epoch 0: the group exists
        ShareGroupMemberMetadataKey,
        ShareGroupMetadataKey,  # epoch 1: a member joined
        ShareGroupTargetAssignmentMemberKey,
        ShareGroupTargetAssignmentMetadataKey,
        ShareGroupCurrentMemberAssignmentKey,
    ]
    assert result.records[2].value == ShareGroupMetadataValue(epoch=1)
    assert result.records[4].value == ShareGroupTargetAssignmentMetadataValue(assignment_epoch=1)
    assert result.records[5].value == ShareGroupCurrentMemberAssignmentValue(
        member_epoch=1, previous_member_epoch=0, assigned=((T, (0, 1, 2)),)
    )
    assert [type(e) for e in result.events][:2] == [GroupCreated, MemberJoined]


def test_given_a_member_when_a_second_joins_then_both_take_the_new_target_at_their_next_heartbeat() -> None:
    c = coordinator()
    beat(c, "m1")
    second, _ = beat(c, "m2")
    assert second.member_epoch == 2
    first, records = beat(c, "m1", epoch=1, topics=None)
    assert first.member_epoch == 2
    assert first.assignment is not None and second.assignment is not None
    one, two = dict(first.assignment)[T], dict(second.assignment)[T]
    assert set(one) | set(two) == {0, 1, 2} and not set(one) & set(two)  # 3 partitions, 2 members: no sharing
    assert sorted([len(one), len(two)]) == [1, 2]
    assert [type(r.key) for r in records] == [ShareGroupCurrentMemberAssignmentKey]


def test_given_more_members_than_partitions_then_a_partition_is_shared() -> None:
    c = coordinator()
    joins = [beat(c, member, topics=("audit",))[0] for member in ("m1", "m2", "m3")]
    assert all(j.assignment == ((U, (0,)),) for j in joins)  # one partition, three members: all share it
    answers = [beat(c, m, epoch=e, topics=None)[0] for m, e in (("m1", 1), ("m2", 2), ("m3", 3))]
    assert [a.member_epoch for a in answers] == [3, 3, 3]
    assert all(a.assignment is None for a in answers)  # unchanged: not sent again


def test_given_a_steady_member_when_nothing_changed_then_the_heartbeat_writes_nothing_and_sends_no_assignment() -> None:
    c = coordinator()
    beat(c, "m1")
    response, records = beat(c, "m1", epoch=1, topics=None)
    assert records == [] and response.assignment is None and response.member_epoch == 1


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "code", "message"),
    [
        ("", 0, ("orders",), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        ("m1", 0, None, ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."),
        ("m1", 0, (), ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."),
        ("m1", -2, None, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        ("m1", 3, None, ErrorCode.GROUP_ID_NOT_FOUND, "Share group g not found."),
        ("x" * 37, 0, ("orders",), ErrorCode.INVALID_REQUEST, "Invalid member id in the request."),
    ],
)
def test_refused_heartbeats_change_nothing(
    member: str, epoch: int, topics: tuple[str, ...] | None, code: ErrorCode, message: str
) -> None:
    c = coordinator()
    before = c.hard_state()
    key = ("k", -2)
    req = ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=topics)
    result = c.share_group_heartbeat(req, key, 10)
    response = result.response_for(key)
    assert (response.error, response.error_message) == (code, message)
    assert result.refused is code and result.records == [] and c.hard_state() == before


def test_given_a_member_when_it_sends_an_epoch_it_never_had_then_it_is_fenced_but_one_back_is_accepted() -> None:
    c = coordinator()
    beat(c, "m1")
    beat(c, "m2")
    beat(c, "m1", epoch=1, topics=None)  # m1: epoch 2, previous 1
    ahead, _ = beat(c, "m1", epoch=5, topics=None)
    assert ahead.error is ErrorCode.FENCED_MEMBER_EPOCH
    behind, _ = beat(c, "m1", epoch=1, topics=None)  # its last response was lost: accepted
    assert behind.error is ErrorCode.NONE and behind.member_epoch == 2
    unknown, _ = beat(c, "m9", epoch=2, topics=None)
    assert unknown.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_given_a_group_at_its_maximum_size_when_another_member_joins_then_it_is_refused() -> None:
    c = coordinator(share_group_max_size=1)
    beat(c, "m1")
    full, records = beat(c, "m2")
    assert full.error is ErrorCode.GROUP_MAX_SIZE_REACHED and records == []
    again, _ = beat(c, "m1", epoch=0)  # a member already in may rejoin
    assert again.error is ErrorCode.NONE


def test_given_a_member_when_it_leaves_then_its_records_are_tombstoned_and_the_epoch_moves_on() -> None:
    c = coordinator()
    beat(c, "m1")
    beat(c, "m2")
    key = ("k", -3)
    result = c.share_group_heartbeat(ShareGroupHeartbeatRequest(group_id="g", member_id="m2", member_epoch=-1), key, 20)
    assert result.response_for(key).member_epoch == -1
    tombstones = [type(r.key) for r in result.records if r.value is None]
    assert tombstones == [
        ShareGroupCurrentMemberAssignmentKey,
        ShareGroupTargetAssignmentMemberKey,
        ShareGroupMemberMetadataKey,
    ]
    assert result.records[-1].value == ShareGroupMetadataValue(epoch=3)
    assert any(isinstance(e, MemberLeft) and e.reason == "leave" for e in result.events)
    rest, _ = beat(c, "m1", epoch=1, topics=None)  # it never took epoch 2's target, and 3's is what it has
    assert rest.member_epoch == 3 and rest.assignment is None


def test_given_a_silent_member_when_its_session_expires_then_it_is_fenced() -> None:
    c = coordinator(share_group_session_timeout_ms=45_000)
    beat(c, "m1", now=0)
    result = c.advance(45_000)
    assert any(isinstance(e, MemberLeft) and e.reason == "session timeout" for e in result.events)
    group = c.groups.typed("g", ShareGroup)
    assert group is not None and not group.members


def test_other_group_types_refuse_a_share_group_id_as_kafka_does() -> None:
    c = coordinator()
    beat(c, "m1")
    key = ("k", -4)
    consumer = c.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="c1", member_epoch=1, subscribed_topic_names=("orders",), rebalance_timeout_ms=1
        ),
        key,
        10,
    )
    assert consumer.response_for(key).error is ErrorCode.GROUP_ID_NOT_FOUND
    key = ("k", -5)
    join = c.join_group(
        JoinGroupRequest(
            group_id="g",
            member_id="",
            protocol_type="consumer",
            protocols=(("range", b""),),
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
        ),
        key,
        10,
    )
    assert join.response_for(key).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_replaying_the_records_rebuilds_the_groups() -> None:
    c = coordinator()
    records: list[object] = []
    for member in ("m1", "m2", "m3"):
        records += beat(c, member)[1]
    records += beat(c, "m1", epoch=1, topics=("orders", "audit"))[1]
    rebuilt = GroupCoordinator.from_records(c.snapshot_records(), 100)
    assert rebuilt.hard_state() == c.hard_state()
    live, again = c.groups.typed("g", ShareGroup), rebuilt.groups.typed("g", ShareGroup)
    assert live is not None and again is not None
    assert (again.group_epoch, again.assignment_epoch, again.members, again.targets) == (
        live.group_epoch,
        live.assignment_epoch,
        live.members,
        live.targets,
    )


def test_a_member_is_told_of_its_partitions_without_state_at_every_heartbeat_until_they_have_it() -> None:
    """A heartbeat names the member's assigned partitions that have no state yet (the shell initializes them),
    every heartbeat, not only the one that assigned them; none once they all have state; and again any whose
    state is deleted (its tombstone replayed) while the member keeps it."""
    c = coordinator()
    assert beat(c, "m1")[0].uninitialized == ((T, (0, 1, 2)),)
    assert beat(c, "m1", epoch=1, topics=None)[0].uninitialized == ((T, (0, 1, 2)),)
    c.initialize_share_partitions("g", {(T, 0): 0, (T, 2): 0}, None, 20)
    assert beat(c, "m1", epoch=1, topics=None)[0].uninitialized == ((T, (1,)),)
    c.initialize_share_partitions("g", {(T, 1): 0}, None, 20)
    assert beat(c, "m1", epoch=1, topics=None)[0].uninitialized == ()
    assert beat(c, "m1", epoch=1, topics=None)[0].uninitialized == ()
    c.replay(Record(SharePartitionStateKey(group_id="g", topic_id=T, partition=2), None))
    assert beat(c, "m1", epoch=1, topics=None)[0].uninitialized == ((T, (2,)),)
    c.initialize_share_partitions("g", {(T, 2): 0}, None, 20)
    assert beat(c, "m1", epoch=1, topics=None)[0].uninitialized == ()
    wider, _ = beat(c, "m1", epoch=1, topics=("orders", "audit"))  # (a new assignment: looked at again)
    assert (wider.member_epoch, wider.uninitialized) == (2, ((U, (0,)),))
    c.initialize_share_partitions("g", {(U, 0): 0}, None, 20)
    assert beat(c, "m1", epoch=2, topics=None)[0].uninitialized == ()
    c.replay(Record(SharePartitionStateKey(group_id="g", topic_id=T, partition=1), None))
    assert beat(c, "m1", epoch=2, topics=None)[0].uninitialized == ((T, (1,)),)
