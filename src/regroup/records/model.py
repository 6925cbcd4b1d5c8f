"""Record keys and values (Kafka's ``__consumer_offsets`` shapes, version-agnostic). A record whose value
is ``None`` is a tombstone: the key is deleted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.records.consumer import ConsumerRecordKey, ConsumerRecordValue

# The classic group's records are built at every generation, one MemberMetadata per member: they are not frozen
# and write their own ``__init__``, which the compiled build compiles (a generated one stays interpreted, and a
# frozen one costs about 10k instructions per object there). ``Final`` fields keep them immutable for mypy;
# ``unsafe_hash`` keeps the field-based hash a frozen dataclass has.


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class GroupMetadataKey:
    group_id: Final[str]

    def __init__(self, *, group_id: str) -> None:
        self.group_id = group_id


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class MemberMetadata:
    """A classic member as persisted: the metadata of the selected protocol and its assignment."""

    member_id: Final[str]
    group_instance_id: Final[str | None]
    client_id: Final[str]
    client_host: Final[str]
    rebalance_timeout_ms: Final[int]
    session_timeout_ms: Final[int]
    subscription: Final[bytes]
    assignment: Final[bytes]

    def __init__(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        subscription: bytes,
        assignment: bytes,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.subscription = subscription
        self.assignment = assignment


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class GroupMetadataValue:
    """A classic group's hard state: written when a generation completes, when the leader's assignment is
    stored, when a static member is replaced, and for a new empty group."""

    protocol_type: Final[str | None]
    generation: Final[int]
    protocol_name: Final[str | None]
    leader: Final[str | None]
    current_state_timestamp_ms: Final[int]
    members: Final[tuple[MemberMetadata, ...]]

    def __init__(
        self,
        *,
        protocol_type: str | None,
        generation: int,
        protocol_name: str | None,
        leader: str | None,
        current_state_timestamp_ms: int,
        members: tuple[MemberMetadata, ...],
    ) -> None:
        self.protocol_type = protocol_type
        self.generation = generation
        self.protocol_name = protocol_name
        self.leader = leader
        self.current_state_timestamp_ms = current_state_timestamp_ms
        self.members = members


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class OffsetCommitKey:
    group_id: Final[str]
    topic: Final[str]
    partition: Final[int]

    def __init__(self, *, group_id: str, topic: str, partition: int) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class OffsetCommitValue:
    offset: Final[int]
    leader_epoch: Final[int]
    metadata: Final[str]
    commit_timestamp_ms: Final[int]
    expire_timestamp_ms: Final[int | None]

    def __init__(
        self,
        *,
        offset: int,
        leader_epoch: int,
        metadata: str,
        commit_timestamp_ms: int,
        expire_timestamp_ms: int | None,
    ) -> None:
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp_ms = commit_timestamp_ms
        self.expire_timestamp_ms = expire_timestamp_ms


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class PendingOffsetCommitKey:
    """An offset committed inside a transaction (TxnOffsetCommit) by ``producer_id``: pending until the
    transaction ends; its value is an ``OffsetCommitValue``."""

    producer_id: Final[int]
    group_id: Final[str]
    topic: Final[str]
    partition: Final[int]

    def __init__(self, *, producer_id: int, group_id: str, topic: str, partition: int) -> None:
        self.producer_id = producer_id
        self.group_id = group_id
        self.topic = topic
        self.partition = partition


RecordKey = GroupMetadataKey | OffsetCommitKey | PendingOffsetCommitKey | ConsumerRecordKey
RecordValue = GroupMetadataValue | OffsetCommitValue | ConsumerRecordValue


@dataclass(slots=True, init=False, unsafe_hash=True)
class Record:
    key: Final[RecordKey]
    value: Final[RecordValue | None]

    def __init__(self, key: RecordKey, value: RecordValue | None) -> None:
        self.key = key
        self.value = value
