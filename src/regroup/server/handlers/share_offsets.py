"""The share-group offsets admin APIs (KIP-932): DescribeShareGroupOffsets (v0–1, v1 with KIP-1226's lag),
AlterShareGroupOffsets (v0) and DeleteShareGroupOffsets (v0).

A share group's "offset" of a partition is its share-partition start offset: every record below it was
acknowledged or archived. Describe answers it per partition the group has state for (a partition without
state, or of a topic that does not exist, is start offset -1 with no error, as Kafka answers; a group that
does not exist simply has none). Alter restarts partitions at the given offsets; the group must have no
members (NON_EMPTY_GROUP) and is created when it does not exist. Delete forgets every partition of the named
topics (the group must exist and be empty), so they start again where ``share.auto.offset.reset`` says.

Authorization (Kafka's ``KafkaApis``): Describe needs DESCRIBE on each Group (GROUP_AUTHORIZATION_FAILED for
that group) and DESCRIBE on each Topic (named topics: TOPIC_AUTHORIZATION_FAILED per partition; all topics:
the others are left out); Alter needs READ on the Group (the whole request) and READ on each Topic; Delete
needs DELETE on the Group and READ on each Topic.
"""

from __future__ import annotations

import uuid
from typing import Any

from regroup.model.errors import ErrorCode
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed, require
from regroup.server.handlers._common import respond
from regroup.server.handlers.share_groups import require_share_groups
from regroup.server.inspection_answers import topics_answer
from regroup.server.offset_answers import pause
from regroup.server.share_offset_answers import (
    ShareOffsetRow,
    ShareOffsetsGroup,
    ShareOffsetsTopic,
    share_offsets_answer,
)
from regroup.server.time_slices import TimeSlices
from regroup.server.topics import TopicStore

DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 91, 92
NO_OFFSET = -1
#: the partitions of a DescribeShareGroupOffsets group one core call reads; the loop gets a turn between calls
DESCRIBE_PARTITIONS_PER_CALL = 1_000
#: the answer's rows are made in slices of this long at most
DESCRIBE_SLICE_S = 0.0025
#: the partitions one core call of an AlterShareGroupOffsets or DeleteShareGroupOffsets writes (10,000 in one
#: call held the loop about 80 ms); the loop gets a turn between calls, each checking that the group is still
#: empty, so a member joining meanwhile stops the rest (Kafka checks once, then writes each partition's state)
ALTER_PARTITIONS_PER_CALL = 250

TopicPartition = tuple[uuid.UUID, int]


def _store(broker: Broker) -> TopicStore:
    store = broker.topic_store
    if not isinstance(store, TopicStore):
        raise TypeError("the share offsets handlers need regroup.server.topics.TopicStore")
    return store


def _log_end(store: TopicStore, name: str, partition: int) -> int | None:
    """The partition's log end offset (None: no such partition); one never opened since the store opened has no
    data (0), and is not opened for it."""
    plog = store.opened_partition(name, partition)
    if plog is True:
        return 0
    return None if plog is False else int(plog.log_end_offset)


# --------------------------------------------------------------------------------- DescribeShareGroupOffsets
def _describe_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, groups=[{"group_id": g.group_id, "topics": [], "error_code": code} for g in request.groups])


def _partition_row(index: int, found: tuple[int, int] | None, error: ErrorCode = ErrorCode.NONE) -> ShareOffsetRow:
    start, lag = found if found is not None else (NO_OFFSET, NO_OFFSET)
    return (index, start, 0, lag, int(error))


async def _describe_group(broker: Broker, ctx: RequestContext, group: Any) -> ShareOffsetsGroup:
    """One group's answer: its partitions' log ends and lags read ``DESCRIBE_PARTITIONS_PER_CALL`` a core call,
    the rows made in slices of ``DESCRIBE_SLICE_S`` (a group of 10,000 partitions was one step of about 20 ms)."""
    store = _store(broker)
    topics = store.topics()
    by_id = {info.topic_id: info for info in topics.values()}
    group_id = group.group_id
    explicit = group.topics is not None
    slices = TimeSlices(DESCRIBE_SLICE_S)
    wanted: list[tuple[str, list[int]]] = []
    named: list[TopicPartition] = []
    if explicit:
        wanted = [(t.topic_name, [int(p) for p in t.partitions]) for t in group.topics]
        for name, partitions in wanted:
            info = topics.get(name)
            for p in partitions if info is not None else []:
                await slices.tick()
                named.append((info.topic_id, p))  # type: ignore[union-attr]
    else:

        def listed(c: Any, key: Any, now: int) -> Any:
            named.extend(c.share_partitions(group_id))
            return c.describe_share_group_offsets(group_id, {}, key, now)

        await broker.coordinator.call(listed)
    found: dict[TopicPartition, tuple[int, int]] = {}
    for start in range(0, len(named), DESCRIBE_PARTITIONS_PER_CALL):
        if start:
            await pause()
        chunk = named[start : start + DESCRIBE_PARTITIONS_PER_CALL]

        def op(c: Any, key: Any, now: int, chunk: list[TopicPartition] = chunk) -> Any:
            log_ends: dict[TopicPartition, int] = {}
            for tp in chunk:
                info = by_id.get(tp[0])
                end = _log_end(store, info.name, tp[1]) if info is not None else None
                if end is not None:
                    log_ends[tp] = end
            return c.describe_share_group_offsets(group_id, log_ends, key, now)

        outcome = await broker.coordinator.call(op)
        if not isinstance(outcome, dict):
            return (group_id, [], int(outcome))
        found.update(outcome)
    slices.restart()
    rows: list[ShareOffsetsTopic] = []
    if explicit:
        for name, partitions in wanted:
            info = topics.get(name)
            refused = info is not None and not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            parts: list[ShareOffsetRow] = []
            for p in partitions:
                await slices.tick()
                if info is None:
                    parts.append(_partition_row(p, None))
                elif refused:
                    parts.append(_partition_row(p, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                else:
                    parts.append(_partition_row(p, found.get((info.topic_id, p))))
            rows.append((name, None if info is None else info.topic_id, parts))
    else:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for topic_id, p in found:
            by_topic.setdefault(topic_id, []).append(p)
        for topic_id in sorted(by_topic, key=str):  # (by id as text, each topic's partitions in order)
            info = by_id.get(topic_id)
            if info is None or not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                continue  # (all topics: what the principal may not see is left out)
            parts = []
            for p in sorted(by_topic[topic_id]):
                await slices.tick()
                parts.append(_partition_row(p, found[(topic_id, p)]))
            rows.append((info.name, topic_id, parts))
    return (group_id, rows, 0)


async def describe_share_group_offsets(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Group; DESCRIBE on each Topic."""
    groups: list[ShareOffsetsGroup] = []
    for group in request.groups:
        if not getattr(broker, "share_groups", True):
            groups.append((group.group_id, [], int(ErrorCode.UNSUPPORTED_VERSION)))
        elif not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
            groups.append((group.group_id, [], int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
        else:
            groups.append(await _describe_group(broker, ctx, group))
    return await share_offsets_answer(respond(ctx, groups=[]), groups, ctx.api_version)


# ------------------------------------------------------------------------------------ AlterShareGroupOffsets
def _alter_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, error_message=None, responses=[])


async def alter_share_group_offsets(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """READ on the Group; READ on each Topic."""
    require_share_groups(broker)
    require(broker, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = _store(broker).topics()
    starts: dict[TopicPartition, int] = {}
    rows: list[dict[str, Any]] = []
    for t in request.topics:
        info = topics.get(t.topic_name)
        if info is not None and not allowed(broker, ctx, AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            rows.append(
                {
                    "topic_name": t.topic_name,
                    "topic_id": info.topic_id,
                    "partitions": [{"partition_index": p.partition_index, "error_code": error} for p in t.partitions],
                }
            )
            continue
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            if info is None or not 0 <= index < info.partitions:
                parts.append({"partition_index": index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
                continue
            starts[(info.topic_id, index)] = int(p.start_offset)
            parts.append({"partition_index": index, "error_code": ErrorCode.NONE})
        rows.append({"topic_name": t.topic_name, "topic_id": info.topic_id if info else None, "partitions": parts})
    group_id = request.group_id
    items = list(starts.items())
    for start in range(0, max(len(items), 1), ALTER_PARTITIONS_PER_CALL):
        if start:
            await pause()
        chunk = dict(items[start : start + ALTER_PARTITIONS_PER_CALL])

        def altered(c: Any, key: Any, now: int, chunk: dict[TopicPartition, int] = chunk) -> Any:
            return c.alter_share_group_offsets(group_id, chunk, key, now)

        outcome = await broker.coordinator.call(altered)
        if outcome is not ErrorCode.NONE:  # (a member that joined meanwhile stops it: NON_EMPTY_GROUP)
            return _alter_error(ctx, request, ErrorCode(int(outcome)))
    return await topics_answer(respond(ctx, error_code=ErrorCode.NONE, error_message=None, responses=[]), rows)


# ----------------------------------------------------------------------------------- DeleteShareGroupOffsets
def _delete_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, error_message=None, responses=[])


async def delete_share_group_offsets(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DELETE on the Group; READ on each Topic."""
    require_share_groups(broker)
    require(
        broker, ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED
    )
    topics = _store(broker).topics()
    rows: dict[str, dict[str, Any]] = {}
    ids: list[uuid.UUID] = []
    for t in request.topics:
        info = topics.get(t.topic_name)
        if info is None:
            rows[t.topic_name] = {
                "topic_name": t.topic_name,
                "topic_id": None,
                "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }
        elif not allowed(broker, ctx, AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            rows[t.topic_name] = {"topic_name": t.topic_name, "topic_id": info.topic_id, "error_code": error}
        else:
            ids.append(info.topic_id)
            rows[t.topic_name] = {"topic_name": t.topic_name, "topic_id": info.topic_id, "error_code": ErrorCode.NONE}
    group_id = request.group_id
    partitions: list[TopicPartition] = []

    def listed(c: Any, key: Any, now: int) -> Any:  # (the topics' codes; nothing deleted yet)
        partitions.extend(c.share_partitions(group_id))
        return c.delete_share_group_offsets(group_id, ids, key, now, partitions=())

    outcome = await broker.coordinator.call(listed)
    if not isinstance(outcome, dict):
        return _delete_error(ctx, request, ErrorCode(int(outcome)))
    named = set(ids)
    doomed = [tp for tp in partitions if tp[0] in named]
    for start in range(0, len(doomed), ALTER_PARTITIONS_PER_CALL):
        await pause()
        part = doomed[start : start + ALTER_PARTITIONS_PER_CALL]

        def deleted(c: Any, key: Any, now: int, part: list[TopicPartition] = part) -> Any:
            return c.delete_share_group_offsets(group_id, ids, key, now, part)

        refused = await broker.coordinator.call(deleted)
        if not isinstance(refused, dict):  # (a member that joined meanwhile stops it: NON_EMPTY_GROUP)
            return _delete_error(ctx, request, ErrorCode(int(refused)))
    for row in rows.values():
        code = outcome.get(row["topic_id"]) if row["topic_id"] is not None else None
        if code is not None and code is not ErrorCode.NONE:
            row["error_code"] = code
            row["error_message"] = "There is no offset information to delete."
    return respond(ctx, error_code=ErrorCode.NONE, error_message=None, responses=list(rows.values()))


SPECS = [
    ApiSpec(DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, describe_share_group_offsets, _describe_error),
    ApiSpec(ALTER_SHARE_GROUP_OFFSETS, 0, 0, alter_share_group_offsets, _alter_error),
    ApiSpec(DELETE_SHARE_GROUP_OFFSETS, 0, 0, delete_share_group_offsets, _delete_error),
]
