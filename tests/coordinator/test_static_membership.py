"""Scenarios M01-M07 of docs/protocol.md: static membership (KIP-345) in classic groups."""

from __future__ import annotations

import pytest

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupMember, JoinGroupResponse, SyncGroupResponse
from regroup.records.model import GroupMetadataKey, Record
from tests.coordinator.harness import GROUP, GroupHarness, member_protocols

E = ErrorCode


def test_M01_static_follower_restart_needs_no_rebalance() -> None:
    """Given a Stable group of static members I0 (leader) and I1;
    when a restarted I1 sends JoinGroup with MemberId "" and instance I1, same protocols;
    then it gets a new member id and an immediate response with the current generation, the leader and
    no member list; there is no rebalance (still Stable, same generation), the old id is gone (in place,
    keeping I1's assignment), and the replacement is persisted."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    leader, old = formed.leader, formed.followers[0]
    mark = h.mark()
    response = h.join("", instance_id="I1", protocols=member_protocols(1), client_id="client-1").response
    new = response.member_id
    assert new.startswith("I1-") and new != old
    assert response == JoinGroupResponse(
        generation_id=formed.generation,
        protocol_type="consumer",
        protocol_name="range",
        leader=leader,
        member_id=new,
        members=(),
        skip_assignment=False,
    )
    group = h.group()
    assert group.state is ClassicGroupState.STABLE
    assert group.generation == formed.generation
    assert list(group.members) == [leader, new]
    assert group.static_members == {"I0": leader, "I1": new}
    assert h.records_since(mark) == [Record(GroupMetadataKey(group_id=GROUP), group.to_record_value())]
    assert [m.member_id for m in group.to_record_value().members] == [leader, new]
    assert h.sync(new, formed.generation).response == SyncGroupResponse(
        protocol_type="consumer", protocol_name="range", assignment=b"assignment-1"
    )
    assert h.heartbeat(old, formed.generation, instance_id=None) is E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [8, 9])
def test_M02_static_leader_restart(version: int) -> None:
    """Given a Stable group of static members I0 (leader) and I1;
    when the leader restarts (JoinGroup "" + I0);
    then no rebalance; with v9 the response names the new id as Leader, lists the members and sets
    SkipAssignment (the leader keeps its assignment without running the assignor); with v8 the Leader is
    the *old* id and the member list is empty, so the returning leader does not think it leads. Either
    way the group's leader is now the new id."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    old_leader, follower = formed.leader, formed.followers[0]
    response = h.join("", instance_id="I0", protocols=member_protocols(0), version=version).response
    new = response.member_id
    assert new.startswith("I0-") and new != old_leader
    if version >= 9:
        expected = JoinGroupResponse(
            generation_id=formed.generation,
            protocol_type="consumer",
            protocol_name="range",
            leader=new,
            member_id=new,
            skip_assignment=True,
            members=(
                JoinGroupMember(member_id=new, group_instance_id="I0", metadata=b"metadata-0"),
                JoinGroupMember(member_id=follower, group_instance_id="I1", metadata=b"metadata-1"),
            ),
        )
    else:
        expected = JoinGroupResponse(
            generation_id=formed.generation,
            protocol_type="consumer",
            protocol_name="range",
            leader=old_leader,
            member_id=new,
            skip_assignment=False,
            members=(),
        )
    assert response == expected
    assert h.group().leader_id == new
    assert h.state is ClassicGroupState.STABLE
    assert h.group().generation == formed.generation


def test_M03_static_restart_changing_selected_protocol_rebalances() -> None:
    """Given a Stable group of static members I0 (leader) and I1, both offering [range, roundrobin] so
    "range" is selected (session 15 s, rebalance 10 s);
    when I1 restarts offering only [roundrobin];
    then the selected protocol would change, so a rebalance starts (its JoinGroup waits). The old leader
    never rejoins; at the rebalance timeout the static I0 is kept but the new I1 is elected leader and
    generation N+1 uses "roundrobin", the member list including I0."""
    h = GroupHarness()
    both = [(("range", f"range-{i}".encode()), ("roundrobin", f"rr-{i}".encode())) for i in range(2)]
    formed = h.form_group(2, instance_ids=["I0", "I1"], protocols=both, session_timeout_ms=15_000)
    assert h.group().protocol_name == "range"
    mark = h.mark()
    call = h.join("", instance_id="I1", protocols=(("roundrobin", b"rr-new"),), session_timeout_ms=15_000)
    assert not call.done
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert h.records_since(mark) == []
    h.sleep(10_000)
    new = call.response.member_id
    assert call.response == JoinGroupResponse(
        generation_id=formed.generation + 1,
        protocol_type="consumer",
        protocol_name="roundrobin",
        leader=new,
        member_id=new,
        members=(
            JoinGroupMember(member_id=formed.leader, group_instance_id="I0", metadata=b"rr-0"),
            JoinGroupMember(member_id=new, group_instance_id="I1", metadata=b"rr-new"),
        ),
    )
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.group().static_members == {"I0": formed.leader, "I1": new}


def test_M04_replaced_static_member_is_fenced() -> None:
    """Given static member I1 replaced by a new member id (restart while Stable);
    when the old process sends Heartbeat, SyncGroup, OffsetCommit or JoinGroup with its old id and I1;
    then each gets FENCED_INSTANCE_ID (OffsetCommit on every partition) and nothing changes."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    old = formed.followers[0]
    h.join("", instance_id="I1", protocols=member_protocols(1))
    g = formed.generation
    mark = h.mark()
    assert h.heartbeat(old, g, instance_id="I1") is E.FENCED_INSTANCE_ID
    assert h.sync(old, g, instance_id="I1").response == SyncGroupResponse(error=E.FENCED_INSTANCE_ID)
    commit = h.commit(old, g, {("t", 0): 1, ("t", 1): 2}, instance_id="I1")
    assert commit.topics == (("t", ((0, E.FENCED_INSTANCE_ID), (1, E.FENCED_INSTANCE_ID))),)
    rejoin = h.join(old, instance_id="I1").response
    assert rejoin.error is E.FENCED_INSTANCE_ID
    assert rejoin.member_id == old
    assert h.records_since(mark) == []
    assert h.state is ClassicGroupState.STABLE


def test_M05_parked_join_of_old_static_process_is_fenced() -> None:
    """Given a rebalance (a new member joined) in which the old I1 process rejoined with its member id
    and is parked;
    when a new I1 process joins with MemberId "" and I1;
    then the parked JoinGroup is answered FENCED_INSTANCE_ID (old MemberId, Leader "", generation -1, no
    protocol fields); the group is still PreparingRebalance and the new I1 takes part in generation N+1."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    leader, old = formed.leader, formed.followers[0]
    newcomer = h.join_new(client_id="client-new")
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    old_join = h.join(old)
    assert not old_join.done
    new_join = h.join("", instance_id="I1", protocols=member_protocols(1))
    assert old_join.response == JoinGroupResponse(
        error=E.FENCED_INSTANCE_ID,
        member_id=old,
        leader="",
        generation_id=-1,
        protocol_type=None,
        protocol_name=None,
        members=(),
    )
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert not new_join.done
    h.join(leader)
    assert new_join.response.generation_id == formed.generation + 1
    assert newcomer.response.generation_id == formed.generation + 1
    assert h.group().static_members["I1"] == new_join.response.member_id


def test_M06_static_restart_during_completing_rebalance_rebalances() -> None:
    """Given a group in CompletingRebalance;
    when a static member rejoins with MemberId "" (a restart);
    then a rebalance is always prepared (the leader may have assigned the old id): with the single static
    member it completes at once at generation 2; with two members the old process's parked SyncGroup is
    answered FENCED_INSTANCE_ID and the group waits in PreparingRebalance for the leader."""
    h = GroupHarness()
    first = h.join_new(instance_id="I0")
    h.sleep(0)
    assert first.response.generation_id == 1
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    mark = h.mark()
    again = h.join("", instance_id="I0").response
    assert again.error is E.NONE
    assert again.generation_id == 2
    assert again.leader == again.member_id != first.response.member_id
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.group().generation == 2
    assert len(h.group().members) == 1
    assert h.records_since(mark) == []

    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    h.rejoin_all()
    old_sync = h.sync(formed.followers[0])
    assert not old_sync.done
    restart = h.join("", instance_id="I1", protocols=member_protocols(1))
    assert old_sync.response == SyncGroupResponse(error=E.FENCED_INSTANCE_ID)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert not restart.done
    h.join(formed.leader)
    assert restart.response.generation_id == formed.generation + 2


def test_M07_known_member_id_with_unknown_instance_id() -> None:
    """Given a Stable group of static members;
    when a JoinGroup carries the leader's member id but an unknown instance id;
    then UNKNOWN_MEMBER_ID and nothing changes."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    mark = h.mark()
    response = h.join(formed.leader, instance_id="unknown-instance").response
    assert response == JoinGroupResponse(error=E.UNKNOWN_MEMBER_ID, member_id=formed.leader)
    assert h.state is ClassicGroupState.STABLE
    assert h.records_since(mark) == []


def test_static_members_that_did_not_rejoin_must_still_sync() -> None:
    """Given a Stable group of static members I0 (leader) and I1 (session 30 s, rebalance 10 s) and a new
    dynamic member joining; neither static member rejoins, so at the rebalance timeout generation N+1
    completes with the newcomer as leader and both static members kept (listed, but not answered);
    when the newcomer syncs and the static members never send SyncGroup for the new generation;
    then, as for any member of the generation (docs/protocol.md, S07), the pending-sync timer removes
    them one rebalance timeout after the join completed and a new rebalance is prepared."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"], session_timeout_ms=30_000)
    newcomer = h.join_new(client_id="client-new", session_timeout_ms=30_000)
    h.sleep(10_000)
    response = newcomer.response
    assert response.leader == response.member_id
    assert [m.member_id for m in response.members] == [*formed.members, response.member_id]
    assert h.group().pending_sync_members == {*formed.members, response.member_id}
    h.sync(response.member_id, response.generation_id, {response.member_id: b"all"})
    assert h.state is ClassicGroupState.STABLE
    h.sleep(9_999)
    assert h.state is ClassicGroupState.STABLE
    h.sleep(1)
    assert list(h.group().members) == [response.member_id]
    assert h.group().static_members == {}
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
