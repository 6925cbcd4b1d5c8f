"""The share-group membership APIs (KIP-932): ShareGroupHeartbeat (v1) and ShareGroupDescribe (v1).

The core decides membership, epochs and assignments (``coordinator/share``); this module maps kio entities to
``regroup.protocol.share`` and back, and after a heartbeat that assigned partitions the group has no state for
yet, starts them where ``share.auto.offset.reset`` says (the group's setting, else ``latest``): ``latest`` at
the partition's log end offset, ``earliest`` at its log start offset, ``by_duration:<ISO 8601 duration>`` at
the first record no older than that. As in Kafka, a share partition's start offset is fixed when it is first
assigned, so records produced after a member's first heartbeat are delivered under ``latest``.

Authorization (Kafka's ``KafkaApis``): ShareGroupHeartbeat needs READ on the Group (else the whole request is
GROUP_AUTHORIZATION_FAILED before anything else) and DESCRIBE on each subscribed Topic (else
TOPIC_AUTHORIZATION_FAILED); ShareGroupDescribe needs DESCRIBE on each Group (GROUP_AUTHORIZATION_FAILED for
one without it, nothing of it disclosed).

ShareGroupDescribe reads the core's rows in its first step (``share_group_rows``) and describes and encodes the
members a chunk at a time, yielding to the event loop between chunks (``server/inspection_answers.py``).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from regroup.coordinator.share.describe import DescribedShareMembers, MemberRow, share_group_rows
from regroup.coordinator.share.membership import MAX_MEMBER_ID_LENGTH
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.share import (
    DescribedShareGroup,
    DescribedShareMember,
    DescribedSharePartitions,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed, require
from regroup.server.entities import build
from regroup.server.group_configs import BY_DURATION, SHARE_RESET, parse_duration_ms
from regroup.server.handlers._common import DEFAULT_MESSAGES, assignment_class, client_info, respond
from regroup.server.handlers.authorized import NOT_REQUESTED as OPERATIONS_NOT_REQUESTED
from regroup.server.handlers.consumer import plain_answer, plain_layout
from regroup.server.handlers.described_groups import described_groups_answer
from regroup.server.inspection_answers import (
    element_class,
    encode_items,
    entity_bytes,
    read,
    share_member,
    share_member_layout,
    spliced,
)
from regroup.server.offset_answers import Pacer, pause

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77


def require_share_groups(broker: Broker) -> None:
    """As Kafka with share groups off (``group.share.enable=false``, ``share.version`` 0): the APIs stay listed
    in ApiVersions and every request is UNSUPPORTED_VERSION."""
    if not getattr(broker, "share_groups", True):
        raise ApiError(ErrorCode.UNSUPPORTED_VERSION, "Share groups are not enabled on this broker.")


# ------------------------------------------------------------------------------------- ShareGroupHeartbeat
def _heartbeat_response(ctx: RequestContext, resp: ShareGroupHeartbeatResponse) -> Any:
    """The answer, written field by field as a ConsumerGroupHeartbeat's (the same layout): a member of 10,000
    partitions' assignment took kio's writer several milliseconds."""
    message = resp.error_message
    if message is None and resp.error is not ErrorCode.NONE:
        message = DEFAULT_MESSAGES.get(resp.error)
    if plain_layout(ctx.api_key, ctx.api_version):
        return plain_answer(ctx.api_key, ctx.api_version, resp, message)
    assignment = None
    if resp.assignment is not None:
        assignment = build(
            assignment_class(ctx.api_key, ctx.api_version),
            topic_partitions=[{"topic_id": t, "partitions": ps} for t, ps in resp.assignment],
        )
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
    return _heartbeat_response(ctx, ShareGroupHeartbeatResponse(error=code))


async def share_group_heartbeat(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """READ on the Group; DESCRIBE on each subscribed Topic."""
    require_share_groups(broker)
    require(broker, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.member_id or len(request.member_id) > MAX_MEMBER_ID_LENGTH:  # (Kafka's check, before any other)
        message = "Invalid member id in the request."
        return _heartbeat_response(
            ctx, ShareGroupHeartbeatResponse(error=ErrorCode.INVALID_REQUEST, error_message=message)
        )
    names = request.subscribed_topic_names
    if names:
        for name in names:
            if not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                return _heartbeat_error(ctx, request, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    req = ShareGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client=client_info(ctx),
    )
    resp: ShareGroupHeartbeatResponse = await broker.coordinator.call(
        lambda c, key, now: c.share_group_heartbeat(req, key, now), group_id=req.group_id
    )
    if resp.error is ErrorCode.NONE and resp.uninitialized:
        await initialize_partitions(broker, request.group_id, resp.uninitialized)
    return _heartbeat_response(ctx, resp)


#: the share partitions one core call initializes (a heartbeat assigning 10,000 partitions, or a ShareFetch
#: naming them, wrote their 10,000 state records in one step of the event loop; 1,000 a call still took 10 ms)
INITIALIZE_CHUNK = 250


async def initialize_partitions(broker: Broker, group_id: str, partitions: TopicPartitions) -> None:
    """Start the group's share partitions without state where ``share.auto.offset.reset`` says,
    ``INITIALIZE_CHUNK`` partitions a call (a partition is initialized once: the core ignores one that has state
    by the time its call runs)."""
    topics = {info.topic_id: info.name for info in broker.topic_store.topics().values()}
    reset = _reset_of(broker, group_id)
    starts: dict[tuple[uuid.UUID, int], int] = {}
    for topic_id, ps in partitions:
        name = topics.get(topic_id)
        if name is None:
            continue
        for p in ps:
            start = _start_offset(broker, name, p, reset)
            if start is not None:
                starts[(topic_id, p)] = start
            if len(starts) >= INITIALIZE_CHUNK:
                await _initialize(broker, group_id, starts)
                starts = {}
    if starts:
        await _initialize(broker, group_id, starts)


async def _initialize(broker: Broker, group_id: str, starts: dict[tuple[uuid.UUID, int], int]) -> None:
    await broker.coordinator.write(lambda c, key, now: c.initialize_share_partitions(group_id, starts, None, now))


def _reset_of(broker: Broker, group_id: str) -> str:
    configs = getattr(broker, "group_configs", None)
    value = None
    if configs is not None:
        value = configs.overrides(group_id).get(SHARE_RESET)
    return value or "latest"


def _start_offset(broker: Broker, topic: str, partition: int, reset: str) -> int | None:
    store: Any = broker.topic_store
    plog = store.opened_partition(topic, partition)
    if plog is False:
        return None
    if plog is True:  # (never opened since the store opened: no data, every offset 0; not opened for it)
        return 0
    if reset == "earliest":
        return int(plog.log_start_offset)
    if reset.startswith(BY_DURATION):
        duration = parse_duration_ms(reset.removeprefix(BY_DURATION))
        if duration is not None:
            now_ms = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
            found = plog.offset_for_timestamp(now_ms - duration)
            return int(found[1]) if found is not None else int(plog.log_end_offset)
    return int(plog.log_end_offset)


# -------------------------------------------------------------------------------------- ShareGroupDescribe
def _partitions(rows: tuple[DescribedSharePartitions, ...]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": r.topic_id, "topic_name": r.topic_name, "partitions": r.partitions} for r in rows
        ]
    }


def _member(m: DescribedShareMember, assignment_cls: type[Any]) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "rack_id": m.rack_id,
        "member_epoch": m.member_epoch,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": m.subscribed_topic_names,
        "assignment": build(assignment_cls, **_partitions(m.assignment)),
    }


def _described(ctx: RequestContext, group: DescribedShareGroup, operations: int) -> dict[str, Any]:
    assignment_cls = assignment_class(ctx.api_key, ctx.api_version)
    return {
        "error_code": group.error,
        "error_message": group.error_message,
        "group_id": group.group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor_name,
        "members": [_member(m, assignment_cls) for m in group.members],
        "authorized_operations": operations if group.error is ErrorCode.NONE else OPERATIONS_NOT_REQUESTED,
    }


#: a member costs about four listed groups to describe and encode, and three more per topic of its assignment
#: (thirty and ten when kio writes it)
MEMBER_WEIGHT, TOPIC_WEIGHT, KIO_MEMBER_WEIGHT, KIO_TOPIC_WEIGHT = 4, 3, 30, 10


async def _described_bytes(
    ctx: RequestContext,
    group_class: type[Any],
    header: DescribedShareGroup,
    rows: list[MemberRow],
    described: DescribedShareMembers,
    operations: int,
    pacer: Pacer,
) -> bytes:
    """One group of a ShareGroupDescribe answer, its members described and encoded a chunk at a time."""
    empty = build(group_class, **_described(ctx, header, operations))
    if not rows:
        return entity_bytes(empty)
    member_class = element_class(group_class, "members")
    if not share_member_layout(member_class):  # a layout written by kio
        assignment_cls = assignment_class(ctx.api_key, ctx.api_version)
        parts = await encode_items(
            member_class,
            rows,
            pacer,
            lambda row: _member(described.member(row), assignment_cls),
            lambda row: KIO_MEMBER_WEIGHT + KIO_TOPIC_WEIGHT * len(row[6]),
        )
        return await spliced(empty, "members", parts, pacer)
    parts = []
    for row in rows:
        if pacer.due(MEMBER_WEIGHT + TOPIC_WEIGHT * len(row[6])):
            await pause()
        parts.append(share_member(described.member(row)))
    return await spliced(empty, "members", parts, pacer)


def _describe_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    message = DEFAULT_MESSAGES.get(code)
    groups = [DescribedShareGroup(group_id=g, error=code, error_message=message) for g in request.group_ids]
    return respond(ctx, groups=[_described(ctx, g, OPERATIONS_NOT_REQUESTED) for g in groups])


async def share_group_describe(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Group."""
    require_share_groups(broker)
    group_ids: list[str] = []
    refused: list[dict[str, Any]] = []
    for group_id in request.group_ids:
        if allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            group_ids.append(group_id)
        else:
            failed = DescribedShareGroup(group_id=group_id, error=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            refused.append(_described(ctx, failed, OPERATIONS_NOT_REQUESTED))
    rows: list[tuple[DescribedShareGroup, list[MemberRow]]] = []
    described: DescribedShareMembers | None = None
    if group_ids:

        def query(c: Any) -> list[tuple[DescribedShareGroup, list[MemberRow]]]:
            nonlocal described
            described = DescribedShareMembers(c.groups.image)
            return [share_group_rows(c.groups, g) for g in group_ids]

        rows = await read(broker, query)

    async def group_bytes(group_class: type[Any], header: Any, members: Any, operations: int, pacer: Pacer) -> bytes:
        assert described is not None
        return await _described_bytes(ctx, group_class, header, members, described, operations, pacer)

    return await described_groups_answer(broker, ctx, request, refused, rows, group_bytes)


SPECS = [
    ApiSpec(SHARE_GROUP_HEARTBEAT, 1, 1, share_group_heartbeat, _heartbeat_error),
    ApiSpec(SHARE_GROUP_DESCRIBE, 1, 1, share_group_describe, _describe_error),
]
