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

OffsetCommit and OffsetFetch answers are encoded by hand, a chunk of partitions at a time with the event loop
given back between chunks (``server/offset_answers.py``), after the coordinator's call: its outcome is fixed
when the request's first step ends, so a later request on the connection sees the commit, and a fetch answers
the offsets as they were when it was asked. Error answers built by the dispatcher stay kio entities.

Authorization, in Kafka's order (``KafkaApis``), always before the coordinator is asked, so a refused request
or partition changes nothing:

* OffsetCommit: READ on the Group (else GROUP_AUTHORIZATION_FAILED on every partition), then READ on each
  Topic: the partitions of a topic without it are TOPIC_AUTHORIZATION_FAILED (before the unknown-topic check,
  so an unauthorized principal learns nothing of which topics exist); the others are committed.
* OffsetFetch: DESCRIBE on the Group (per group from v8, GROUP_AUTHORIZATION_FAILED for that group only), then
  DESCRIBE on each Topic: named partitions of a topic without it are TOPIC_AUTHORIZATION_FAILED (offset -1);
  when all of the group's offsets are fetched (null topics) such topics are left out silently. A group-level
  error from the coordinator is answered without the refused topics, as Kafka does.
* OffsetDelete: DELETE on the Group (else GROUP_AUTHORIZATION_FAILED), then READ on each Topic: partitions of
  a topic without it are TOPIC_AUTHORIZATION_FAILED and keep their offsets; the rest go to the coordinator
  (which answers unknown topics and partitions UNKNOWN_TOPIC_OR_PARTITION).

An OffsetDelete hands the core ``OFFSET_DELETE_CHUNK`` partitions per call, a turn of the loop between two, and
its answer is encoded by hand like OffsetCommit's (the same layout).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Coroutine, Iterator
from operator import attrgetter, itemgetter
from typing import Any, TypeVar, cast

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.offsets import PlannedTopic, narrow_plan
from regroup.coordinator.result import RequestKey, Result
from regroup.model.errors import ErrorCode
from regroup.network.codec import response_class
from regroup.network.deferred import Deferred
from regroup.protocol.offsets import (
    NO_LEADER_EPOCH,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommits,
)
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import ApiSpec, AtOnce, Broker, RequestContext
from regroup.server.authz import allowed, authorizer_of, permits, require
from regroup.server.entities import build, ms
from regroup.server.errors import CoordinatorUnavailable
from regroup.server.handlers._common import respond
from regroup.server.offset_answers import CHUNK, FetchTopic, commit_topics, fetch_groups, fetch_topics, pause

OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 8, 9, 47
T = TypeVar("T")
log = logging.getLogger(__name__)
RETENTION_VERSIONS = range(2, 5)
#: partitions of one OffsetDelete handed to the core per call (a call of 10,000 held the loop 20-40 ms)
OFFSET_DELETE_CHUNK = 1_000
#: the fields of a decoded OffsetCommit partition the core's columns are made of
_PARTITION_INDEX = attrgetter("partition_index")
_OFFSET = attrgetter("committed_offset")
_LEADER_EPOCH = attrgetter("committed_leader_epoch")
_METADATA = attrgetter("committed_metadata")
FETCH_TOP_LEVEL_ERROR_FROM = 2
FETCH_BATCHED_FROM = 8


# --------------------------------------------------------------------------------------- OffsetCommit
def _commit_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """Every partition of the request answered ``code``."""
    topics = [
        {
            "name": t.name,
            "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
        }
        for t in request.topics
    ]
    return respond(ctx, topics=topics)


def _require_group(broker: Broker, ctx: RequestContext, operation: AclOperation, group_id: str) -> None:
    require(broker, ctx, operation, ResourceType.GROUP, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _split_refused(
    broker: Broker, ctx: RequestContext, topics: Any, *, known_only: bool = True
) -> tuple[list[tuple[str, list[Any]]], dict[str, list[tuple[int, ErrorCode]]]]:
    """(the request's topics reduced to partitions the principal may READ and — with ``known_only`` — that
    exist, each a ``(name, partitions)`` pair; topic -> ``(partition, error)`` of the others, in request order:
    TOPIC_AUTHORIZATION_FAILED for a topic without READ, else UNKNOWN_TOPIC_OR_PARTITION)."""
    known = broker.topic_store.topics() if known_only else {}
    valid: list[tuple[str, list[Any]]] = []
    refused: dict[str, list[tuple[int, ErrorCode]]] = {}
    for topic in topics:
        if not allowed(broker, ctx, AclOperation.READ, ResourceType.TOPIC, topic.name):
            denied = refused.setdefault(topic.name, [])
            denied.extend((p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions)
            continue
        if not known_only:
            valid.append((topic.name, list(topic.partitions)))
            continue
        info = known.get(topic.name)
        count = info.partitions if info is not None else 0
        present = [p for p in topic.partitions if 0 <= p.partition_index < count]
        if len(present) < len(topic.partitions):
            missing = refused.setdefault(topic.name, [])
            missing.extend(
                (p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                for p in topic.partitions
                if not 0 <= p.partition_index < count
            )
        if present:
            valid.append((topic.name, present))
    return valid, refused


async def offset_commit(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """READ on the Group, then READ on each Topic."""
    _require_group(broker, ctx, AclOperation.READ, request.group_id)
    valid, planned, refused = commit_partitions(broker, ctx, request.topics)
    # as Kafka's response builder: the refused partitions first, then the coordinator's answers merged by topic
    rows: dict[str, list[tuple[int, int]]] = {name: list(partitions) for name, partitions in refused.items()}
    committed = await _commit_valid(broker, ctx, request, valid, planned) if valid else ()
    return await commit_topics(respond(ctx, topics=[]), _merged(rows, committed))


def _merged(
    rows: dict[str, list[tuple[int, int]]], committed: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]
) -> list[tuple[str, list[tuple[int, int]]]]:
    """``rows`` (by topic) followed by the core's answer ``committed``, a topic named in both (or twice) answered once,
    its rows merged, as Kafka's response builder does."""
    for topic, partitions in committed:
        rows.setdefault(topic, []).extend(partitions)
    return list(rows.items())


def _core_request(request: Any, version: int, topics: list[tuple[str, PartitionCommits]]) -> OffsetCommitRequest:
    """The core's request for a decoded OffsetCommit of ``version`` and its ``topics`` to commit."""
    return OffsetCommitRequest(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_ms=_retention_ms(version, request),
        topics=tuple(topics),
        version=version,
    )


def commit_partitions(
    broker: Broker, ctx: RequestContext, topics: Any
) -> tuple[list[tuple[str, PartitionCommits]], list[PlannedTopic | None], dict[str, list[tuple[int, ErrorCode]]]]:
    """``_split_refused`` for OffsetCommit and TxnOffsetCommit, with each topic's valid partitions as the core's
    columns: (topic name, its partitions to commit) per topic with any, the topic's ``PlannedTopic`` for each of
    those when the request was planned ahead (``_plan_commit``, ``_plan_txn_commit``; narrowed to the partitions
    in range when some are not; else None), and the refused partitions by topic. A request may name 10,000
    partitions and all of this runs in one step of the event loop: each column is one ``map`` over the decoded
    partitions, and the partition numbers are checked by their least and greatest (each partition is visited on
    its own only when some is out of range)."""
    known = broker.topic_store.topics()
    plans: tuple[PlannedTopic | None, ...] = ctx.plan or ()
    valid: list[tuple[str, PartitionCommits]] = []
    planned: list[PlannedTopic | None] = []
    refused: dict[str, list[tuple[int, ErrorCode]]] = {}
    for index, topic in enumerate(topics):
        name, partitions = topic.name, topic.partitions
        if not allowed(broker, ctx, AclOperation.READ, ResourceType.TOPIC, name):
            denied = refused.setdefault(name, [])
            denied.extend((p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in partitions)
            continue
        if not partitions:
            continue
        info = known.get(name)
        count = info.partitions if info is not None else 0
        plan = plans[index] if index < len(plans) else None
        indexes = tuple(map(_PARTITION_INDEX, partitions)) if plan is None else plan.columns.partitions
        if min(indexes) < 0 or max(indexes) >= count:
            refused.setdefault(name, []).extend(
                (p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in indexes if not 0 <= p < count
            )
            if plan is not None:
                plan = narrow_plan(plan, count)  # (filtered: a fraction of building the rest on the loop)
                if not plan.columns:
                    continue
            else:
                partitions = tuple(p for p in partitions if 0 <= p.partition_index < count)
                if not partitions:
                    continue
        if plan is not None:
            valid.append((name, plan.columns))
        else:
            valid.append((name, commit_columns(partitions)))
        planned.append(plan)
    return valid, planned, refused


def commit_columns(partitions: Any) -> PartitionCommits:
    """The core's columns of a topic's decoded partitions, a ``map`` each. Versions without a leader epoch (before
    6) commit ``NO_LEADER_EPOCH``."""
    indexes = tuple(map(_PARTITION_INDEX, partitions))
    if hasattr(partitions[0], "committed_leader_epoch"):
        epochs = tuple(map(_LEADER_EPOCH, partitions))
    else:
        epochs = (NO_LEADER_EPOCH,) * len(indexes)
    offsets = tuple(map(_OFFSET, partitions))
    return PartitionCommits(indexes, offsets, epochs, tuple(map(_METADATA, partitions)))


def _retention_ms(version: int, request: Any) -> int:
    return ms(request.retention_time) if version in RETENTION_VERSIONS else -1


def _plan_commit(broker: Broker, version: int, request: Any) -> tuple[PlannedTopic | None, ...]:
    """A large OffsetCommit's records worked out ahead, on the thread that decoded it (``ApiSpec.plan_aside``):
    each topic's ``PlannedTopic`` (None for a topic without partitions), by position in the request. It reads
    only the request, the clock and the coordinator's fixed configuration; ``commit_partitions`` uses a topic's
    plan only when the topic is authorized (narrowed to its partitions in range), and the core only
    once the group accepts the commit. What the loop is left with at 10,000 partitions: the checks and the apply
    (about a tenth of the core's step without a plan)."""
    coordinator = broker.coordinator
    group_id, retention_ms = request.group_id, _retention_ms(version, request)
    return tuple(
        coordinator.plan_offset_commit(group_id, topic.name, commit_columns(topic.partitions), retention_ms)
        if topic.partitions
        else None
        for topic in request.topics
    )


async def _commit_valid(
    broker: Broker,
    ctx: RequestContext,
    request: Any,
    topics: list[tuple[str, PartitionCommits]],
    planned: list[PlannedTopic | None],
) -> tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]:
    req = _core_request(request, ctx.api_version, topics)
    if not any(planned):
        planned = []
    resp: OffsetCommitResponse = await broker.coordinator.call(
        lambda c, key, now: c.offset_commit(req, key, now, planned), group_id=req.group_id
    )
    return resp.topics


def _commit_prepared(version: int, request: Any) -> Any:
    """An OffsetCommit answered at once works on its whole decoded body (``AtOnce.fresh``): the request itself,
    or None (always the general path) when it names no topic."""
    return request if request.topics else None


def _commit_at_once(
    broker: Broker,
    principal: str,
    client_host: str,
    client_id: str | None,
    version: int,
    request: Any,
    _varying: None,
) -> Any:
    """An OffsetCommit answered without its handler's coroutine: READ on the Group and on every Topic allowed,
    every partition of a topic that exists, ``CHUNK`` partitions at most; the same core call as
    ``offset_commit``'s, its answer a ``Deferred`` settled once the records are durable (``call_then``), the same
    answer (a COORDINATOR_NOT_AVAILABLE one if the coordinator's log fails first). Else None, and
    ``offset_commit`` answers it."""
    if not permits(broker, principal, client_host, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return None
    known = broker.topic_store.topics()
    valid: list[tuple[str, PartitionCommits]] = []
    total = 0
    for topic in request.topics:
        name, partitions = topic.name, topic.partitions
        if not permits(broker, principal, client_host, AclOperation.READ, ResourceType.TOPIC, name):
            return None
        if not partitions:
            continue
        info = known.get(name)
        count = info.partitions if info is not None else 0
        columns = commit_columns(partitions)
        if min(columns.partitions) < 0 or max(columns.partitions) >= count:
            return None
        total += len(partitions)
        valid.append((name, columns))
    if not valid or total > CHUNK:
        return None
    req = _core_request(request, version, valid)
    later: Deferred[Any] = Deferred()
    try:
        now, resp = broker.coordinator.call_then(
            lambda c, key, now_ms: c.offset_commit(req, key, now_ms, ()),
            functools.partial(_commit_durable, later, version, request),
            group_id=req.group_id,
        )
    except CoordinatorUnavailable:
        return None  # (before the core saw it: ``offset_commit`` answers COORDINATOR_NOT_AVAILABLE)
    try:  # (committed: whatever goes wrong now closes the connection, never commits a second time)
        return _commit_answer(version, resp.topics) if now else later
    except Exception as exc:
        log.exception("OffsetCommit v%d answered at once: its answer failed after the commit", version)
        return Deferred.failed(exc)


def _commit_durable(
    later: Deferred[Any], version: int, request: Any, resp: OffsetCommitResponse | None, error: BaseException | None
) -> None:
    """(``_commit_at_once``) The commit's records are durable (or the coordinator failed first)."""
    try:
        if error is None:
            assert resp is not None
            answer = _commit_answer(version, resp.topics)
        elif isinstance(error, CoordinatorUnavailable):  # (as the dispatcher answers ``offset_commit``'s raise)
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            rows = [(t.name, [(p.partition_index, code) for p in t.partitions]) for t in request.topics]
            answer = _finished(commit_topics(_empty_commit(version), rows))
        else:
            later.fail(error)
            return
    except Exception as exc:  # (the connection closes, as for a response that does not encode)
        later.fail(exc)
        return
    later.settle(answer)


#: how many answers of small commits ``_commit_answer`` keeps
COMMIT_ANSWERS_KEPT = 1024
#: an answer is kept when its commit names at most this many partitions
COMMIT_ANSWER_ROWS_KEPT = 64
#: (version, the core's rows) -> the answer
_commit_answers: dict[tuple[int, tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]], Any] = {}


def _commit_answer(version: int, topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]) -> Any:
    """``offset_commit``'s answer of the core's rows (a topic named twice answered once, its rows merged). A
    consumer commits the same partitions again and again and is answered the same bytes: the answers of small
    commits are kept by version and rows (looking one up costs a twentieth of encoding it)."""
    key = (version, topics) if sum(map(len, map(_ROWS, topics))) <= COMMIT_ANSWER_ROWS_KEPT else None
    answer = None if key is None else _commit_answers.get(key)
    if answer is None:
        answer = _finished(commit_topics(_empty_commit(version), _merged({}, topics)))
        if key is not None:
            if len(_commit_answers) >= COMMIT_ANSWERS_KEPT:
                _commit_answers.clear()
            _commit_answers[key] = answer
    return answer


_ROWS = itemgetter(1)


@functools.cache
def _empty_commit(version: int) -> Any:
    """The OffsetCommitResponse of ``version`` without topics (``respond``'s, shared)."""
    return build(response_class(OFFSET_COMMIT, version), topics=[], throttle_time=0)


def _finished(coro: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that never suspends (an answer of at most ``CHUNK`` partitions: ``Pacer``)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return cast(T, stop.value)
    coro.close()
    raise RuntimeError("the answer gave the loop a turn")


# ---------------------------------------------------------------------------------------- OffsetFetch
def _fetch_rows(resp: OffsetFetchResponse, partition_error: ErrorCode | None = None) -> list[FetchTopic]:
    """The answer's topics as ``offset_answers`` encodes them (``partition_error``: set on every partition). The
    core's rows are already ``(partition, offset, leader epoch, metadata, error)`` tuples (``FetchedOffset``):
    without an error to set they are handed over as they are, not copied (10,000 of them in one step, else)."""
    if partition_error is None:
        return [(name, rows) for name, rows in resp.topics]
    return [
        (
            name,
            [
                (
                    r.partition,
                    r.offset,
                    r.leader_epoch,
                    r.metadata,
                    partition_error,
                )
                for r in rows
            ],
        )
        for name, rows in resp.topics
    ]


def _requested(topics: Any) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    if topics is None:
        return None
    return tuple((t.name, tuple(t.partition_indexes)) for t in topics)


async def _single_group_response(ctx: RequestContext, resp: OffsetFetchResponse) -> Any:
    if ctx.api_version < FETCH_TOP_LEVEL_ERROR_FROM:
        on_partitions = resp.error if resp.error is not ErrorCode.NONE else None
        return await fetch_topics(respond(ctx, topics=[]), _fetch_rows(resp, on_partitions), ctx.api_version)
    return await fetch_topics(respond(ctx, topics=[], error_code=resp.error), _fetch_rows(resp), ctx.api_version)


def _fetch_error_entity(ctx: RequestContext, resp: OffsetFetchResponse) -> Any:
    """A v1-7 error answer as a kio entity (the dispatcher's error responses are synchronous; they are small)."""
    on_partitions = resp.error if ctx.api_version < FETCH_TOP_LEVEL_ERROR_FROM else None
    topics = [
        {
            "name": name,
            "partitions": [
                {
                    "partition_index": r.partition,
                    "committed_offset": r.offset,
                    "committed_leader_epoch": r.leader_epoch,
                    "metadata": r.metadata,
                    "error_code": on_partitions if on_partitions is not None else r.error,
                }
                for r in rows
            ],
        }
        for name, rows in resp.topics
    ]
    if on_partitions is not None:
        return respond(ctx, topics=topics)
    return respond(ctx, topics=topics, error_code=resp.error)


def _fetch_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    if ctx.api_version >= FETCH_BATCHED_FROM:
        return respond(ctx, groups=[{"group_id": g.group_id, "topics": [], "error_code": code} for g in request.groups])
    requested = _requested(request.topics) or ()
    topics = tuple((t, tuple(FetchedOffset(partition=p) for p in ps)) for t, ps in requested)
    return _fetch_error_entity(ctx, OffsetFetchResponse(group_id=request.group_id, error=code, topics=topics))


async def _fetch_one(broker: Broker, req: OffsetFetchRequest) -> OffsetFetchResponse:
    resp: OffsetFetchResponse = await broker.coordinator.call(
        lambda c, key, now: c.offset_fetch(req, key, now), group_id=req.group_id
    )
    return resp


async def _fetch_described(broker: Broker, ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    """One group's fetch with the Topic ACLs applied (the Group's DESCRIBE is already checked): named topics
    without DESCRIBE are not asked for and answered TOPIC_AUTHORIZATION_FAILED after the others; fetching all
    offsets leaves such topics out of the answer."""

    def may_describe(topic: str) -> bool:
        return allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    if authorizer_of(broker) is None:
        return await _fetch_one(broker, req)
    if req.topics is None:
        resp = await _fetch_one(broker, req)
        if resp.error is not ErrorCode.NONE:
            return resp
        return dataclasses.replace(resp, topics=tuple(t for t in resp.topics if may_describe(t[0])))
    authorized = tuple(t for t in req.topics if may_describe(t[0]))
    if len(authorized) == len(req.topics):
        return await _fetch_one(broker, req)
    resp = await _fetch_one(broker, dataclasses.replace(req, topics=authorized))
    if resp.error is not ErrorCode.NONE:
        return resp
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    refused = tuple(
        (name, tuple(FetchedOffset(partition=p, error=denied) for p in partitions))
        for name, partitions in req.topics
        if not may_describe(name)
    )
    return dataclasses.replace(resp, topics=resp.topics + refused)


async def offset_fetch(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on the Group (per group from v8), then DESCRIBE on each Topic."""
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version < FETCH_BATCHED_FROM:
        _require_group(broker, ctx, AclOperation.DESCRIBE, request.group_id)
        req = OffsetFetchRequest(
            group_id=request.group_id, topics=_requested(request.topics), require_stable=require_stable
        )
        return await _single_group_response(ctx, await _fetch_described(broker, ctx, req))
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
    responses: list[OffsetFetchResponse] = []
    for start in range(0, len(requests), FETCH_GROUPS_CHUNK):  # (each chunk's reads in a turn of their own)
        chunk = requests[start : start + FETCH_GROUPS_CHUNK]
        responses.extend(await asyncio.gather(*(_fetch_group(broker, ctx, r) for r in chunk)))
    return await fetch_groups(respond(ctx, groups=[]), [(r.group_id, _fetch_rows(r), r.error) for r in responses])


#: groups of a batched OffsetFetch read together, in one turn of the event loop (about 15 µs a group: a fetch of
#: 1,000 groups read at once held the loop 12-24 ms)
FETCH_GROUPS_CHUNK = 100


async def _fetch_group(broker: Broker, ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    """One group of a batched (v8+) fetch: GROUP_AUTHORIZATION_FAILED for it alone without DESCRIBE."""
    if not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_id):
        return OffsetFetchResponse(group_id=req.group_id, error=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await _fetch_described(broker, ctx, req)


# --------------------------------------------------------------------------------------- OffsetDelete
def _delete_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, topics=[])


async def offset_delete(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DELETE on the Group, then READ on each Topic. The group's offsets of the named partitions are deleted
    unless the group subscribes to the topic (GROUP_SUBSCRIBED_TO_TOPIC); a group with members that are not
    consumers refuses (NON_EMPTY_GROUP)."""
    _require_group(broker, ctx, AclOperation.DELETE, request.group_id)
    valid, refused = _split_refused(broker, ctx, request.topics, known_only=False)  # the core answers unknown ones
    wanted = [(name, tuple(p.partition_index for p in partitions)) for name, partitions in valid]
    error, answered = await _delete_offsets(broker, request.group_id, wanted)
    # as Kafka's response builder: the refused partitions first, then the coordinator's merged by topic
    rows: dict[str, list[tuple[int, ErrorCode]]] = {name: list(partitions) for name, partitions in refused.items()}
    for name, partitions in answered:
        rows.setdefault(name, []).extend(partitions)
    if error is not ErrorCode.NONE:
        return respond(
            ctx,
            error_code=error,
            topics=[
                {"name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in partitions]}
                for name, partitions in rows.items()
            ],
        )
    return await commit_topics(respond(ctx, error_code=error, topics=[]), list(rows.items()))


async def _delete_offsets(
    broker: Broker, group_id: str, topics: list[tuple[str, tuple[int, ...]]]
) -> tuple[ErrorCode, list[tuple[str, tuple[tuple[int, ErrorCode], ...]]]]:
    """The core's answer to deleting ``topics``' offsets, asked ``OFFSET_DELETE_CHUNK`` partitions per call (a
    turn of the loop between two): the group's error and the partitions' outcomes. A group error of the first
    call is the answer (nothing deleted); one of a later call (the group changed in between) is the error of
    each of that call's partitions."""
    error, answered = ErrorCode.NONE, list[tuple[str, tuple[tuple[int, ErrorCode], ...]]]()
    for index, chunk in enumerate(_offset_chunks(topics, OFFSET_DELETE_CHUNK)):
        if index:
            await pause()  # (a call that deletes nothing answers without a turn of the loop)
        req = OffsetDeleteRequest(group_id=group_id, topics=tuple(chunk))
        resp: OffsetDeleteResponse = await broker.coordinator.call(functools.partial(_delete_chunk, req))
        if resp.error is ErrorCode.NONE:
            answered.extend(resp.topics)
        elif index == 0:
            error = resp.error
            break
        else:
            answered.extend((name, tuple((p, resp.error) for p in partitions)) for name, partitions in chunk)
    return error, answered


def _offset_chunks(topics: list[tuple[str, tuple[int, ...]]], size: int) -> Iterator[list[tuple[str, tuple[int, ...]]]]:
    """``topics`` cut into chunks of at most ``size`` partitions, in order (a topic may span two chunks; one
    named with no partitions keeps its place); at least one chunk, empty when ``topics`` is."""
    chunk: list[tuple[str, tuple[int, ...]]] = []
    count = 0
    for name, partitions in topics:
        if not partitions:
            chunk.append((name, ()))  # (after a full chunk too: no call of its own for it)
            continue
        start = 0
        while start < len(partitions):
            if count >= size:  # (a full chunk goes once more partitions follow it)
                yield chunk
                chunk, count = [], 0
            taken = partitions[start : start + size - count]
            chunk.append((name, taken))
            count += len(taken)
            start += len(taken)
    yield chunk


def _delete_chunk(req: OffsetDeleteRequest, coordinator: GroupCoordinator, key: RequestKey, now_ms: int) -> Result:
    return coordinator.offset_delete(req, key, now_ms)


SPECS = [
    ApiSpec(
        OFFSET_COMMIT,
        2,
        9,
        offset_commit,
        _commit_error,
        plan_aside=_plan_commit,
        at_once=AtOnce(_commit_prepared, _commit_at_once, fresh=True),
    ),
    ApiSpec(OFFSET_FETCH, 1, 9, offset_fetch, _fetch_error),
    ApiSpec(OFFSET_DELETE, 0, 0, offset_delete, _delete_error),
]
