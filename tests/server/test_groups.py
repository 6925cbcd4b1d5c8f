"""A full classic rebalance over the wire with two members on two connections, one speaking the newest
versions and one the oldest: JoinGroup → SyncGroup → Heartbeat → LeaveGroup, with DescribeGroups views."""

from __future__ import annotations

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    encode_assignment,
    encode_subscription,
)
from tests.server.conftest import ServerProcess
from tests.server.wire import DESCRIBE, HEARTBEAT, JOIN, LEAVE, SYNC, WireClient

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 0, 22, 25, 27, 79
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT = 23, 26
SUB = encode_subscription(ConsumerProtocolSubscription(topics=("t",)))


def join_v9(client: WireClient, group: str, member_id: str = "") -> int:
    return client.send(
        JOIN,
        9,
        group_id=group,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": SUB}],
        reason=None,
    )


def join_v0(client: WireClient, group: str, member_id: str = "") -> int:
    return client.send(
        JOIN,
        0,
        group_id=group,
        session_timeout=10_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": SUB}],
    )


def assignment(*partitions: int) -> bytes:
    return encode_assignment(ConsumerProtocolAssignment(partitions={"t": tuple(partitions)}))


def test_two_members_rebalance_sync_heartbeat_and_leave(server: ServerProcess) -> None:
    group = "cycle"
    with WireClient(server.port, client_id="new-client") as a, WireClient(server.port, client_id="old-client") as b:
        # A (v9): KIP-394 round trip, then the group forms around A alone (initial delay 0)
        join_v9(a, group)
        first = a.receive()
        assert (first.error_code, first.generation_id) == (MEMBER_ID_REQUIRED, -1)
        a_id = first.member_id
        assert a_id.startswith("new-client-")
        join_v9(a, group, a_id)
        joined = a.receive()
        assert (joined.error_code, joined.generation_id, joined.leader, joined.member_id) == (NONE, 1, a_id, a_id)
        assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
        assert [m.member_id for m in joined.members] == [a_id]
        synced = a.call(
            SYNC,
            5,
            group_id=group,
            generation_id=1,
            member_id=a_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[{"member_id": a_id, "assignment": assignment(0, 1)}],
        )
        assert (synced.error_code, synced.assignment) == (NONE, assignment(0, 1))

        # B (v0: no MEMBER_ID_REQUIRED, no rebalance timeout) joins; its JoinGroup parks ...
        join_v0(b, group)
        # ... and does not block A's heartbeat on another connection, which is told to rejoin
        beat = a.call(HEARTBEAT, 4, group_id=group, generation_id=1, member_id=a_id, group_instance_id=None)
        assert beat.error_code == REBALANCE_IN_PROGRESS
        join_v9(a, group, a_id)
        leader_view, follower_view = a.receive(), b.receive()
        b_id = follower_view.member_id
        assert (leader_view.generation_id, follower_view.generation_id) == (2, 2)
        assert leader_view.leader == follower_view.leader == a_id
        assert sorted(m.member_id for m in leader_view.members) == sorted([a_id, b_id])
        assert follower_view.members == () and follower_view.protocol_name == "range"

        # the follower's SyncGroup (v0) parks until the leader's (v5) stores the assignment
        b.send(SYNC, 0, group_id=group, generation_id=2, member_id=b_id, assignments=[])
        leader_sync = a.call(
            SYNC,
            5,
            group_id=group,
            generation_id=2,
            member_id=a_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                {"member_id": a_id, "assignment": assignment(0)},
                {"member_id": b_id, "assignment": assignment(1)},
            ],
        )
        follower_sync = b.receive()
        assert (leader_sync.error_code, leader_sync.assignment) == (NONE, assignment(0))
        assert (follower_sync.error_code, follower_sync.assignment) == (NONE, assignment(1))
        assert b.call(HEARTBEAT, 0, group_id=group, generation_id=2, member_id=b_id).error_code == NONE
        assert b.call(HEARTBEAT, 0, group_id=group, generation_id=1, member_id=b_id).error_code == ILLEGAL_GENERATION

        described = a.call(DESCRIBE, 5, groups=[group], include_authorized_operations=True).groups[0]
        assert (described.error_code, described.group_state, described.protocol_data) == (NONE, "Stable", "range")
        members = {m.member_id: m for m in described.members}
        assert members[b_id].client_id == "old-client" and members[b_id].client_host == "/127.0.0.1"
        assert members[b_id].member_assignment == assignment(1)
        assert described.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)

        # B leaves (v0: one member, one error); A rejoins alone; A leaves (v5 batch) → Empty
        assert b.call(LEAVE, 0, group_id=group, member_id=b_id).error_code == NONE
        assert a.call(HEARTBEAT, 4, group_id=group, generation_id=2, member_id=a_id).error_code == REBALANCE_IN_PROGRESS
        join_v9(a, group, a_id)
        assert a.receive().generation_id == 3
        left = a.call(
            LEAVE, 5, group_id=group, members=[{"member_id": a_id, "group_instance_id": None, "reason": "bye"}]
        )
        assert left.error_code == NONE and [(m.member_id, m.error_code) for m in left.members] == [(a_id, NONE)]
        assert a.call(DESCRIBE, 0, groups=[group]).groups[0].group_state == "Empty"
        # a member that is gone is told so, in either LeaveGroup shape
        assert b.call(LEAVE, 2, group_id=group, member_id=b_id).error_code == UNKNOWN_MEMBER_ID
        gone = a.call(LEAVE, 3, group_id=group, members=[{"member_id": a_id, "group_instance_id": None}])
        assert [m.error_code for m in gone.members] == [UNKNOWN_MEMBER_ID]


def test_join_group_errors_reach_every_version(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        bad = client.call(
            JOIN,
            5,
            group_id="errors",
            session_timeout=10,
            rebalance_timeout=10,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": SUB}],
        )
        assert (bad.error_code, bad.protocol_name, bad.member_id) == (INVALID_SESSION_TIMEOUT, "", "")
        unknown = client.call(
            JOIN,
            7,
            group_id="errors",
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="nobody",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": SUB}],
        )
        assert (unknown.error_code, unknown.protocol_name, unknown.protocol_type) == (UNKNOWN_MEMBER_ID, None, None)
        # SyncGroup v5 must name its protocol type and name (KafkaApis)
        sync = client.call(
            SYNC,
            5,
            group_id="errors",
            generation_id=1,
            member_id="m",
            group_instance_id=None,
            protocol_type=None,
            protocol_name=None,
            assignments=[],
        )
        assert sync.error_code == INCONSISTENT_GROUP_PROTOCOL
