"""Offset commit (plain and transactional), fetch and delete requests and responses (version-agnostic)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.model.errors import ErrorCode

NO_OFFSET = -1
NO_LEADER_EPOCH = -1

# The commit types are built for every partition a member commits (a simulated member commits in each of its
# revocation callbacks): not frozen (a frozen dataclass costs about 10k instructions per object in the compiled
# build; docs/architecture.md); ``Final`` fields keep them immutable for mypy and ``unsafe_hash`` keeps a frozen
# dataclass's field-based hash.


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class PartitionCommit:
    partition: Final[int]
    offset: Final[int]
    leader_epoch: Final[int] = NO_LEADER_EPOCH
    metadata: Final[str | None] = ""


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class OffsetCommitRequest:
    group_id: Final[str]
    generation_id: Final[int] = -1  # or member epoch for consumer groups
    member_id: Final[str] = ""
    group_instance_id: Final[str | None] = None
    retention_ms: Final[int] = -1  # v2-4 only; -1 = broker default
    topics: Final[tuple[tuple[str, tuple[PartitionCommit, ...]], ...]] = ()
    version: Final[int] = 9
    #: committed inside a transaction (TxnOffsetCommit): the group's rules differ a little (Kafka)
    transactional: Final[bool] = False


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class OffsetCommitResponse:
    """No top-level error: a request-level failure is set on every partition."""

    topics: Final[tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequest:
    """Offsets committed inside ``producer_id``'s transaction; generation, member id and instance id are
    sent from version 3 (KIP-447), before that they are -1, "" and None."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponse:
    """``error``: the group's (then ``topics`` is empty); otherwise a code per partition asked for."""

    error: ErrorCode = ErrorCode.NONE
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...] = ()
