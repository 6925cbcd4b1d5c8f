"""Online migration between the classic and consumer protocols (KIP-848): scenarios X01-X18 of
docs/protocol.md, plus replay of converted groups.

Each scenario checks the responses and the records the operation wrote (``h.written``: one line per record;
classic members are C0, C1, ..., consumer-protocol members A, ...). The upgrade writes Kafka's records in
Kafka's order (``GroupMetadataManager.convertToConsumerGroup``, ``ConsumerGroup.createConsumerGroupRecords``):
the classic group's tombstone, every member's metadata, the group epoch, every target, the target epoch,
every current assignment, then the joining member's records."""

from __future__ import annotations

from regroup.assignors.consumer_protocol import ConsumerProtocolAssignment, decode_assignment, encode_assignment
from regroup.coordinator.classic.group import ClassicGroupState
from regroup.coordinator.consumer.group import ConsumerGroupMemberState
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import LeavingMember
from tests.coordinator.consumer_harness import ConsumerHarness, lines, named, subscription
from tests.coordinator.harness import Formed
from tests.group_views import consumer_groups

COOP = "cooperative-sticky"


def _protocols(owned: dict[str, list[int]] | None = None, name: str = COOP) -> tuple[tuple[str, bytes], ...]:
    return ((name, subscription(["foo"], owned)),)


def classic_group(h: ConsumerHarness, n: int = 2, **kwargs: object) -> Formed:
    """A Stable classic "consumer" group of ``n`` members splitting foo's 6 partitions."""
    h.topics(foo=6)
    formed = h.form_group(n, protocols=[_protocols()] * n, **kwargs)  # type: ignore[arg-type]
    share = 6 // n
    assignments = {
        m: encode_assignment(ConsumerProtocolAssignment(partitions={"foo": tuple(range(i * share, (i + 1) * share))}))
        for i, m in enumerate(formed.members)
    }
    h.rejoin_all()
    h.sync_all(assignments=assignments)
    return Formed(formed.members, formed.leader, h.group().generation, assignments, formed.join_responses)


def _names(formed: Formed, **others: str | None) -> dict[str, str]:
    """C0, C1, ... for the classic members, and the given names for other member ids."""
    names = {m: f"C{i}" for i, m in enumerate(formed.members)}
    names.update({member_id: name for name, member_id in others.items() if member_id})
    return names


def _deleted(*members: str) -> list[str]:
    """The tombstones of a whole consumer group whose members are ``members``."""
    each = [f"delete {kind} {m}" for m in members for kind in ("current", "target", "member")]
    return [*each, "delete target-epoch", "delete subscription", "delete epoch"]


def _tombstones_then_group(written: list[str], tombstones: list[str], group: str) -> None:
    """A downgrade deletes every consumer-group record, then writes the classic group. Kafka orders the
    tombstones by record type (all current assignments, all targets, the target epoch, all member metadata,
    the subscription metadata, the group epoch: ``ConsumerGroup.createGroupTombstoneRecords``); regroup
    deletes member by member. Either replays to the same state, so the tombstones are compared as a set."""
    assert sorted(written[:-1]) == sorted(tombstones)
    assert written[-1] == group


def test_x01_upgrade_on_first_consumer_member() -> None:
    """Given a Stable classic group at generation 3 (C0 owning foo 0-2, C1 foo 3-5, cooperative-sticky)
    whose leader's rejoin is parked in JoinGroup;
    when a consumer-protocol member A sends its first ConsumerGroupHeartbeat;
    then the group becomes a consumer group: the parked JoinGroup gets REBALANCE_IN_PROGRESS, C0 and C1 are
    classic members at epoch 3 keeping what they own, and A's join then bumps the group epoch to 4 and computes
    a target giving A a share (unreleased until C0 and C1 revoke)."""
    h = ConsumerHarness()
    formed = classic_group(h)
    assert formed.generation == 3
    parked = h.join(formed.leader)  # the leader's rejoin starts a rebalance: this JoinGroup waits
    assert not parked.done
    joined = h.hb("", 0, topics=["foo"])
    assert joined.error is ErrorCode.NONE
    assert parked.response.error is ErrorCode.REBALANCE_IN_PROGRESS
    assert not h.has_group()
    assert h.written(_names(formed, A=joined.member_id)) == [
        "delete group",
        "member C0 foo classic",
        "member C1 foo classic",
        "epoch 3",
        "target C0 foo=0,1,2",
        "target C1 foo=3,4,5",
        "target-epoch 3",
        "current C0 epoch=3 prev=3 stable assigned=foo=0,1,2 revoking=-",
        "current C1 epoch=3 prev=3 stable assigned=foo=3,4,5 revoking=-",
        "member A foo",
        "subscription foo:6",
        "epoch 4",
        "target C0 foo=0,1",
        "target C1 foo=3,4",
        "target A foo=2,5",
        "target-epoch 4",
        "current A epoch=4 prev=0 unreleased_partitions assigned=- revoking=-",
    ]


def test_x01_upgrade_by_static_replacement_recomputes_the_target() -> None:
    """A classic member left during the classic group's life, so its partitions are in no stored assignment;
    a consumer-protocol process then takes a static member's place (same subscription). Kafka's converted
    group has no subscription metadata yet, so that first heartbeat bumps the group epoch and the target
    covers every partition; the static replacement alone would bump nothing and leave foo-3..5 to nobody.
    The records: the upgrade (C0 only), the replacement of C0 by A (Kafka's ``replaceMember``: C0's records
    deleted, A's metadata, C0's target and A's current assignment written), then A's own heartbeat."""
    h = ConsumerHarness()
    formed = classic_group(h, instance_ids=["i0", None])
    assert h.leave(formed.members[1]).error is ErrorCode.NONE
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    joined = h.hb("", 0, topics=["foo"], instance_id="i0")
    assert joined.error is ErrorCode.NONE
    assert h.written(_names(formed, A=joined.member_id)) == [
        "delete group",
        "member C0 foo instance=i0 classic",
        "epoch 3",
        "target C0 foo=0,1,2",
        "target-epoch 3",
        "current C0 epoch=3 prev=3 stable assigned=foo=0,1,2 revoking=-",
        "delete current C0",
        "delete target C0",
        "delete member C0",
        "member A foo instance=i0 classic",
        "target A foo=0,1,2",
        "current A epoch=0 prev=0 stable assigned=foo=0,1,2 revoking=-",
        "member A foo instance=i0",
        "subscription foo:6",
        "epoch 4",
        "target A foo=0,1,2,3,4,5",
        "target-epoch 4",
        "current A epoch=4 prev=0 stable assigned=foo=0,1,2,3,4,5 revoking=-",
    ]


def test_x02_policy_blocks_upgrade() -> None:
    """Given a Stable classic group and group.consumer.migration.policy "downgrade" (or "disabled");
    when a consumer-protocol member joins;
    then GROUP_ID_NOT_FOUND, the classic group stays Stable and nothing is written."""
    for policy in ("downgrade", "disabled"):
        h = ConsumerHarness(consumer_group_migration_policy=policy)
        classic_group(h)
        mark = h.mark()
        assert h.hb("", 0, topics=["foo"]).error is ErrorCode.GROUP_ID_NOT_FOUND
        assert h.group().state is ClassicGroupState.STABLE
        assert h.records_since(mark) == []


def test_x03_non_consumer_protocol_type_blocks_upgrade() -> None:
    """Given a Stable classic group of protocol type "connect";
    when a consumer-protocol member joins;
    then GROUP_ID_NOT_FOUND and nothing is written."""
    h = ConsumerHarness()
    h.topics(foo=6)
    call = h.join_new(protocol_type="connect")
    h.sleep(0)
    member = call.response.member_id
    h.sync(member, 1, {member: b""})
    mark = h.mark()
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert h.group().state is ClassicGroupState.STABLE
    assert h.records_since(mark) == []


def test_x04_empty_classic_group_replaced_offsets_kept() -> None:
    """Given an empty classic group that holds only committed offsets (policy "disabled");
    when a consumer-protocol member joins;
    then the empty classic group is deleted (its tombstone) and a consumer group created in its place,
    whatever the policy; the committed offset is kept (offsets belong to the group id, no offset record is
    written)."""
    h = ConsumerHarness(consumer_group_migration_policy="disabled")
    h.topics(foo=6)
    h.commit("", -1, {("foo", 0): 7})
    assert h.has_group()
    joined = h.hb("", 0, topics=["foo"])
    assert joined.error is ErrorCode.NONE
    assert not h.has_group() and "group" in consumer_groups(h.coordinator)
    assert h.written({joined.member_id or "": "A"}) == [
        "delete group",
        "member A foo",
        "subscription foo:6",
        "epoch 1",
        "target A foo=0,1,2,3,4,5",
        "target-epoch 1",
        "current A epoch=1 prev=0 stable assigned=foo=0,1,2,3,4,5 revoking=-",
    ]
    assert h.fetch({"foo": [0]}).topics[0][1][0].offset == 7


def test_x05_classic_heartbeat_after_upgrade_asks_to_rejoin() -> None:
    """Given a group just upgraded (A joined, so the target changed for C1);
    when C1 sends a classic Heartbeat with its generation;
    then REBALANCE_IN_PROGRESS (it must rejoin to learn its new assignment) and nothing is written."""
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    mark = h.mark()
    error = h.heartbeat(formed.members[1], formed.generation, instance_id=None)
    assert error is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.records_since(mark) == []


def test_x06_cooperative_rejoin_revokes_first() -> None:
    """Given an upgraded group where A's target takes foo-2 from C0;
    when C0 (cooperative) rejoins reporting that it owns foo 0-2, then syncs, then rejoins owning foo 0-1;
    then the first JoinGroup answers at the old generation 3 and the SyncGroup gives C0 only what it keeps
    (C0 UNREVOKED_PARTITIONS, foo-2 pending revocation); the rejoin reporting the smaller set moves C0 to the
    group epoch 4, Stable. Each JoinGroup rewrites C0's metadata (its protocols) and its current assignment;
    the SyncGroup writes nothing."""
    h = ConsumerHarness()
    formed = classic_group(h)
    new = h.hb("", 0, topics=["foo"])
    c0 = formed.members[0]
    names = _names(formed, A=new.member_id)
    owned = named(h.cmember(c0).assigned) or {}
    assert owned == {"foo": [0, 1, 2]}
    response = h.join(c0, protocols=_protocols(owned), instance_id=None).response
    assert response.error is ErrorCode.NONE
    assert response.generation_id == formed.generation  # still owns a partition the new member needs
    assert h.cmember(c0).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    assert h.written(names) == [
        "member C0 foo classic",
        "current C0 epoch=3 prev=3 unrevoked_partitions assigned=foo=0,1 revoking=foo=2",
    ]
    sync = h.sync(c0, response.generation_id, instance_id=None).response
    assert decode_assignment(sync.assignment).partitions == {"foo": (0, 1)}
    assert h.written() == []
    # the client revokes and rejoins reporting only what it kept
    again = h.join(c0, protocols=_protocols({"foo": [0, 1]}), instance_id=None).response
    assert again.generation_id == h.cg().group_epoch == 4
    assert h.written(names) == [
        "member C0 foo classic",
        "current C0 epoch=4 prev=3 stable assigned=foo=0,1 revoking=-",
    ]
    assert new.member_id in h.cg().members


def test_x07_eager_rejoin_advances_directly() -> None:
    """Given an upgraded group where A's target takes foo-2 from C0;
    when C0 rejoins owning nothing (eager: it revoked everything before rejoining);
    then it is answered at the group epoch 4 at once, Stable with its new target; its metadata and current
    assignment are written."""
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    response = h.join(formed.members[0], protocols=_protocols({}), instance_id=None).response
    assert response.generation_id == h.cg().group_epoch == 4
    assert h.written(_names(formed)) == [
        "member C0 foo classic",
        "current C0 epoch=4 prev=3 stable assigned=foo=0,1 revoking=-",
    ]


def test_x08_sync_validation() -> None:
    """Given a classic member C0 of a consumer group that rejoined;
    when it syncs with a wrong generation, or names a protocol it did not join with;
    then ILLEGAL_GENERATION, then INCONSISTENT_GROUP_PROTOCOL; with the right ones its assignment comes back
    with the protocol name. No SyncGroup writes anything."""
    h = ConsumerHarness()
    formed = classic_group(h)
    h.hb("", 0, topics=["foo"])
    c0 = formed.members[0]
    response = h.join(c0, protocols=_protocols({}), instance_id=None).response
    mark = h.mark()
    assert h.sync(c0, response.generation_id + 5, instance_id=None).response.error is ErrorCode.ILLEGAL_GENERATION
    wrong = h.sync(c0, response.generation_id, instance_id=None, protocol_name="range").response
    assert wrong.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ok = h.sync(c0, response.generation_id, instance_id=None, protocol_type="consumer", protocol_name=COOP).response
    assert ok.error is ErrorCode.NONE and ok.protocol_name == COOP
    assert h.records_since(mark) == []


def test_x09_joined_but_never_synced_is_fenced() -> None:
    """Given classic members with 30 s sessions in a consumer group, C0 having rejoined;
    when C0 sends no SyncGroup within its rebalance timeout (10 s);
    then it is fenced at the deadline, not before: its records are deleted and the group epoch bumped."""
    h = ConsumerHarness()
    formed = classic_group(h, session_timeout_ms=30_000)
    h.hb("", 0, topics=["foo"])
    c0 = formed.members[0]
    h.join(c0, protocols=_protocols({}), instance_id=None)
    h.sleep(9_999)  # the rebalance timeout of the harness is 10 s
    assert c0 in h.cg().members and h.written() == []
    h.sleep(1)
    assert c0 not in h.cg().members
    assert h.written(_names(formed)) == ["delete current C0", "delete target C0", "delete member C0", "epoch 5"]


def test_x10_told_to_rejoin_but_never_does_is_fenced() -> None:
    """Given a classic member C1 (30 s session) of a consumer group told REBALANCE_IN_PROGRESS by a Heartbeat;
    when it keeps heartbeating but does not rejoin within its rebalance timeout (10 s from the first
    REBALANCE_IN_PROGRESS);
    then it is fenced: its records are deleted and the group epoch bumped."""
    h = ConsumerHarness()
    formed = classic_group(h, session_timeout_ms=30_000)
    h.hb("", 0, topics=["foo"])
    c1 = formed.members[1]
    assert h.heartbeat(c1, formed.generation, instance_id=None) is ErrorCode.REBALANCE_IN_PROGRESS
    h.sleep(5_000)
    assert h.heartbeat(c1, formed.generation, instance_id=None) is ErrorCode.REBALANCE_IN_PROGRESS
    h.sleep(4_999)
    assert c1 in h.cg().members
    h.sleep(1)  # 10 s after the first REBALANCE_IN_PROGRESS
    assert c1 not in h.cg().members
    assert h.written(_names(formed)) == ["delete current C1", "delete target C1", "delete member C1", "epoch 5"]


def test_x11_consumer_member_cannot_use_classic_apis() -> None:
    """Given a consumer-protocol member A;
    when it sends a classic Heartbeat or SyncGroup;
    then UNKNOWN_MEMBER_ID each time and nothing is written."""
    h = ConsumerHarness()
    h.topics(foo=6)
    a = h.join_cg()
    mark = h.mark()
    assert h.heartbeat(a.member_id or "", 1, instance_id=None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync(a.member_id or "", 1, instance_id=None).response.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.records_since(mark) == []


def test_x12_downgrade_when_last_consumer_member_leaves() -> None:
    """Given an upgraded group (C0, C1 classic; A the only consumer-protocol member) at group epoch 4;
    when A leaves;
    then the group becomes classic again at generation 4 with C0 and C1 holding what they held, and
    rebalances (PreparingRebalance: their heartbeats answer REBALANCE_IN_PROGRESS, and their rejoins complete
    generation 5). Every consumer-group record is deleted, then the classic group is written."""
    h = ConsumerHarness()
    formed = classic_group(h)
    new = h.hb("", 0, topics=["foo"])
    epoch = h.cg().group_epoch
    h.hb(new.member_id or "", -1)
    assert "group" not in consumer_groups(h.coordinator)
    _tombstones_then_group(
        h.written(_names(formed, A=new.member_id)),
        _deleted("C0", "C1", "A"),
        "group generation=4 protocol=cooperative-sticky leader=C0 members=C0:foo=0,1,2 C1:foo=3,4,5",
    )
    group = h.group()
    assert group.state is ClassicGroupState.PREPARING_REBALANCE
    assert group.generation == epoch
    assert set(group.members) == set(formed.members)
    assert group.protocol_type == "consumer"
    assert h.heartbeat(formed.members[0], epoch, instance_id=None) is ErrorCode.REBALANCE_IN_PROGRESS
    # the classic members rejoin and the group is classic again
    responses = h.rejoin_all()
    assert all(r.error is ErrorCode.NONE for r in responses.values())
    assert h.group().generation == epoch + 1


def test_x13_no_downgrade_when_blocked() -> None:
    """Given a consumer group of classic C0 and C1 and consumer-protocol A, with group.max.size 1 (so the
    classic members would not fit a classic group) or the policy "upgrade" (no downgrade);
    when A leaves;
    then the group stays a consumer group of C0 and C1: only A's records are deleted and the epoch bumped."""
    for overrides in ({"group_max_size": 1}, {"consumer_group_migration_policy": "upgrade"}):
        h = ConsumerHarness(**overrides)
        formed_members = classic_group(h, n=1).members  # one classic member (fits a classic max size of 1)
        new = h.hb("", 0, topics=["foo"])
        # a second classic member joins the consumer group
        second = h.join("", protocols=_protocols(), instance_id=None).response
        second = h.join(second.member_id, protocols=_protocols(), instance_id=None).response
        assert second.error is ErrorCode.NONE, second
        h.hb(new.member_id or "", -1)
        assert "group" in consumer_groups(h.coordinator), overrides
        assert h.written({new.member_id or "": "A"}) == [
            "delete current A",
            "delete target A",
            "delete member A",
            "epoch 5",
        ]
        assert len(h.cg().members) == 2 and formed_members[0] in h.cg().members


def test_x14_downgrade_on_session_expiry() -> None:
    """Given an upgraded group whose classic members rejoined eagerly and keep heartbeating;
    when the only consumer-protocol member A goes silent for its session timeout (45 s);
    then it is fenced and the group downgrades to a rebalancing classic group of C0 and C1 (all consumer
    records deleted, then the classic group written)."""
    h = ConsumerHarness()
    formed = classic_group(h)
    silent = h.hb("", 0, topics=["foo"])
    # the classic members rejoin (eagerly) and keep their sessions (10 s) alive; the new member goes silent
    for m in formed.members:
        generation = h.join(m, protocols=_protocols({}), instance_id=None).response.generation_id
        assert h.sync(m, generation, instance_id=None).response.error is ErrorCode.NONE
    for _ in range(8):
        h.sleep(5_000)
        for m in formed.members:
            h.heartbeat(m, h.cmember(m).member_epoch, instance_id=None)
    assert "group" in consumer_groups(h.coordinator)
    h.sleep(5_000)  # 45 s after the join
    assert "group" not in consumer_groups(h.coordinator)
    written = h.written(_names(formed, A=silent.member_id))
    assert written[-1].startswith("group generation=4 ")
    assert sorted(written[:-1]) == sorted(_deleted("C0", "C1", "A"))
    assert h.has_group() and h.group().state is ClassicGroupState.PREPARING_REBALANCE
    assert set(h.group().members) == set(formed.members)


def test_x15_static_consumer_member_replaced_by_classic_member() -> None:
    """Given an upgraded group of classic C0 and a static consumer-protocol member A (instance i1) that holds
    nothing yet;
    when a classic process joins with instance i1;
    then it takes A's place and the group downgrades without a rebalance (Stable at generation 3): the new
    classic member C1 inherits what A held (nothing), not A's target. All consumer records are deleted, then
    the classic group is written."""
    h = ConsumerHarness()
    formed = classic_group(h, n=1)
    static = h.hb("", 0, topics=["foo"], instance_id="i1")
    held = h.cmember(static.member_id or "")
    assert named({**held.assigned, **held.pending_revocation}) == {}  # what it holds, not its target
    mark = h.mark()
    response = h.join("", instance_id="i1", protocols=_protocols()).response
    assert response.error is ErrorCode.NONE
    assert "group" not in consumer_groups(h.coordinator)
    group = h.group()
    assert group.state is ClassicGroupState.STABLE
    assert group.members[response.member_id].assignment == encode_assignment(ConsumerProtocolAssignment(partitions={}))
    _tombstones_then_group(
        lines(h.records_since(mark), _names(formed, A=static.member_id, C1=response.member_id)),
        _deleted("C0", "A"),
        "group generation=3 protocol=cooperative-sticky leader=C0 members=C0:foo=0,1,2,3,4,5 C1:-",
    )


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
    mark = h.mark()
    response = h.join("", instance_id="i1", protocols=_protocols()).response
    assert response.error is ErrorCode.NONE
    assert "group" not in consumer_groups(h.coordinator)
    _tombstones_then_group(
        lines(h.records_since(mark), {static: "A", response.member_id: "C"}),
        _deleted("A"),
        f"group generation={h.group().generation} protocol=cooperative-sticky leader=C members=C:foo=0,1,2",
    )
    group = h.group()
    joined = group.members[response.member_id]
    assert decode_assignment(joined.assignment).partitions == {t: tuple(ps) for t, ps in held.items()}
    assert group.state is ClassicGroupState.PREPARING_REBALANCE
    assert h.sync(response.member_id, response.generation_id).response.error is ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = h.join(response.member_id, protocols=_protocols(held)).response
    assert rejoined.error is ErrorCode.NONE and rejoined.leader == response.member_id
    assignment = encode_assignment(ConsumerProtocolAssignment(partitions={"foo": (0, 1, 2, 3, 4, 5)}))
    synced = h.sync(response.member_id, rejoined.generation_id, {response.member_id: assignment}).response
    assert synced.error is ErrorCode.NONE and h.group().state is ClassicGroupState.STABLE


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
    mark = h.mark()
    response = h.join("", instance_id="i1", protocols=_protocols()).response
    assert response.error is ErrorCode.NONE
    assert "group" not in consumer_groups(h.coordinator)
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    _tombstones_then_group(
        lines(h.records_since(mark), {static: "A", response.member_id: "C"}),
        _deleted("A"),
        "group generation=1 protocol=cooperative-sticky leader=C members=C:foo=0,1,2,3,4,5",
    )


def test_x16_classic_join_replaces_empty_consumer_group() -> None:
    """Given a consumer group left empty by its last member;
    when a classic member joins (whatever the policy);
    then the empty consumer group is deleted (its remaining records tombstoned) and a classic group takes its
    place, persisted as an empty classic group; the join completes generation 1 (initial delay 0) and the
    leader's SyncGroup writes the group with its assignment."""
    h = ConsumerHarness()
    h.topics(foo=6)
    a = h.join_cg()
    h.hb(a.member_id or "", -1)
    assert h.cg().members == {}
    mark = h.mark()
    call = h.join_new(protocols=_protocols())
    h.sleep(0)
    assert "group" not in consumer_groups(h.coordinator)
    assert h.has_group()
    assert call.response.error is ErrorCode.NONE  # initial delay 0: completes at once
    member = call.response.member_id
    assert lines(h.records_since(mark)) == [
        "delete target-epoch",
        "delete subscription",
        "delete epoch",
        "group generation=0 protocol=None leader=None members=-",
    ]
    everything = encode_assignment(ConsumerProtocolAssignment(partitions={"foo": tuple(range(6))}))
    assert h.sync(member, 1, {member: everything}).response.error is ErrorCode.NONE
    assert h.written({member: "C0"}) == [
        "group generation=1 protocol=cooperative-sticky leader=C0 members=C0:foo=0,1,2,3,4,5"
    ]


def test_x17_classic_joiner_must_share_a_protocol() -> None:
    """Given a consumer group whose classic members all speak cooperative-sticky;
    when a classic member joins offering only roundrobin;
    then INCONSISTENT_GROUP_PROTOCOL and nothing is written."""
    h = ConsumerHarness()
    classic_group(h)
    h.hb("", 0, topics=["foo"])
    mark = h.mark()
    response = h.join("", protocols=_protocols(name="roundrobin"), instance_id=None).response
    assert response.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.records_since(mark) == []


def test_x18_classic_leave_in_consumer_group() -> None:
    """Given an upgraded group (classic C0, C1; consumer-protocol A) at epoch 4;
    when a LeaveGroup names C0 and A;
    then C0 leaves (its records deleted, the epoch bumped to 5) and A, which does not speak the classic
    protocol, is answered UNKNOWN_MEMBER_ID and stays."""
    h = ConsumerHarness()
    formed = classic_group(h)
    new = h.hb("", 0, topics=["foo"])
    epoch = h.cg().group_epoch
    response = h.leave(LeavingMember(member_id=formed.members[0]), LeavingMember(member_id=new.member_id or ""))
    assert [m.error for m in response.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.cg().group_epoch == epoch + 1
    assert formed.members[0] not in h.cg().members and new.member_id in h.cg().members
    assert h.written(_names(formed)) == ["delete current C0", "delete target C0", "delete member C0", "epoch 5"]


def test_replay_after_migrations() -> None:
    """Given a group upgraded (then a classic member rejoined) and later downgraded;
    when a new coordinator is built from the records after each step;
    then it holds the same state as the live one."""
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
    assert h.group().state is ClassicGroupState.COMPLETING_REBALANCE  # assignments still stored: an upgrade is safe
    h.leave(second)  # the rebalance restarts: every stored assignment is cleared
    assert h.group().state is ClassicGroupState.PREPARING_REBALANCE
    mark = h.mark()
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.records_since(mark) == []  # refused: nothing written
    rejoined = h.join(first, protocols=_protocols({"foo": [0, 1, 2]}))
    assert rejoined.response.error is ErrorCode.NONE and h.group().state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.member(first).assignment == b""  # first still owns 0-2, the group no longer says so
    assert h.hb("", 0, topics=["foo"]).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    everything = encode_assignment(ConsumerProtocolAssignment(partitions={"foo": tuple(range(6))}))
    assert h.sync(first, assignments={first: everything}).response.error is ErrorCode.NONE
    joined = h.hb("", 0, topics=["foo"])
    assert joined.error is ErrorCode.NONE and named(joined.assignment) == {}  # first must revoke before
    assert named(h.cmember(first).assigned) == {"foo": [0, 1, 2, 3, 4, 5]}
