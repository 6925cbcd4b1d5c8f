"""Offset commit (plain and transactional), fetch and delete requests and responses (version-agnostic)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Final, NamedTuple, cast

from regroup.model.errors import ErrorCode

NO_OFFSET = -1
NO_LEADER_EPOCH = -1

# The commit types are built for every partition a member commits (a simulated member commits in each of its
# revocation callbacks): not frozen (a frozen dataclass costs about 10k instructions per object in the compiled
# build; docs/architecture.md); ``Final`` fields keep them immutable for mypy and ``unsafe_hash`` keeps a frozen
# dataclass's field-based hash.
# ``PartitionCommit`` also takes its fields by position (about half the cost of keywords), as ``rows`` builds it.


@dataclass(slots=True, unsafe_hash=True)
class PartitionCommit:
    partition: Final[int]
    offset: Final[int]
    leader_epoch: Final[int] = NO_LEADER_EPOCH
    metadata: Final[str | None] = ""


@dataclass(slots=True, unsafe_hash=True)
class PartitionCommits:
    """One topic's partitions of a commit as columns: index ``i`` of each is what ``PartitionCommit`` ``i`` would
    hold. The server builds these from a decoded request, a column in one pass of C code over its partitions with
    no object per partition (a request may name 10,000; its first step on the event loop is bounded), and the
    core reads them the same way it reads ``PartitionCommit`` rows (``commit_rows``). Columns of one length."""

    partitions: Final[tuple[int, ...]]
    offsets: Final[tuple[int, ...]]
    leader_epochs: Final[tuple[int, ...]]
    metadata: Final[tuple[str | None, ...]]

    def __len__(self) -> int:
        return len(self.partitions)

    def __iter__(self) -> Iterator[PartitionCommit]:
        """The partitions as ``PartitionCommit`` objects, as a reader of the row form walks them."""
        return iter(self.rows())

    def rows(self) -> tuple[PartitionCommit, ...]:
        """The same partitions as ``PartitionCommit`` objects."""
        return tuple(map(PartitionCommit, self.partitions, self.offsets, self.leader_epochs, self.metadata))


#: a topic's partitions in a commit: a row per partition, or columns
CommitPartitions = tuple[PartitionCommit, ...] | PartitionCommits

_ROW = attrgetter("partition", "offset", "leader_epoch", "metadata")


def commit_rows(partitions: CommitPartitions) -> Iterator[tuple[int, int, int, str | None]]:
    """``(partition, offset, leader epoch, metadata)`` per partition, in order, from either form; a tuple made
    per partition in C (freed as soon as it is unpacked), so a loop over it pays no attribute lookup."""
    if isinstance(partitions, PartitionCommits):
        columns = partitions.partitions, partitions.offsets, partitions.leader_epochs, partitions.metadata
        return zip(*columns, strict=True)
    return cast("Iterator[tuple[int, int, int, str | None]]", map(_ROW, partitions))


def commit_offsets(partitions: CommitPartitions) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the partition numbers, their offsets), in order, from either form."""
    if isinstance(partitions, PartitionCommits):
        return partitions.partitions, partitions.offsets
    return tuple(p.partition for p in partitions), tuple(p.offset for p in partitions)


def partition_numbers(partitions: CommitPartitions) -> tuple[int, ...]:
    if isinstance(partitions, PartitionCommits):
        return partitions.partitions
    return tuple(p.partition for p in partitions)


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class OffsetCommitRequest:
    group_id: Final[str]
    generation_id: Final[int] = -1  # or member epoch for consumer groups
    member_id: Final[str] = ""
    group_instance_id: Final[str | None] = None
    retention_ms: Final[int] = -1  # v2-4 only; -1 = broker default
    topics: Final[tuple[tuple[str, CommitPartitions], ...]] = ()
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


class FetchedOffset(NamedTuple):
    """One partition of an OffsetFetch answer. A named tuple, not a dataclass: an OffsetFetch of every partition
    of a large assignment builds 10,000 of them in one step of the core, and the server encodes them as the
    ``(partition, offset, leader epoch, metadata, error)`` rows they are (``server/offset_answers.py``)."""

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
    topics: tuple[tuple[str, CommitPartitions], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponse:
    """``error``: the group's (then ``topics`` is empty); otherwise a code per partition asked for."""

    error: ErrorCode = ErrorCode.NONE
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...] = ()
