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

A steady member's ConsumerGroupHeartbeat (at its epoch, reconciled, nothing new in the request, READ allowed) is
answered at once from its bytes (``server/at_once.py``, ``GroupCoordinator.consumer_group_heartbeat_at_once``):
the same answer and effect, the session deadline moved, without the general path's layers.

ConsumerGroupDescribe reads the core's rows in its first step (``consumer_group_rows``) and describes and encodes
the members a chunk at a time, yielding to the event loop between chunks (``server/inspection_answers.py``).
"""

from __future__ import annotations

import dataclasses
import struct
from functools import cache, lru_cache
from typing import Any, Final

from regroup.coordinator.consumer.describe import DescribedMembers, MemberRow, consumer_group_rows
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.errors import ErrorCode
from regroup.network.codec import response_class
from regroup.protocol.classic import ClientInfo
from regroup.protocol.consumer import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
    TopicPartitions,
)
from regroup.protocol.share import ShareGroupHeartbeatResponse
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import ZERO_UUID, ApiSpec, AtOnce, Broker, RequestContext
from regroup.server.authz import allowed, permits, require
from regroup.server.encoded import PreEncoded, array_header
from regroup.server.entities import build, ms
from regroup.server.handlers._common import DEFAULT_MESSAGES, assignment_class, client_info, respond
from regroup.server.handlers.authorized import NOT_REQUESTED as OPERATIONS_NOT_REQUESTED
from regroup.server.handlers.described_groups import described_groups_answer
from regroup.server.inspection_answers import (
    consumer_member,
    consumer_member_layout,
    element_class,
    encode_items,
    entity_bytes,
    read,
    spliced,
)
from regroup.server.offset_answers import Pacer, pause

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
CLIENT_MEMBER_ID_FROM = 1
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


# ---------------------------------------------------------------------------------- ConsumerGroupHeartbeat
def _heartbeat_response(ctx: RequestContext, resp: ConsumerGroupHeartbeatResponse) -> Any:
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
    return _heartbeat_response(ctx, ConsumerGroupHeartbeatResponse(error=code))


#: the fields of a ConsumerGroupHeartbeat (or ShareGroupHeartbeat) response, in order, that ``plain_answer``
#: writes
PLAIN_HEARTBEAT_FIELDS: Final = (
    "throttle_time",
    "error_code",
    "error_message",
    "member_id",
    "member_epoch",
    "heartbeat_interval",
    "assignment",
)
_THROTTLE_AND_ERROR = struct.Struct(">ih")
_EPOCH_AND_INTERVAL = struct.Struct(">ii")
_NO_ASSIGNMENT_NO_TAGS = b"\xff\x00"  # a null struct, then no tagged fields


#: what ``plain_answer`` reads of a core heartbeat response (a consumer group's or a share group's)
HeartbeatAnswer = ConsumerGroupHeartbeatResponse | ShareGroupHeartbeatResponse
#: the fields of its ``Assignment``, and of each of that one's topics, that ``plain_answer`` writes
PLAIN_ASSIGNMENT_FIELDS: Final = ("topic_partitions",)
PLAIN_TOPIC_FIELDS: Final = ("topic_id", "partitions")


@cache
def plain_layout(api_key: int, version: int) -> bool:
    """Whether ``plain_answer`` knows the layout of that API's (ConsumerGroupHeartbeat's, ShareGroupHeartbeat's)
    version's response and of its assignment (else kio writes it)."""
    cls = response_class(api_key, version)
    assignment = assignment_class(api_key, version)
    return (
        tuple(f.name for f in dataclasses.fields(cls)) == PLAIN_HEARTBEAT_FIELDS
        and tuple(f.name for f in dataclasses.fields(assignment)) == PLAIN_ASSIGNMENT_FIELDS
        and tuple(f.name for f in dataclasses.fields(element_class(assignment, "topic_partitions")))
        == PLAIN_TOPIC_FIELDS
    )


def plain_answer(api_key: int, version: int, resp: HeartbeatAnswer, message: str | None) -> PreEncoded:
    """The answer written field by field: most heartbeats of a KIP-848 group get one without an assignment, and
    every member gets one with its new assignment at each rebalance (a member of 10,000 topics: kio's generic
    writer took 45 ms for it, and several times this writer's cost for the small ones). A share group's
    heartbeat answer has the same layout (KIP-932)."""
    assignment = resp.assignment
    body = b"".join(
        (
            _THROTTLE_AND_ERROR.pack(0, resp.error),
            _compact_string(message),
            _compact_string(resp.member_id),
            _EPOCH_AND_INTERVAL.pack(resp.member_epoch, resp.heartbeat_interval_ms),
            _NO_ASSIGNMENT_NO_TAGS if assignment is None else _assignment_bytes(assignment),
        )
    )
    code = int(resp.error)
    return PreEncoded(response_class(api_key, version), body, (code,) if code else ())


def _assignment_bytes(assignment: TopicPartitions) -> bytes:
    """A present ``Assignment`` struct (then the response's own empty tagged fields): each topic's id, its
    partitions as a compact array of int32, no tagged fields; the struct's none."""
    parts = [b"\x01", array_header(len(assignment), True)]
    add = parts.append
    for topic_id, partitions in assignment:
        add(topic_id.bytes)
        add(array_header(len(partitions), True))
        if partitions:
            add(struct.pack(f">{len(partitions)}i", *partitions))
        add(b"\x00")
    add(b"\x00\x00")
    return b"".join(parts)


def _compact_string(text: str | None) -> bytes:
    """A compact nullable string: its UTF-8 length plus one as an unsigned varint (0: null), then the bytes."""
    if text is None:
        return b"\x00"
    raw = text.encode()
    return array_header(len(raw), True) + raw


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
    req = _heartbeat_request(ctx.api_version, request, client_info(ctx))
    resp: ConsumerGroupHeartbeatResponse = await broker.coordinator.call(
        lambda c, key, now: c.consumer_group_heartbeat(req, key, now), group_id=req.group_id
    )
    return _heartbeat_response(ctx, resp)


def _heartbeat_request(version: int, request: Any, client: ClientInfo) -> ConsumerGroupHeartbeatRequest:
    """The core's request for a kio ConsumerGroupHeartbeat request of ``version`` sent by ``client``."""
    return ConsumerGroupHeartbeatRequest(
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
        version=version,
        client=client,
    )


_UNKNOWN_CLIENT: Final = ClientInfo(client_id="", client_host="")


def _heartbeat_prepared(version: int, request: Any) -> ConsumerGroupHeartbeatRequest | None:
    """What a steady member's heartbeat answered at once needs: the core's request, its client given per
    request (``_heartbeat_at_once``). None, the general path always: an empty member id from v1 on (the handler
    answers it itself), or a version whose answer ``plain_answer`` does not know how to write."""
    if (version >= CLIENT_MEMBER_ID_FROM and not request.member_id.strip()) or not plain_layout(
        CONSUMER_GROUP_HEARTBEAT, version
    ):
        return None
    return _heartbeat_request(version, request, _UNKNOWN_CLIENT)


@lru_cache(maxsize=4096)
def _client(client_id: str | None, client_host: str) -> ClientInfo:
    """``client_info`` of a request's client id and peer host (a connection sends the same every time)."""
    return ClientInfo(client_id=client_id or "", client_host=f"/{client_host}" if client_host else "")


def _heartbeat_at_once(
    broker: Broker,
    principal: str,
    client_host: str,
    client_id: str | None,
    version: int,
    req: ConsumerGroupHeartbeatRequest,
    _varying: None,
) -> Any:
    """A steady member's heartbeat answered at once (``GroupCoordinator.consumer_group_heartbeat_at_once``):
    READ on the Group allowed, else None and the handler answers GROUP_AUTHORIZATION_FAILED."""
    if not permits(broker, principal, client_host, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return None
    resp: ConsumerGroupHeartbeatResponse | None = broker.coordinator.answer_at_once(
        GroupCoordinator.consumer_group_heartbeat_at_once, req, _client(client_id, client_host), group_id=req.group_id
    )
    if resp is None:
        return None
    key = (version, resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms)
    answer = _STEADY_ANSWERS.get(key)
    if answer is None:
        answer = plain_answer(CONSUMER_GROUP_HEARTBEAT, version, resp, None)
        if len(req.member_id) <= _STEADY_ANSWER_MAX_ID:
            if len(_STEADY_ANSWERS) >= _STEADY_ANSWERS_MAX:
                _STEADY_ANSWERS.clear()  # bounded: a burst of members costs encoding again, never memory
            _STEADY_ANSWERS[key] = answer
    return answer


#: a steady member's answer by (version, member id, epoch, interval): the same bytes until its epoch moves
_STEADY_ANSWERS: dict[tuple[int, str | None, int, int], PreEncoded] = {}
_STEADY_ANSWERS_MAX: Final = 16_384
_STEADY_ANSWER_MAX_ID: Final = 128


# ----------------------------------------------------------------------------------- ConsumerGroupDescribe
def _partitions(rows: tuple[DescribedTopicPartitions, ...]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": r.topic_id, "topic_name": r.topic_name, "partitions": r.partitions} for r in rows
        ]
    }


def _member(m: DescribedConsumerMember, assignment_cls: type[Any]) -> dict[str, Any]:
    return {
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
        "members": [_member(m, assignment_cls) for m in group.members],
        "authorized_operations": operations if group.error is ErrorCode.NONE else OPERATIONS_NOT_REQUESTED,
    }


#: a member costs about four listed groups to describe and encode, and two more per topic of its assignment and of
#: its target (thirty and ten when kio writes it): with one topic in each, 125 members between two yields
MEMBER_WEIGHT, TOPIC_WEIGHT, KIO_MEMBER_WEIGHT, KIO_TOPIC_WEIGHT = 4, 2, 30, 10


async def _described_bytes(
    ctx: RequestContext,
    group_class: type[Any],
    header: DescribedConsumerGroup,
    rows: list[MemberRow],
    described: DescribedMembers,
    operations: int,
    pacer: Pacer,
) -> bytes:
    """One group of a ConsumerGroupDescribe answer, its members described and encoded a chunk at a time."""
    empty = build(group_class, **_described(ctx, header, operations))
    if not rows:
        return entity_bytes(empty)
    member_class = element_class(group_class, "members")
    with_type = consumer_member_layout(member_class)
    if with_type is None:  # a layout written by kio
        assignment_cls = assignment_class(ctx.api_key, ctx.api_version)
        parts = await encode_items(
            member_class,
            rows,
            pacer,
            lambda row: _member(described.member(row), assignment_cls),
            lambda row: KIO_MEMBER_WEIGHT + KIO_TOPIC_WEIGHT * (len(row[8]) + len(row[9])),
        )
        return await spliced(empty, "members", parts, pacer)
    parts = []
    for row in rows:
        if pacer.due(MEMBER_WEIGHT + TOPIC_WEIGHT * (len(row[8]) + len(row[9]))):
            await pause()
        member = described.member(row)
        member_type = (CLASSIC_MEMBER if member.uses_classic_protocol else CONSUMER_MEMBER) if with_type else None
        parts.append(consumer_member(member, member_type))
    return await spliced(empty, "members", parts, pacer)


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
    rows: list[tuple[DescribedConsumerGroup, list[MemberRow]]] = []
    described: DescribedMembers | None = None
    if group_ids:

        def query(c: Any) -> list[tuple[DescribedConsumerGroup, list[MemberRow]]]:
            nonlocal described
            described = DescribedMembers(c.groups.image)
            return [consumer_group_rows(c.config, c.groups, g) for g in group_ids]

        rows = await read(broker, query)

    async def group_bytes(group_class: type[Any], header: Any, members: Any, operations: int, pacer: Pacer) -> bytes:
        assert described is not None
        return await _described_bytes(ctx, group_class, header, members, described, operations, pacer)

    return await described_groups_answer(broker, ctx, request, refused, rows, group_bytes)


SPECS = [
    ApiSpec(
        CONSUMER_GROUP_HEARTBEAT,
        0,
        1,
        consumer_group_heartbeat,
        _heartbeat_error,
        at_once=AtOnce(_heartbeat_prepared, _heartbeat_at_once),
    ),
    ApiSpec(CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_group_describe, _describe_error),
]
