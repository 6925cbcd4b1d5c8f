"""The KIP-848 consumer-group APIs: ConsumerGroupHeartbeat (v0-1) and ConsumerGroupDescribe (v0-1).

The core decides everything (validation with Kafka's messages, epochs, targets, reconciliation, migration);
this module maps kio entities to ``regroup.protocol.consumer`` and back. Version and wire quirks handled here:

* ConsumerGroupHeartbeat v1 (KIP-1082) requires the consumer to generate its member id: an empty one is
  INVALID_REQUEST "MemberId can't be empty." for every epoch, as Kafka checks for v1+. With v0 a joining
  member may send "" and gets an id from the coordinator.
* A null topic id inside ``TopicPartitions`` is read as the zero uuid (no topic has it, so the core treats
  those partitions as unknown, like any other id it does not know).
* Errors carry Kafka's error message: the core's when it gave one, else the error's default text (what
  Kafka's coordinator service answers for a failure outside the group logic, e.g. COORDINATOR_NOT_AVAILABLE).
* ConsumerGroupDescribe v1 (KIP-1099) adds each member's type: 0 for a member still using the classic
  protocol (a rolling upgrade in progress), 1 for a consumer-protocol member.
* ConsumerGroupDescribe reports AuthorizedOperations (KIP-430) only when asked, INT32_MIN otherwise, and never
  for a group that failed: the group operations the principal may do (every one without an authorizer).

Authorization (Kafka's ``KafkaApis``): ConsumerGroupHeartbeat needs READ on the Group, else the whole request is
GROUP_AUTHORIZATION_FAILED (with Kafka's default message) before any validation or coordinator work.
ConsumerGroupDescribe needs DESCRIBE on each Group: a group without it is answered GROUP_AUTHORIZATION_FAILED
(no message, nothing of the group disclosed) ahead of the groups the coordinator describes.
"""

from __future__ import annotations

from typing import Any

from regroup.model.errors import ErrorCode
from regroup.protocol.consumer import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedTopicPartitions,
    TopicPartitions,
)
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import ZERO_UUID, ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed, require
from regroup.server.entities import build, ms
from regroup.server.handlers._common import DEFAULT_MESSAGES, assignment_class, client_info, respond
from regroup.server.handlers.authorized import GROUP_OPERATIONS, authorized_operations
from regroup.server.handlers.authorized import NOT_REQUESTED as OPERATIONS_NOT_REQUESTED

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
CLIENT_MEMBER_ID_FROM = 1
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


# ---------------------------------------------------------------------------------- ConsumerGroupHeartbeat
def _heartbeat_response(ctx: RequestContext, resp: ConsumerGroupHeartbeatResponse) -> Any:
    assignment = None
    if resp.assignment is not None:
        assignment = build(
            assignment_class(ctx.api_key, ctx.api_version),
            topic_partitions=[{"topic_id": t, "partitions": ps} for t, ps in resp.assignment],
        )
    message = resp.error_message
    if message is None and resp.error is not ErrorCode.NONE:
        message = DEFAULT_MESSAGES.get(resp.error)
    return respond(
        ctx,
        error_code=resp.error,
        error_message=message,
        member_id=resp.member_id,
        member_epoch=resp.member_epoch,
        heartbeat_interval=resp.heartbeat_interval_ms,
        assignment=assignment,
    )


def _heartbeat_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _heartbeat_response(ctx, ConsumerGroupHeartbeatResponse(error=code))


def _owned(topics: Any) -> TopicPartitions | None:
    if topics is None:
        return None
    return tuple((t.topic_id or ZERO_UUID, tuple(int(p) for p in t.partitions)) for t in topics)


async def consumer_group_heartbeat(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """READ on the Group."""
    require(broker, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.api_version >= CLIENT_MEMBER_ID_FROM and not request.member_id.strip():
        return _heartbeat_response(
            ctx,
            ConsumerGroupHeartbeatResponse(error=ErrorCode.INVALID_REQUEST, error_message="MemberId can't be empty."),
        )
    req = ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=ms(request.rebalance_timeout),
        subscribed_topic_names=None
        if request.subscribed_topic_names is None
        else tuple(request.subscribed_topic_names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        topic_partitions=_owned(request.topic_partitions),
        version=ctx.api_version,
        client=client_info(ctx),
    )
    resp: ConsumerGroupHeartbeatResponse = await broker.coordinator.call(
        lambda c, key, now: c.consumer_group_heartbeat(req, key, now)
    )
    return _heartbeat_response(ctx, resp)


# ----------------------------------------------------------------------------------- ConsumerGroupDescribe
def _partitions(rows: tuple[DescribedTopicPartitions, ...]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": r.topic_id, "topic_name": r.topic_name, "partitions": r.partitions} for r in rows
        ]
    }


def _described(ctx: RequestContext, group: DescribedConsumerGroup, operations: int) -> dict[str, Any]:
    assignment_cls = assignment_class(ctx.api_key, ctx.api_version)
    return {
        "error_code": group.error,
        "error_message": group.error_message,
        "group_id": group.group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": m.subscribed_topic_names,
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": build(assignment_cls, **_partitions(m.assignment)),
                "target_assignment": build(assignment_cls, **_partitions(m.target_assignment)),
                "member_type": CLASSIC_MEMBER if m.uses_classic_protocol else CONSUMER_MEMBER,
            }
            for m in group.members
        ],
        "authorized_operations": operations if group.error is ErrorCode.NONE else OPERATIONS_NOT_REQUESTED,
    }


def _describe_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    message = DEFAULT_MESSAGES.get(code)
    groups = [DescribedConsumerGroup(group_id=g, error=code, error_message=message) for g in request.group_ids]
    return respond(ctx, groups=[_described(ctx, g, OPERATIONS_NOT_REQUESTED) for g in groups])


async def consumer_group_describe(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Group."""
    group_ids: list[str] = []
    refused: list[dict[str, Any]] = []
    for group_id in request.group_ids:
        if allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            group_ids.append(group_id)
        else:
            failed = DescribedConsumerGroup(group_id=group_id, error=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            refused.append(_described(ctx, failed, OPERATIONS_NOT_REQUESTED))
    described: tuple[DescribedConsumerGroup, ...] = ()
    if group_ids:
        described = await broker.coordinator.call(lambda c, key, now: c.consumer_group_describe(group_ids, key, now))
    wanted = request.include_authorized_operations
    return respond(
        ctx,
        groups=refused
        + [
            _described(
                ctx,
                g,
                authorized_operations(broker, ctx, ResourceType.GROUP, g.group_id, GROUP_OPERATIONS)
                if wanted and g.error is ErrorCode.NONE
                else OPERATIONS_NOT_REQUESTED,
            )
            for g in described
        ],
    )


SPECS = [
    ApiSpec(CONSUMER_GROUP_HEARTBEAT, 0, 1, consumer_group_heartbeat, _heartbeat_error),
    ApiSpec(CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_group_describe, _describe_error),
]
