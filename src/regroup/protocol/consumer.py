"""KIP-848 consumer-group requests and responses (ConsumerGroupHeartbeat, ConsumerGroupDescribe),
version-agnostic. Partitions are named by topic id, as on the wire."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from regroup.model.errors import ErrorCode
from regroup.protocol.classic import ClientInfo

#: topic id -> sorted partitions, as a tuple of pairs (the wire's TopicPartitions)
TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str = ""
    member_epoch: int = JOIN_EPOCH
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: TopicPartitions | None = None
    version: int = 0
    client: ClientInfo = field(default_factory=ClientInfo)

    def is_full(self) -> bool:
        """Kafka's "full request": a join, or one carrying every optional field (sent after errors)."""
        return self.member_epoch == JOIN_EPOCH or (
            self.rebalance_timeout_ms != -1
            and self.subscribed_topic_names is not None
            and self.topic_partitions is not None
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatResponse:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: None = unchanged; otherwise every partition the member may use now
    assignment: TopicPartitions | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    uses_classic_protocol: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
