"""Record keys and values of KIP-848 consumer groups (Kafka's ConsumerGroup* record shapes). A group is a
set of records: its epoch, its subscription metadata, one metadata record per member, one target assignment
per member plus the target epoch, one current assignment per member, and one resolution per regular
expression its members subscribe to. Replaying them rebuilds the group.
Partition sets are sorted tuples of ``(topic id, partitions)`` pairs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from typing import Final

PartitionSet = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribedTopic:
    topic_id: uuid.UUID
    name: str
    partitions: int
    racks: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[SubscribedTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocolMetadata:
    """Present iff the member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a consumer group."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int
    classic: ClassicProtocolMetadata | None = None


#: the fields of a member-metadata record, named as on the coordinator's member (``ConsumerGroupMember``), which
#: writes, replays and compares its metadata through them: a new member field is declared here and on the member
MEMBER_METADATA_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in fields(ConsumerGroupMemberMetadataValue))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    #: when the target was computed (KIP-1263's ``AssignmentTimestamp``): the next waits for the group's
    #: assignment interval from it; 0 when not known (written before it was kept)
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: PartitionSet


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned: PartitionSet
    pending_revocation: PartitionSet


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupRegularExpressionKey:
    """A regular expression the group's members subscribe to, as the group resolved it (KIP-848)."""

    group_id: str
    regex: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupRegularExpressionValue:
    """The topics the regex matched, sorted, and when it was resolved."""

    topics: tuple[str, ...]
    resolved_at_ms: int


ConsumerRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)
CONSUMER_KEY_TYPES = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)
