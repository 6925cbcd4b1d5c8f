"""Record keys and values (Kafka's ``__consumer_offsets`` shapes, version-agnostic). A record whose value
is ``None`` is a tombstone: the key is deleted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.records.consumer import ConsumerRecordKey, ConsumerRecordValue
from regroup.records.share import ShareRecordKey, ShareRecordValue

# The classic group's records are built at every generation, one MemberMetadata per member: they are not frozen
# (a frozen dataclass costs about 10k instructions per object in the compiled build; docs/architecture.md).
# ``Final`` fields keep them immutable for mypy; ``unsafe_hash`` keeps the field-based hash a frozen dataclass
# has. The offset key and value are built once per partition an OffsetCommit names (10,000 in one request is
# usual): they also take their fields by position, which costs about half of a keyword call.


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class GroupMetadataKey:
    group_id: Final[str]


@dataclass(slots=True, unsafe_hash=True)
class MemberMetadata:
    """A classic member as persisted: the metadata of the selected protocol and its assignment. (Its fields may be
    given by position: a group's record is 10,000 of these, made in one step.)"""

    member_id: Final[str]
    group_instance_id: Final[str | None]
    client_id: Final[str]
    client_host: Final[str]
    rebalance_timeout_ms: Final[int]
    session_timeout_ms: Final[int]
    subscription: Final[bytes]
    assignment: Final[bytes]


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class GroupMetadataValue:
    """A classic group's hard state: written when a generation completes, when the leader's assignment is
    stored, when a static member is replaced, and for a new empty group."""

    protocol_type: Final[str | None]
    generation: Final[int]
    protocol_name: Final[str | None]
    leader: Final[str | None]
    current_state_timestamp_ms: Final[int]
    members: Final[tuple[MemberMetadata, ...]]


@dataclass(slots=True, unsafe_hash=True)
class OffsetCommitKey:
    group_id: Final[str]
    topic: Final[str]
    partition: Final[int]


@dataclass(slots=True, unsafe_hash=True)
class OffsetCommitValue:
    offset: Final[int]
    leader_epoch: Final[int]
    metadata: Final[str]
    commit_timestamp_ms: Final[int]
    expire_timestamp_ms: Final[int | None]


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class PendingOffsetCommitKey:
    """An offset committed inside a transaction (TxnOffsetCommit) by ``producer_id``: pending until the
    transaction ends; its value is an ``OffsetCommitValue``."""

    producer_id: Final[int]
    group_id: Final[str]
    topic: Final[str]
    partition: Final[int]


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class TxnMarkerKey:
    """The marker of ``producer_id``'s transaction reached the group coordinator for ``group_id`` (Kafka writes
    a COMMIT or ABORT control record into ``__consumer_offsets``): the producer's pending offsets of the group
    become its committed offsets (each one not overwritten by a commit applied after it) or are dropped. One
    record however many partitions the transaction committed offsets for; its value is a ``TxnMarkerValue``."""

    producer_id: Final[int]
    group_id: Final[str]


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class TxnMarkerValue:
    committed: Final[bool]


RecordKey = (
    GroupMetadataKey | OffsetCommitKey | PendingOffsetCommitKey | TxnMarkerKey | ConsumerRecordKey | ShareRecordKey
)
RecordValue = GroupMetadataValue | OffsetCommitValue | TxnMarkerValue | ConsumerRecordValue | ShareRecordValue


@dataclass(slots=True, unsafe_hash=True)
class Record:
    key: Final[RecordKey]
    value: Final[RecordValue | None]
