"""Conformance of online migration between the classic and consumer protocols: scenarios X01-X18 of the
reference (section 7.8), plus replay of converted groups."""

from __future__ import annotations

from regroup.assignors.consumer_protocol import Assignment, decode_assignment, encode_assignment
from regroup.coordinator.classic.group import GroupState
from regroup.coordinator.consumer.group import MemberState
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import LeavingMember
from tests.coordinator.consumer_harness import ConsumerHarness, named, subscription
from tests.coordinator.harness import Formed

COOP = "cooperative-sticky"


def _protocols(owned: dict[str, list[int]] | None = None, name: str = COOP) -> tuple[tuple[str, bytes], ...]:
    return ((name, subscription(["foo"], owned)),)


def classic_group(h: ConsumerHarness, n: int = 2, **kwargs: object) -> Formed:
    """A Stable classic "consumer" group of ``n`` members splitting foo's 6 partitions."""
    h.topics(foo=6)
    formed = h.form_group(n, protocols=[_protocols()] * n, **kwargs)  # type: ignore[arg-type]
    share = 6 // n
    assignments = {
        m: encode_assignment(Assignment(partitions={"foo": tuple(range(i * share, (i + 1) * share))}))
        for i, m in enumerate(formed.members)
    }
    h.rejoin_all()
    h.sync_all(assignments=assignments)
    return Formed(formed.members, formed.leader, h.group().generation, assignments, formed.join_responses)


def test_x01_upgrade_on_first_consumer_member() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    generation = formed.generation
    parked = h.join(formed.leader)  # the leader's rejoin starts a rebalance: this JoinGroup waits
    assert not parked.done
    joined = h.hb("", 0, topics=["foo"])
    assert joined.error is ErrorCode.NONE
    assert parked.response.error is ErrorCode.REBALANCE_IN_PROGRESS
    assert not h.has_group()
    group = h.cg()
    assert group.group_epoch == generation + 1
    for member_id in formed.members:
        member = group.members[member_id]
        assert member.classic is not None and member.member_epoch == generation
    assert named(group.members[formed.members[0]].assigned) == {"foo": [0, 1, 2]}


def test_x01_upgrade_by_static_replacement_recomputes_the_target() -> None:
    """A classic member left during the classic group's life, so its partitions are in no stored assignment;
    a consumer-protocol process then takes a static member's place (same subscription). Kafka's converted
    group has no subscription metadata yet, so that first heartbeat bumps the group epoch and the target
    covers every partition; the static replacement alone would bump nothing and leave foo-3..5 to nobody."""
    h = ConsumerHarness()
    formed = classic_group(h, instance_ids=["i0", None])
    generation = formed.generation
    assert h.leave(formed.members[1]).error is ErrorCode.NONE
    assert h.group().state is GroupState.PREPARING_REBALANCE
    joined = h.hb("", 0, topics=["foo"], instance_id="i0")
    assert joined.error is ErrorCode.NONE
    group = h.cg()
    assert group.group_epoch == generation + 1 and group.assignment_epoch == generation + 1
    assert named(group.target_of(joined.member_id or "")) == {"foo": [0, 1, 2, 3, 4, 5]}


def test_x02_policy_blocks_upgrade() -> None:
    for policy in ("downgrade", "disabled"):
        h = ConsumerHarness(consumer_group_migration_policy=policy)
        classic_group(h)
        assert h.hb("", 0, topics=["foo"]).error is ErrorCode.GROUP_ID_NOT_FOUND
        assert h.group().state is GroupState.STABLE


def test_x03_non_consumer_protocol_type_blocks_upgrade() -> None:
    h = ConsumerHarness()
    h.topics(foo=6)
    call = h.join_new(protocol_type="connect")
    h.sleep(0)
    member = call.response.member_id
    h.sync(member, 1, {member: b""})
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.GROUP_ID_NOT_FOUND


def test_x04_empty_classic_group_replaced_offsets_kept() -> None:
    h = ConsumerHarness(consumer_group_migration_policy="disabled")
    h.topics(foo=6)
    h.commit("", -1, {("foo", 0): 7})
    assert h.has_group()
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.NONE
    assert not h.has_group() and "group" in h.coordinator.consumer_groups
    assert h.fetch({"foo": [0]}).topics[0][1][0].offset == 7


def test_x05_classic_heartbeat_after_upgrade_asks_to_rejoin() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    error = h.heartbeat(formed.members[1], formed.generation, instance_id=None)
    assert error is ErrorCode.REBALANCE_IN_PROGRESS


def test_x06_cooperative_rejoin_revokes_first() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    new = h.hb("", 0, topics=["foo"])
    c0 = formed.members[0]
    owned = named(h.cmember(c0).assigned) or {}
    response = h.join(c0, protocols=_protocols(owned), instance_id=None).response
    assert response.error is ErrorCode.NONE
    assert response.generation_id == formed.generation  # still owns a partition the new member needs
    assert h.cmember(c0).state is MemberState.UNREVOKED_PARTITIONS
    sync = h.sync(c0, response.generation_id, instance_id=None).response
    kept = decode_assignment(sync.assignment).partitions
    assert set(kept["foo"]) < set(owned["foo"])
    # the client revokes and rejoins reporting only what it kept
    again = h.join(c0, protocols=_protocols({"foo": list(kept["foo"])}), instance_id=None).response
    assert again.generation_id == h.cg().group_epoch
    assert new.member_id in h.cg().members


def test_x07_eager_rejoin_advances_directly() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    response = h.join(formed.members[0], protocols=_protocols({}), instance_id=None).response
    assert response.generation_id == h.cg().group_epoch


def test_x08_sync_validation() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    c0 = formed.members[0]
    response = h.join(c0, protocols=_protocols({}), instance_id=None).response
    assert h.sync(c0, response.generation_id + 5, instance_id=None).response.error is ErrorCode.ILLEGAL_GENERATION
    wrong = h.sync(c0, response.generation_id, instance_id=None, protocol_name="range").response
    assert wrong.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ok = h.sync(c0, response.generation_id, instance_id=None, protocol_type="consumer", protocol_name=COOP).response
    assert ok.error is ErrorCode.NONE and ok.protocol_name == COOP


def test_x09_joined_but_never_synced_is_fenced() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    c0 = formed.members[0]
    h.join(c0, protocols=_protocols({}), instance_id=None)
    h.sleep(9_999)  # the rebalance timeout of the harness is 10 s
    assert c0 in h.cg().members
    h.sleep(1)
    assert c0 not in h.cg().members


def test_x10_told_to_rejoin_but_never_does_is_fenced() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    c1 = formed.members[1]
    assert h.heartbeat(c1, formed.generation, instance_id=None) is ErrorCode.REBALANCE_IN_PROGRESS
    h.sleep(5_000)
    assert h.heartbeat(c1, formed.generation, instance_id=None) is ErrorCode.REBALANCE_IN_PROGRESS
    h.sleep(5_000)  # 10 s after the first REBALANCE_IN_PROGRESS
    assert c1 not in h.cg().members


def test_x11_consumer_member_cannot_use_classic_apis() -> None:
    h = ConsumerHarness()
    h.topics(foo=6)
    a = h.join_cg()
    assert h.heartbeat(a.member_id or "", 1, instance_id=None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync(a.member_id or "", 1, instance_id=None).response.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_x12_downgrade_when_last_consumer_member_leaves() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    new = h.hb("", 0, topics=["foo"])
    epoch = h.cg().group_epoch
    h.hb(new.member_id or "", -1)
    assert "group" not in h.coordinator.consumer_groups
    group = h.group()
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.generation == epoch
    assert set(group.members) == set(formed.members)
    assert group.protocol_type == "consumer"
    assert h.heartbeat(formed.members[0], epoch, instance_id=None) is ErrorCode.REBALANCE_IN_PROGRESS
    # the classic members rejoin and the group is classic again
    responses = h.rejoin_all()
    assert all(r.error is ErrorCode.NONE for r in responses.values())
    assert h.group().generation == epoch + 1


def test_x13_no_downgrade_when_blocked() -> None:
    for overrides in ({"group_max_size": 1}, {"consumer_group_migration_policy": "upgrade"}):
        h = ConsumerHarness(**overrides)
        formed_members = classic_group(h, n=1).members  # one classic member (fits a classic max size of 1)
        new = h.hb("", 0, topics=["foo"])
        # a second classic member joins the consumer group
        second = h.join("", protocols=_protocols(), instance_id=None).response
        second = h.join(second.member_id, protocols=_protocols(), instance_id=None).response
        assert second.error is ErrorCode.NONE, second
        h.hb(new.member_id or "", -1)
        assert "group" in h.coordinator.consumer_groups, overrides
        assert len(h.cg().members) == 2 and formed_members[0] in h.cg().members


def test_x14_downgrade_on_session_expiry() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    # the classic members rejoin (eagerly) and keep their sessions (10 s) alive; the new member goes silent
    for m in formed.members:
        generation = h.join(m, protocols=_protocols({}), instance_id=None).response.generation_id
        assert h.sync(m, generation, instance_id=None).response.error is ErrorCode.NONE
    for _ in range(8):
        h.sleep(5_000)
        for m in formed.members:
            h.heartbeat(m, h.cmember(m).member_epoch, instance_id=None)
    assert "group" in h.coordinator.consumer_groups
    h.sleep(5_000)  # 45 s after the join
    assert "group" not in h.coordinator.consumer_groups
    assert h.has_group() and h.group().state is GroupState.PREPARING_REBALANCE
    assert set(h.group().members) == set(formed.members)


def test_x15_static_consumer_member_replaced_by_classic_member() -> None:
    h = ConsumerHarness()
    classic_group(h, n=1)
    static = h.hb("", 0, topics=["foo"], instance_id="i1")
    held = h.cmember(static.member_id or "")
    target = named({**held.assigned, **held.pending_revocation})  # what it holds, not its target
    response = h.join("", instance_id="i1", protocols=_protocols()).response
    assert response.error is ErrorCode.NONE
    assert "group" not in h.coordinator.consumer_groups
    group = h.group()
    assert group.state is GroupState.STABLE
    joined = group.members[response.member_id]
    assert decode_assignment(joined.assignment).partitions == {t: tuple(ps) for t, ps in (target or {}).items()}


def test_x15_static_replacement_rebalances_when_a_target_is_held_by_nobody() -> None:
    """A static member left with epoch -2 (it keeps what it held and reconciles nothing), then the other
    member left: the group epoch moved past the target, which Kafka recomputes (all six partitions for the
    absent member) before converting. A classic process taking its place downgrades the group; this classic
    group holds only what the member held, so it rebalances instead of staying Stable with foo-3..5 owned by
    nobody."""
    h = ConsumerHarness()
    h.topics(foo=6)
    static = h.join_cg(instance_id="i1").member_id or ""
    other = h.join_cg().member_id or ""
    h.settle([static, other])
    held = named(h.cmember(static).assigned)
    assert held is not None and len(held["foo"]) == 3
    assert h.hb(static, -2, instance_id="i1").member_epoch == -2
    assert h.hb(other, -1).error is ErrorCode.NONE
    assert h.cg().group_epoch > h.cg().assignment_epoch
    assert named(h.cmember(static).assigned) == held  # away: nothing reconciled
    response = h.join("", instance_id="i1", protocols=_protocols()).response
    assert response.error is ErrorCode.NONE
    assert "group" not in h.coordinator.consumer_groups
    group = h.group()
    joined = group.members[response.member_id]
    assert decode_assignment(joined.assignment).partitions == {t: tuple(ps) for t, ps in held.items()}
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.sync(response.member_id, response.generation_id).response.error is ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = h.join(response.member_id, protocols=_protocols(held)).response
    assert rejoined.error is ErrorCode.NONE and rejoined.leader == response.member_id
    assignment = encode_assignment(Assignment(partitions={"foo": (0, 1, 2, 3, 4, 5)}))
    synced = h.sync(response.member_id, rejoined.generation_id, {response.member_id: assignment}).response
    assert synced.error is ErrorCode.NONE and h.group().state is GroupState.STABLE


def test_x15_static_replacement_rebalances_when_the_topics_grew() -> None:
    """foo grew while the only consumer-protocol member was away (epoch -2): no heartbeat has refreshed the
    subscription metadata, so no target names foo-6. Kafka refreshes it before converting and hands foo-6
    out through the target; here the classic group rebalances instead of leaving it without an owner."""
    h = ConsumerHarness()
    h.topics(foo=6)
    static = h.join_cg(instance_id="i1").member_id or ""
    h.settle([static])
    assert h.hb(static, -2, instance_id="i1").member_epoch == -2
    h.topics(foo=7)
    assert h.cg().group_epoch == h.cg().assignment_epoch
    response = h.join("", instance_id="i1", protocols=_protocols()).response
    assert response.error is ErrorCode.NONE
    assert "group" not in h.coordinator.consumer_groups
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_x16_classic_join_replaces_empty_consumer_group() -> None:
    h = ConsumerHarness()
    h.topics(foo=6)
    a = h.join_cg()
    h.hb(a.member_id or "", -1)
    assert h.cg().members == {}
    call = h.join_new(protocols=_protocols())
    h.sleep(0)
    assert "group" not in h.coordinator.consumer_groups
    assert h.has_group()
    assert call.response.error is ErrorCode.NONE  # initial delay 0: completes at once


def test_x17_classic_joiner_must_share_a_protocol() -> None:
    h = ConsumerHarness()
    classic_group(h)
    h.hb("", 0, topics=["foo"])
    response = h.join("", protocols=_protocols(name="roundrobin"), instance_id=None).response
    assert response.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_x18_classic_leave_in_consumer_group() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    new = h.hb("", 0, topics=["foo"])
    epoch = h.cg().group_epoch
    response = h.leave(LeavingMember(member_id=formed.members[0]), LeavingMember(member_id=new.member_id or ""))
    assert [m.error for m in response.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.cg().group_epoch == epoch + 1
    assert formed.members[0] not in h.cg().members


def test_replay_after_migrations() -> None:
    h = ConsumerHarness()
    formed = classic_group(h)
    new = h.hb("", 0, topics=["foo"])
    h.join(formed.members[0], protocols=_protocols({}), instance_id=None)
    state = h.coordinator.hard_state()
    h.reload()
    assert h.coordinator.hard_state() == state
    assert h.cmember(formed.members[0]).classic is not None
    h.hb(new.member_id or "", -1)
    state = h.coordinator.hard_state()
    h.reload()
    assert h.coordinator.hard_state() == state
    assert h.group().members.keys() == set(formed.members)


def test_upgrade_waits_until_cleared_classic_assignments_are_stored_again() -> None:
    """A rebalance restarted from CompletingRebalance clears the stored classic assignments, while cooperative
    members keep processing what they own. Until a SyncGroup stores new assignments — through the next join
    phase and the CompletingRebalance after it, not only the PreparingRebalance right after the reset — an
    upgrade would seed the consumer group with members holding nothing and hand their partitions out twice
    (mixed calm soak seed 466), so the joining consumer-protocol member is told to retry."""
    h = ConsumerHarness()
    formed = classic_group(h)
    first, second = formed.members
    h.join(first, protocols=_protocols({"foo": [0, 1, 2]}))
    h.join(second, protocols=_protocols({"foo": [3, 4, 5]}))
    assert h.group().state is GroupState.COMPLETING_REBALANCE  # assignments still stored: an upgrade is safe
    h.leave(second)  # the rebalance restarts: every stored assignment is cleared
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    rejoined = h.join(first, protocols=_protocols({"foo": [0, 1, 2]}))
    assert rejoined.response.error is ErrorCode.NONE and h.group().state is GroupState.COMPLETING_REBALANCE
    assert h.member(first).assignment == b""  # first still owns 0-2, the group no longer says so
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    everything = encode_assignment(Assignment(partitions={"foo": tuple(range(6))}))
    assert h.sync(first, assignments={first: everything}).response.error is ErrorCode.NONE
    joined = h.hb("", 0, topics=["foo"])
    assert joined.error is ErrorCode.NONE and named(joined.assignment) == {}  # first must revoke before
    assert named(h.cmember(first).assigned) == {"foo": [0, 1, 2, 3, 4, 5]}
