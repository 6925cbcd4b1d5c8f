"""Record keys and values of share groups (KIP-932; Kafka's ShareGroup* record shapes, and the state the share
coordinator keeps per share partition). A share group is its epoch, one metadata record per member, one target
assignment per member plus the target epoch, and one current assignment per member; each share partition it
consumed is one state record: its start offset and the delivery state of the offsets in flight above it (only
the latest record of a key counts). Replaying them rebuilds the group and its share partitions.
Partition sets are sorted tuples of ``(topic id, partitions)`` pairs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

PartitionSet = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    #: when the target was computed (KIP-1263's ``AssignmentTimestamp``), kept while the group has an assignment
    #: interval; 0 when not known
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMemberValue:
    partitions: PartitionSet


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    assigned: PartitionSet


@dataclass(frozen=True, slots=True, kw_only=True)
class SharePartitionStateBatch:
    """Offsets ``first_offset..last_offset`` (inclusive) in one delivery state (Kafka's codes: 0 AVAILABLE,
    2 ACKNOWLEDGED, 4 ARCHIVED; acquired offsets are stored as AVAILABLE) with one delivery count."""

    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SharePartitionStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SharePartitionStateValue:
    """The share-partition start offset (every offset below it is done) and the offsets in flight above it."""

    start_offset: int
    batches: tuple[SharePartitionStateBatch, ...]


ShareRecordKey = (
    ShareGroupMetadataKey
    | ShareGroupMemberMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | SharePartitionStateKey
)
ShareRecordValue = (
    ShareGroupMetadataValue
    | ShareGroupMemberMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | SharePartitionStateValue
)
SHARE_KEY_TYPES = (
    ShareGroupMetadataKey,
    ShareGroupMemberMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
    SharePartitionStateKey,
)
