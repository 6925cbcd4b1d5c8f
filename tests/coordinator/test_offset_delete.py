"""Scenarios O12-O16 of docs/protocol.md: OffsetDelete (KIP-496) against every group type. Each group type
says whether offsets may be deleted at all and which topics it subscribes to (``GroupType``); the offsets
of a subscribed topic are refused one by one."""

from __future__ import annotations

from regroup.coordinator.classic.rebalance import join_phase_key
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import FetchedOffset
from tests.coordinator.consumer_harness import ConsumerHarness
from tests.coordinator.test_migration import classic_group

E = ErrorCode


def _committed(h: ConsumerHarness, topic: str, partitions: list[int]) -> tuple[FetchedOffset, ...]:
    ((name, rows),) = h.fetch({topic: partitions}).topics
    assert name == topic
    return rows


def test_O12_unknown_or_empty_group_id() -> None:
    """Given no group "group";
    when OffsetDelete names it, or names the group id "";
    then GROUP_ID_NOT_FOUND, respectively INVALID_GROUP_ID, with no partitions, and nothing is written."""
    h = ConsumerHarness()
    h.topics(foo=2)
    missing = h.delete_offsets({"foo": [0]})
    assert (missing.error, missing.topics) == (E.GROUP_ID_NOT_FOUND, ())
    empty = h.delete_offsets({"foo": [0]}, group_id="")
    assert (empty.error, empty.topics) == (E.INVALID_GROUP_ID, ())
    assert h.records == []


def test_O13_an_empty_classic_group_loses_the_named_offsets_only() -> None:
    """Given a simple group with offsets for foo-0, foo-1 and bar-0;
    when OffsetDelete names foo-0, bar-0 and bar-1 (never committed);
    then every partition is answered NONE, exactly the foo-0 and bar-0 offsets are tombstoned, and foo-1's
    offset is still fetched."""
    h = ConsumerHarness()
    h.topics(foo=2, bar=2)
    h.commit("", -1, {("foo", 0): 5, ("foo", 1): 6, ("bar", 0): 7})
    mark = h.mark()
    response = h.delete_offsets({"foo": [0], "bar": [0, 1]})
    assert response.error is E.NONE
    assert response.topics == (("foo", ((0, E.NONE),)), ("bar", ((0, E.NONE), (1, E.NONE))))
    assert [(r.key.topic, r.key.partition, r.value) for r in h.records_since(mark)] == [  # type: ignore[union-attr]
        ("foo", 0, None),
        ("bar", 0, None),
    ]
    assert _committed(h, "foo", [0, 1]) == (FetchedOffset(partition=0), FetchedOffset(partition=1, offset=6))


def test_a_partition_named_twice_is_deleted_once_and_the_rest_in_order() -> None:
    """Given a simple group with offsets for foo-0..2;
    when OffsetDelete names foo-2, foo-0, foo-2 again and foo-1;
    then each is answered NONE, and foo-2, foo-0, foo-1 are tombstoned once each, in that order."""
    h = ConsumerHarness()
    h.topics(foo=3)
    h.commit("", -1, {("foo", 0): 5, ("foo", 1): 6, ("foo", 2): 7})
    mark = h.mark()
    response = h.delete_offsets({"foo": [2, 0, 2, 1]})
    assert response.topics == (("foo", ((2, E.NONE), (0, E.NONE), (2, E.NONE), (1, E.NONE))),)
    assert [(r.key.topic, r.key.partition, r.value) for r in h.records_since(mark)] == [  # type: ignore[union-attr]
        ("foo", 2, None),
        ("foo", 0, None),
        ("foo", 1, None),
    ]


def test_O14_a_classic_consumer_group_keeps_the_offsets_of_its_subscribed_topics() -> None:
    """Given a Stable classic group of consumers subscribed to foo, with offsets for foo-0 and bar-0;
    when OffsetDelete names foo-0 and bar-0;
    then foo-0 is GROUP_SUBSCRIBED_TO_TOPIC and kept, bar-0 is deleted."""
    h = ConsumerHarness()
    formed = classic_group(h)
    h.topics(foo=6, bar=1)
    h.commit(formed.leader, formed.generation, {("foo", 0): 3, ("bar", 0): 4})
    mark = h.mark()
    response = h.delete_offsets({"foo": [0], "bar": [0]})
    assert response.topics == (("foo", ((0, E.GROUP_SUBSCRIBED_TO_TOPIC),)), ("bar", ((0, E.NONE),)))
    assert [(r.key.topic, r.value) for r in h.records_since(mark)] == [("bar", None)]  # type: ignore[union-attr]
    assert _committed(h, "foo", [0]) == (FetchedOffset(partition=0, offset=3),)


def test_O15_a_classic_group_of_other_clients_refuses_while_it_has_members() -> None:
    """Given a Stable classic group whose protocol type is not "consumer" (its subscriptions cannot be read);
    when OffsetDelete names any partition;
    then NON_EMPTY_GROUP and nothing is written; once the group is empty the offsets can be deleted."""
    h = ConsumerHarness()
    h.topics(foo=1)
    call = h.join_new(protocol_type="connect")
    if not call.done:  # the join phase of a new group waits for its timer
        deadline = h.coordinator.timers.deadline(join_phase_key("group"))
        assert deadline is not None
        h.sleep_until(deadline)
    joined = call.response
    assert joined.error is E.NONE
    assert h.sync(joined.member_id, joined.generation_id).response.error is E.NONE
    assert h.group().protocol_type == "connect" and h.group().state.value == "Stable"
    h.commit(joined.member_id, joined.generation_id, {("foo", 0): 9})
    mark = h.mark()
    refused = h.delete_offsets({"foo": [0]})
    assert (refused.error, refused.topics) == (E.NON_EMPTY_GROUP, ())
    assert h.records_since(mark) == []
    h.leave(joined.member_id)
    assert h.delete_offsets({"foo": [0]}).topics == (("foo", ((0, E.NONE),)),)
    assert _committed(h, "foo", [0]) == (FetchedOffset(partition=0),)


def test_O16_a_consumer_group_keeps_subscribed_topics_and_unknown_partitions_are_refused() -> None:
    """Given a KIP-848 consumer group whose member subscribes to foo, with offsets for foo-0 and bar-0;
    when OffsetDelete names foo-0, bar-0, bar-7 (bar has 1 partition) and nope-0 (no such topic);
    then foo-0 GROUP_SUBSCRIBED_TO_TOPIC, bar-0 NONE (deleted), bar-7 and nope-0 UNKNOWN_TOPIC_OR_PARTITION."""
    h = ConsumerHarness()
    h.topics(foo=2, bar=1)
    joined = h.hb("", 0, topics=["foo"])
    h.commit(joined.member_id, joined.member_epoch, {("foo", 0): 1, ("bar", 0): 2})
    mark = h.mark()
    response = h.delete_offsets({"foo": [0], "bar": [0, 7], "nope": [0]})
    assert response.topics == (
        ("foo", ((0, E.GROUP_SUBSCRIBED_TO_TOPIC),)),
        ("bar", ((0, E.NONE), (7, E.UNKNOWN_TOPIC_OR_PARTITION))),
        ("nope", ((0, E.UNKNOWN_TOPIC_OR_PARTITION),)),
    )
    assert [(r.key.topic, r.value) for r in h.records_since(mark)] == [("bar", None)]  # type: ignore[union-attr]
    assert _committed(h, "bar", [0]) == (FetchedOffset(partition=0),)


def test_describe_groups_v6_says_a_consumer_group_is_not_classic() -> None:
    """Given a KIP-848 consumer group;
    when DescribeGroups asks for it and for a missing group at v5 and at v6;
    then v5 answers "Dead" without error for both (Kafka), v6 GROUP_ID_NOT_FOUND with a message (KIP-1043)."""
    h = ConsumerHarness()
    h.topics(foo=1)
    h.hb("", 0, topics=["foo"])
    old = h.describe("group", "missing", version=5)
    assert [(d.error, d.state, d.error_message) for d in old] == [(E.NONE, "Dead", None)] * 2
    new = h.describe("group", "missing", version=6)
    assert [(d.error, d.error_message) for d in new] == [
        (E.GROUP_ID_NOT_FOUND, "Group group is not a classic group."),
        (E.GROUP_ID_NOT_FOUND, "Group missing not found."),
    ]
