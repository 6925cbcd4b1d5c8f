"""The classic membership APIs: JoinGroup (v0-9), SyncGroup (v0-5), Heartbeat (v0-4), LeaveGroup (v0-5).

Each handler maps the kio request of whatever version to ``regroup.protocol.classic``, runs the core
operation through the coordinator runtime (JoinGroup and SyncGroup may park until the rebalance releases
them) and maps the core's response back to the requested version. Version quirks handled here:

* JoinGroup v0 has no rebalance timeout: the session timeout is used (as Kafka's request layer does).
* JoinGroup v<7 cannot send a null protocol name: null goes out as "" (error responses too).
* SyncGroup v5+ must carry both protocol type and name, else INCONSISTENT_GROUP_PROTOCOL (KafkaApis).
* LeaveGroup v0-2 carry one member id and answer with one error: the top-level error if set, else that
  member's (KIP-345 normalises them to a one-member batch).

At 10,000 members a classic group's answers are large: the leader's JoinGroup answer and a batched LeaveGroup's
are encoded by hand a chunk of members at a time (``server/member_answers.py``), and a LeaveGroup hands the core
``LEAVE_GROUP_CHUNK`` members per call, a turn of the loop between two calls (a member named twice is answered
UNKNOWN_MEMBER_ID the second time, as in one call).

Authorization (Kafka's API-to-ACL table): all four need READ on the Group; without it the request is answered
GROUP_AUTHORIZATION_FAILED before the coordinator sees it. SyncGroup checks its v5 protocol fields first, as
Kafka does.

A steady member's Heartbeat (known, at its group's generation, READ allowed) is answered at once from its
bytes (``server/at_once.py``, ``GroupCoordinator.heartbeat_at_once``): the same answer and the same effect, the
session deadline moved, without the general path's layers.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from regroup.client.embedded import assigned_partitions
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import RequestKey, Result
from regroup.model.errors import ApiError, ErrorCode
from regroup.network.codec import response_class
from regroup.protocol.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import ApiSpec, AtOnce, Broker, RequestContext
from regroup.server.authz import permits, require
from regroup.server.encoded import PreEncoded, entity_bytes
from regroup.server.entities import build, ms
from regroup.server.handlers._common import client_info, respond
from regroup.server.member_answers import (
    JOIN_NULLABLE_PROTOCOL_FROM,
    SYNC_PROTOCOL_FIELDS_FROM,
    join_answer,
    join_members,
    leave_members,
    sync_answer,
)
from regroup.server.offset_answers import pause

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
LEAVE_BATCH_FROM = 3
#: members of one LeaveGroup handed to the core per call (a call of 10,000 held the loop about 45 ms; with 250 a
#: call, classic-joins-10k's watchdog still named LeaveGroup in 13 turns over 10 ms in four rounds, 2 with 100)
LEAVE_GROUP_CHUNK = 100


def _require_read(broker: Broker, ctx: RequestContext, group_id: str) -> None:
    """READ on the Group, else GROUP_AUTHORIZATION_FAILED."""
    require(broker, ctx, AclOperation.READ, ResourceType.GROUP, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)


# ------------------------------------------------------------------------------------------ JoinGroup
def _join_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _join_response(ctx, JoinGroupResponse(error=code))


def _join_response(ctx: RequestContext, resp: JoinGroupResponse) -> PreEncoded:
    """An answer without members (``member_answers.join_answer``): every member's but the leader's."""
    return join_answer(ctx.api_version, resp)


def _join_entity(ctx: RequestContext, resp: JoinGroupResponse) -> Any:
    """The answer as a kio entity (the leader's is made with its members left out: ``join_members`` splices
    them in)."""
    nullable = ctx.api_version >= JOIN_NULLABLE_PROTOCOL_FROM
    return respond(
        ctx,
        error_code=resp.error,
        generation_id=resp.generation_id,
        protocol_type=resp.protocol_type,
        protocol_name=resp.protocol_name if nullable else (resp.protocol_name or ""),
        leader=resp.leader,
        skip_assignment=resp.skip_assignment,
        member_id=resp.member_id,
        members=[
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in resp.members
        ],
    )


async def join_group(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    _require_read(broker, ctx, request.group_id)
    session_ms = ms(request.session_timeout)
    req = JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=ms(request.rebalance_timeout) if ctx.api_version >= 1 else session_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        reason=getattr(request, "reason", None),
        version=ctx.api_version,
        client=client_info(ctx),
    )
    resp = await broker.coordinator.call(
        lambda c, key, now: c.join_group(req, key, now), may_park=True, group_id=req.group_id
    )
    if resp.members:  # the leader's answer: its members encoded by hand, a chunk between two yields
        empty = _join_entity(ctx, dataclasses.replace(resp, members=()))
        return await join_members(empty, resp.members, ctx.api_version, int(resp.error))
    return _join_response(ctx, resp)


# ------------------------------------------------------------------------------------------ SyncGroup
def _sync_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _sync_response(ctx, SyncGroupResponse(error=code))


def _sync_response(ctx: RequestContext, resp: SyncGroupResponse) -> PreEncoded:
    return sync_answer(ctx.api_version, resp)


async def sync_group(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    if ctx.api_version >= SYNC_PROTOCOL_FIELDS_FROM and (protocol_type is None or protocol_name is None):
        raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    _require_read(broker, ctx, request.group_id)
    req = SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=ctx.plan if ctx.plan is not None else _assignments(request),
    )
    resp = await broker.coordinator.call(
        lambda c, key, now: c.sync_group(req, key, now), may_park=True, group_id=req.group_id
    )
    return _sync_response(ctx, resp)


def _assignments(request: Any) -> tuple[tuple[str, bytes], ...]:
    return tuple((a.member_id, a.assignment) for a in request.assignments)


def _plan_sync(broker: Broker, version: int, request: Any) -> tuple[tuple[str, bytes], ...]:
    """A large SyncGroup's assignments (a leader's for 10,000 members) as the core takes them, made on the thread
    that decoded it (``ApiSpec.plan_aside``): a few milliseconds the loop's step is spared. The partitions of a
    consumer group's assignments are read there too (``assigned_partitions``, which keeps what it read): the
    ``group_assignment`` rows of the generation (``server/events.py``) find them read, about half their cost on
    the loop."""
    assignments = _assignments(request)
    if getattr(request, "protocol_type", None) in (None, "consumer"):
        for _, data in assignments:
            assigned_partitions(data)
    return assignments


# ------------------------------------------------------------------------------------------ Heartbeat
def _heartbeat_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _heartbeat_answer(ctx.api_version, code)


@cache
def _heartbeat_answer(version: int, code: ErrorCode) -> PreEncoded:
    """A Heartbeat response of ``version`` carrying ``code``, encoded once: it has no other field that varies
    (the throttle time is always 0), and a steady group answers thousands of heartbeats a second."""
    entity = build(response_class(HEARTBEAT, version), error_code=code, throttle_time=0)
    return PreEncoded(type(entity), entity_bytes(entity), (int(code),) if code else ())


def _heartbeat_request(request: Any) -> HeartbeatRequest:
    """The core's request for a kio Heartbeat request of any version."""
    return HeartbeatRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )


async def heartbeat(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    _require_read(broker, ctx, request.group_id)
    req = _heartbeat_request(request)
    resp: HeartbeatResponse = await broker.coordinator.call(
        lambda c, key, now: c.heartbeat(req, key, now), group_id=req.group_id
    )
    return _heartbeat_answer(ctx.api_version, resp.error)


def _heartbeat_at_once(
    broker: Broker,
    principal: str,
    client_host: str,
    client_id: str | None,
    version: int,
    req: HeartbeatRequest,
    _varying: None,
) -> Any:
    """A steady member's Heartbeat answered at once (``GroupCoordinator.heartbeat_at_once``): READ on the Group
    allowed, else None and ``heartbeat`` answers GROUP_AUTHORIZATION_FAILED."""
    if not permits(broker, principal, client_host, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return None
    resp: HeartbeatResponse | None = broker.coordinator.answer_at_once(
        GroupCoordinator.heartbeat_at_once, req, group_id=req.group_id
    )
    return None if resp is None else _heartbeat_answer(version, resp.error)


# ----------------------------------------------------------------------------------------- LeaveGroup
def _leave_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, members=[])


async def leave_group(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    _require_read(broker, ctx, request.group_id)
    batch = ctx.api_version >= LEAVE_BATCH_FROM
    members: Sequence[Any] = request.members if batch else (LeavingMember(member_id=request.member_id),)
    resp = await _leave(broker, request.group_id, members, _leaving if batch else _as_is)
    if not batch:
        error = resp.error
        if error is ErrorCode.NONE and resp.members:
            error = resp.members[0].error
        return respond(ctx, error_code=error)
    return await leave_members(respond(ctx, error_code=resp.error, members=[]), resp.members, int(resp.error))


def _leaving(member: Any) -> LeavingMember:
    """A decoded LeaveGroup v3+ member as the core's ``LeavingMember``."""
    return LeavingMember(
        member_id=member.member_id,
        group_instance_id=getattr(member, "group_instance_id", None),
        reason=getattr(member, "reason", None),
    )


def _as_is(member: LeavingMember) -> LeavingMember:
    return member


async def _leave(
    broker: Broker, group_id: str, members: Sequence[Any], leaving: Callable[[Any], LeavingMember] = _as_is
) -> LeaveGroupResponse:
    """The core's answer to ``members`` leaving (each made a ``LeavingMember`` by ``leaving`` as its chunk is
    asked: a LeaveGroup of 10,000 members is not made over at once), asked ``LEAVE_GROUP_CHUNK`` members per
    call: a top-level error of the first call is the answer (nothing left); one of a later call (the group
    changed in between) is the error of each of that call's members."""
    answered: list[LeaveGroupMemberResponse] = []
    for start in range(0, max(len(members), 1), LEAVE_GROUP_CHUNK):
        if start:
            await pause()  # (a call that writes nothing answers without a turn of the loop)
        chunk = tuple(map(leaving, members[start : start + LEAVE_GROUP_CHUNK]))
        req = LeaveGroupRequest(group_id=group_id, members=chunk)
        resp: LeaveGroupResponse = await broker.coordinator.call(
            functools.partial(_leave_chunk, req), group_id=group_id
        )
        if resp.error is ErrorCode.NONE:
            answered.extend(resp.members)
        elif start == 0:
            return resp
        else:
            answered.extend(
                LeaveGroupMemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error=resp.error)
                for m in req.members
            )
    return LeaveGroupResponse(members=tuple(answered))


def _leave_chunk(req: LeaveGroupRequest, coordinator: GroupCoordinator, key: RequestKey, now_ms: int) -> Result:
    return coordinator.leave_group(req, key, now_ms)


SPECS = [
    ApiSpec(JOIN_GROUP, 0, 9, join_group, _join_error),
    ApiSpec(SYNC_GROUP, 0, 5, sync_group, _sync_error, plan_aside=_plan_sync),
    ApiSpec(
        HEARTBEAT,
        0,
        4,
        heartbeat,
        _heartbeat_error,
        at_once=AtOnce(lambda _, body: _heartbeat_request(body), _heartbeat_at_once),
    ),
    ApiSpec(LEAVE_GROUP, 0, 5, leave_group, _leave_error),
]
