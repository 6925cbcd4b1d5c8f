"""Classic group membership requests and responses: JoinGroup, SyncGroup, Heartbeat, LeaveGroup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.model.errors import ErrorCode

NO_GENERATION = -1
UNKNOWN_MEMBER = ""


# The messages a group exchanges on every join, sync and heartbeat are not frozen and write their own
# ``__init__``: the compiled build (docs/architecture.md) compiles a written ``__init__`` but leaves a generated
# one interpreted, and a frozen one costs several times a plain one in either build. Treat them as immutable
# all the same: nothing changes a message after building it. The client info and LeaveGroup's messages go
# further: ``Final`` fields (mypy refuses an assignment) and the field-based hash of a frozen dataclass
# (``unsafe_hash``), so they stay hashable values.


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class ClientInfo:
    """Who sent a request (KIP-40's client id and host)."""

    client_id: Final[str]
    client_host: Final[str]

    def __init__(self, *, client_id: str = "", client_host: str = "") -> None:
        self.client_id = client_id
        self.client_host = client_host


#: the client info of a request that gives none (ClientInfo is immutable: one shared instance)
NO_CLIENT = ClientInfo()


@dataclass(slots=True, kw_only=True, init=False)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    reason: str | None
    version: int
    client: ClientInfo

    def __init__(
        self,
        *,
        group_id: str,
        member_id: str = UNKNOWN_MEMBER,
        group_instance_id: str | None = None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        reason: str | None = None,
        version: int = 9,
        client: ClientInfo = NO_CLIENT,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.reason = reason
        self.version = version
        self.client = client


@dataclass(slots=True, kw_only=True, init=False)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes

    def __init__(self, *, member_id: str, group_instance_id: str | None, metadata: bytes) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.metadata = metadata


@dataclass(slots=True, kw_only=True, init=False)
class JoinGroupResponse:
    error: ErrorCode
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    skip_assignment: bool
    member_id: str
    members: tuple[JoinGroupMember, ...]

    def __init__(
        self,
        *,
        error: ErrorCode = ErrorCode.NONE,
        generation_id: int = NO_GENERATION,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader: str = "",
        skip_assignment: bool = False,
        member_id: str = UNKNOWN_MEMBER,
        members: tuple[JoinGroupMember, ...] = (),
    ) -> None:
        self.error = error
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader = leader
        self.skip_assignment = skip_assignment
        self.member_id = member_id
        self.members = members


@dataclass(slots=True, kw_only=True, init=False)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]

    def __init__(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.assignments = assignments


@dataclass(slots=True, kw_only=True, init=False)
class SyncGroupResponse:
    error: ErrorCode
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes

    def __init__(
        self,
        *,
        error: ErrorCode = ErrorCode.NONE,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignment: bytes = b"",
    ) -> None:
        self.error = error
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.assignment = assignment


@dataclass(slots=True, kw_only=True, init=False)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None

    def __init__(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id


@dataclass(slots=True, kw_only=True, init=False)
class HeartbeatResponse:
    error: ErrorCode

    def __init__(self, *, error: ErrorCode = ErrorCode.NONE) -> None:
        self.error = error


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class LeavingMember:
    member_id: Final[str]
    group_instance_id: Final[str | None]
    reason: Final[str | None]

    def __init__(self, *, member_id: str, group_instance_id: str | None = None, reason: str | None = None) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.reason = reason


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class LeaveGroupRequest:
    group_id: Final[str]
    members: Final[tuple[LeavingMember, ...]]

    def __init__(self, *, group_id: str, members: tuple[LeavingMember, ...]) -> None:
        self.group_id = group_id
        self.members = members


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class LeaveGroupMemberResponse:
    member_id: Final[str]
    group_instance_id: Final[str | None]
    error: Final[ErrorCode]

    def __init__(self, *, member_id: str, group_instance_id: str | None, error: ErrorCode) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.error = error


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class LeaveGroupResponse:
    error: Final[ErrorCode]
    members: Final[tuple[LeaveGroupMemberResponse, ...]]

    def __init__(
        self, *, error: ErrorCode = ErrorCode.NONE, members: tuple[LeaveGroupMemberResponse, ...] = ()
    ) -> None:
        self.error = error
        self.members = members
