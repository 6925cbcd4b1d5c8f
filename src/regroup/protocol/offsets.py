"""Offset commit and fetch requests and responses (version-agnostic)."""

from __future__ import annotations

from dataclasses import dataclass

from regroup.model.errors import ErrorCode

NO_OFFSET = -1
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionCommit:
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int = -1  # or member epoch for consumer groups
    member_id: str = ""
    group_instance_id: str | None = None
    retention_ms: int = -1  # v2-4 only; -1 = broker default
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...] = ()
    version: int = 9


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponse:
    """No top-level error: a request-level failure is set on every partition."""

    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None = None  # None = every committed topic
    member_id: str | None = None
    member_epoch: int = -1
    require_stable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedOffset:
    partition: int
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponse:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    topics: tuple[tuple[str, tuple[FetchedOffset, ...]], ...] = ()
