"""Group inspection and deletion (KIP-40 and later): DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from dataclasses import dataclass

from regroup.model.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    error_message: str | None = None  # version 6 and later


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsRequest:
    states: tuple[str, ...] = ()
    types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsResponse:
    error: ErrorCode = ErrorCode.NONE
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponse:
    results: tuple[tuple[str, ErrorCode], ...]
