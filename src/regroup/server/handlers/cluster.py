"""Describing the cluster to admin clients: DescribeCluster (v0–v2, KIP-700) and DescribeTopicPartitions
(v0, KIP-966).

**DescribeCluster** answers with the cluster id, node 0 as the controller and the one broker at the
advertised host and port (with its ``broker.rack``, if any; never fenced), and — when asked — the cluster's
authorized operations (KIP-430: those the principal may do, every one without an authorizer). From v1 the
request names an endpoint type: brokers (1) are described; controllers (2) get MISMATCHED_ENDPOINT_TYPE, as from a Kafka
broker; any other value UNSUPPORTED_ENDPOINT_TYPE. v2's ``include_fenced_brokers`` changes nothing (no broker
is fenced).

**DescribeTopicPartitions** describes the named topics (all topics when none is named) in name order,
partition by partition, at most ``response_partition_limit`` partitions per response (clamped to 1..2,000,
Kafka's ``max.request.partition.size.limit`` default); when the limit cuts a topic short, or is used up
before the next topic, ``next_cursor`` names the topic and partition to continue from. A request's cursor
starts there: topics ordered before the cursor's are skipped, and when topics are named the cursor's topic
must be among them (INVALID_REQUEST, as must a negative cursor partition). A named topic that does not exist
is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name), without a topic id. Every
partition is led by node 0 with replicas = ISR = [0], leader epoch -1 (as Metadata reports it), no eligible
leader replicas beyond the ISR and none offline; no topic is internal (the coordinator's records are not a
topic); each topic carries the topic operations the principal may do. Names are ordered as Kafka orders them
(Java's ``String.compareTo``: UTF-16 code units).

Authorization, as Kafka's broker checks it:

- **DescribeCluster** (``AuthHelper.computeDescribeClusterResponse``): Kafka's ACL table lists DESCRIBE on the
  Cluster, and that is what the answer depends on, but Kafka does not refuse the request: without DESCRIBE on
  the Cluster the cluster's authorized operations are 0 (when asked), and the rest is answered as usual. So
  does this server (every admin client asks for it).
- **DescribeTopicPartitions** (``DescribeTopicPartitionsRequestHandler``): DESCRIBE on each Topic. Describing
  all topics leaves the others out silently (they do not count towards the partition limit); a named topic
  without it is TOPIC_AUTHORIZATION_FAILED with a zero topic id, after the described topics, whether or not it
  exists. Each described topic (and each named unknown one) carries the topic operations the principal may do.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from regroup.model.errors import ApiError
from regroup.model.errors import ErrorCode as CoreErrorCode
from regroup.network.limits import TOPIC_NAME
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import (
    CLUSTER_ID,
    NODE_ID,
    ZERO_UUID,
    ApiSpec,
    Broker,
    RequestContext,
    TopicInfo,
    broker_rack,
)
from regroup.server.handlers._common import respond
from regroup.server.handlers.authorized import (
    CLUSTER_OPERATIONS,
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    authorized_operations,
)
from regroup.server.handlers.topics import UNAUTHORIZED, may, may_on_cluster, store_of
from regroup.server.topics import InvalidTopicError, validate_topic_name

__all__ = ["DESCRIBE_CLUSTER", "DESCRIBE_TOPIC_PARTITIONS", "SPECS"]

DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 60, 75
BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2
#: the most partitions one DescribeTopicPartitions response describes (Kafka's default limit)
MAX_PARTITIONS_PER_RESPONSE = 2000


# ---------------------------------------------------------------------- DescribeCluster


async def handle_describe_cluster(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on the Cluster decides the authorized operations; the request itself is never refused."""
    endpoint = int(getattr(request, "endpoint_type", BROKERS_ENDPOINT))
    if endpoint == CONTROLLERS_ENDPOINT:
        message = "This is a broker endpoint; controllers are described only by a controller."
        return _cluster_error(ctx, ErrorCode.mismatched_endpoint_type, message)
    if endpoint != BROKERS_ENDPOINT:
        return _cluster_error(ctx, ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {endpoint}")
    operations = NOT_REQUESTED
    if request.include_cluster_authorized_operations:
        operations = (
            authorized_operations(broker, ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
            if may_on_cluster(broker, ctx, AclOperation.DESCRIBE)
            else 0
        )
    host, port = broker.endpoint(ctx.listener)
    node = {"broker_id": NODE_ID, "host": host, "port": port, "rack": broker_rack(broker), "is_fenced": False}
    return respond(
        ctx,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=CLUSTER_ID,
        controller_id=NODE_ID,
        brokers=[node],
        cluster_authorized_operations=operations,
    )


def _cluster_error(ctx: RequestContext, code: ErrorCode | CoreErrorCode, message: str | None) -> Any:
    return respond(ctx, error_code=code, error_message=message, cluster_id="", controller_id=-1, brokers=[])


def _describe_cluster_error(ctx: RequestContext, request: Any, code: CoreErrorCode) -> Any:
    return _cluster_error(ctx, code, None)


# ---------------------------------------------------------------------- DescribeTopicPartitions


def java_order(name: str) -> bytes:
    """A sort key ordering names as Java's ``String.compareTo`` does (by UTF-16 code unit)."""
    return name.encode("utf-16-be", errors="surrogatepass")


async def handle_describe_topic_partitions(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Topic."""
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
        if remaining == 0:  # the previous topic used the limit up exactly: continue with this one
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        info = store.topic(name)
        if info is None:
            if not everything:
                topics.append(_unknown_topic(name))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(info.partitions, first + remaining)
        topics.append(_topic(info, range(first, end)))
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
    """A named topic the principal may not DESCRIBE: nothing of it disclosed."""
    return {
        "error_code": UNAUTHORIZED,
        "name": name,
        "topic_id": ZERO_UUID,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": NOT_REQUESTED,
    }


def _topic(info: TopicInfo, partitions: range) -> dict[str, Any]:
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


def _describe_topic_partitions_error(ctx: RequestContext, request: Any, code: CoreErrorCode) -> Any:
    topics = [
        {"error_code": code, "name": t.name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": []}
        for t in request.topics
    ]
    return respond(ctx, topics=topics, next_cursor=None)


SPECS: list[ApiSpec] = [
    ApiSpec(DESCRIBE_CLUSTER, 0, 2, handle_describe_cluster, _describe_cluster_error),
    # topic names are the handler's to judge: an illegal one is INVALID_TOPIC_EXCEPTION, as in Kafka
    ApiSpec(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        0,
        handle_describe_topic_partitions,
        _describe_topic_partitions_error,
        frozenset({TOPIC_NAME}),
    ),
]
