"""Scenarios S01-S07, H01-H06, L01-L05 and G01-G02 of docs/protocol.md: classic SyncGroup,
Heartbeat, LeaveGroup, session expiry and the group size limit.

S08 (leader SyncGroup append failure) is not covered: the core has no append-failure path yet."""

from __future__ import annotations

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupResponse, LeaveGroupMemberResponse, LeavingMember, SyncGroupResponse
from regroup.records.model import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record
from tests.coordinator.harness import CLIENT_HOST, GROUP, GroupHarness

E = ErrorCode


def test_S01_follower_sync_waits_for_leader() -> None:
    """Given a group in CompletingRebalance;
    when a follower sends SyncGroup before the leader;
    then it is parked, and answered with its own assignment (and the protocol type/name) once the leader's
    SyncGroup stores the assignment; the group is then Stable."""
    h = GroupHarness()
    formed = h.form_group(2)
    h.rejoin_all()
    leader, follower = formed.leader, formed.followers[0]
    follower_sync = h.sync(follower)
    assert not follower_sync.done
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    leader_sync = h.sync(leader, assignments={leader: b"to-leader", follower: b"to-follower"})
    assert follower_sync.response == SyncGroupResponse(
        protocol_type="consumer", protocol_name="range", assignment=b"to-follower"
    )
    assert leader_sync.response == SyncGroupResponse(
        protocol_type="consumer", protocol_name="range", assignment=b"to-leader"
    )
    assert h.state is ClassicGroupState.STABLE


def test_S02_member_missing_from_leader_assignment_gets_empty_bytes() -> None:
    """Given a group in CompletingRebalance with two members;
    when the leader's SyncGroup assigns only itself;
    then the group is Stable, the omitted follower receives empty assignment bytes, and the persisted
    group record carries both members with those assignments."""
    h = GroupHarness()
    formed = h.form_group(2)
    h.rejoin_all()
    leader, follower = formed.leader, formed.followers[0]
    completing_since = h.group().state_timestamp_ms
    generation = h.group().generation
    mark = h.mark()
    h.sync(leader, assignments={leader: b"everything"})
    assert h.state is ClassicGroupState.STABLE
    assert h.sync(follower).response == SyncGroupResponse(
        protocol_type="consumer", protocol_name="range", assignment=b""
    )
    assert h.records_since(mark) == [
        Record(
            GroupMetadataKey(group_id=GROUP),
            GroupMetadataValue(
                protocol_type="consumer",
                generation=generation,
                protocol_name="range",
                leader=leader,
                current_state_timestamp_ms=completing_since,
                members=(
                    MemberMetadata(
                        member_id=leader,
                        group_instance_id=None,
                        client_id="client-0",
                        client_host=CLIENT_HOST,
                        rebalance_timeout_ms=10_000,
                        session_timeout_ms=10_000,
                        subscription=b"metadata-0",
                        assignment=b"everything",
                    ),
                    MemberMetadata(
                        member_id=follower,
                        group_instance_id=None,
                        client_id="client-1",
                        client_host=CLIENT_HOST,
                        rebalance_timeout_ms=10_000,
                        session_timeout_ms=10_000,
                        subscription=b"metadata-1",
                        assignment=b"",
                    ),
                ),
            ),
        )
    ]


def test_S03_sync_with_wrong_generation_is_illegal() -> None:
    """Given a Stable group at generation N;
    when a member sends SyncGroup with generation N-1 or N+1;
    then ILLEGAL_GENERATION, and the group is unchanged."""
    h = GroupHarness()
    formed = h.form_group(2)
    for generation in (formed.generation - 1, formed.generation + 1):
        assert h.sync(formed.followers[0], generation).response == SyncGroupResponse(error=E.ILLEGAL_GENERATION)
    assert h.state is ClassicGroupState.STABLE


def test_S04_sync_protocol_names_must_match_when_given() -> None:
    """Given a Stable group using consumer/range;
    when a v5 SyncGroup names ProtocolName "roundrobin" (or ProtocolType "connect");
    then INCONSISTENT_GROUP_PROTOCOL; with matching names, or with null names (v<5), it succeeds."""
    h = GroupHarness()
    formed = h.form_group(2)
    follower = formed.followers[0]
    wrong_name = h.sync(follower, protocol_type="consumer", protocol_name="roundrobin").response
    assert wrong_name == SyncGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    wrong_type = h.sync(follower, protocol_type="connect", protocol_name="range").response
    assert wrong_type == SyncGroupResponse(error=E.INCONSISTENT_GROUP_PROTOCOL)
    expected = SyncGroupResponse(protocol_type="consumer", protocol_name="range", assignment=b"assignment-1")
    assert h.sync(follower, protocol_type="consumer", protocol_name="range").response == expected
    assert h.sync(follower, protocol_type=None, protocol_name=None).response == expected


def test_S05_sync_during_preparing_rebalance() -> None:
    """Given a group in PreparingRebalance (the leader rejoined);
    when a member sends SyncGroup with the current generation;
    then REBALANCE_IN_PROGRESS."""
    h = GroupHarness()
    formed = h.form_group(2)
    h.join(formed.leader)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    response = h.sync(formed.followers[0], formed.generation).response
    assert response == SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS)


def test_S06_sync_to_unknown_group() -> None:
    """Given no group;
    when SyncGroup arrives;
    then UNKNOWN_MEMBER_ID and no group is created."""
    h = GroupHarness()
    assert h.sync("member", 1).response == SyncGroupResponse(error=E.UNKNOWN_MEMBER_ID)
    assert not h.has_group()


def test_S07_followers_that_never_sync_are_removed_at_rebalance_timeout() -> None:
    """Given a join phase that completed for 3 members (rebalance timeout 5000), the leader synced (Stable)
    and the followers only heartbeat;
    when the rebalance timeout elapses after the join completed;
    then the followers are removed and the group is PreparingRebalance again: the leader's heartbeat gets
    REBALANCE_IN_PROGRESS, the followers' UNKNOWN_MEMBER_ID; nothing is written by the expiry."""
    h = GroupHarness()
    formed = h.form_group(3, session_timeout_ms=6_000, rebalance_timeout_ms=5_000)
    h.rejoin_all()
    generation = formed.generation + 1
    h.sleep(2_500)
    for member_id in formed.members:
        assert h.heartbeat(member_id, generation) is E.NONE
    h.sync(formed.leader, generation, {m: b"x" for m in formed.members})
    assert h.state is ClassicGroupState.STABLE
    assert h.heartbeat(formed.leader, generation) is E.NONE
    mark = h.mark()
    h.sleep(2_499)
    assert h.state is ClassicGroupState.STABLE
    h.sleep(1)
    assert h.records_since(mark) == []
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert list(h.group().members) == [formed.leader]
    assert h.heartbeat(formed.leader, generation) is E.REBALANCE_IN_PROGRESS
    for follower in formed.followers:
        assert h.heartbeat(follower, generation) is E.UNKNOWN_MEMBER_ID


def test_H01_heartbeat_to_unknown_group() -> None:
    """Given no group;
    when a Heartbeat arrives;
    then UNKNOWN_MEMBER_ID and no group is created."""
    h = GroupHarness()
    assert h.heartbeat("member", 1) is E.UNKNOWN_MEMBER_ID
    assert not h.has_group()


def test_H02_heartbeat_during_completing_rebalance() -> None:
    """Given a group in CompletingRebalance;
    when a member heartbeats with the current (new) generation;
    then NONE."""
    h = GroupHarness()
    formed = h.form_group(2)
    h.rejoin_all()
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    for member_id in formed.members:
        assert h.heartbeat(member_id, formed.generation + 1) is E.NONE


def test_H03_heartbeat_with_old_generation() -> None:
    """Given a Stable group at generation 3;
    when a member heartbeats with generation 2;
    then ILLEGAL_GENERATION; with generation 3, NONE."""
    h = GroupHarness()
    formed = h.form_group(2)
    assert formed.generation == 2
    h.rejoin_all()
    h.sync_all()
    assert h.group().generation == 3
    assert h.heartbeat(formed.followers[0], 2) is E.ILLEGAL_GENERATION
    assert h.heartbeat(formed.followers[0], 3) is E.NONE


def test_H04_silent_member_expires_and_others_see_rebalance() -> None:
    """Given a Stable group of 3 (session 10 s) where one member stops heartbeating;
    when its session timeout elapses;
    then it is removed and a rebalance is prepared: the others' heartbeats get REBALANCE_IN_PROGRESS, its
    own later heartbeat UNKNOWN_MEMBER_ID."""
    h = GroupHarness()
    formed = h.form_group(3)
    a, b, c = formed.members
    g = formed.generation
    h.sleep(5_000)
    assert h.heartbeat(a, g) is E.NONE
    assert h.heartbeat(c, g) is E.NONE
    h.sleep(4_999)
    assert h.state is ClassicGroupState.STABLE
    h.sleep(1)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert list(h.group().members) == [a, c]
    assert h.heartbeat(a, g) is E.REBALANCE_IN_PROGRESS
    assert h.heartbeat(c, g) is E.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, g) is E.UNKNOWN_MEMBER_ID


def test_H05_parked_join_satisfies_heartbeat_but_heartbeats_alone_do_not_rejoin() -> None:
    """Given a Stable group of 2 (session 6 s, rebalance 20 s); the leader rejoins (parked) and the
    follower only heartbeats (REBALANCE_IN_PROGRESS) without rejoining;
    when time passes beyond the session timeout;
    then the parked leader is not expired, the follower is expired at its session timeout after its last
    heartbeat, the join completes at once without it, and its later heartbeats get UNKNOWN_MEMBER_ID."""
    h = GroupHarness()
    formed = h.form_group(2, session_timeout_ms=6_000, rebalance_timeout_ms=20_000)
    leader, follower = formed.leader, formed.followers[0]
    leader_join = h.join(leader)
    h.sleep(3_000)
    assert h.heartbeat(follower, formed.generation) is E.REBALANCE_IN_PROGRESS
    h.sleep(5_999)  # 8999 ms parked: beyond the leader's 6 s session
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert list(h.group().members) == [leader, follower]
    assert not leader_join.done
    h.sleep(1)
    assert list(h.group().members) == [leader]
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert leader_join.response.generation_id == formed.generation + 1
    assert [m.member_id for m in leader_join.response.members] == [leader]
    assert h.heartbeat(follower, formed.generation) is E.UNKNOWN_MEMBER_ID


def test_H06_offset_commits_keep_the_session_alive() -> None:
    """Given a Stable group of 2 (session 6 s) where the follower never heartbeats but commits offsets
    every 5 s (the leader heartbeats);
    when 20 s pass;
    then the follower is still a member and the group stays Stable; once it stops committing it expires
    6 s after its last commit."""
    h = GroupHarness()
    formed = h.form_group(2, session_timeout_ms=6_000)
    leader, follower = formed.leader, formed.followers[0]
    g = formed.generation
    for _ in range(4):
        h.sleep(5_000)
        assert h.heartbeat(leader, g) is E.NONE
        assert h.commit(follower, g).topics == (("topic", ((0, E.NONE),)),)
    assert h.state is ClassicGroupState.STABLE
    assert list(h.group().members) == [leader, follower]
    h.sleep(3_000)
    assert h.heartbeat(leader, g) is E.NONE
    h.sleep(2_999)
    assert follower in h.group().members
    h.sleep(1)
    assert follower not in h.group().members
    assert h.state is ClassicGroupState.PREPARING_REBALANCE


def test_L01_batch_leave_with_one_valid_and_one_unknown_member() -> None:
    """Given a Stable group of 2;
    when LeaveGroup (v3 batch) names the follower and an unknown member id;
    then top-level NONE, per member NONE and UNKNOWN_MEMBER_ID, the follower is removed and a rebalance
    is prepared."""
    h = GroupHarness()
    formed = h.form_group(2)
    follower = formed.followers[0]
    response = h.leave(follower, "unknown-member")
    assert response.error is E.NONE
    assert response.members == (
        LeaveGroupMemberResponse(member_id=follower, group_instance_id=None, error=E.NONE),
        LeaveGroupMemberResponse(member_id="unknown-member", group_instance_id=None, error=E.UNKNOWN_MEMBER_ID),
    )
    assert list(h.group().members) == [formed.leader]
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert h.heartbeat(formed.leader, formed.generation) is E.REBALANCE_IN_PROGRESS


def test_L02_leave_unknown_group() -> None:
    """Given no group;
    when LeaveGroup v3 names two members;
    then top-level NONE and UNKNOWN_MEMBER_ID for each; a v0-2 (single member) response, which takes the
    top-level error if set and otherwise the member's, is therefore UNKNOWN_MEMBER_ID."""
    h = GroupHarness()
    response = h.leave("m1", LeavingMember(member_id="m2", group_instance_id="i2"))
    assert response.error is E.NONE
    assert response.members == (
        LeaveGroupMemberResponse(member_id="m1", group_instance_id=None, error=E.UNKNOWN_MEMBER_ID),
        LeaveGroupMemberResponse(member_id="m2", group_instance_id="i2", error=E.UNKNOWN_MEMBER_ID),
    )
    single = h.leave("m1")
    assert (single.error or single.members[0].error) is E.UNKNOWN_MEMBER_ID
    assert not h.has_group()


def test_L03_admin_removal_by_instance_id() -> None:
    """Given a Stable group of static members I0 (leader) and I1;
    when LeaveGroup names MemberId "" with GroupInstanceId I1;
    then NONE for that entry, I1's member is removed (and unmapped) and a rebalance is prepared; an unknown
    instance id with MemberId "" gets UNKNOWN_MEMBER_ID."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    response = h.leave(LeavingMember(member_id="", group_instance_id="I1"))
    assert response.members == (LeaveGroupMemberResponse(member_id="", group_instance_id="I1", error=E.NONE),)
    assert list(h.group().members) == [formed.leader]
    assert h.group().static_members == {"I0": formed.leader}
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    unknown = h.leave(LeavingMember(member_id="", group_instance_id="I9"))
    assert unknown.members == (
        LeaveGroupMemberResponse(member_id="", group_instance_id="I9", error=E.UNKNOWN_MEMBER_ID),
    )


def test_L04_leave_with_fenced_instance_id() -> None:
    """Given static member I1 with member id m1 in a Stable group;
    when LeaveGroup names member id m2 with instance I1;
    then FENCED_INSTANCE_ID for that entry, nobody is removed and the group stays Stable."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"])
    response = h.leave(LeavingMember(member_id="m2", group_instance_id="I1"))
    assert response.error is E.NONE
    assert response.members == (
        LeaveGroupMemberResponse(member_id="m2", group_instance_id="I1", error=E.FENCED_INSTANCE_ID),
    )
    assert list(h.group().members) == formed.members
    assert h.state is ClassicGroupState.STABLE


def test_L05_last_member_leaving_empties_the_group() -> None:
    """Given a Stable group with one member at generation N;
    when it leaves;
    then the group goes Empty at generation N+1 and is persisted that way (no protocol, no leader, no
    members)."""
    h = GroupHarness()
    formed = h.form_group(1)
    h.sleep(100)
    mark = h.mark()
    assert h.leave(formed.leader).members[0].error is E.NONE
    assert h.state is ClassicGroupState.EMPTY
    assert h.group().generation == formed.generation + 1
    assert h.records_since(mark) == [
        Record(
            GroupMetadataKey(group_id=GROUP),
            GroupMetadataValue(
                protocol_type="consumer",
                generation=formed.generation + 1,
                protocol_name=None,
                leader=None,
                current_state_timestamp_ms=h.now_ms,
                members=(),
            ),
        )
    ]


def test_G01_join_beyond_max_size_is_rejected() -> None:
    """Given group.max.size = 1 and a Stable group with one member;
    when a second member sends JoinGroup (v4, MemberId "");
    then GROUP_MAX_SIZE_REACHED with MemberId "", and the group is unchanged (no pending id)."""
    h = GroupHarness(group_max_size=1)
    formed = h.form_group(1)
    response = h.join("", version=4).response
    assert response == JoinGroupResponse(error=E.GROUP_MAX_SIZE_REACHED, member_id="")
    assert list(h.group().members) == formed.members
    assert h.group().pending_join_members == set()
    assert h.state is ClassicGroupState.STABLE


def test_G02_loaded_group_over_max_size_rebalances_and_last_joiner_is_kicked() -> None:
    """Given a Stable group of 3 members persisted, and a coordinator loading it with group.max.size = 2;
    when the group is loaded;
    then a rebalance is prepared at once (still 3 members). When the members rejoin, the first two are
    accepted and the last one gets GROUP_MAX_SIZE_REACHED with MemberId "" and is removed; the group waits
    (PreparingRebalance) until the rebalance timeout and then completes with the two members."""
    h = GroupHarness()
    formed = h.form_group(3)
    h.reload(group_max_size=2)
    group = h.group()
    assert group.state is ClassicGroupState.PREPARING_REBALANCE
    assert list(group.members) == formed.members
    a, b, c = formed.members
    join_a, join_b = h.join(a), h.join(b)
    late = h.join(c).response
    assert late == JoinGroupResponse(error=E.GROUP_MAX_SIZE_REACHED, member_id="")
    assert list(group.members) == [a, b]
    assert group.state is ClassicGroupState.PREPARING_REBALANCE
    assert not join_a.done and not join_b.done
    h.sleep(9_999)
    assert group.state is ClassicGroupState.PREPARING_REBALANCE
    h.sleep(1)
    assert group.state is ClassicGroupState.COMPLETING_REBALANCE
    assert group.generation == formed.generation + 1
    assert [m.member_id for m in join_a.response.members] == [a, b]
    assert join_b.response.generation_id == formed.generation + 1


def test_sync_failed_by_new_rebalance_restarts_the_session() -> None:
    """Given static members I0 (leader) and I1 (session 6 s, rebalance 20 s) in CompletingRebalance, I1
    parked in SyncGroup past its session timeout (which a parked member survives) while I0 heartbeats;
    when a new member joins, failing I1's parked SyncGroup with REBALANCE_IN_PROGRESS, and I1 never
    rejoins;
    then I1's session was restarted when its SyncGroup was answered (Kafka's ``propagateAssignment``), so
    it expires 6 s later and the join phase completes without it, instead of the static member being kept
    forever with no session timer."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", "I1"], session_timeout_ms=6_000, rebalance_timeout_ms=20_000)
    i0, i1 = formed.members
    h.rejoin_all()
    generation = formed.generation + 1
    parked = h.sync(i1, generation)
    h.sleep(3_000)
    assert h.heartbeat(i0, generation) is E.NONE
    h.sleep(4_000)  # I1's session timer fired at 6 s while it was parked
    assert h.heartbeat(i0, generation) is E.NONE
    newcomer = h.join_new(client_id="client-new", session_timeout_ms=6_000)
    assert parked.response == SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS)
    leader_join = h.join(i0)
    h.sleep(5_999)
    assert i1 in h.group().members
    h.sleep(1)
    assert i1 not in h.group().members
    assert h.group().static_members == {"I0": i0}
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    assert leader_join.response.generation_id == generation + 1
    assert newcomer.response.generation_id == generation + 1
