"""Builders of the requests a classic consumer sends, from its configuration and current identity."""

from __future__ import annotations

from typing import Final

from regroup.client.config import MemberConfig
from regroup.client.embedded import by_topic
from regroup.client.types import TopicPartition
from regroup.protocol.classic import (
    ClientInfo,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from regroup.protocol.offsets import OffsetCommitRequest, PartitionCommit

PROTOCOL_TYPE: Final = "consumer"


def join_request(
    config: MemberConfig, member_id: str, protocols: tuple[tuple[str, bytes], ...], reason: str
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=config.group_id,
        member_id=member_id,
        group_instance_id=config.group_instance_id,
        session_timeout_ms=config.session_timeout_ms,
        rebalance_timeout_ms=config.rebalance_timeout_ms,
        protocol_type=PROTOCOL_TYPE,
        protocols=protocols,
        reason=reason,
        version=config.join_group_version,
        client=ClientInfo(client_id=config.client_id),
    )


def sync_request(
    config: MemberConfig,
    generation: int,
    member_id: str,
    protocol_name: str | None,
    assignments: tuple[tuple[str, bytes], ...],
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=config.group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=config.group_instance_id,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=protocol_name,
        assignments=assignments,
    )


def heartbeat_request(config: MemberConfig, generation: int, member_id: str) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=config.group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=config.group_instance_id,
    )


def leave_request(config: MemberConfig, member_id: str) -> LeaveGroupRequest:
    return LeaveGroupRequest(
        group_id=config.group_id,
        members=(LeavingMember(member_id=member_id, reason="the consumer is being closed"),),
    )


def commit_request(
    config: MemberConfig, generation: int, member_id: str, partitions: frozenset[TopicPartition], offset: int
) -> OffsetCommitRequest:
    """Commit every partition at ``offset`` (the processed position, see ``classic_member``)."""
    topics = tuple(
        (topic, tuple(PartitionCommit(partition=p, offset=offset) for p in ps))
        for topic, ps in by_topic(partitions).items()
    )
    return OffsetCommitRequest(
        group_id=config.group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=config.group_instance_id,
        topics=topics,
    )
