"""KIP-848 consumer groups: scenarios K01-K21 and K26 of docs/protocol.md (ConsumerGroupHeartbeat,
reconciliation, timeouts, static members, states, ConsumerGroupDescribe, targets computed aside), plus offsets,
deletion and replay of consumer groups.

Each scenario checks the response and the exact records the operation wrote (``h.written``: one line per
record, members named A, B, ...), in Kafka's order (``GroupMetadataManager.consumerGroupHeartbeat``)."""

from __future__ import annotations

import pytest

from regroup.coordinator.consumer.group import ConsumerGroupMemberState, ConsumerGroupState
from regroup.model.errors import ErrorCode
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest
from regroup.protocol.offsets import OffsetFetchRequest, OffsetFetchResponse
from tests.coordinator.consumer_harness import ConsumerHarness, lines, named
from tests.group_views import consumer_groups

SESSION_MS = 45_000
ALL = "foo=0,1,2,3,4,5"


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.topics(foo=6, bar=3)
    return harness


def _id(response: object) -> str:
    member_id = getattr(response, "member_id", None)
    assert member_id, response
    return str(member_id)


def test_k01_first_member_gets_everything(h: ConsumerHarness) -> None:
    """Given topic foo with 6 partitions and no group;
    when a member joins (epoch 0, subscribed to foo, rebalance timeout 5 s, no owned partitions);
    then it gets a member id, epoch 1, heartbeat interval 5 s and all of foo; the group is created at epoch 1
    and Kafka's records are written in order: member metadata, subscription metadata, group epoch, target,
    target epoch, current assignment."""
    response = h.hb("", 0, topics=["foo"], owned={}, rebalance_timeout_ms=5000)
    assert response.error is ErrorCode.NONE
    assert response.member_epoch == 1
    assert response.heartbeat_interval_ms == 5000
    assert named(response.assignment) == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.written({_id(response): "A"}) == [
        "member A foo",
        "subscription foo:6",
        "epoch 1",
        f"target A {ALL}",
        "target-epoch 1",
        f"current A epoch=1 prev=0 stable assigned={ALL} revoking=-",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": {"foo": [0]}}, "TopicPartitions must be empty when (re-)joining."),
        ({"topics": []}, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."),
    ],
)
def test_k02_join_validation(h: ConsumerHarness, kwargs: dict[str, object], message: str) -> None:
    """Given no group;
    when a join (epoch 0) lacks its rebalance timeout, reports owned partitions or subscribes to nothing;
    then INVALID_REQUEST with Kafka's message, and nothing is written."""
    args: dict[str, object] = {"topics": ["foo"], **kwargs}
    response = h.hb("", 0, **args)  # type: ignore[arg-type]
    assert response.error is ErrorCode.INVALID_REQUEST
    assert response.error_message == message
    assert h.records == []
    assert "group" not in consumer_groups(h.coordinator)


def test_k02_join_with_null_partitions_is_invalid(h: ConsumerHarness) -> None:
    """Given no group;
    when a join sends null TopicPartitions (not the empty list);
    then INVALID_REQUEST and nothing is written."""
    call = h._submit(
        h.coordinator.consumer_group_heartbeat,
        ConsumerGroupHeartbeatRequest(
            group_id="group", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",)
        ),
    )
    assert call.response.error is ErrorCode.INVALID_REQUEST
    assert h.records == []


def test_k02_other_validations(h: ConsumerHarness) -> None:
    """Given no group;
    when a heartbeat has epoch > 0 without a member id, an epoch below -2, epoch -2 without an instance id,
    or a blank group id, instance id or rack id;
    then INVALID_REQUEST each time, and nothing is written."""
    assert h.hb("", 3).error is ErrorCode.INVALID_REQUEST  # epoch > 0 needs a member id
    assert h.hb("m", -3).error is ErrorCode.INVALID_REQUEST
    assert h.hb("m", -2).error is ErrorCode.INVALID_REQUEST  # static leave needs an instance id
    assert h.hb("", 0, topics=["foo"], group_id=" ").error is ErrorCode.INVALID_REQUEST
    assert h.hb("", 0, topics=["foo"], instance_id=" ").error is ErrorCode.INVALID_REQUEST
    assert h.hb("", 0, topics=["foo"], rack_id="").error is ErrorCode.INVALID_REQUEST
    assert h.records == []


def test_k03_regex_subscription_resolves_against_topics(h: ConsumerHarness) -> None:
    """Given topics foo-1 (2 partitions) and foo-2 (2);
    when a member joins with the regex ``foo-.*``;
    then the group resolves the regex asynchronously, as Kafka does: the joining heartbeat writes the member
    and an empty target (the regex adds nothing yet); the resolution, a write of its own due at once, records
    what the regex matched, the subscription metadata and a group epoch bump; the member's next heartbeat
    gets both topics from the target of the new epoch."""
    h.topics(**{"foo-1": 2, "foo-2": 2})
    response = h.hb("", 0, regex="foo-.*")
    names = {_id(response): "A"}
    assert response.error is ErrorCode.NONE
    assert response.assignment == ()
    assert h.written(names) == [
        "member A - regex=foo-.*",
        "epoch 1",
        "target A -",
        "target-epoch 1",
        "current A epoch=1 prev=0 stable assigned=- revoking=-",
    ]
    assert h.coordinator.next_deadline() == h.now_ms  # the resolution is due at once
    h.sleep(0)
    assert h.written(names) == ["regex foo-.* = foo-1,foo-2", "subscription foo-1:2 foo-2:2", "epoch 2"]
    nxt = h.hb(_id(response), response.member_epoch)
    assert nxt.member_epoch == 2
    assert named(nxt.assignment) == {"foo-1": [0, 1], "foo-2": [0, 1]}
    assert h.written(names) == [
        "target A foo-1=0,1 foo-2=0,1",
        "target-epoch 2",
        "current A epoch=2 prev=1 stable assigned=foo-1=0,1 foo-2=0,1 revoking=-",
    ]


def test_k03_regex_refresh_after_the_cluster_changes(h: ConsumerHarness) -> None:
    """Given a member subscribed to ``foo-.*``, resolved to foo-1 and foo-2 (2 partitions each);
    when foo-2 grows to 3 partitions, and later foo-3 and zzz appear;
    then the image change writes nothing by itself; the member's next heartbeat refreshes the subscription
    metadata (foo-2:3) and gets the new partition; a new topic is matched only by a resolution, which a
    heartbeat asks for once the last one is 10 s old; the topic then reaches the member's next heartbeat."""
    h.topics(**{"foo-1": 2, "foo-2": 2})
    first = h.hb("", 0, regex="foo-.*")
    h.sleep(0)
    a = h.hb(_id(first), first.member_epoch)
    names = {_id(first): "A"}
    h.topics(**{"foo-1": 2, "foo-2": 3})
    assert h.written() == []
    grown = h.hb(_id(first), a.member_epoch)
    assert named(grown.assignment) == {"foo-1": [0, 1], "foo-2": [0, 1, 2]}
    assert h.written(names)[:2] == ["subscription foo-1:2 foo-2:3", "epoch 3"]
    h.topics(zzz=1, **{"foo-1": 2, "foo-2": 3, "foo-3": 1})
    early = h.hb(_id(first), grown.member_epoch)  # the last resolution is not 10 s old: no new one
    assert h.coordinator.next_deadline() != h.now_ms and early.assignment is None
    h.sleep(10_001)
    h.hb(_id(first), early.member_epoch)
    h.sleep(0)
    assert h.written(names) == [
        "regex foo-.* = foo-1,foo-2,foo-3",
        "subscription foo-1:2 foo-2:3 foo-3:1",
        "epoch 4",
    ]
    last = h.hb(_id(first), early.member_epoch)
    assert named(last.assignment) == {"foo-1": [0, 1], "foo-2": [0, 1, 2], "foo-3": [0]}


def test_k03_a_first_resolution_over_many_names_is_matched_aside() -> None:
    """Given offloading the matching from three names, topics foo-1, foo-2 and bar (and an internal one);
    when a member joins with ``foo-.*`` and the resolution falls due;
    then the resolution writes nothing and hands the matching out (one at a time: a resolution due meanwhile,
    for member B's new ``ba.``, waits for it); foo-3 is created before it lands; when it lands, the group is
    resolved against the cluster as it is then, foo-3 matched within, and writes what a resolution within would
    have. A group deleted and created anew meanwhile drops the work; work that failed is matched within."""
    from regroup.coordinator.asides import outcome_of
    from regroup.coordinator.consumer import subscriptions

    subscriptions._MATCHED.pop("foo-.*", None)  # (nothing matched before, whatever ran earlier in this process)
    h = ConsumerHarness(consumer_group_regex_offload_names=3)
    h.topics(**{"foo-1": 2, "foo-2": 2, "bar": 1, "__consumer_offsets": 1})
    response = h.hb("", 0, regex="foo-.*")
    names = {_id(response): "A"}
    h.sleep(0)
    assert h.written(names) == []
    (aside,) = h.last.asides
    assert h.cg().regex_aside is aside
    h.topics(**{"foo-1": 2, "foo-2": 2, "bar": 1, "__consumer_offsets": 1, "foo-3": 1})
    joined = h.hb("", 0, regex="ba.")  # (a new regex: a resolution due at once, which waits for the work out)
    names[_id(joined)] = "B"
    h.sleep(0)
    assert h.written(names) == [] and not h.last.asides
    outcome = outcome_of(aside)
    assert outcome == {"foo-.*": {"foo-1": True, "foo-2": True, "bar": False, "__consumer_offsets": False}}
    h._collect(h.coordinator.land(aside, outcome, h.now_ms))
    assert h.written(names) == [
        "regex ba. = bar",
        "regex foo-.* = foo-1,foo-2,foo-3",
        "subscription bar:1 foo-1:2 foo-2:2 foo-3:1",
        "epoch 3",
    ]
    assert h.cg().regex_aside is None and not h.last.asides
    # a failure: matched within when it lands
    subscriptions._MATCHED.pop("bar|foo-1", None)
    other = h.hb("", 0, group_id="other", regex="bar|foo-1")
    h.sleep(0)
    (failing,) = h.last.asides
    h._collect(h.coordinator.land(failing, RuntimeError("worker gone"), h.now_ms))
    assert h.written({_id(other): "B"}) == ["regex bar|foo-1 = bar,foo-1", "subscription bar:1 foo-1:2", "epoch 2"]
    # a group deleted and created anew meanwhile: the work is dropped
    subscriptions._MATCHED.pop("foo-2", None)
    third = h.hb("", 0, group_id="third", regex="foo-2")
    h.sleep(0)
    (dropped,) = h.last.asides
    h.hb(_id(third), -1, group_id="third")
    h.delete_groups("third")
    h.hb("", 0, group_id="third", topics=["bar"])
    h._collect(h.coordinator.land(dropped, outcome_of(dropped), h.now_ms))
    assert h.written() == []


def test_k03_a_resolved_regex_is_shared_and_deleted_with_its_last_subscriber(h: ConsumerHarness) -> None:
    """Given member A subscribed to ``foo-.*``, resolved;
    when member B joins with the same regex, then A switches to the topic names [foo-1], then B leaves;
    then B's join bumps the group epoch at once and B gets a share of the matched topics without a new
    resolution; the regex's resolution is kept while B subscribes, and deleted when B leaves."""
    h.topics(**{"foo-1": 2, "foo-2": 2})
    a = h.hb("", 0, regex="foo-.*")
    h.sleep(0)
    a = h.hb(_id(a), a.member_epoch)
    b = h.hb("", 0, regex="foo-.*")
    assert b.member_epoch == 3 and h.coordinator.next_deadline() != h.now_ms
    names = {_id(a): "A", _id(b): "B"}
    assert "regex foo-.* = foo-1,foo-2" not in h.written(names)
    h.hb(_id(a), a.member_epoch, topics=["foo-1"], regex="")
    assert not any(line.startswith(("regex", "delete regex")) for line in h.written(names))
    h.hb(_id(b), -1)
    assert "delete regex foo-.*" in h.written(names)
    assert "foo-.*" not in h.cg().resolved_regexes


def test_k03_invalid_or_oversized_regex(h: ConsumerHarness) -> None:
    """Given no group;
    when a member joins with an invalid regex, one longer than 1000 characters, or one with a back-reference;
    then INVALID_REGULAR_EXPRESSION (the message names the pattern) and nothing is written (RE2 refuses
    back-references: no exponential matching)."""
    bad = h.hb("", 0, regex="foo(")
    assert bad.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert bad.error_message and "foo(" in bad.error_message
    assert h.hb("", 0, regex="a" * 1001).error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert h.hb("", 0, regex=r"(a)\1").error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert h.records == []


def test_k04_unsupported_assignor(h: ConsumerHarness) -> None:
    """Given the server assignors uniform and range;
    when a member joins naming the assignor "sticky";
    then UNSUPPORTED_ASSIGNOR, no group and nothing written."""
    response = h.hb("", 0, topics=["foo"], assignor="sticky")
    assert response.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "group" not in consumer_groups(h.coordinator)
    assert h.records == []


def test_k05_unknown_group(h: ConsumerHarness) -> None:
    """Given no group;
    when a heartbeat (epoch 1) or a leave (epoch -1) names a member of it;
    then GROUP_ID_NOT_FOUND and nothing is written."""
    assert h.hb("m", 1).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert h.hb("m", -1).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert h.records == []


def test_k06_member_epoch_validation(h: ConsumerHarness) -> None:
    """Given a member at epoch 100 whose previous epoch is 99 (group at 100; set directly, as Kafka's own
    test does);
    when it heartbeats with epoch 200, 50, or 99 while owning a partition it was never given;
    then FENCED_MEMBER_EPOCH; with 99 and owned partitions within its assignment (the response to its last
    heartbeat was lost) it is accepted and told epoch 100. Nothing is written: the member is unchanged."""
    a = _id(h.join_cg())
    member = h.cmember(a)
    member.member_epoch, member.previous_member_epoch = 100, 99
    h.cg().group_epoch = h.cg().assignment_epoch = 100
    mark = h.mark()
    assert h.hb(a, 200).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert h.hb(a, 50).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert h.hb(a, 99, owned={"foo": [9]}).error is ErrorCode.FENCED_MEMBER_EPOCH  # not a subset
    ok = h.hb(a, 99, owned={"foo": [0, 1]})
    assert ok.error is ErrorCode.NONE and ok.member_epoch == 100
    assert h.records_since(mark) == []


def test_k07_reconciliation_process(h: ConsumerHarness) -> None:
    """Given member A owning all of foo at epoch 1;
    when B joins;
    then the group epoch is 2, the target splits foo, and B is at epoch 2 with nothing (its partitions are
    not released yet: UNRELEASED_PARTITIONS). A's next heartbeat keeps epoch 1 and is told to keep only its
    share (UNREVOKED_PARTITIONS, the rest pending revocation); B gets nothing until A acknowledges by
    reporting its smaller owned set, which moves A to epoch 2 (Stable); B's next heartbeat then gets the
    released partitions. Each step writes the member's current-assignment record."""
    a = h.join_cg()
    a_id = _id(a)
    b = h.join_cg()
    b_id = _id(b)
    names = {a_id: "A", b_id: "B"}
    assert b.member_epoch == 2 and named(b.assignment) == {}
    assert h.written(names) == [
        "member B foo",
        "epoch 2",
        "target A foo=0,1,2",
        "target B foo=3,4,5",
        "target-epoch 2",
        "current B epoch=2 prev=0 unreleased_partitions assigned=- revoking=-",
    ]
    a2 = h.hb(a_id, 1)
    assert a2.member_epoch == 1 and named(a2.assignment) == {"foo": [0, 1, 2]}
    assert h.cmember(a_id).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    assert h.written(names) == ["current A epoch=1 prev=1 unrevoked_partitions assigned=foo=0,1,2 revoking=foo=3,4,5"]
    b2 = h.hb(b_id, 2)
    assert b2.assignment is None and h.cmember(b_id).assigned == {}
    a3 = h.hb(a_id, 1, owned={"foo": [0, 1, 2]})
    assert a3.member_epoch == 2 and h.cmember(a_id).state is ConsumerGroupMemberState.STABLE
    assert h.written(names) == ["current A epoch=2 prev=1 stable assigned=foo=0,1,2 revoking=-"]
    b3 = h.hb(b_id, 2)
    assert named(b3.assignment) == {"foo": [3, 4, 5]}
    assert h.written(names) == ["current B epoch=2 prev=2 stable assigned=foo=3,4,5 revoking=-"]
    assert h.cg().state() is ConsumerGroupState.STABLE


def test_k08_revocation_timeout_fences(h: ConsumerHarness) -> None:
    """Given A (rebalance timeout 3 s) told to revoke half of foo after B joined;
    when A does not acknowledge within 3 s;
    then A is fenced at the deadline, not before: its current assignment, target and metadata are deleted
    (in that order) and the group epoch is bumped."""
    a = _id(h.join_cg(rebalance_timeout_ms=3000))
    h.join_cg()
    h.hb(a, 1)  # A is told to revoke and never acknowledges
    h.sleep(2999)
    assert a in h.cg().members and h.written() == []
    h.sleep(1)
    assert a not in h.cg().members
    assert h.written({a: "A"}) == ["delete current A", "delete target A", "delete member A", "epoch 3"]


def test_k08_revocation_timer_ignored_when_epoch_moved(h: ConsumerHarness) -> None:
    """Given A told to revoke (rebalance timeout 3 s);
    when it acknowledges in time;
    then the revocation deadline passes without fencing it and nothing is written."""
    a = _id(h.join_cg(rebalance_timeout_ms=3000))
    h.join_cg()
    kept = named(h.hb(a, 1).assignment)
    h.hb(a, 1, owned=kept)  # acknowledged in time
    mark = h.mark()
    h.sleep(3000)
    assert a in h.cg().members
    assert h.records_since(mark) == []


def test_k09_session_timeout(h: ConsumerHarness) -> None:
    """Given a member alone in the group (session timeout 45 s);
    when it sends no heartbeat for 45 s;
    then it is fenced at the deadline, not before: its records are deleted, the subscription metadata
    becomes empty and the group epoch is bumped; its next heartbeat gets UNKNOWN_MEMBER_ID."""
    a = _id(h.join_cg())
    h.sleep(SESSION_MS - 1)
    assert a in h.cg().members and h.written() == []
    h.sleep(1)
    assert a not in h.cg().members
    assert h.written({a: "A"}) == [
        "delete current A",
        "delete target A",
        "delete member A",
        "subscription",
        "epoch 2",
    ]
    assert h.hb(a, 1).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_k09_heartbeat_restarts_session(h: ConsumerHarness) -> None:
    """Given a member;
    when it heartbeats every 40 s;
    then its 45 s session never expires."""
    a = _id(h.join_cg())
    h.sleep(40_000)
    h.hb(a, 1)
    h.sleep(40_000)
    assert a in h.cg().members


def test_k10_subscription_change_bumps_and_retargets(h: ConsumerHarness) -> None:
    """Given A alone, subscribed to foo;
    when it subscribes to foo and bar;
    then its metadata and the subscription metadata are rewritten, the group epoch is bumped to 2, a new
    target is computed, and A gets bar at epoch 2."""
    a = _id(h.join_cg())
    response = h.hb(a, 1, topics=["foo", "bar"])
    assert named(response.assignment) == {"bar": [0, 1, 2], "foo": [0, 1, 2, 3, 4, 5]}
    assert response.member_epoch == 2
    assert h.written({a: "A"}) == [
        "member A bar,foo",
        "subscription bar:3 foo:6",
        "epoch 2",
        f"target A bar=0,1,2 {ALL}",
        "target-epoch 2",
        f"current A epoch=2 prev=1 stable assigned=bar=0,1,2 {ALL} revoking=-",
    ]


def test_k11_rack_or_assignor_change_does_not_bump(h: ConsumerHarness) -> None:
    """Given A alone;
    when it changes its rack, its assignor and its rebalance timeout, one heartbeat each;
    then each heartbeat rewrites only A's member metadata; the group epoch stays 1."""
    a = _id(h.join_cg())
    mark = h.mark()
    h.hb(a, 1, rack_id="r1")
    h.hb(a, 1, assignor="range")
    h.hb(a, 1, rebalance_timeout_ms=9000)
    assert h.cg().group_epoch == 1
    member = h.cmember(a)
    assert (member.rack_id, member.server_assignor, member.rebalance_timeout_ms) == ("r1", "range", 9000)
    assert [type(r.key).__name__ for r in h.records_since(mark)] == ["ConsumerGroupMemberMetadataKey"] * 3


def test_k12_partitions_added(h: ConsumerHarness) -> None:
    """Given A owning foo's 6 partitions;
    when foo grows to 8 partitions;
    then A's next heartbeat refreshes the subscription metadata, bumps the group epoch and gives A all 8."""
    a = _id(h.join_cg())
    h.topics(foo=8)
    response = h.hb(a, 1)
    assert named(response.assignment) == {"foo": list(range(8))}
    assert h.written({a: "A"}) == [
        "subscription foo:8",
        "epoch 2",
        "target A foo=0,1,2,3,4,5,6,7",
        "target-epoch 2",
        "current A epoch=2 prev=1 stable assigned=foo=0,1,2,3,4,5,6,7 revoking=-",
    ]


def test_k13_leave_bumps(h: ConsumerHarness) -> None:
    """Given A and B;
    when A leaves (epoch -1);
    then it is answered with epoch -1, its records are deleted and the group epoch is bumped (the subscribed
    topics are unchanged, so no subscription metadata is written); an unknown member leaving gets
    UNKNOWN_MEMBER_ID."""
    a = _id(h.join_cg())
    h.join_cg()
    response = h.hb(a, -1)
    assert response.error is ErrorCode.NONE and response.member_epoch == -1
    assert h.written({a: "A"}) == [
        "delete current A",
        "delete target A",
        "delete member A",
        "epoch 3",
    ]
    assert h.hb("nobody", -1).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_k14_static_member_temporary_leave_and_return(h: ConsumerHarness) -> None:
    """Given static members i1 (A) and i2, settled;
    when A leaves with epoch -2 (a temporary leave) and a new process joins with instance i1;
    then the leave keeps A's assignment (current assignment written with epoch -2, group epoch unchanged);
    the new member replaces A without a rebalance: A's records are deleted, the new member's metadata, A's
    target and its current assignment are written (Kafka's ``replaceMember``), and it is brought to the
    group epoch with A's partitions."""
    a = _id(h.join_cg(instance_id="i1"))
    b = _id(h.join_cg(instance_id="i2"))
    h.settle([a, b])
    epoch = h.cg().group_epoch
    before = named(h.cmember(a).assigned)
    assert before == {"foo": [0, 1, 2]}
    leave = h.hb(a, -2, instance_id="i1")
    assert leave.error is ErrorCode.NONE and leave.member_epoch == -2
    assert h.written({a: "A"}) == ["current A epoch=-2 prev=1 stable assigned=foo=0,1,2 revoking=-"]
    back = h.hb("", 0, topics=["foo"], instance_id="i1")
    assert back.error is ErrorCode.NONE
    new = _id(back)
    assert new != a and a not in h.cg().members
    assert h.cg().group_epoch == epoch
    assert named(back.assignment) == before
    assert h.written({a: "A", new: "A2"}) == [
        "delete current A",
        "delete target A",
        "delete member A",
        "member A2 foo instance=i1",
        "target A2 foo=0,1,2",
        "current A2 epoch=0 prev=0 stable assigned=foo=0,1,2 revoking=-",
        f"current A2 epoch={epoch} prev=0 stable assigned=foo=0,1,2 revoking=-",
    ]


def test_k15_unreleased_instance_id(h: ConsumerHarness) -> None:
    """Given a static member i1 that did not leave;
    when another process joins with instance i1;
    then UNRELEASED_INSTANCE_ID and nothing is written."""
    h.join_cg(instance_id="i1")
    mark = h.mark()
    assert h.hb("", 0, topics=["foo"], instance_id="i1").error is ErrorCode.UNRELEASED_INSTANCE_ID
    assert h.records_since(mark) == []


def test_k16_fenced_and_unknown_instance(h: ConsumerHarness) -> None:
    """Given static member i1;
    when another member id heartbeats as i1, or the member heartbeats naming an unknown instance;
    then FENCED_INSTANCE_ID, then UNKNOWN_MEMBER_ID, and nothing is written."""
    a = _id(h.join_cg(instance_id="i1"))
    mark = h.mark()
    assert h.hb("m2", 1, instance_id="i1").error is ErrorCode.FENCED_INSTANCE_ID
    assert h.hb(a, 1, instance_id="nobody").error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.records_since(mark) == []


def test_k17_group_max_size(h: ConsumerHarness) -> None:
    """Given group.consumer.max.size 1 and one member;
    when a second member joins;
    then GROUP_MAX_SIZE_REACHED and nothing is written; the existing member still heartbeats."""
    h = ConsumerHarness(consumer_group_max_size=1)
    h.topics(foo=6)
    a = _id(h.join_cg())
    mark = h.mark()
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.records_since(mark) == []
    assert h.hb(a, 1).error is ErrorCode.NONE


def test_k18_preferred_assignor(h: ConsumerHarness) -> None:
    """Given two members asking for range and one for uniform;
    when the target is computed;
    then the most requested assignor (range) is used: contiguous ranges in member order, and the target
    records say so."""
    ids = [_id(h.join_cg(assignor=name)) for name in ("range", "range")]
    mark = h.mark()
    ids.append(_id(h.join_cg(assignor="uniform")))
    (described,) = h.cg_describe("group")
    assert described.assignor_name == "range"
    written = lines(h.records_since(mark), dict(zip(ids, "ABC", strict=True)))
    targets = [line for line in written if line.startswith("target ")]
    assert targets == ["target A foo=0,1", "target B foo=2,3", "target C foo=4,5"]


def test_k19_assignment_only_when_full_or_changed(h: ConsumerHarness) -> None:
    """Given a Stable member;
    when it sends a plain heartbeat, then a full one (every field set, as after a reconnect);
    then the plain one carries no assignment, the full one carries the whole assignment; neither writes."""
    a = _id(h.join_cg())
    mark = h.mark()
    assert h.hb(a, 1).assignment is None
    full = h.hb(a, 1, topics=["foo"], owned={"foo": list(range(6))}, rebalance_timeout_ms=5000)
    assert named(full.assignment) == {"foo": list(range(6))}
    assert h.records_since(mark) == []


def test_k20_group_states(h: ConsumerHarness) -> None:
    """Given a group going through a join, a settle, a leave and the last leave;
    then its state is Stable (one member), Reconciling (B joined, A must revoke), Stable (settled),
    Assigning (A left: group epoch bumped, no target computed yet), Stable again once B's heartbeat computes
    the target (written as target, target epoch, current assignment), and Empty after the last leave."""
    a = _id(h.join_cg())
    assert h.cg().state() is ConsumerGroupState.STABLE
    b = _id(h.join_cg())
    assert h.cg().state() is ConsumerGroupState.RECONCILING
    h.settle([a, b])
    assert h.cg().state() is ConsumerGroupState.STABLE
    h.hb(a, -1)
    assert h.cg().state() is ConsumerGroupState.ASSIGNING
    h.hb(b, h.cmember(b).member_epoch)
    assert h.written({b: "B"}) == [
        f"target B {ALL}",
        "target-epoch 3",
        f"current B epoch=3 prev=2 stable assigned={ALL} revoking=-",
    ]
    assert h.cg().state() is ConsumerGroupState.STABLE
    h.hb(b, -1)
    assert h.cg().state() is ConsumerGroupState.EMPTY


def test_k21_describe(h: ConsumerHarness) -> None:
    """Given a classic group "classic" and a consumer group of A (epoch 1, still owning all of foo) and B;
    when ConsumerGroupDescribe asks for "classic", "nope" and "group";
    then the first two are GROUP_ID_NOT_FOUND and "group" is described at group and assignment epoch 2,
    Reconciling, with A's current assignment and its target; an empty group id is INVALID_GROUP_ID. Describing
    writes nothing."""
    h.form_group(1, group_id="classic")
    a = _id(h.join_cg())
    b = _id(h.join_cg())
    mark = h.mark()
    classic, unknown, consumer = h.cg_describe("classic", "nope", "group")
    assert classic.error is ErrorCode.GROUP_ID_NOT_FOUND
    assert unknown.error is ErrorCode.GROUP_ID_NOT_FOUND
    assert consumer.error is ErrorCode.NONE
    assert (consumer.group_epoch, consumer.assignment_epoch, consumer.state) == (2, 2, "Reconciling")
    members = {m.member_id: m for m in consumer.members}
    assert set(members) == {a, b}
    assert members[a].member_epoch == 1
    assert [(t.topic_name, t.partitions) for t in members[a].assignment] == [("foo", (0, 1, 2, 3, 4, 5))]
    assert [(t.topic_name, t.partitions) for t in members[a].target_assignment] == [("foo", (0, 1, 2))]
    assert h.cg_describe("")[0].error is ErrorCode.INVALID_GROUP_ID
    assert h.records_since(mark) == []


def test_d05_list_groups_reports_type_and_state(h: ConsumerHarness) -> None:
    """Given a classic group and a consumer group;
    then ListGroups reports each with its type and state and filters by both; DescribeGroups (the classic
    API) reports the consumer group as Dead."""
    h.form_group(1, group_id="classic")
    h.join_cg()
    listed = {g.group_id: g for g in h.list_groups().groups}
    assert (listed["group"].group_type, listed["group"].state, listed["group"].protocol_type) == (
        "consumer",
        "Stable",
        "consumer",
    )
    assert listed["classic"].group_type == "classic"
    assert [g.group_id for g in h.list_groups(types=["consumer"]).groups] == ["group"]
    assert [g.group_id for g in h.list_groups(states=["stable"], types=["classic"]).groups] == ["classic"]
    (described,) = h.describe("group")
    assert described.state == "Dead"  # DescribeGroups knows classic groups only


def test_o06_o07_o10_offsets_fenced_by_member_epoch(h: ConsumerHarness) -> None:
    """Given member A at epoch 1 of a consumer group;
    when it commits with epoch 1, then with a stale epoch, an unknown member, or OffsetCommit v8;
    then only the first commit is written; the others are STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID and
    UNSUPPORTED_VERSION. OffsetFetch is checked the same way, except an admin fetch (no member)."""
    member_id = _id(h.join_cg())
    ok = h.commit(member_id, 1, {("foo", 0): 10})
    assert ok.topics[0][1][0][1] is ErrorCode.NONE
    assert h.written() == ["offset foo-0=10"]
    mark = h.mark()
    stale = h.commit(member_id, 0, {("foo", 0): 11})
    assert stale.topics[0][1][0][1] is ErrorCode.STALE_MEMBER_EPOCH
    unknown = h.commit("nobody", 1, {("foo", 0): 12})
    assert unknown.topics[0][1][0][1] is ErrorCode.UNKNOWN_MEMBER_ID
    old = h.commit(member_id, 1, {("foo", 0): 13}, version=8)
    assert old.topics[0][1][0][1] is ErrorCode.UNSUPPORTED_VERSION
    assert h.records_since(mark) == []

    def fetch(member: str | None, epoch: int) -> OffsetFetchResponse:
        request = OffsetFetchRequest(group_id="group", member_id=member, member_epoch=epoch)
        response = h._submit(h.coordinator.offset_fetch, request).response
        assert isinstance(response, OffsetFetchResponse)
        return response

    fetched = fetch(member_id, 1)
    assert fetched.error is ErrorCode.NONE and fetched.topics[0][1][0].offset == 10
    assert fetch(member_id, 7).error is ErrorCode.STALE_MEMBER_EPOCH
    assert fetch("nobody", 1).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch(None, -1).topics[0][1][0].offset == 10  # admin fetch: no validation


def test_delete_consumer_group(h: ConsumerHarness) -> None:
    """Given a consumer group with a member and a committed offset;
    when DeleteGroups names it;
    then NON_EMPTY_GROUP while the member is there; once it left, the group is deleted: the offsets, then
    the target epoch, the subscription metadata and the group epoch are tombstoned (Kafka's order)."""
    a = _id(h.join_cg())
    h.commit(a, 1, {("foo", 0): 10})
    assert h.delete_groups("group").results == (("group", ErrorCode.NON_EMPTY_GROUP),)
    assert h.written() == []
    h.hb(a, -1)
    assert h.delete_groups("group").results == (("group", ErrorCode.NONE),)
    assert h.written() == ["delete offset foo-0", "delete target-epoch", "delete subscription", "delete epoch"]
    assert "group" not in consumer_groups(h.coordinator)
    assert h.coordinator.hard_state()["group_records"] == {}


def test_replay_rebuilds_consumer_groups(h: ConsumerHarness) -> None:
    """Given a static member A mid-revocation and a member B;
    when a new coordinator is built from the records;
    then it holds the same state, and re-arms the timers: A's revocation timeout (5 s) fences it while B
    stays."""
    a = _id(h.join_cg(instance_id="i1"))
    b = _id(h.join_cg())
    h.hb(a, 1)  # A mid-revocation
    before = h.coordinator.hard_state()
    h.reload()
    assert h.coordinator.hard_state() == before
    group = h.cg()
    assert group.members[a].state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    assert group.static_members == {"i1": a}
    h.sleep(5_000)
    assert a not in h.cg().members
    assert b in h.cg().members


def test_a_member_that_must_revoke_gets_free_partitions_only_with_its_acknowledgement(h: ConsumerHarness) -> None:
    """Kafka's CurrentAssignmentBuilder: a member whose new target takes partitions away keeps its epoch and
    only what it keeps until it acknowledges the revocation, even when the partitions it gains are free. A
    hand-off to such a member therefore waits for its revocation callbacks as well as its assignment callbacks
    (the two callback delays of the simulator's hand-off bound, tests/property/test_sim_safety_kip848.py)."""
    ids = sorted(_id(h.join_cg(assignor="range")) for _ in range(3))
    h.settle(ids)
    a, b, c = ids
    assert [named(h.cmember(m).assigned) for m in ids] == [{"foo": [0, 1]}, {"foo": [2, 3]}, {"foo": [4, 5]}]
    assert h.hb(a, -1).error is ErrorCode.NONE  # a leaves: 0 and 1 are free; the range target is b 0-2, c 3-5
    epoch = h.cmember(b).member_epoch
    told = h.hb(b, epoch)
    assert told.member_epoch == epoch and named(told.assignment) == {"foo": [2]}
    assert h.cmember(b).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    assert h.hb(b, epoch).assignment is None  # owned partitions not reported: still revoking, nothing new
    acknowledged = h.hb(b, epoch, owned={"foo": [2]})
    assert acknowledged.member_epoch == h.cg().group_epoch and named(acknowledged.assignment) == {"foo": [0, 1, 2]}
    assert named(h.hb(c, h.cmember(c).member_epoch).assignment) == {"foo": [3, 4, 5]}  # 3 released by b


def test_k26_a_large_groups_target_is_computed_aside() -> None:
    """Given offloading from two members and ``range``; when B joins A's group, then the heartbeat writes B's
    metadata, the subscription metadata, the group epoch and B's current assignment at the last target epoch
    (1: never 0, with no partitions) and hands the computation out; the group is Assigning. When the work
    lands, it writes the changed targets and the target epoch, and the members reconcile towards them. One
    computation per group is out at a time. Work that lands after the subscribed topics changed writes nothing;
    work that lands after a member left is written for its epoch without that member; either way the current
    epoch is handed out next."""
    from regroup.coordinator.asides import outcome_of

    h = ConsumerHarness(consumer_group_assignors=("range",), consumer_group_assignor_offload_members=2)
    h.topics(foo=6, bar=3)

    def land() -> None:
        (aside,) = h.last.asides
        h._collect(h.coordinator.land(aside, outcome_of(aside), h.now_ms))

    a = _id(h.join_cg(("foo",)))
    assert not h.last.asides  # (the group's first target: within)
    b = _id(h.join_cg(("bar", "foo")))
    names = {a: "A", b: "B"}
    assert h.written(names) == [
        "member B bar,foo",
        "subscription bar:3 foo:6",
        "epoch 2",
        "current B epoch=1 prev=0 stable assigned=- revoking=-",
    ]
    assert h.cg().state() is ConsumerGroupState.ASSIGNING
    land()
    assert h.written(names) == ["target A foo=0,1,2", "target B bar=0,1,2 foo=3,4,5", "target-epoch 2"]
    assert not h.last.asides and h.cg().assignment_epoch == 2
    h.settle([a, b])
    assert named(h.cmember(b).assigned) == {"bar": [0, 1, 2], "foo": [3, 4, 5]}
    # work landing after the group's subscribed topics changed (B, bar's only subscriber, left): dropped
    c = _id(h.join_cg(("foo",)))
    (late,) = h.last.asides
    h.hb(b, -1)
    assert not h.last.asides  # (one computation out at a time)
    h._collect(h.coordinator.land(late, outcome_of(late), h.now_ms))
    assert h.written() == [] and len(h.last.asides) == 1  # (the current epoch, handed out afresh)
    land()
    assert h.cg().assignment_epoch == h.cg().group_epoch == 4
    assert set(h.cg().targets) == {a, c}
    h.settle([a, c])
    # work landing after a member left (the topics the same): written for its epoch, without that member
    d = _id(h.join_cg(("foo",)))
    (late,) = h.last.asides
    h.hb(c, -1)
    h._collect(h.coordinator.land(late, outcome_of(late), h.now_ms))
    names = {a: "A", d: "D"}
    assert h.written(names) == ["target A foo=0,1", "target D foo=4,5", "target-epoch 5"]  # (C's share: nobody's)
    assert h.cg().assignment_epoch == 5 < h.cg().group_epoch == 6
    assert set(h.cg().targets) == {a, d} and len(h.last.asides) == 1
    land()
    assert h.written(names) == ["target A foo=0,1,2", "target D foo=3,4,5", "target-epoch 6"]


def test_k26_a_static_members_target_lands_under_the_process_that_replaced_it() -> None:
    """Given A and static S (instance i1) on foo under ``range``, offloading from two members; when E joins and,
    while its target is out, S's process is replaced (S leaves with epoch -2, S2 joins as i1), then the target
    computed for S is written under S2's id when the work lands, and S has none."""
    from regroup.coordinator.asides import outcome_of

    h = ConsumerHarness(consumer_group_assignors=("range",), consumer_group_assignor_offload_members=2)
    h.topics(foo=6)

    def land() -> None:
        (aside,) = h.last.asides
        h._collect(h.coordinator.land(aside, outcome_of(aside), h.now_ms))

    a = _id(h.join_cg(("foo",)))
    s1 = _id(h.join_cg(("foo",), instance_id="i1"))
    land()
    h.settle([a, s1])
    before = dict(h.cg().targets)
    e = _id(h.join_cg(("foo",)))
    (late,) = h.last.asides
    h.hb(s1, -2, instance_id="i1")
    s2 = _id(h.join_cg(("foo",), instance_id="i1"))
    assert h.cg().targets[s2] == before[s1]  # (the replacement took S's target)
    h._collect(h.coordinator.land(late, outcome_of(late), h.now_ms))
    assert h.written({a: "A", e: "E", s2: "S2"}) == [
        "target A foo=2,3",
        "target S2 foo=0,1",
        "target E foo=4,5",
        "target-epoch 3",
    ]
    assert s1 not in h.cg().targets
    owned = [p for target in h.cg().targets.values() for ps in target.values() for p in ps]
    assert sorted(owned) == [0, 1, 2, 3, 4, 5]
