"""Record keys and values (Kafka's ``__consumer_offsets`` shapes, version-agnostic). A record whose value
is ``None`` is a tombstone: the key is deleted."""

from __future__ import annotations

from dataclasses import dataclass

from regroup.records.consumer import ConsumerRecordKey, ConsumerRecordValue


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    """A classic member as persisted: the metadata of the selected protocol and its assignment."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    """A classic group's hard state: written when a generation completes, when the leader's assignment is
    stored, when a static member is replaced, and for a new empty group."""

    protocol_type: str | None
    generation: int
    protocol_name: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None


RecordKey = GroupMetadataKey | OffsetCommitKey | ConsumerRecordKey
RecordValue = GroupMetadataValue | OffsetCommitValue | ConsumerRecordValue


@dataclass(frozen=True, slots=True)
class Record:
    key: RecordKey
    value: RecordValue | None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None
