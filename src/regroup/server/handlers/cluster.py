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

import bisect
import itertools
import sys
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from regroup.model.errors import ApiError
from regroup.model.errors import ErrorCode as CoreErrorCode
from regroup.network.codec import response_class
from regroup.network.limits import TOPIC_NAME
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import (
    CLUSTER_ID,
    NODE_ID,
    ZERO_UUID,
    ApiSpec,
    Broker,
    RequestContext,
    broker_rack,
)
from regroup.server.encoded import PreEncoded, splice_pieces
from regroup.server.handlers._common import respond
from regroup.server.handlers.authorized import (
    CLUSTER_OPERATIONS,
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    authorized_operations,
)
from regroup.server.handlers.topics import METADATA_PARTITION, UNAUTHORIZED, may, may_on_cluster, store_of
from regroup.server.topic_answers import answers_of, java_order
from regroup.server.topic_entries import format_for
from regroup.server.topics import InvalidTopicError, validate_topic_name

__all__ = ["DESCRIBED_PARTITION", "DESCRIBE_CLUSTER", "DESCRIBE_TOPIC_PARTITIONS", "SPECS", "java_order"]

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


#: every partition as DescribeTopicPartitions describes it (but its index): Metadata's, and no eligible leader
#: replicas beyond the ISR
DESCRIBED_PARTITION: dict[str, Any] = {
    **METADATA_PARTITION,
    "eligible_leader_replicas": (),
    "last_known_elr": (),
}


async def handle_describe_topic_partitions(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Topic.

    Answered from the store's cached topic heads and the shared run of encoded partitions
    (``server/topic_answers.py``): a page costs the topics and partitions it holds, and the topics' order is
    kept between changes."""
    store = store_of(broker)
    answers = answers_of(store)
    response_cls = response_class(ctx.api_key, ctx.api_version)
    mod = sys.modules[response_cls.__module__]
    fmt = format_for(
        mod.DescribeTopicPartitionsResponseTopic, mod.DescribeTopicPartitionsResponsePartition, DESCRIBED_PARTITION
    )
    cursor = request.cursor
    start_key = java_order(cursor.topic_name) if cursor is not None else b""
    everything = not request.topics
    names: Iterable[str]
    refused: list[str] = []
    if everything:  # (those the principal may not DESCRIBE are left out silently, as they come)
        keys, infos = answers.by_java_order()
        names = (info.name for info in itertools.islice(infos, bisect.bisect_left(keys, start_key), None))
    else:
        asked = sorted((n for n in {t.name for t in request.topics} if java_order(n) >= start_key), key=java_order)
        if cursor is not None and cursor.topic_name not in asked:
            raise ApiError(CoreErrorCode.INVALID_REQUEST, "the cursor's topic must be one of the topics requested")
        refused = [name for name in asked if not may(broker, ctx, AclOperation.DESCRIBE, name)]
        denied = set(refused)
        names = [name for name in asked if name not in denied]
    if cursor is not None and cursor.partition_index < 0:
        raise ApiError(CoreErrorCode.INVALID_REQUEST, "the cursor's partition must not be negative")
    remaining = max(min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit), 1)
    pieces: list[bytes] = []
    errors: list[int] = []
    next_cursor: dict[str, Any] | None = None
    for name in names:
        if everything and not may(broker, ctx, AclOperation.DESCRIBE, name):
            continue
        if remaining == 0:  # the previous topic used the limit up exactly: continue with this one
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        operations = authorized_operations(broker, ctx, ResourceType.TOPIC, name, TOPIC_OPERATIONS)
        info = store.topic(name)
        if info is None:
            if not everything:
                code = _unknown_topic_code(name)
                pieces.append(fmt.encode(**_no_topic(name, code), topic_authorized_operations=operations))
                errors.append(code)
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(info.partitions, first + remaining)
        pieces.append(answers.head(fmt, info) + fmt.partitions(first, end) + fmt.tail(operations))
        if end < info.partitions:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= max(0, end - first)
    for name in refused:  # named topics the principal may not DESCRIBE, after the described ones
        pieces.append(fmt.encode(**_no_topic(name, UNAUTHORIZED), topic_authorized_operations=NOT_REQUESTED))
        errors.append(UNAUTHORIZED)
    skeleton = respond(ctx, topics=[], next_cursor=next_cursor)
    return PreEncoded(response_cls, splice_pieces(skeleton, "topics", len(pieces), pieces), tuple(errors))


def _no_topic(name: str, code: int) -> dict[str, Any]:
    """A named topic described by its error alone: nothing of it disclosed."""
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": ()}


def _unknown_topic_code(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


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
