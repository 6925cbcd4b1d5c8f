"""Classic group membership requests and responses: JoinGroup, SyncGroup, Heartbeat, LeaveGroup."""

from __future__ import annotations

from dataclasses import dataclass, field

from regroup.model.errors import ErrorCode

NO_GENERATION = -1
UNKNOWN_MEMBER = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientInfo:
    """Who sent a request (KIP-40's client id and host)."""

    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    group_id: str
    member_id: str = UNKNOWN_MEMBER
    group_instance_id: str | None = None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    reason: str | None = None
    version: int = 9
    client: ClientInfo = field(default_factory=ClientInfo)


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResponse:
    error: ErrorCode = ErrorCode.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = UNKNOWN_MEMBER
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResponse:
    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse:
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResponse:
    error: ErrorCode = ErrorCode.NONE
    members: tuple[LeaveGroupMemberResponse, ...] = ()
