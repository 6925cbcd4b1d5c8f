"""How a ``ClassicClientMember`` reacts to each response (Kafka's ``AbstractCoordinator`` response handlers and
``ConsumerCoordinator.onJoinComplete``), kept apart from the driving loop in ``classic_member``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from regroup.client.embedded import LeaderAssignmentError, assigned_partitions, leader_assign, metadata_snapshot
from regroup.client.types import ClassicClientState
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import HeartbeatResponse, JoinGroupResponse, SyncGroupResponse
from regroup.protocol.offsets import OffsetCommitResponse

if TYPE_CHECKING:
    from regroup.client.classic_member import ClassicClientMember
    from regroup.client.types import Inflight

#: read on every heartbeat answer, as module constants (the compiled build reads them without a class lookup)
_STABLE: Final = ClassicClientState.STABLE
_AFTER_JOIN: Final = (ClassicClientState.STABLE, ClassicClientState.COMPLETING_REBALANCE)
E = ErrorCode

#: Errors that end the consumer (the Java consumer's ``AbstractCoordinator`` raises them to the application).
FATAL: Final = frozenset(
    {
        E.FENCED_INSTANCE_ID,
        E.INCONSISTENT_GROUP_PROTOCOL,
        E.INVALID_SESSION_TIMEOUT,
        E.INVALID_GROUP_ID,
        E.GROUP_AUTHORIZATION_FAILED,
        E.GROUP_MAX_SIZE_REACHED,
        E.UNSUPPORTED_VERSION,
    }
)


def dispatch(member: ClassicClientMember, request_id: int, inflight: Inflight, response: object, now_ms: int) -> None:
    if isinstance(response, JoinGroupResponse) and request_id == member.join_id:
        member.join_id = None
        if member.reads_join_response_later(now_ms):
            member.stash_join_response(inflight, response)
        else:
            on_join(member, inflight, response, now_ms)
    elif isinstance(response, SyncGroupResponse) and request_id == member.sync_id:
        member.sync_id = None
        on_sync(member, inflight, response, now_ms)
    elif isinstance(response, HeartbeatResponse) and request_id == member.heartbeat_id:
        member.heartbeat_id = None
        on_heartbeat(member, inflight, response, now_ms)
    elif isinstance(response, OffsetCommitResponse):
        on_commit(member, inflight, response, now_ms)


def dispatch_join(member: ClassicClientMember, inflight: Inflight, response: object, now_ms: int) -> None:
    """A JoinGroup answer the member read later than it arrived (``ClassicClientMember.stash_join_response``)."""
    if isinstance(response, JoinGroupResponse) and member.state is ClassicClientState.PREPARING_REBALANCE:
        on_join(member, inflight, response, now_ms)


def _unchanged(member: ClassicClientMember, inflight: Inflight) -> bool:
    """Kafka's ``generationUnchanged``: the member is still what it was when it sent the request."""
    return inflight.generation == member.generation and inflight.member_id == member.member_id


def on_join(member: ClassicClientMember, inflight: Inflight, resp: JoinGroupResponse, now_ms: int) -> None:
    error = resp.error
    if error is E.NONE:
        if resp.protocol_type not in (None, "consumer"):
            member.fail(now_ms, f"JoinGroup answered protocol type {resp.protocol_type!r}")
            return
        member.member_id = resp.member_id
        member.generation = resp.generation_id
        member.protocol_name = resp.protocol_name
        member.leader_id = resp.leader
        # no lease from a JoinGroup answer: an immediate answer (identical rejoin while CompletingRebalance)
        # restarts neither the session timer nor the pending-sync timer
        member.heartbeat_after_join(now_ms)
        assignments: tuple[tuple[str, bytes], ...] = ()
        if member.is_leader and not resp.skip_assignment:
            assignor = next((a for a in member.assignors if a.name == resp.protocol_name), None)
            if assignor is None:
                member.fail(now_ms, f"leader does not know the selected protocol {resp.protocol_name!r}")
                return
            try:
                result = leader_assign(
                    assignor,
                    resp.members,
                    member.partition_counts,
                    cooperative=member.cooperative,
                    options=member.config.options,
                )
            except LeaderAssignmentError as exc:
                member.fail(now_ms, f"leader assignment failed: {exc}")
                return
            member.metadata_snapshot = result.metadata_snapshot
            assignments = result.assignments
        elif member.is_leader:  # a returning static leader keeps its assignment but still watches metadata
            member.metadata_snapshot = metadata_snapshot(resp.members, member.partition_counts)
        else:
            member.metadata_snapshot = None
        member.send_sync(now_ms, assignments)
    elif error is E.MEMBER_ID_REQUIRED:
        member.member_id = resp.member_id
        member.move(ClassicClientState.UNJOINED)
        member.request_rejoin(now_ms, "member id required")
    elif error is E.UNKNOWN_MEMBER_ID:
        member.reset(now_ms, "JoinGroup: UNKNOWN_MEMBER_ID", member_id_too=True)
    elif error in FATAL:
        member.fail(now_ms, f"JoinGroup: {error.name}")
    elif error is E.REBALANCE_IN_PROGRESS:
        member.move(ClassicClientState.UNJOINED)
        member.request_rejoin(now_ms, "JoinGroup: REBALANCE_IN_PROGRESS")
    else:  # coordinator moving or loading, unknown server error: back off and retry
        member.move(ClassicClientState.UNJOINED)
        member.request_rejoin(now_ms, f"JoinGroup: {error.name}", member.config.retry_backoff_ms)


def on_sync(member: ClassicClientMember, inflight: Inflight, resp: SyncGroupResponse, now_ms: int) -> None:
    error = resp.error
    if error is E.NONE:
        if resp.protocol_name is not None and resp.protocol_name != member.protocol_name:
            member.fail(now_ms, f"SyncGroup answered protocol {resp.protocol_name!r}")
            return
        assigned = assigned_partitions(resp.assignment)
        if assigned is None:
            member.fail(now_ms, "SyncGroup assignment bytes are malformed")
            return
        member.extend_lease(inflight.sent_ms)
        member.move(ClassicClientState.STABLE)
        member.needs_join_prepare = True
        member.previous = assigned
        member.previous_generation = member.generation
        member.assignment_received(assigned)  # its callbacks run at the application's next poll
        member.check_metadata(now_ms)
    elif error is E.REBALANCE_IN_PROGRESS:
        member.move(ClassicClientState.UNJOINED)
        member.request_rejoin(now_ms, "SyncGroup: REBALANCE_IN_PROGRESS")
    elif error in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
        member.reset(now_ms, f"SyncGroup: {error.name}", member_id_too=error is E.UNKNOWN_MEMBER_ID)
    elif error in FATAL:
        member.fail(now_ms, f"SyncGroup: {error.name}")
    else:
        member.move(ClassicClientState.UNJOINED)
        member.request_rejoin(now_ms, f"SyncGroup: {error.name}", member.config.retry_backoff_ms)


def on_heartbeat(member: ClassicClientMember, inflight: Inflight, resp: HeartbeatResponse, now_ms: int) -> None:
    error = resp.error
    member.heartbeat_due_after(inflight.sent_ms, now_ms)
    unchanged = _unchanged(member, inflight)
    if error is E.NONE:
        if unchanged and member.state is _STABLE:
            member.extend_lease(inflight.sent_ms)
    elif error is E.REBALANCE_IN_PROGRESS:
        if unchanged and member.state is _STABLE:
            member.request_rejoin(now_ms, "Heartbeat: REBALANCE_IN_PROGRESS")
    elif error in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
        if unchanged and member.state in _AFTER_JOIN:
            member.reset(now_ms, f"Heartbeat: {error.name}", member_id_too=error is E.UNKNOWN_MEMBER_ID)
    elif error is E.FENCED_INSTANCE_ID:
        if unchanged:
            member.fail(now_ms, "Heartbeat: FENCED_INSTANCE_ID")
    else:
        member.next_heartbeat_ms = now_ms + member.config.retry_backoff_ms


def on_commit(member: ClassicClientMember, inflight: Inflight, resp: OffsetCommitResponse, now_ms: int) -> None:
    codes: set[ErrorCode] = set()
    for _, results in resp.topics:
        for _, code in results:
            codes.add(code)
    if not _unchanged(member, inflight) or member.state is not _STABLE:
        return
    if E.UNKNOWN_MEMBER_ID in codes or E.ILLEGAL_GENERATION in codes:
        fenced = E.UNKNOWN_MEMBER_ID if E.UNKNOWN_MEMBER_ID in codes else E.ILLEGAL_GENERATION
        member.reset(now_ms, f"OffsetCommit: {fenced.name}", member_id_too=fenced is E.UNKNOWN_MEMBER_ID)
    elif E.FENCED_INSTANCE_ID in codes:
        member.fail(now_ms, "OffsetCommit: FENCED_INSTANCE_ID")
    elif E.REBALANCE_IN_PROGRESS in codes:
        member.request_rejoin(now_ms, "OffsetCommit: REBALANCE_IN_PROGRESS")
