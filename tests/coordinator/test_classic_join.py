"""Scenarios C01-C27 of docs/protocol.md: classic JoinGroup and the group state machine."""

from __future__ import annotations

import pytest

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupMember, JoinGroupResponse, SyncGroupResponse
from regroup.records.model import GroupMetadataKey, GroupMetadataValue, Record
from tests.coordinator.harness import GROUP, GroupHarness

E = ErrorCode


def _id(prefix: str, n: int) -> str:
    """The n-th id ``CountingIds`` hands out, behind ``prefix``."""
    text = f"{n:032x}"
    return f"{prefix}-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _empty_group_record(generation: int, ts: int, protocol_type: str | None = "consumer") -> Record:
    return Record(
        GroupMetadataKey(group_id=GROUP),
        GroupMetadataValue(
            protocol_type=protocol_type,
            generation=generation,
            protocol_name=None,
            leader=None,
            current_state_timestamp_ms=ts,
            members=(),
        ),
    )


@pytest.mark.parametrize("version", [4, 9])
def test_C01_new_dynamic_member_gets_member_id_required(version: int) -> None:
    """Given no group;
    when a dynamic member sends JoinGroup (v4+) with MemberId "";
    then it gets MEMBER_ID_REQUIRED with a generated MemberId, the group exists Empty with no member (the
    id is only pending), and the new group is persisted as an empty group-metadata record."""
    h = GroupHarness()
    response = h.join("", version=version, client_id="client-a").response
    member_id = _id("client-a", 1)
    assert response == JoinGroupResponse(error=E.MEMBER_ID_REQUIRED, member_id=member_id)
    group = h.group()
    assert group.state is ClassicGroupState.EMPTY
    assert group.members == {}
    assert group.pending_join_members == {member_id}
    assert group.generation == 0
    assert h.records == [_empty_group_record(0, 0, protocol_type=None)]


def test_C02_pending_member_rejoins_and_becomes_leader() -> None:
    """Given the pending id handed out by MEMBER_ID_REQUIRED;
    when the member sends JoinGroup with that id;
    then it is added (no longer pending) and the group is PreparingRebalance; once the initial delay (0)
    elapses the group is CompletingRebalance at generation 1 and the caller is leader with itself listed."""
    h = GroupHarness()
    member_id = h.new_member_id(client_id="client-a")
    call = h.join(member_id, client_id="client-a")
    assert not call.done
    group = h.group()
    assert group.state is ClassicGroupState.PREPARING_REBALANCE
    assert list(group.members) == [member_id]
    assert group.pending_join_members == set()

    h.sleep(0)
    assert call.response == JoinGroupResponse(
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader=member_id,
        member_id=member_id,
        members=(JoinGroupMember(member_id=member_id, group_instance_id=None, metadata=b"range-metadata"),),
    )
    assert group.state is ClassicGroupState.COMPLETING_REBALANCE
    assert group.generation == 1
    assert group.leader_id == member_id


def test_C03_join_v3_adds_member_without_member_id_round_trip() -> None:
    """Given no group;
    when a member sends JoinGroup v3 with MemberId "";
    then there is no MEMBER_ID_REQUIRED: the member is added at once (group PreparingRebalance) and gets
    its generated id in the generation-1 JoinGroup response."""
    h = GroupHarness()
    call = h.join("", version=3, client_id="client-a")
    member_id = _id("client-a", 1)
    assert not call.done
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert list(h.group().members) == [member_id]
    assert h.group().pending_join_members == set()

    h.sleep(0)
    response = call.response
    assert response.error is E.NONE
    assert response.member_id == member_id
    assert response.generation_id == 1
    assert response.leader == member_id


def test_C04_unknown_member_id_on_absent_group_is_rejected() -> None:
    """Given no group;
    when JoinGroup carries a non-empty MemberId (dynamic, and static with an instance id);
    then UNKNOWN_MEMBER_ID (echoing the MemberId), and no group is created and nothing is written."""
    h = GroupHarness()
    assert h.join("member-id").response == JoinGroupResponse(error=E.UNKNOWN_MEMBER_ID, member_id="member-id")
    assert h.join("member-id", instance_id="instance").response == JoinGroupResponse(
        error=E.UNKNOWN_MEMBER_ID, member_id="member-id"
    )
    assert not h.has_group()
    assert h.records == []


@pytest.mark.parametrize("session_timeout_ms", [5_999, 1_800_001])
def test_C05_session_timeout_out_of_range(session_timeout_ms: int) -> None:
    """Given group.min.session.timeout.ms 6000 and group.max.session.timeout.ms 1800000;
    when JoinGroup has SessionTimeoutMs 5999 (or 1800001);
    then INVALID_SESSION_TIMEOUT and no group is created; the bounds themselves are accepted."""
    h = GroupHarness()
    response = h.join("", session_timeout_ms=session_timeout_ms).response
    assert response.error is E.INVALID_SESSION_TIMEOUT
    assert not h.has_group()
    assert h.records == []
    assert h.join("", session_timeout_ms=6_000).response.error is E.MEMBER_ID_REQUIRED
    assert h.join("", session_timeout_ms=1_800_000).response.error is E.MEMBER_ID_REQUIRED


def test_C06_empty_group_id_is_invalid() -> None:
    """Given any coordinator;
    when JoinGroup has GroupId "";
    then INVALID_GROUP_ID and nothing is created."""
    h = GroupHarness()
    assert h.join("", group_id="").response.error is E.INVALID_GROUP_ID
    assert len(h.coordinator.groups) == 0
    assert h.records == []


def test_C07_empty_group_needs_protocol_type_and_protocols() -> None:
    """Given an Empty group;
    when a member joins with ProtocolType "" (dynamic or static) or with no protocols;
    then INCONSISTENT_GROUP_PROTOCOL, and the group stays Empty without members.
    Also, when such a join names a group that does not exist, the refused join creates nothing: no group,
    no record (Kafka writes an empty group's record even then; here a refused request changes nothing)."""
    h = GroupHarness()
    h.new_member_id()  # creates the Empty group
    mark = h.mark()
    bad_type = h.join("", protocol_type="", protocols=(("range", b""),)).response
    assert bad_type == JoinGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    bad_type_static = h.join("", instance_id="instance", protocol_type="", protocols=(("range", b""),)).response
    assert bad_type_static == JoinGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    no_protocols = h.join("", protocols=()).response
    assert no_protocols == JoinGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    assert h.state is ClassicGroupState.EMPTY
    assert h.group().members == {}
    assert h.records_since(mark) == []

    assert h.join("", group_id="other", protocols=()).response.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert not h.has_group("other")
    assert "other" not in h.coordinator.persisted
    assert h.records_since(mark) == []


def test_C08_protocol_type_must_match_the_group() -> None:
    """Given a "consumer" group with a member;
    when a new member joins with ProtocolType "connect";
    then INCONSISTENT_GROUP_PROTOCOL (before any member id is handed out) and the group is unchanged.
    Also given an initial rebalance whose only member left (PreparingRebalance, no members, type still
    "consumer"): a "connect" joiner is rejected too, the check is against the group's type once it is no
    longer Empty (CG ``supportsProtocols`` tests the Empty *state*, not the member count)."""
    h = GroupHarness()
    formed = h.form_group(1)
    response = h.join("", protocol_type="connect", protocols=(("range", b""),)).response
    assert response == JoinGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    group = h.group()
    assert group.state is ClassicGroupState.STABLE
    assert list(group.members) == formed.members
    assert group.pending_join_members == set()

    h = GroupHarness(group_initial_rebalance_delay_ms=3_000)
    first = h.join_new()
    (only,) = h.group().members
    h.leave(only)
    assert first.response.error is E.UNKNOWN_MEMBER_ID
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert h.group().members == {}
    response = h.join("", protocol_type="connect", protocols=(("range", b""),)).response
    assert response == JoinGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    assert h.join("", protocol_type="consumer").response.error is E.MEMBER_ID_REQUIRED


def test_C09_new_member_must_share_a_protocol_with_everyone() -> None:
    """Given members that support only "range";
    when a new member joins supporting only "roundrobin";
    then INCONSISTENT_GROUP_PROTOCOL and the group is unchanged (Stable, same members, no pending id)."""
    h = GroupHarness()
    formed = h.form_group(2)
    response = h.join("", protocols=(("roundrobin", b"rr"),)).response
    assert response == JoinGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    group = h.group()
    assert group.state is ClassicGroupState.STABLE
    assert list(group.members) == formed.members
    assert group.pending_join_members == set()
    assert group.generation == formed.generation


def test_C10_selected_protocol_is_the_one_everyone_supports() -> None:
    """Given members A=[roundrobin, range], B=[range, roundrobin], C=[range];
    when the join phase completes;
    then the selected protocol is "range" (the only one all members support) and the leader receives every
    member's "range" metadata."""
    h = GroupHarness()
    formed = h.form_group(
        3,
        protocols=[
            (("roundrobin", b"a-rr"), ("range", b"a-range")),
            (("range", b"b-range"), ("roundrobin", b"b-rr")),
            (("range", b"c-range"),),
        ],
    )
    a, b, c = formed.members
    leader_response = formed.join_responses[formed.leader]
    assert {r.protocol_name for r in formed.join_responses.values()} == {"range"}
    assert leader_response.members == (
        JoinGroupMember(member_id=a, group_instance_id=None, metadata=b"a-range"),
        JoinGroupMember(member_id=b, group_instance_id=None, metadata=b"b-range"),
        JoinGroupMember(member_id=c, group_instance_id=None, metadata=b"c-range"),
    )
    assert h.group().protocol_name == "range"


def test_C11_votes_follow_member_preference_order() -> None:
    """Given two members that both list [a, b] in that order;
    when the join phase completes;
    then the selected protocol is "a"."""
    h = GroupHarness()
    formed = h.form_group(2, protocols=[(("a", b"0a"), ("b", b"0b")), (("a", b"1a"), ("b", b"1b"))])
    assert h.group().protocol_name == "a"
    assert {r.protocol_name for r in formed.join_responses.values()} == {"a"}
    assert [m.metadata for m in formed.join_responses[formed.leader].members] == [b"0a", b"1a"]


def test_C12_new_member_triggers_rebalance_seen_through_heartbeats() -> None:
    """Given a Stable group at generation N with 2 members;
    when a new member joins;
    then the group is PreparingRebalance, the existing members' heartbeats answer REBALANCE_IN_PROGRESS,
    and once both rejoin the join phase completes at generation N+1 with 3 members."""
    h = GroupHarness()
    formed = h.form_group(2)
    a, b = formed.members
    n = formed.generation
    new = h.join_new(client_id="client-new")
    assert not new.done
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, n) is E.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, n) is E.REBALANCE_IN_PROGRESS
    joins = [h.join(a), h.join(b)]
    assert all(call.done for call in joins)
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.group().generation == n + 1
    assert new.response.generation_id == n + 1
    assert new.response.leader == a
    assert len(h.group().members) == 3


def test_C13_only_leader_gets_member_list_with_selected_metadata() -> None:
    """Given 3 members each offering [roundrobin, range] with member-specific metadata;
    when the join phase completes;
    then every response has the same GenerationId, ProtocolType, ProtocolName ("roundrobin") and Leader;
    only the leader's response lists the members (in join order) with their "roundrobin" metadata."""
    h = GroupHarness()
    formed = h.form_group(
        3, protocols=[(("roundrobin", f"rr-{i}".encode()), ("range", f"range-{i}".encode())) for i in range(3)]
    )
    responses = h.rejoin_all()
    generation = formed.generation + 1
    everyone = tuple(
        JoinGroupMember(member_id=m, group_instance_id=None, metadata=f"rr-{i}".encode())
        for i, m in enumerate(formed.members)
    )
    for member_id, response in responses.items():
        assert response == JoinGroupResponse(
            generation_id=generation,
            protocol_type="consumer",
            protocol_name="roundrobin",
            leader=formed.leader,
            member_id=member_id,
            members=everyone if member_id == formed.leader else (),
        )


def test_C14_unchanged_follower_rejoin_does_not_rebalance() -> None:
    """Given a Stable group;
    when a follower rejoins with identical protocols;
    then it is answered at once with the current generation, Leader, empty Members, SkipAssignment false;
    the group stays Stable at the same generation and nothing is written."""
    h = GroupHarness()
    formed = h.form_group(2)
    follower = formed.followers[0]
    mark = h.mark()
    response = h.join(follower).response
    assert response == JoinGroupResponse(
        generation_id=formed.generation,
        protocol_type="consumer",
        protocol_name="range",
        leader=formed.leader,
        member_id=follower,
        members=(),
        skip_assignment=False,
    )
    assert h.state is ClassicGroupState.STABLE
    assert h.group().generation == formed.generation
    assert h.records_since(mark) == []


def test_C15_unchanged_leader_rejoin_rebalances() -> None:
    """Given a Stable group;
    when the leader rejoins with identical protocols;
    then a rebalance starts: the leader's JoinGroup waits, the group is PreparingRebalance, and it
    completes at generation N+1 when the follower rejoins."""
    h = GroupHarness()
    formed = h.form_group(2)
    leader_call = h.join(formed.leader)
    assert not leader_call.done
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    h.join(formed.followers[0])
    assert leader_call.response.generation_id == formed.generation + 1


def test_C16_follower_with_changed_metadata_rebalances() -> None:
    """Given a Stable group;
    when a follower rejoins with changed metadata for the same protocol;
    then a rebalance starts (its JoinGroup waits, group PreparingRebalance) and its new metadata is kept."""
    h = GroupHarness()
    formed = h.form_group(2)
    follower = formed.followers[0]
    call = h.join(follower, protocols=(("range", b"new-metadata"),))
    assert not call.done
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert h.member(follower).protocols == (("range", b"new-metadata"),)
    leader_view = h.join(formed.leader).response
    assert call.response.generation_id == formed.generation + 1
    assert JoinGroupMember(member_id=follower, group_instance_id=None, metadata=b"new-metadata") in leader_view.members


def test_C17_identical_join_in_completing_rebalance_is_answered_at_once() -> None:
    """Given a group in CompletingRebalance (join phase done, no SyncGroup yet);
    when the leader and then a follower re-send identical JoinGroups (e.g. the first response was lost);
    then both are answered at once with the current generation, the leader with the member list, the
    follower without, and the group stays CompletingRebalance."""
    h = GroupHarness()
    formed = h.form_group(2)
    first = h.rejoin_all()
    generation = formed.generation + 1
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    leader_again = h.join(formed.leader).response
    follower_again = h.join(formed.followers[0]).response
    assert leader_again == first[formed.leader]
    assert leader_again.generation_id == generation
    assert len(leader_again.members) == 2
    assert follower_again == first[formed.followers[0]]
    assert follower_again.members == ()
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.group().generation == generation


def test_C18_new_member_during_completing_rebalance_fails_parked_syncs() -> None:
    """Given a group in CompletingRebalance with a follower parked in SyncGroup;
    when a new member joins;
    then the parked SyncGroup is answered REBALANCE_IN_PROGRESS (no assignment, no protocol fields),
    assignments are cleared and the group is PreparingRebalance."""
    h = GroupHarness()
    formed = h.form_group(2)
    h.rejoin_all()
    follower_sync = h.sync(formed.followers[0])
    assert not follower_sync.done
    new = h.join_new(client_id="client-new")
    assert follower_sync.response == SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert not new.done
    assert all(m.assignment == b"" for m in h.group().members.values())


def test_C19_dynamic_member_not_rejoining_is_dropped_at_rebalance_timeout() -> None:
    """Given PreparingRebalance where 2 of 3 dynamic members rejoined (session 30 s, rebalance 10 s);
    when the rebalance timeout elapses;
    then the missing member is removed and generation N+1 completes with the 2 others; the dropped
    member's heartbeat gets UNKNOWN_MEMBER_ID."""
    h = GroupHarness()
    formed = h.form_group(3, session_timeout_ms=30_000)
    a, b, c = formed.members
    leader_call, b_call = h.join(a), h.join(b)
    h.sleep(9_999)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert not leader_call.done
    h.sleep(1)
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.group().generation == formed.generation + 1
    assert list(h.group().members) == [a, b]
    assert [m.member_id for m in leader_call.response.members] == [a, b]
    assert b_call.response.generation_id == formed.generation + 1
    assert h.heartbeat(c, formed.generation) is E.UNKNOWN_MEMBER_ID


def test_C20_joined_follower_replaces_missing_leader() -> None:
    """Given a Stable group where the follower rejoins (changed metadata starts the rebalance) but the
    leader never does;
    when the join timer fires;
    then the old leader is removed and the follower is the new leader, with itself as the only member."""
    h = GroupHarness()
    formed = h.form_group(2, session_timeout_ms=30_000)
    follower = formed.followers[0]
    call = h.join(follower, protocols=(("range", b"changed"),))
    h.sleep(10_000)
    assert call.response == JoinGroupResponse(
        generation_id=formed.generation + 1,
        protocol_type="consumer",
        protocol_name="range",
        leader=follower,
        member_id=follower,
        members=(JoinGroupMember(member_id=follower, group_instance_id=None, metadata=b"changed"),),
    )
    assert h.group().leader_id == follower
    assert list(h.group().members) == [follower]


def test_C21_new_member_during_initial_delay_extends_it() -> None:
    """Given an Empty group, initial delay 3000, rebalance timeout 10000;
    when a member joins at t=0 and another at t=2000;
    then the join phase completes at t=6000 (the delay is extended once), not at 3000, with both members
    in generation 1."""
    h = GroupHarness(group_initial_rebalance_delay_ms=3_000)
    first = h.join_new(client_id="client-a")
    h.sleep(2_000)
    second = h.join_new(client_id="client-b")
    h.sleep(1_000)
    assert not first.done and not second.done
    h.sleep_until(5_999)
    assert not first.done and not second.done
    h.sleep(1)
    assert first.response.generation_id == second.response.generation_id == 1
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert len(h.group().members) == 2


def test_C22_initial_delay_applies_even_when_everyone_joined() -> None:
    """Given an Empty group, initial delay 3000;
    when a single member joins at t=0;
    then the join phase completes at t=3000, not earlier, although all members had joined."""
    h = GroupHarness(group_initial_rebalance_delay_ms=3_000)
    call = h.join_new()
    assert h.group().has_all_members_joined()
    h.sleep(2_999)
    assert not call.done
    h.sleep(1)
    assert call.response.generation_id == 1
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE


def test_C23_initial_delay_bounded_by_rebalance_timeout() -> None:
    """Given an Empty group, initial delay 3000, rebalance timeout 10000;
    when a new member joins every second from t=0 to t=9000;
    then the join phase completes at t=10000 (the rebalance timeout), with all 10 members in generation 1."""
    h = GroupHarness(group_initial_rebalance_delay_ms=3_000)
    calls = []
    for i in range(10):
        h.sleep_until(i * 1_000)
        calls.append(h.join_new(client_id=f"client-{i}"))
    h.sleep_until(9_999)
    assert not any(call.done for call in calls)
    h.sleep(1)
    assert [call.response.generation_id for call in calls] == [1] * 10
    assert len(h.group().members) == 10


def test_C24_pending_member_expiry_completes_the_join_phase() -> None:
    """Given a rebalance in which both members rejoined but a pending member (MEMBER_ID_REQUIRED, session
    6000) never comes back;
    when its session timeout elapses;
    then the pending id is dropped and the join phase completes with the 2 members; a late JoinGroup with
    that id gets UNKNOWN_MEMBER_ID."""
    h = GroupHarness()
    formed = h.form_group(2)
    pending = h.new_member_id(session_timeout_ms=6_000, client_id="client-pending")
    calls = [h.join(m) for m in formed.members]
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    h.sleep(5_999)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert not any(call.done for call in calls)
    h.sleep(1)
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.group().pending_join_members == set()
    assert list(h.group().members) == formed.members
    assert all(call.response.generation_id == formed.generation + 1 for call in calls)
    late = h.join(pending, session_timeout_ms=6_000).response
    assert late == JoinGroupResponse(error=E.UNKNOWN_MEMBER_ID, member_id=pending)


def test_C25_new_member_expires_after_new_member_join_timeout() -> None:
    """Given a group whose leader (session 305 s, rebalance 600 s) does not rejoin, and a new member
    parked in JoinGroup (session 6 s);
    when 5 minutes (new-member join timeout) pass without the phase completing;
    then the new member is removed and its JoinGroup is answered UNKNOWN_MEMBER_ID with MemberId ""."""
    h = GroupHarness()
    formed = h.form_group(1, session_timeout_ms=305_000, rebalance_timeout_ms=600_000)
    new = h.join_new(session_timeout_ms=6_000, rebalance_timeout_ms=6_000, client_id="client-new")
    group = h.group()
    assert len(group.members) == 2
    assert [m.is_new for m in group.members.values()] == [False, True]
    h.sleep(299_999)
    assert not new.done
    h.sleep(1)
    assert new.response == JoinGroupResponse(error=E.UNKNOWN_MEMBER_ID, member_id="")
    assert list(group.members) == formed.members
    assert group.state is ClassicGroupState.PREPARING_REBALANCE


def test_C26_old_member_id_in_empty_group_is_unknown() -> None:
    """Given a group that became Empty because its only member expired;
    when that member sends JoinGroup with its old id;
    then UNKNOWN_MEMBER_ID (generation -1), the group stays Empty and nothing is written."""
    h = GroupHarness()
    formed = h.form_group(1)
    h.sleep(10_000)
    assert h.state is ClassicGroupState.EMPTY
    assert h.group().generation == formed.generation + 1
    mark = h.mark()
    response = h.join(formed.leader).response
    assert response == JoinGroupResponse(error=E.UNKNOWN_MEMBER_ID, member_id=formed.leader, generation_id=-1)
    assert h.state is ClassicGroupState.EMPTY
    assert h.records_since(mark) == []


def test_C27_each_completed_rebalance_increments_generation_by_one() -> None:
    """Given a group going through several rebalances (first member alone, second member joins, plain
    rejoin, third member joins, everybody leaves);
    when each join phase completes;
    then the generation grows by exactly 1 each time, also for the transition to Empty, which is
    persisted with that generation, no protocol and no leader."""
    h = GroupHarness()
    generations = []
    first = h.join_new(client_id="client-a")
    h.sleep(0)
    generations.append(first.response.generation_id)
    a = first.response.member_id
    second = h.join_new(client_id="client-b")
    h.join(a)
    generations.append(second.response.generation_id)
    h.sync_all()
    generations.append(h.rejoin_all()[a].generation_id)
    h.sync_all()
    third = h.join_new(client_id="client-c")
    h.rejoin_all()
    generations.append(third.response.generation_id)
    h.sync_all()
    h.leave(*h.group().members)
    generations.append(h.group().generation)
    assert generations == [1, 2, 3, 4, 5]
    assert h.state is ClassicGroupState.EMPTY
    assert h.records[-1] == _empty_group_record(5, h.now_ms)
