"""Short, stable text descriptions of requests and responses for the event log's ``detail`` field, and
the ``topic-partition`` labels used everywhere in the simulator's output."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from regroup.assignors.consumer_protocol import ProtocolDecodeError, decode_subscription
from regroup.client.embedded import assigned_partitions as read_assignment
from regroup.client.types import TopicPartition
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, TopicPartitions
from regroup.protocol.offsets import OffsetCommitRequest
from regroup.protocol.share import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from regroup.protocol.share_fetch import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)


def request_ids(req: object) -> tuple[str | None, int | None]:
    """(member id, generation) a request carries, for the log: a KIP-848 heartbeat's member epoch is its
    generation, a LeaveGroup names its first leaving member. The common requests are read by type (their
    fields typed); anything else by name."""
    if isinstance(req, HeartbeatRequest):
        return req.member_id, req.generation_id
    if isinstance(req, JoinGroupRequest):
        return req.member_id, None
    if isinstance(req, SyncGroupRequest):
        return req.member_id, req.generation_id
    if isinstance(req, ConsumerGroupHeartbeatRequest):
        return req.member_id, req.member_epoch
    if isinstance(req, LeaveGroupRequest):
        return (req.members[0].member_id if req.members else None), None
    if isinstance(req, ShareGroupHeartbeatRequest):
        return req.member_id, req.member_epoch
    if isinstance(req, ShareFetchRequest | ShareAcknowledgeRequest):
        return req.member_id, None
    return getattr(req, "member_id", None), getattr(req, "generation_id", None)


def response_fields(response: object) -> tuple[ErrorCode | None, int | None, str | None]:
    """(error, generation, member id) a response carries, for the log (the member id None when empty; a
    successful KIP-848 heartbeat's member epoch is its generation)."""
    if isinstance(response, HeartbeatResponse):
        return response.error, None, None
    if isinstance(response, SyncGroupResponse):
        return response.error, None, None
    if isinstance(response, JoinGroupResponse):
        return response.error, response.generation_id, response.member_id or None
    if isinstance(response, ConsumerGroupHeartbeatResponse):
        error = response.error
        return error, (response.member_epoch if error is ErrorCode.NONE else None), response.member_id or None
    if isinstance(response, ShareGroupHeartbeatResponse):
        error = response.error
        return error, (response.member_epoch if error is ErrorCode.NONE else None), response.member_id or None
    if isinstance(response, ShareFetchResponse | ShareAcknowledgeResponse):
        return response.error, None, None
    found: ErrorCode | None = getattr(response, "error", None)
    return found, getattr(response, "generation_id", None), getattr(response, "member_id", None) or None


def label(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def labels(partitions: Iterable[TopicPartition]) -> str:
    return ",".join(label(tp) for tp in sorted(partitions))


#: ``labels`` of one topic's partitions, by (topic, partitions as given): members list the same partitions
#: JoinGroup after JoinGroup (bounded: cleared when full)
_TOPIC_LABELS: Final[dict[tuple[str, tuple[int, ...]], str]] = {}


def partition_labels(partitions: Mapping[str, tuple[int, ...]]) -> str:
    """``labels`` of the (topic, partition) pairs in a topic -> partitions mapping: the same text, put
    together topic by topic (topics sorted, each one's partitions sorted: the order of the sorted pairs)."""
    out: list[str] = []
    for topic in sorted(partitions):
        key = (topic, partitions[topic])
        text = _TOPIC_LABELS.get(key)
        if text is None:
            text = ",".join(f"{topic}-{p}" for p in sorted(key[1]))
            if len(_TOPIC_LABELS) >= 4096:
                _TOPIC_LABELS.clear()
            _TOPIC_LABELS[key] = text
        if text:
            out.append(text)
    return ",".join(out)


#: per assignment bytes already read: its partitions in order and their ``labels`` (each assignment is read
#: for the SyncGroup answer and again for the Stable group, and a member that keeps its partitions gets the
#: same bytes generation after generation; bounded: cleared when full)
_ASSIGNED: Final[dict[bytes, tuple[tuple[Any, ...], str]]] = {}


def _assignment_view(data: bytes) -> tuple[tuple[Any, ...], str]:
    known = _ASSIGNED.get(data)
    if known is not None:
        return known
    # (the member's own reading of the bytes, itself kept per bytes; pairs typed Any: the compiled build
    # keeps them boxed)
    partitions: tuple[Any, ...] = tuple(sorted(read_assignment(data) or ()))
    view = (partitions, ",".join([label(tp) for tp in partitions]))
    if len(_ASSIGNED) >= 4096:
        _ASSIGNED.clear()
    _ASSIGNED[bytes(data)] = view
    return view


def assigned_partitions(data: bytes) -> tuple[TopicPartition, ...]:
    """Partitions in consumer-protocol assignment bytes, sorted and without repeats (empty or malformed
    bytes: none)."""
    return _assignment_view(data)[0]


def assignment_labels(data: bytes) -> str:
    """``labels(assigned_partitions(data))``."""
    return _assignment_view(data)[1]


#: ``partition_labels`` of the owned partitions in subscription bytes already read (a member rejoining with
#: the same subscription sends the same bytes; bounded: cleared when full)
_OWNED: Final[dict[bytes, str]] = {}


def _owned_labels(metadata: bytes) -> str:
    """The owned partitions' labels of consumer-protocol subscription bytes ("" when they do not decode)."""
    known = _OWNED.get(metadata)
    if known is not None:
        return known
    try:
        text = partition_labels(decode_subscription(metadata).owned)
    except ProtocolDecodeError:
        text = ""
    if len(_OWNED) >= 4096:
        _OWNED.clear()
    _OWNED[bytes(metadata)] = text
    return text


def _named(parts: TopicPartitions, names: Mapping[object, str]) -> str:
    return labels((names.get(t, str(t)), p) for t, ps in parts for p in ps)


def request_detail(request: object, names: Mapping[object, str] | None = None) -> str | None:
    """``names``: topic id -> topic name, for KIP-848 requests."""
    if isinstance(request, ConsumerGroupHeartbeatRequest):
        parts = [f"epoch={request.member_epoch}"]
        if request.is_full():
            parts.append("full")
        if request.subscribed_topic_names is not None:
            parts.append("topics=" + ",".join(request.subscribed_topic_names))
        if request.server_assignor is not None:
            parts.append(f"assignor={request.server_assignor}")
        if request.topic_partitions is not None:
            parts.append(f"owned=[{_named(request.topic_partitions, names or {})}]")
        return " ".join(parts)
    if isinstance(request, JoinGroupRequest):
        protocols = ",".join(name for name, _ in request.protocols)
        owned = _owned_labels(request.protocols[0][1]) if request.protocols else ""
        return f"protocols={protocols} owned=[{owned}] reason={request.reason or ''}"
    if isinstance(request, SyncGroupRequest):
        return f"assignments={len(request.assignments)}"
    if isinstance(request, OffsetCommitRequest):
        return "partitions=" + labels((t, p.partition) for t, parts in request.topics for p in parts)
    if isinstance(request, ShareGroupHeartbeatRequest):
        parts = [f"epoch={request.member_epoch}"]
        if request.subscribed_topic_names is not None:
            parts.append("topics=" + ",".join(request.subscribed_topic_names))
        return " ".join(parts)
    if isinstance(request, ShareFetchRequest):
        known = names or {}
        fetched = labels((known.get(t, str(t)), p) for t, p in request.partitions)
        return f"partitions={fetched} max_records={request.max_records} acks={_ack_count(request.acknowledgements)}"
    if isinstance(request, ShareAcknowledgeRequest):
        close = " close" if request.close_session else ""
        return f"acks={_ack_count(request.acknowledgements)}{close}"
    return None


def _ack_count(acks: tuple[tuple[object, tuple[tuple[int, int, int], ...]], ...]) -> int:
    """How many records ``acks`` acknowledge."""
    return sum(last - first + 1 for _, ranges in acks for first, last, _ in ranges)


def response_detail(response: object, names: Mapping[object, str] | None = None) -> str | None:
    if isinstance(response, ConsumerGroupHeartbeatResponse):
        if response.error is not ErrorCode.NONE:
            return response.error_message
        if response.assignment is None:
            return None
        return f"assignment=[{_named(response.assignment, names or {})}]"
    if isinstance(response, JoinGroupResponse) and response.generation_id >= 0:
        return f"leader={response.leader} protocol={response.protocol_name} members={len(response.members)}"
    if isinstance(response, SyncGroupResponse):
        return f"assignment=[{assignment_labels(response.assignment)}]"
    if isinstance(response, ShareGroupHeartbeatResponse):
        if response.error is not ErrorCode.NONE:
            return response.error_message
        if response.assignment is None:
            return None
        return f"assignment=[{_named(response.assignment, names or {})}]"
    if isinstance(response, ShareFetchResponse):
        runs = [run for _, runs in response.acquired for run in runs]
        acquired = sum(last - first + 1 for first, last, _ in runs)
        again = sum(last - first + 1 for first, last, count in runs if count > 1)
        detail = f"acquired={acquired} redelivered={again} lock_ms={response.lock_ms}"
        return detail + _ack_errors(response.acknowledge_errors)
    if isinstance(response, ShareAcknowledgeResponse):
        return _ack_errors(response.acknowledge_errors).strip() or None
    return None


def _ack_errors(errors: tuple[tuple[object, ErrorCode], ...]) -> str:
    """`` ack_errors=NAME,...`` for acknowledgements refused (empty when none was)."""
    refused = sorted({code.name for _, code in errors if code is not ErrorCode.NONE})
    return f" ack_errors={','.join(refused)}" if refused else ""
