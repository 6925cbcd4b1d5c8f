"""Conformance of KIP-848 consumer groups: scenarios K01-K21 of the reference (section 7.7)."""

from __future__ import annotations

import pytest

from regroup.coordinator.consumer.group import ConsumerGroupState, MemberState
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import OffsetFetchRequest, OffsetFetchResponse
from tests.coordinator.consumer_harness import ConsumerHarness, named

SESSION_MS = 45_000


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.topics(foo=6, bar=3)
    return harness


def test_k01_first_member_gets_everything(h: ConsumerHarness) -> None:
    response = h.hb("", 0, topics=["foo"], owned={}, rebalance_timeout_ms=5000)
    assert response.error is ErrorCode.NONE
    assert response.member_id
    assert response.member_epoch == 1
    assert response.heartbeat_interval_ms == 5000
    assert named(response.assignment) == {"foo": [0, 1, 2, 3, 4, 5]}
    assert h.cg().group_epoch == 1 and h.cg().assignment_epoch == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": {"foo": [0]}}, "TopicPartitions must be empty when (re-)joining."),
        ({"topics": []}, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."),
    ],
)
def test_k02_join_validation(h: ConsumerHarness, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"topics": ["foo"], **kwargs}
    response = h.hb("", 0, **args)  # type: ignore[arg-type]
    assert response.error is ErrorCode.INVALID_REQUEST
    assert response.error_message == message
    assert h.records == [] or all(r.key.__class__.__name__ != "ConsumerGroupMemberMetadataKey" for r in h.records)


def test_k02_join_with_null_partitions_is_invalid(h: ConsumerHarness) -> None:
    from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest

    call = h._submit(
        h.coordinator.consumer_group_heartbeat,
        ConsumerGroupHeartbeatRequest(
            group_id="group", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",)
        ),
    )
    assert call.response.error is ErrorCode.INVALID_REQUEST


def test_k02_other_validations(h: ConsumerHarness) -> None:
    assert h.hb("", 3).error is ErrorCode.INVALID_REQUEST  # epoch > 0 needs a member id
    assert h.hb("m", -3).error is ErrorCode.INVALID_REQUEST
    assert h.hb("m", -2).error is ErrorCode.INVALID_REQUEST  # static leave needs an instance id
    assert h.hb("", 0, topics=["foo"], group_id=" ").error is ErrorCode.INVALID_REQUEST
    assert h.hb("", 0, topics=["foo"], instance_id=" ").error is ErrorCode.INVALID_REQUEST
    assert h.hb("", 0, topics=["foo"], rack_id="").error is ErrorCode.INVALID_REQUEST


def test_k03_regex_subscription_resolves_against_topics(h: ConsumerHarness) -> None:
    h.topics(**{"foo-1": 2, "foo-2": 2})
    response = h.hb("", 0, regex="foo-.*")
    assert response.error is ErrorCode.NONE
    assert named(response.assignment) == {"foo-1": [0, 1], "foo-2": [0, 1]}
    # a new matching topic reaches the member on its next heartbeat (epoch bump)
    epoch = h.cg().group_epoch
    h.topics(zzz=1, **{"foo-1": 2, "foo-2": 3})
    nxt = h.hb(response.member_id or "", response.member_epoch)
    assert h.cg().group_epoch == epoch + 1
    assert named(nxt.assignment) == {"foo-1": [0, 1], "foo-2": [0, 1, 2]}


def test_k03_invalid_or_oversized_regex(h: ConsumerHarness) -> None:
    bad = h.hb("", 0, regex="foo(")
    assert bad.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert bad.error_message and "foo(" in bad.error_message
    huge = h.hb("", 0, regex="a" * 1001)
    assert huge.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    backref = h.hb("", 0, regex=r"(a)\1")  # RE2 refuses back-references: no exponential matching
    assert backref.error is ErrorCode.INVALID_REGULAR_EXPRESSION


def test_k04_unsupported_assignor(h: ConsumerHarness) -> None:
    response = h.hb("", 0, topics=["foo"], assignor="sticky")
    assert response.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "foo" not in str(h.coordinator.consumer_groups)


def test_k05_unknown_group(h: ConsumerHarness) -> None:
    assert h.hb("m", 1).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert h.hb("m", -1).error is ErrorCode.GROUP_ID_NOT_FOUND


def test_k06_member_epoch_validation(h: ConsumerHarness) -> None:
    a = h.join_cg()
    member = h.cmember(a.member_id or "")
    # as in Kafka's test, a group at epoch 100 whose member came from 99 (set directly, not through records)
    member.member_epoch, member.previous_member_epoch = 100, 99
    h.cg().group_epoch = h.cg().assignment_epoch = 100
    assert h.hb(a.member_id or "", 200).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert h.hb(a.member_id or "", 50).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert h.hb(a.member_id or "", 99, owned={"foo": [9]}).error is ErrorCode.FENCED_MEMBER_EPOCH  # not a subset
    ok = h.hb(a.member_id or "", 99, owned={"foo": [0, 1]})
    assert ok.error is ErrorCode.NONE and ok.member_epoch == 100


def test_k07_reconciliation_process(h: ConsumerHarness) -> None:
    a = h.join_cg()
    assert a.member_epoch == 1 and named(a.assignment) == {"foo": [0, 1, 2, 3, 4, 5]}
    b = h.join_cg()
    assert h.cg().group_epoch == 2
    assert b.member_epoch == 2 and named(b.assignment) == {}
    assert h.cmember(b.member_id or "").state is MemberState.UNRELEASED_PARTITIONS
    a_id, b_id = a.member_id or "", b.member_id or ""
    # A is asked to revoke: its epoch stays 1, its assignment shrinks to what it keeps
    a2 = h.hb(a_id, 1)
    assert a2.member_epoch == 1
    kept = named(a2.assignment)
    assert kept is not None and len(kept["foo"]) == 3
    assert h.cmember(a_id).state is MemberState.UNREVOKED_PARTITIONS
    # B cannot get A's partitions yet
    b2 = h.hb(b_id, 2)
    assert b2.assignment is None and h.cmember(b_id).assigned == {}
    # A acknowledges the revocation: epoch 2, stable
    a3 = h.hb(a_id, 1, owned=kept)
    assert a3.member_epoch == 2 and h.cmember(a_id).state is MemberState.STABLE
    # B picks the released partitions up
    b3 = h.hb(b_id, 2)
    released = sorted(set(range(6)) - set(kept["foo"]))
    assert named(b3.assignment) == {"foo": released}
    assert h.cg().state() is ConsumerGroupState.STABLE


def test_k08_revocation_timeout_fences(h: ConsumerHarness) -> None:
    a = h.join_cg(rebalance_timeout_ms=3000)
    h.join_cg()
    h.hb(a.member_id or "", 1)  # A is told to revoke and never acknowledges
    epoch = h.cg().group_epoch
    h.sleep(2999)
    assert (a.member_id or "") in h.cg().members
    h.sleep(1)
    assert (a.member_id or "") not in h.cg().members
    assert h.cg().group_epoch == epoch + 1


def test_k08_revocation_timer_ignored_when_epoch_moved(h: ConsumerHarness) -> None:
    a = h.join_cg(rebalance_timeout_ms=3000)
    h.join_cg()
    kept = named(h.hb(a.member_id or "", 1).assignment)
    h.hb(a.member_id or "", 1, owned=kept)  # acknowledged in time
    h.sleep(3000)
    assert (a.member_id or "") in h.cg().members


def test_k09_session_timeout(h: ConsumerHarness) -> None:
    a = h.join_cg()
    h.sleep(SESSION_MS - 1)
    assert (a.member_id or "") in h.cg().members
    h.sleep(1)
    assert (a.member_id or "") not in h.cg().members
    assert h.hb(a.member_id or "", 1).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_k09_heartbeat_restarts_session(h: ConsumerHarness) -> None:
    a = h.join_cg()
    h.sleep(40_000)
    h.hb(a.member_id or "", 1)
    h.sleep(40_000)
    assert (a.member_id or "") in h.cg().members


def test_k10_subscription_change_bumps_and_retargets(h: ConsumerHarness) -> None:
    a = h.join_cg()
    response = h.hb(a.member_id or "", 1, topics=["foo", "bar"])
    assert h.cg().group_epoch == 2
    assert named(response.assignment) == {"bar": [0, 1, 2], "foo": [0, 1, 2, 3, 4, 5]}
    assert response.member_epoch == 2


def test_k11_rack_or_assignor_change_does_not_bump(h: ConsumerHarness) -> None:
    a = h.join_cg()
    mark = h.mark()
    h.hb(a.member_id or "", 1, rack_id="r1")
    h.hb(a.member_id or "", 1, assignor="range")
    h.hb(a.member_id or "", 1, rebalance_timeout_ms=9000)
    assert h.cg().group_epoch == 1
    member = h.cmember(a.member_id or "")
    assert (member.rack_id, member.server_assignor, member.rebalance_timeout_ms) == ("r1", "range", 9000)
    assert all(type(r.key).__name__ == "ConsumerGroupMemberMetadataKey" for r in h.records_since(mark))


def test_k12_partitions_added(h: ConsumerHarness) -> None:
    a = h.join_cg()
    h.topics(foo=8)
    response = h.hb(a.member_id or "", 1)
    assert h.cg().group_epoch == 2
    assert named(response.assignment) == {"foo": list(range(8))}


def test_k13_leave_bumps(h: ConsumerHarness) -> None:
    a = h.join_cg()
    h.join_cg()
    response = h.hb(a.member_id or "", -1)
    assert response.error is ErrorCode.NONE and response.member_epoch == -1
    assert (a.member_id or "") not in h.cg().members
    assert h.cg().group_epoch == 3
    assert h.hb("nobody", -1).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_k14_static_member_temporary_leave_and_return(h: ConsumerHarness) -> None:
    a = h.join_cg(instance_id="i1")
    b = h.join_cg(instance_id="i2")
    h.settle([a.member_id or "", b.member_id or ""])
    epoch = h.cg().group_epoch
    before = named(h.cmember(a.member_id or "").assigned)
    leave = h.hb(a.member_id or "", -2, instance_id="i1")
    assert leave.error is ErrorCode.NONE and leave.member_epoch == -2
    assert h.cg().group_epoch == epoch
    back = h.hb("", 0, topics=["foo"], instance_id="i1")
    assert back.error is ErrorCode.NONE
    assert back.member_id != a.member_id
    assert h.cg().group_epoch == epoch
    assert named(back.assignment) == before
    assert (a.member_id or "") not in h.cg().members


def test_k15_unreleased_instance_id(h: ConsumerHarness) -> None:
    h.join_cg(instance_id="i1")
    response = h.hb("", 0, topics=["foo"], instance_id="i1")
    assert response.error is ErrorCode.UNRELEASED_INSTANCE_ID


def test_k16_fenced_and_unknown_instance(h: ConsumerHarness) -> None:
    a = h.join_cg(instance_id="i1")
    assert h.hb("m2", 1, instance_id="i1").error is ErrorCode.FENCED_INSTANCE_ID
    assert h.hb(a.member_id or "", 1, instance_id="nobody").error is ErrorCode.UNKNOWN_MEMBER_ID


def test_k17_group_max_size(h: ConsumerHarness) -> None:
    h = ConsumerHarness(consumer_group_max_size=1)
    h.topics(foo=6)
    a = h.join_cg()
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.hb(a.member_id or "", 1).error is ErrorCode.NONE


def test_k18_preferred_assignor(h: ConsumerHarness) -> None:
    h.join_cg(assignor="range")
    h.join_cg(assignor="range")
    h.join_cg(assignor="uniform")
    (described,) = h.cg_describe("group")
    assert described.assignor_name == "range"
    # range: contiguous ranges in member order
    targets = sorted(tuple(sorted(ps)) for t in h.cg().targets.values() for ps in t.values())
    assert targets == [(0, 1), (2, 3), (4, 5)]


def test_k19_assignment_only_when_full_or_changed(h: ConsumerHarness) -> None:
    a = h.join_cg()
    assert h.hb(a.member_id or "", 1).assignment is None
    full = h.hb(a.member_id or "", 1, topics=["foo"], owned={"foo": list(range(6))}, rebalance_timeout_ms=5000)
    assert named(full.assignment) == {"foo": list(range(6))}


def test_k20_group_states(h: ConsumerHarness) -> None:
    a = h.join_cg()
    assert h.cg().state() is ConsumerGroupState.STABLE
    b = h.join_cg()
    assert h.cg().state() is ConsumerGroupState.RECONCILING
    h.settle([a.member_id or "", b.member_id or ""])
    assert h.cg().state() is ConsumerGroupState.STABLE
    h.hb(a.member_id or "", -1)  # a leave bumps the epoch without computing a target
    assert h.cg().state() is ConsumerGroupState.ASSIGNING
    h.hb(b.member_id or "", h.cmember(b.member_id or "").member_epoch)
    assert h.cg().state() in (ConsumerGroupState.STABLE, ConsumerGroupState.RECONCILING)
    h.settle([b.member_id or ""])
    h.hb(b.member_id or "", -1)
    assert h.cg().state() is ConsumerGroupState.EMPTY


def test_k21_describe(h: ConsumerHarness) -> None:
    h.form_group(1, group_id="classic")
    a = h.join_cg()
    b = h.join_cg()
    classic, unknown, consumer = h.cg_describe("classic", "nope", "group")
    assert classic.error is ErrorCode.GROUP_ID_NOT_FOUND
    assert unknown.error is ErrorCode.GROUP_ID_NOT_FOUND
    assert consumer.error is ErrorCode.NONE
    assert (consumer.group_epoch, consumer.assignment_epoch, consumer.state) == (2, 2, "Reconciling")
    members = {m.member_id: m for m in consumer.members}
    assert set(members) == {a.member_id, b.member_id}
    a_desc = members[a.member_id or ""]
    assert a_desc.member_epoch == 1
    assert [(t.topic_name, t.partitions) for t in a_desc.assignment] == [("foo", (0, 1, 2, 3, 4, 5))]
    assert sum(len(t.partitions) for t in a_desc.target_assignment) == 3
    assert h.cg_describe("")[0].error is ErrorCode.INVALID_GROUP_ID


def test_list_groups_reports_type_and_state(h: ConsumerHarness) -> None:
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


def test_offsets_fenced_by_member_epoch(h: ConsumerHarness) -> None:
    a = h.join_cg()
    member_id = a.member_id or ""
    ok = h.commit(member_id, 1, {("foo", 0): 10})
    assert ok.topics[0][1][0][1] is ErrorCode.NONE
    stale = h.commit(member_id, 0, {("foo", 0): 11})
    assert stale.topics[0][1][0][1] is ErrorCode.STALE_MEMBER_EPOCH
    unknown = h.commit("nobody", 1, {("foo", 0): 12})
    assert unknown.topics[0][1][0][1] is ErrorCode.UNKNOWN_MEMBER_ID
    old = h.commit(member_id, 1, {("foo", 0): 13}, version=8)
    assert old.topics[0][1][0][1] is ErrorCode.UNSUPPORTED_VERSION

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
    a = h.join_cg()
    assert h.delete_groups("group").results == (("group", ErrorCode.NON_EMPTY_GROUP),)
    h.hb(a.member_id or "", -1)
    assert h.delete_groups("group").results == (("group", ErrorCode.NONE),)
    assert "group" not in h.coordinator.consumer_groups
    assert h.coordinator.hard_state()["consumer_groups"] == {}


def test_replay_rebuilds_consumer_groups(h: ConsumerHarness) -> None:
    a = h.join_cg(instance_id="i1")
    b = h.join_cg()
    h.hb(a.member_id or "", 1)  # A mid-revocation
    before = h.coordinator.hard_state()
    h.reload()
    assert h.coordinator.hard_state() == before
    group = h.cg()
    assert group.members[a.member_id or ""].state is MemberState.UNREVOKED_PARTITIONS
    assert group.static_members == {"i1": a.member_id}
    # timers re-armed on load: A's revocation timer and both sessions
    h.sleep(5_000)
    assert (a.member_id or "") not in h.cg().members
    assert (b.member_id or "") in h.cg().members


def test_a_member_that_must_revoke_gets_free_partitions_only_with_its_acknowledgement(h: ConsumerHarness) -> None:
    """Kafka's CurrentAssignmentBuilder: a member whose new target takes partitions away keeps its epoch and
    only what it keeps until it acknowledges the revocation, even when the partitions it gains are free. A
    hand-off to such a member therefore waits for its revocation callbacks as well as its assignment callbacks
    (the two callback delays of the simulator's hand-off bound, tests/property/test_sim_safety_kip848.py)."""
    ids = sorted(h.join_cg(assignor="range").member_id or "" for _ in range(3))
    h.settle(ids)
    a, b, c = ids
    assert [named(h.cmember(m).assigned) for m in ids] == [{"foo": [0, 1]}, {"foo": [2, 3]}, {"foo": [4, 5]}]
    assert h.hb(a, -1).error is ErrorCode.NONE  # a leaves: 0 and 1 are free; the range target is b 0-2, c 3-5
    epoch = h.cmember(b).member_epoch
    told = h.hb(b, epoch)
    assert told.member_epoch == epoch and named(told.assignment) == {"foo": [2]}
    assert h.cmember(b).state is MemberState.UNREVOKED_PARTITIONS
    assert h.hb(b, epoch).assignment is None  # owned partitions not reported: still revoking, nothing new
    acknowledged = h.hb(b, epoch, owned={"foo": [2]})
    assert acknowledged.member_epoch == h.cg().group_epoch and named(acknowledged.assignment) == {"foo": [0, 1, 2]}
    assert named(h.hb(c, h.cmember(c).member_epoch).assignment) == {"foo": [3, 4, 5]}  # 3 released by b
