"""The straightforward answers to Metadata and DescribeTopicPartitions: every topic and partition built as a kio
entity per request, as the handlers did before they answered from cached encoded entries
(``server/topic_answers.py``). The property tests hold the handlers to these, byte for byte."""

from __future__ import annotations

import dataclasses
import uuid
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from regroup.model.errors import ApiError
from regroup.model.errors import ErrorCode as CoreErrorCode
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import CLUSTER_ID, NODE_ID, ZERO_UUID, Broker, RequestContext, TopicInfo, broker_rack
from regroup.server.handlers._common import respond
from regroup.server.handlers.authorized import (
    CLUSTER_OPERATIONS,
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    authorized_operations,
)
from regroup.server.handlers.cluster import MAX_PARTITIONS_PER_RESPONSE, java_order
from regroup.server.handlers.topics import (
    NO_THROTTLE,
    UNAUTHORIZED,
    build,
    may,
    may_on_cluster,
    response_module,
    store_of,
)
from regroup.server.topics import (
    InvalidTopicError,
    PartitionLimitError,
    TopicExistsError,
    TopicStore,
    validate_topic_name,
)

# ---------------------------------------------------------------------- Metadata


def reference_metadata(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """Metadata's answer, every entity built afresh (auto-creating what the request asks to, as the handler)."""
    mod = response_module(request)
    store = store_of(broker)
    version = ctx.api_version
    topics: list[Any] = []
    if request.topics is None or (version == 0 and not request.topics):
        topics = [
            _topic_entry(mod, info)
            for name, info in sorted(store.topics().items())
            if may(broker, ctx, AclOperation.DESCRIBE, name)
        ]
    else:
        auto = broker.auto_create_topics and getattr(request, "allow_auto_topic_creation", True)
        seen: set[object] = set()
        for wanted in request.topics:
            topic_id = getattr(wanted, "topic_id", None) if version >= 12 else None
            key = wanted.name if wanted.name is not None else topic_id
            if key in seen:
                continue
            seen.add(key)
            if wanted.name is None and version < 12:
                topics.append(_topic_error(mod, "", ErrorCode.invalid_request))
                continue
            topics.append(_lookup(mod, store, broker, ctx, wanted.name, topic_id, auto))
    if version >= 8 and request.include_topic_authorized_operations:
        topics = [
            t
            if t.name is None or t.error_code == UNAUTHORIZED
            else dataclasses.replace(
                t,
                topic_authorized_operations=authorized_operations(
                    broker, ctx, ResourceType.TOPIC, t.name, TOPIC_OPERATIONS
                ),
            )
            for t in topics
        ]
    cluster_operations = NOT_REQUESTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = (
            authorized_operations(broker, ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
            if may_on_cluster(broker, ctx, AclOperation.DESCRIBE)
            else 0
        )
    host, port = broker.endpoint(ctx.listener)
    node = build(mod, "MetadataResponseBroker", node_id=NODE_ID, host=host, port=port, rack=broker_rack(broker))
    return build(
        mod,
        "MetadataResponse",
        throttle_time=NO_THROTTLE,
        brokers=(node,),
        cluster_id=CLUSTER_ID,
        controller_id=NODE_ID,
        topics=tuple(topics),
        error_code=ErrorCode.none,
        cluster_authorized_operations=cluster_operations,
    )


def _lookup(
    mod: ModuleType,
    store: TopicStore,
    broker: Broker,
    ctx: RequestContext,
    name: str | None,
    topic_id: uuid.UUID | None,
    auto: bool,
) -> Any:
    if name is None:
        info = store.topic_by_id(topic_id) if topic_id is not None else None
        if info is None:
            return _topic_error(mod, None, ErrorCode.unknown_topic_id, topic_id)
        if not may(broker, ctx, AclOperation.DESCRIBE, info.name):
            return _topic_error(mod, None, UNAUTHORIZED, topic_id)
        return _topic_entry(mod, info)
    if not may(broker, ctx, AclOperation.DESCRIBE, name):
        return _topic_error(mod, name, UNAUTHORIZED)
    info = store.topic(name)
    if info is None and auto:
        if not (may_on_cluster(broker, ctx, AclOperation.CREATE) or may(broker, ctx, AclOperation.CREATE, name)):
            return _topic_error(mod, name, UNAUTHORIZED)
        try:
            info = store.create_topic(name, broker.default_partitions)
        except (InvalidTopicError, TopicExistsError):
            return _topic_error(mod, name, ErrorCode.invalid_topic_exception)
        except PartitionLimitError as exc:
            return _topic_error(mod, name, exc.code)
    if info is None:
        return _topic_error(mod, name, ErrorCode.unknown_topic_or_partition)
    return _topic_entry(mod, info)


def _topic_entry(mod: ModuleType, info: TopicInfo) -> Any:
    partitions = tuple(
        build(
            mod,
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=p,
            leader_id=NODE_ID,
            leader_epoch=-1,
            replica_nodes=(NODE_ID,),
            isr_nodes=(NODE_ID,),
            offline_replicas=(),
        )
        for p in range(info.partitions)
    )
    return build(
        mod,
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=False,
        partitions=partitions,
    )


def _topic_error(mod: ModuleType, name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None) -> Any:
    return build(
        mod, "MetadataResponseTopic", error_code=code, name=name, topic_id=topic_id or ZERO_UUID, partitions=()
    )


# ---------------------------------------------------------------------- DescribeTopicPartitions


def reference_describe_topic_partitions(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DescribeTopicPartitions' answer, every entity built afresh (raises ``ApiError`` as the handler does)."""
    store = store_of(broker)
    cursor = request.cursor
    start_key = java_order(cursor.topic_name) if cursor is not None else b""
    everything = not request.topics
    candidates = store.topics() if everything else {t.name for t in request.topics}
    names = sorted((n for n in candidates if java_order(n) >= start_key), key=java_order)
    if cursor is not None and not everything and cursor.topic_name not in names:
        raise ApiError(CoreErrorCode.INVALID_REQUEST, "the cursor's topic must be one of the topics requested")
    if cursor is not None and cursor.partition_index < 0:
        raise ApiError(CoreErrorCode.INVALID_REQUEST, "the cursor's partition must not be negative")
    remaining = max(min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit), 1)
    refused = [name for name in names if not may(broker, ctx, AclOperation.DESCRIBE, name)]
    if refused:
        denied = set(refused)
        names = [name for name in names if name not in denied]
    topics: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    for name in names:
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        info = store.topic(name)
        if info is None:
            if not everything:
                topics.append(_unknown_topic(name))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(info.partitions, first + remaining)
        topics.append(_described(info, range(first, end)))
        if end < info.partitions:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= max(0, end - first)
    for topic in topics:
        topic["topic_authorized_operations"] = authorized_operations(
            broker, ctx, ResourceType.TOPIC, topic["name"], TOPIC_OPERATIONS
        )
    if not everything:
        topics.extend(_unauthorized_topic(name) for name in refused)
    return respond(ctx, topics=topics, next_cursor=next_cursor)


def _unauthorized_topic(name: str) -> dict[str, Any]:
    return {
        "error_code": UNAUTHORIZED,
        "name": name,
        "topic_id": ZERO_UUID,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": NOT_REQUESTED,
    }


def _described(info: TopicInfo, partitions: range) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": False,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": p,
                "leader_id": NODE_ID,
                "leader_epoch": -1,
                "replica_nodes": [NODE_ID],
                "isr_nodes": [NODE_ID],
                "eligible_leader_replicas": [],
                "last_known_elr": [],
                "offline_replicas": [],
            }
            for p in partitions
        ],
        "topic_authorized_operations": TOPIC_OPERATIONS,
    }


def _unknown_topic(name: str) -> dict[str, Any]:
    try:
        validate_topic_name(name)
        code = ErrorCode.unknown_topic_or_partition
    except InvalidTopicError:
        code = ErrorCode.invalid_topic_exception
    return {
        "error_code": code,
        "name": name,
        "topic_id": ZERO_UUID,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": TOPIC_OPERATIONS,
    }
