"""Classic group membership requests and responses: JoinGroup, SyncGroup, Heartbeat, LeaveGroup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.model.errors import ErrorCode

NO_GENERATION = -1
UNKNOWN_MEMBER = ""


# The messages a group exchanges on every join, sync and heartbeat are not frozen: a frozen dataclass costs
# several times a plain one in either build (docs/architecture.md). Treat them as immutable
# all the same: nothing changes a message after building it. The client info and LeaveGroup's messages go
# further: ``Final`` fields (mypy refuses an assignment) and the field-based hash of a frozen dataclass
# (``unsafe_hash``), so they stay hashable values.


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class ClientInfo:
    """Who sent a request (KIP-40's client id and host)."""

    client_id: Final[str] = ""
    client_host: Final[str] = ""


#: the client info of a request that gives none (ClientInfo is immutable: one shared instance)
NO_CLIENT = ClientInfo()


@dataclass(slots=True, kw_only=True)
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
    client: ClientInfo = NO_CLIENT


@dataclass(slots=True)
class JoinGroupMember:
    """A member as the leader's JoinGroup answer lists it. (Its fields may be given by position: a leader's answer
    lists 10,000 of these, made in one step.)"""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True, kw_only=True)
class JoinGroupResponse:
    error: ErrorCode = ErrorCode.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = UNKNOWN_MEMBER
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(slots=True, kw_only=True)
class SyncGroupResponse:
    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(slots=True, kw_only=True)
class HeartbeatResponse:
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class LeavingMember:
    member_id: Final[str]
    group_instance_id: Final[str | None] = None
    reason: Final[str | None] = None


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class LeaveGroupRequest:
    group_id: Final[str]
    members: Final[tuple[LeavingMember, ...]]


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class LeaveGroupMemberResponse:
    member_id: Final[str]
    group_instance_id: Final[str | None]
    error: Final[ErrorCode]


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class LeaveGroupResponse:
    error: Final[ErrorCode] = ErrorCode.NONE
    members: Final[tuple[LeaveGroupMemberResponse, ...]] = ()
