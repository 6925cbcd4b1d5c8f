"""Share-group requests and responses (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe), version-agnostic.
Partitions are named by topic id, as on the wire."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from regroup.model.errors import ErrorCode
from regroup.protocol.classic import ClientInfo

#: topic id -> sorted partitions, as a tuple of pairs (the wire's TopicPartitions)
TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int = JOIN_EPOCH
    rack_id: str | None = None
    #: None: unchanged since the last heartbeat
    subscribed_topic_names: tuple[str, ...] | None = None
    client: ClientInfo = field(default_factory=ClientInfo)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupHeartbeatResponse:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: None = unchanged; otherwise every partition the member may fetch from now
    assignment: TopicPartitions | None = None
    #: assigned partitions of the group that have no share-partition state yet: the shell finds their start
    #: offsets (``share.auto.offset.reset``) and initializes them (not on the wire)
    uninitialized: TopicPartitions = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedSharePartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[DescribedSharePartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedShareGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareRead:
    """What ShareFetch read of one partition, for the coordinator to acquire from: the offsets
    ``[first_offset, end_offset)``, where ``end_offset`` is never past the read's last batch nor, under
    ``share.isolation.level=read_committed``, past the last stable offset; and under read_committed the
    ``(first, last)`` offsets of each batch of the read that belongs to an aborted transaction, ascending (the
    shell finds them with ``coordinator.share.isolation.aborted_batches``)."""

    first_offset: int
    end_offset: int
    aborted: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcquisition:
    """What ShareFetch acquired: per partition, runs of ``(first offset, last offset, delivery count)``, and how
    long the locks last (the group's ``share.record.lock.duration.ms``); ``archived``: how many records of
    aborted transactions it archived instead (read_committed), which moved the partitions on although nothing
    was delivered."""

    acquired: dict[tuple[uuid.UUID, int], tuple[tuple[int, int, int], ...]]
    lock_ms: int
    archived: int = 0
