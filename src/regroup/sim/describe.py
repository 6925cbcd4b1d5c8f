"""Short, stable text descriptions of requests and responses for the event log's ``detail`` field, and
the ``topic-partition`` labels used everywhere in the simulator's output."""

from __future__ import annotations

from collections.abc import Iterable

from regroup.assignors.consumer_protocol import ProtocolDecodeError, decode_assignment, decode_subscription
from regroup.client.types import TopicPartition
from regroup.protocol.classic import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse
from regroup.protocol.offsets import OffsetCommitRequest


def label(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def labels(partitions: Iterable[TopicPartition]) -> str:
    return ",".join(label(tp) for tp in sorted(partitions))


def assigned_partitions(data: bytes) -> frozenset[TopicPartition]:
    """Partitions in consumer-protocol assignment bytes (empty or malformed bytes: none)."""
    if not data:
        return frozenset()
    try:
        assignment = decode_assignment(data)
    except ProtocolDecodeError:
        return frozenset()
    return frozenset((t, p) for t, ps in assignment.partitions.items() for p in ps)


def request_detail(request: object) -> str | None:
    if isinstance(request, JoinGroupRequest):
        names = ",".join(name for name, _ in request.protocols)
        owned = ""
        if request.protocols:
            try:
                sub = decode_subscription(request.protocols[0][1])
            except ProtocolDecodeError:
                sub = None
            if sub is not None:
                owned = labels((t, p) for t, ps in sub.owned.items() for p in ps)
        return f"protocols={names} owned=[{owned}] reason={request.reason or ''}"
    if isinstance(request, SyncGroupRequest):
        return f"assignments={len(request.assignments)}"
    if isinstance(request, OffsetCommitRequest):
        return "partitions=" + labels((t, p.partition) for t, parts in request.topics for p in parts)
    return None


def response_detail(response: object) -> str | None:
    if isinstance(response, JoinGroupResponse) and response.generation_id >= 0:
        return f"leader={response.leader} protocol={response.protocol_name} members={len(response.members)}"
    if isinstance(response, SyncGroupResponse):
        return f"assignment=[{labels(assigned_partitions(response.assignment))}]"
    return None
