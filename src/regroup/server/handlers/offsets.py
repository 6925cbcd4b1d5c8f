"""OffsetCommit (v2-9), OffsetFetch (v1-9, v8+ batched by group) and OffsetDelete (v0, KIP-496).

Error placement follows Kafka: OffsetCommit has no top-level error, so a request-level failure is set on
every partition (the core already does this for validation failures); OffsetFetch v1 has no top-level error
either, so a group-level error lands on every requested partition; v2-7 carry it at the top level, v8+ per
group. ``RequireStable`` (v7+) is accepted and needs nothing more: there are no transactional offsets, and
a fetch is answered only after every earlier write is durable.

As Kafka's request layer does before its coordinator sees a commit, partitions of topics the embedded partition
log does not have (or beyond a topic's partition count, or of an empty topic name) are answered
UNKNOWN_TOPIC_OR_PARTITION and taken out of the request; the remaining partitions are committed as usual, and
when none remain the coordinator is not asked at all (so no group error is reported either). Commits never
create topics. Versions 0-1 of OffsetCommit and 0 of OffsetFetch are not served (kio has no schema for them;
every client in use negotiates a newer one).
"""

from __future__ import annotations

import asyncio
from typing import Any

from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommit,
)
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.entities import ms
from regroup.server.handlers._common import respond

OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 8, 9, 47
RETENTION_VERSIONS = range(2, 5)
FETCH_TOP_LEVEL_ERROR_FROM = 2
FETCH_BATCHED_FROM = 8


# --------------------------------------------------------------------------------------- OffsetCommit
def _commit_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    topics = [
        {
            "name": t.name,
            "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
        }
        for t in request.topics
    ]
    return respond(ctx, topics=topics)


def _split_unknown(broker: Broker, topics: Any) -> tuple[list[tuple[str, list[Any]]], dict[str, list[int]]]:
    """(the request's topics reduced to partitions that exist, each a ``(name, partitions)`` pair; topic ->
    partition indexes that do not exist, in request order)."""
    known = broker.topic_store.topics()
    valid: list[tuple[str, list[Any]]] = []
    unknown: dict[str, list[int]] = {}
    for topic in topics:
        info = known.get(topic.name)
        count = info.partitions if info is not None else 0
        present = [p for p in topic.partitions if 0 <= p.partition_index < count]
        if len(present) < len(topic.partitions):
            missing = unknown.setdefault(topic.name, [])
            missing.extend(p.partition_index for p in topic.partitions if not 0 <= p.partition_index < count)
        if present:
            valid.append((topic.name, present))
    return valid, unknown


async def offset_commit(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    valid, unknown = _split_unknown(broker, request.topics)
    # as Kafka's response builder: the refused partitions first, then the coordinator's answers merged by topic
    rows: dict[str, list[dict[str, Any]]] = {
        name: [{"partition_index": p, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION} for p in partitions]
        for name, partitions in unknown.items()
    }
    if valid:
        for topic, partitions in await _commit_valid(broker, ctx, request, valid):
            rows.setdefault(topic, []).extend({"partition_index": p, "error_code": code} for p, code in partitions)
    return respond(ctx, topics=[{"name": name, "partitions": partitions} for name, partitions in rows.items()])


async def _commit_valid(
    broker: Broker, ctx: RequestContext, request: Any, topics: list[tuple[str, list[Any]]]
) -> tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]:
    req = OffsetCommitRequest(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_ms=ms(request.retention_time) if ctx.api_version in RETENTION_VERSIONS else -1,
        topics=tuple(
            (
                name,
                tuple(
                    PartitionCommit(
                        partition=p.partition_index,
                        offset=p.committed_offset,
                        leader_epoch=getattr(p, "committed_leader_epoch", -1),
                        metadata=p.committed_metadata,
                    )
                    for p in partitions
                ),
            )
            for name, partitions in topics
        ),
        version=ctx.api_version,
    )
    resp: OffsetCommitResponse = await broker.coordinator.call(lambda c, key, now: c.offset_commit(req, key, now))
    return resp.topics


# ---------------------------------------------------------------------------------------- OffsetFetch
def _partition_rows(rows: tuple[FetchedOffset, ...], error: ErrorCode | None = None) -> list[dict[str, Any]]:
    return [
        {
            "partition_index": r.partition,
            "committed_offset": r.offset,
            "committed_leader_epoch": r.leader_epoch,
            "metadata": r.metadata,
            "error_code": error if error is not None else r.error,
        }
        for r in rows
    ]


def _topic_rows(resp: OffsetFetchResponse, partition_error: ErrorCode | None = None) -> list[dict[str, Any]]:
    return [{"name": t, "partitions": _partition_rows(rows, partition_error)} for t, rows in resp.topics]


def _requested(topics: Any) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    if topics is None:
        return None
    return tuple((t.name, tuple(t.partition_indexes)) for t in topics)


def _single_group_response(ctx: RequestContext, resp: OffsetFetchResponse) -> Any:
    if ctx.api_version < FETCH_TOP_LEVEL_ERROR_FROM:
        on_partitions = resp.error if resp.error is not ErrorCode.NONE else None
        return respond(ctx, topics=_topic_rows(resp, on_partitions))
    return respond(ctx, topics=_topic_rows(resp), error_code=resp.error)


def _fetch_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    if ctx.api_version >= FETCH_BATCHED_FROM:
        return respond(ctx, groups=[{"group_id": g.group_id, "topics": [], "error_code": code} for g in request.groups])
    requested = _requested(request.topics) or ()
    topics = tuple((t, tuple(FetchedOffset(partition=p) for p in ps)) for t, ps in requested)
    return _single_group_response(ctx, OffsetFetchResponse(group_id=request.group_id, error=code, topics=topics))


async def _fetch_one(broker: Broker, req: OffsetFetchRequest) -> OffsetFetchResponse:
    resp: OffsetFetchResponse = await broker.coordinator.call(lambda c, key, now: c.offset_fetch(req, key, now))
    return resp


async def offset_fetch(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version < FETCH_BATCHED_FROM:
        req = OffsetFetchRequest(
            group_id=request.group_id, topics=_requested(request.topics), require_stable=require_stable
        )
        return _single_group_response(ctx, await _fetch_one(broker, req))
    requests = [
        OffsetFetchRequest(
            group_id=g.group_id,
            topics=_requested(g.topics),
            member_id=getattr(g, "member_id", None),
            member_epoch=getattr(g, "member_epoch", -1),
            require_stable=require_stable,
        )
        for g in request.groups
    ]
    responses = await asyncio.gather(*(_fetch_one(broker, r) for r in requests))
    return respond(
        ctx,
        groups=[{"group_id": r.group_id, "topics": _topic_rows(r), "error_code": r.error} for r in responses],
    )


# --------------------------------------------------------------------------------------- OffsetDelete
def _delete_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, topics=[])


async def offset_delete(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """The group's offsets of the named partitions are deleted unless the group subscribes to the topic
    (GROUP_SUBSCRIBED_TO_TOPIC); a group with members that are not consumers refuses (NON_EMPTY_GROUP)."""
    req = OffsetDeleteRequest(
        group_id=request.group_id,
        topics=tuple((t.name, tuple(p.partition_index for p in t.partitions)) for t in request.topics),
    )
    resp: OffsetDeleteResponse = await broker.coordinator.call(lambda c, key, now: c.offset_delete(req, key, now))
    return respond(
        ctx,
        error_code=resp.error,
        topics=[
            {"name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in partitions]}
            for name, partitions in resp.topics
        ],
    )


SPECS = [
    ApiSpec(OFFSET_COMMIT, 2, 9, offset_commit, _commit_error),
    ApiSpec(OFFSET_FETCH, 1, 9, offset_fetch, _fetch_error),
    ApiSpec(OFFSET_DELETE, 0, 0, offset_delete, _delete_error),
]
