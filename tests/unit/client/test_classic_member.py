"""``ClassicClientMember`` against a real ``GroupCoordinator`` (no network): the eager and cooperative stories of
docs/protocol.md (P03, P04, P06), the error reactions (the Java consumer's), leaving, crashing and the
session lease."""

from __future__ import annotations

from regroup.assignors.consumer_protocol import decode_subscription
from regroup.client import CallbackKind, ClassicClientMember, ClassicClientState
from regroup.coordinator.classic.group import ClassicGroupState
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import HeartbeatResponse, JoinGroupRequest
from regroup.protocol.offsets import OffsetCommitRequest, OffsetCommitResponse

from .harness import GroupHarness

FOO = {"topic-foo": 3}
P0, P1, P2 = ("topic-foo", 0), ("topic-foo", 1), ("topic-foo", 2)
EAGER = ("range",)
COOPERATIVE = ("cooperative-sticky",)


def kinds(member: ClassicClientMember) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    return [(cb.kind.value, cb.partitions) for cb in member.callbacks]


def form(strategies: tuple[str, ...]) -> GroupHarness:
    """c0 alone, then c1: the third-member-joins starting point c0[p0,p1], c1[p2]."""
    h = GroupHarness(dict(FOO))
    h.add("c0", strategies)
    h.run_for(1_000)
    h.add("c1", strategies)
    h.run_for(12_000)
    assert h.members["c0"].owned == {P0, P1}
    assert h.members["c1"].owned == {P2}
    return h


def join_subscriptions(h: GroupHarness, member: str, after_ms: int = 0) -> list[tuple[int, object]]:
    out = []
    for sent in h.requests(member, "JoinGroup"):
        if sent.at_ms >= after_ms:
            assert isinstance(sent.out.request, JoinGroupRequest)
            out.append((sent.at_ms, decode_subscription(sent.out.request.protocols[0][1])))
    return out


def test_two_eager_members_then_a_third_stops_the_world() -> None:
    """P03: every eager member revokes everything before its JoinGroup; OwnedPartitions stay empty."""
    h = form(EAGER)
    c0, c1 = h.members["c0"], h.members["c1"]
    generation = h.group().generation
    joined_at = h.now
    c2 = h.add("c2", EAGER)
    h.run_for(10_000)
    assert h.group().generation == generation + 1  # one rebalance
    assert {c0.owned, c1.owned, c2.owned} == {frozenset({P0}), frozenset({P1}), frozenset({P2})}
    for member in (c0, c1):
        revoke = next(cb for cb in member.callbacks if cb.kind is CallbackKind.REVOKED and cb.at_ms >= joined_at)
        join_at, subscription = join_subscriptions(h, "c0" if member is c0 else "c1", joined_at)[0]
        assert revoke.at_ms <= join_at
        assert dict(subscription.owned) == {}  # type: ignore[attr-defined]
    assert kinds(c0)[-2:] == [("revoked", (P0, P1)), ("assigned", (P0,))]
    assert kinds(c1)[-2:] == [("revoked", (P2,)), ("assigned", (P1,))]


def test_cooperative_third_member_takes_two_rebalances_and_only_p1_moves() -> None:
    """P04: the first rebalance moves nothing directly (c0 revokes p1 after SyncGroup and rejoins), the
    second gives p1 to c2; c1 keeps p2 throughout."""
    h = form(COOPERATIVE)
    c0, c1 = h.members["c0"], h.members["c1"]
    generation = h.group().generation
    joined_at = h.now
    c2 = h.add("c2", COOPERATIVE)
    h.run_for(10_000)
    assert h.group().generation == generation + 2
    assert (c0.owned, c1.owned, c2.owned) == ({P0}, {P2}, {P1})
    new = [cb for cb in c0.callbacks if cb.at_ms >= joined_at]
    assert [(cb.kind.value, cb.partitions) for cb in new if cb.partitions] == [("revoked", (P1,))]
    assert all(cb.kind is CallbackKind.ASSIGNED for cb in c1.callbacks)
    _, first = join_subscriptions(h, "c0", joined_at)[0]
    assert first.owned == {"topic-foo": (0, 1)}  # type: ignore[attr-defined]
    assert first.generation == generation  # type: ignore[attr-defined]
    # c0 committed p1 when it revoked it, and the coordinator accepted the commit
    revoke_commits = [
        sent
        for sent in h.requests("c0", "OffsetCommit")
        if sent.at_ms == new[0].at_ms
        and isinstance(sent.out.request, OffsetCommitRequest)
        and sent.out.request.topics == (("topic-foo", sent.out.request.topics[0][1]),)
        and [p.partition for p in sent.out.request.topics[0][1]] == [1]
    ]
    assert len(revoke_commits) == 1
    assert isinstance(revoke_commits[0].response, OffsetCommitResponse)
    assert revoke_commits[0].response.topics == (("topic-foo", ((1, ErrorCode.NONE),)),)


def test_member_id_required_is_adopted() -> None:
    h = GroupHarness(dict(FOO))
    c0 = h.add("c0", EAGER)
    h.run_for(100)
    first, second = h.requests("c0", "JoinGroup")[:2]
    assert first.response is not None and first.response.error is ErrorCode.MEMBER_ID_REQUIRED  # type: ignore[attr-defined]
    assert isinstance(second.out.request, JoinGroupRequest)
    assert second.out.request.member_id == first.response.member_id == c0.member_id  # type: ignore[attr-defined]
    assert c0.state is ClassicClientState.STABLE and c0.owned == {P0, P1, P2}


def test_unknown_member_id_on_heartbeat_loses_partitions_and_rejoins_fresh() -> None:
    """P06: after a reset the member calls onPartitionsLost (not revoked) and rejoins without an id."""
    h = form(COOPERATIVE)
    c0 = h.members["c0"]
    now = h.now + c0.config.heartbeat_interval_ms
    out = c0.poll(now)
    heartbeat = next(o for o in out if o.api == "Heartbeat")
    c0.on_response(heartbeat.request_id, HeartbeatResponse(error=ErrorCode.UNKNOWN_MEMBER_ID), now)
    assert c0.callbacks[-1].kind is CallbackKind.LOST and c0.callbacks[-1].partitions == (P0, P1)
    assert c0.owned == frozenset() and c0.member_id == "" and c0.generation == -1
    rejoin = next(o for o in c0.poll(now) if o.api == "JoinGroup")
    assert isinstance(rejoin.request, JoinGroupRequest) and rejoin.request.member_id == ""
    assert decode_subscription(rejoin.request.protocols[0][1]).owned == {}


def test_illegal_generation_keeps_the_member_id() -> None:
    h = form(EAGER)
    c1 = h.members["c1"]
    member_id = c1.member_id
    now = h.now + c1.config.heartbeat_interval_ms
    heartbeat = next(o for o in c1.poll(now) if o.api == "Heartbeat")
    c1.on_response(heartbeat.request_id, HeartbeatResponse(error=ErrorCode.ILLEGAL_GENERATION), now)
    assert c1.callbacks[-1].kind is CallbackKind.LOST
    assert c1.member_id == member_id and c1.generation == -1


def test_rebalance_in_progress_on_heartbeat_means_rejoin() -> None:
    h = form(COOPERATIVE)
    c0 = h.members["c0"]
    now = h.now + c0.config.heartbeat_interval_ms
    heartbeat = next(o for o in c0.poll(now) if o.api == "Heartbeat")
    c0.on_response(heartbeat.request_id, HeartbeatResponse(error=ErrorCode.REBALANCE_IN_PROGRESS), now)
    assert [o.api for o in c0.poll(now)] == ["OffsetCommit", "JoinGroup"]  # commit before rejoining
    assert c0.owned == {P0, P1}  # cooperative: nothing revoked before JoinGroup


def test_ignores_answers_to_requests_it_no_longer_waits_for() -> None:
    h = form(EAGER)
    c0 = h.members["c0"]
    before = (c0.state, c0.generation, c0.owned)
    c0.on_response(9_999, HeartbeatResponse(error=ErrorCode.UNKNOWN_MEMBER_ID), h.now)
    assert (c0.state, c0.generation, c0.owned) == before


def test_protocol_vote_with_several_assignors() -> None:
    """C10: the only protocol everyone supports wins; each assignor is one JoinGroup protocol."""
    h = GroupHarness(dict(FOO))
    h.add("a", ("roundrobin", "range"))
    h.add("b", ("range", "roundrobin"))
    h.add("c", ("range",))
    h.run_for(5_000)
    assert h.group().protocol_name == "range"
    join = h.requests("a", "JoinGroup")[-1].out.request
    assert isinstance(join, JoinGroupRequest)
    assert [name for name, _ in join.protocols] == ["roundrobin", "range"]
    assert sorted(p for m in h.members.values() for p in m.owned) == [P0, P1, P2]


def test_leave_commits_revokes_and_sends_leave_group() -> None:
    h = form(COOPERATIVE)
    c1 = h.members["c1"]
    c1.leave(h.now)
    assert c1.state is ClassicClientState.LEFT and c1.owned == frozenset()
    assert kinds(c1)[-1] == ("revoked", (P2,))
    h.pump()
    assert [s.out.api for s in h.sent[-2:]] == ["OffsetCommit", "LeaveGroup"]
    assert h.sent[-1].response is not None and h.sent[-1].response.error is ErrorCode.NONE  # type: ignore[attr-defined]
    h.run_for(10_000)
    assert h.members["c0"].owned == {P0, P1, P2}


def test_static_member_does_not_send_leave_group() -> None:
    h = GroupHarness(dict(FOO))
    s = h.add("s", EAGER, group_instance_id="s-1")
    h.run_for(1_000)
    assert s.member_id.startswith("s-1-") and s.owned == {P0, P1, P2}
    s.leave(h.now)
    assert [o.api for o in s.poll(h.now)] == ["OffsetCommit"]


def test_crash_stops_processing_silently() -> None:
    h = form(EAGER)
    c0 = h.members["c0"]
    callbacks = len(c0.callbacks)
    c0.crash()
    assert c0.state is ClassicClientState.CRASHED and c0.owned == frozenset()
    assert len(c0.callbacks) == callbacks and c0.poll(h.now + 60_000) == [] and c0.next_deadline() is None
    h.run_for(30_000)  # the coordinator expires it and c1 takes everything
    assert h.members["c1"].owned == {P0, P1, P2}


def test_session_lease_drops_partitions_before_the_coordinator_can_reassign_them() -> None:
    """A member cut off from the coordinator stops processing before its session could expire."""
    h = form(COOPERATIVE)
    c0, c1 = h.members["c0"], h.members["c1"]
    h.dropped.add("c0")
    removed_at = lost_at = None
    for _ in range(40):
        h.run_for(500)
        if lost_at is None and c0.owned == frozenset():
            lost_at = h.now
        if removed_at is None and c0.member_id not in h.group().members:
            removed_at = h.now
    assert lost_at is not None and removed_at is not None and lost_at <= removed_at
    assert c0.callbacks[-1].kind is CallbackKind.LOST
    assert c1.owned == {P0, P1, P2}
    h.dropped.discard("c0")
    h.run_for(20_000)
    assert {c0.owned, c1.owned} in ({frozenset({P0, P1}), frozenset({P2})}, {frozenset({P2}), frozenset({P0, P1})})


def test_leader_rejoins_when_partitions_are_added() -> None:
    h = form(EAGER)
    leader = next(m for m in h.members.values() if m.is_leader)
    generation = h.group().generation
    h.topics["topic-foo"] = 4
    for member in h.members.values():
        member.update_metadata(h.topics, h.now)
    h.run_for(10_000)
    assert h.group().generation == generation + 1 and h.group().state is ClassicGroupState.STABLE
    assert sorted(p for m in h.members.values() for p in m.owned) == [P0, P1, P2, ("topic-foo", 3)]
    assert leader.metadata_snapshot == {"topic-foo": 4}


def test_lost_join_group_is_retried_after_its_timeout() -> None:
    h = GroupHarness(dict(FOO))
    c0 = h.add("c0", EAGER, rebalance_timeout_ms=6_000, request_timeout_ms=3_000)
    h.dropped.add("c0")
    h.run_for(100)
    h.dropped.discard("c0")
    h.run_for(c0.config.join_timeout_ms + 1_000)
    joins = h.requests("c0", "JoinGroup")
    assert joins[1].at_ms - joins[0].at_ms == c0.config.join_timeout_ms + c0.config.retry_backoff_ms
    assert any(n.kind == "timeout" for n in c0.notes)
    assert c0.state is ClassicClientState.STABLE


def test_a_duplicated_join_group_does_not_reset_the_member() -> None:
    h = form(COOPERATIVE)
    c0 = h.members["c0"]
    member_id = c0.member_id
    c0.request_rejoin(h.now, "test")
    (join,) = [o for o in c0.poll(h.now) if o.api == "JoinGroup"]
    h._handle("c0", join)  # parked: c1 has not rejoined yet
    h._handle("c0", join)  # the same request delivered twice (network duplication)
    h.pump()
    assert c0.member_id == member_id
    assert not any(cb.kind is CallbackKind.LOST for cb in c0.callbacks)
