"""DeleteRecords (v0–v2): move a partition's log start offset up, durably; the records below it are gone.

As Kafka answers it (``ReplicaManager.deleteRecords``, ``UnifiedLog.maybeIncrementLogStartOffset``): the
offset -1 means the high watermark (the log end offset here); any other negative offset, or one beyond the high
watermark, is OFFSET_OUT_OF_RANGE; a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION; a
topic whose ``cleanup.policy`` does not include ``delete`` is POLICY_VIOLATION. Asking for an offset below the
current log start changes nothing. The answer's ``low_watermark`` is the log start offset afterwards (-1 with
an error). The new log starts are written and fsynced before the answer (``log-start-offset`` in each
partition's directory), all of the request's on the topic store's worker thread in one job
(``TopicStore.write_log_starts``; a partition's file never moves down, whatever order two requests' writes
come in); only then do reads stop below them, and the older segments wholly below them are taken out of the
log, their files removed on a worker thread (``server/log_cleaner.remove_dropped``) before the answer goes.
The event loop writes and deletes no file, and walks the partitions ``DELETE_SLICE_S`` at a time between two
turns given to other work (the writes' jobs made on the way, not all at once after the walk); from the first turn
given away until the answer, the connection's later requests are held (``HeldSlices``: Kafka handles a
connection's requests one at a time). The answer is encoded by hand, ``CHUNK`` partitions per step
(``offset_answers.delete_records_topics``).
A topic deleted while the writes were made is UNKNOWN_TOPIC_OR_PARTITION. A crash before the files are gone
leaves older segments below the persisted log start offset, which the reopened log keeps out of reach (and the
next DeleteRecords or cleaning pass drops). Fetch below it is OFFSET_OUT_OF_RANGE and ListOffsets' earliest answers it.

Authorization (Kafka's ``KafkaApis.handleDeleteRecordsRequest``): DELETE on each Topic. The partitions of a
topic without it are TOPIC_AUTHORIZATION_FAILED (low watermark -1), checked before the topic's existence, and
keep their records.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from regroup.network.limits import TOPIC_NAME
from regroup.security.acl import AclOperation
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.handlers.topics import NO_THROTTLE, UNAUTHORIZED, build, may, response_module, store_of
from regroup.server.log_cleaner import remove_dropped
from regroup.server.offset_answers import delete_records_topics
from regroup.server.time_slices import HeldSlices
from regroup.server.topics import LogStartWrite, TopicStore
from regroup.storage.format import StorageError
from regroup.storage.partition_log import DroppedSegments, OffsetOutOfRange, PartitionLog

__all__ = ["SPECS", "handle_delete_records"]

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1
#: how long the event loop walks a request's partitions (planning, then finishing the moves) between two turns
DELETE_SLICE_S = 0.004


async def handle_delete_records(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DELETE on each Topic."""
    with HeldSlices(DELETE_SLICE_S, ctx) as slices:
        return await _delete_records(broker, ctx, request, slices)


async def _delete_records(broker: Broker, ctx: RequestContext, request: Any, slices: HeldSlices) -> Any:
    mod = response_module(request)
    store = store_of(broker)
    # each partition's answer (index, error, low watermark), and the moves waiting for their write
    rows: list[list[tuple[int, ErrorCode, int]]] = []
    # (topic, partition: in ``rows``; the log, the offset, whether its log start is to be written)
    moves: list[tuple[int, int, PartitionLog, int, bool]] = []
    writes: list[LogStartWrite] = []  # the jobs of the moves that write, in their order
    for t, topic in enumerate(request.topics):
        deletable = may(broker, ctx, AclOperation.DELETE, topic.name)
        answers: list[tuple[int, ErrorCode, int]] = []
        for p in topic.partitions:
            await slices.tick()
            code, low = UNAUTHORIZED, -1
            if deletable:
                code, low, move = _plan(store, topic.name, p.offset, p.partition_index)
                if move is not None:
                    plog, offset, write = move
                    moves.append((t, len(answers), plog, offset, write))
                    if write:
                        writes.append((plog.directory, offset, plog.syncs_log_start))
            answers.append((p.partition_index, code, low))
        rows.append(answers)
    removals: list[tuple[Path, DroppedSegments]] = []
    if writes:
        slices.hold()  # (the writes' await gives the loop turns too)
    raised = iter(await store.write_log_starts(writes) if writes else [])
    slices.restart()
    for t, i, plog, offset, write in moves:
        await slices.tick()
        rows[t][i] = (rows[t][i][0], *_moved(plog, offset, next(raised) if write else None, removals))
    if removals:
        slices.hold()
        for directory, exc in await remove_dropped(removals):
            log.error("removing the deleted segments of %s failed: %s: %s", directory, type(exc).__name__, exc)
        slices.restart()
    topics = [
        (topic.name, [(i, low, code) for i, code, low in answers])
        for topic, answers in zip(request.topics, rows, strict=True)
    ]
    return await delete_records_topics(_answer(mod, []), topics)  # (kio's entities: about 4 us a partition)


def _plan(
    store: TopicStore, name: str, offset: int, index: int
) -> tuple[ErrorCode, int, tuple[PartitionLog, int, bool] | None]:
    """``(error, low watermark, the move)`` of deleting one partition's records below ``offset``, as far as the
    event loop decides it before any write: a move (its log, offset, and whether ``log-start-offset`` must be
    written first) is finished by ``_moved``."""
    plog = store.partition(name, index) if store.topic(name) is not None else None
    if plog is None:
        return ErrorCode.unknown_topic_or_partition, -1, None
    target = plog.log_end_offset if offset == HIGH_WATERMARK else offset
    if target < 0 or target > plog.log_end_offset:
        return ErrorCode.offset_out_of_range, -1, None
    if not store.configs.policy(name).delete:
        return ErrorCode.policy_violation, -1, None
    try:
        written = plog.plan_log_start(target)
    except OffsetOutOfRange:
        return ErrorCode.offset_out_of_range, -1, None
    except (OSError, StorageError) as exc:
        log.error("deleting records of %s failed: %s: %s", plog.directory, type(exc).__name__, exc)
        return ErrorCode.kafka_storage_error, -1, None
    if written is None:  # (the log start is there already: nothing to write; older segments left below it drop)
        return ErrorCode.none, -1, (plog, plog.log_start_offset, False)
    return ErrorCode.none, -1, (plog, written, True)


def _moved(
    plog: PartitionLog, offset: int, error: OSError | None, removals: list[tuple[Path, DroppedSegments]]
) -> tuple[ErrorCode, int]:
    """``(error, low watermark)`` once the move's write is done (or failed); the files of the segments it takes
    out of the log go to ``removals``."""
    if plog.closed:  # (its topic deleted meanwhile)
        return ErrorCode.unknown_topic_or_partition, -1
    if error is not None:
        log.error("deleting records of %s failed: %s: %s", plog.directory, type(error).__name__, error)
        return ErrorCode.kafka_storage_error, -1
    try:
        start, dropped = plog.log_start_written(offset)
    except (OSError, StorageError) as exc:
        log.error("deleting records of %s failed: %s: %s", plog.directory, type(exc).__name__, exc)
        return ErrorCode.kafka_storage_error, -1
    if dropped:
        try:
            removals.append((plog.directory, DroppedSegments.open(plog.directory, dropped)))
        except OSError as exc:  # the records are gone all the same; the files, until the next start drops them
            log.error("removing the deleted segments of %s failed: %s: %s", plog.directory, type(exc).__name__, exc)
    return ErrorCode.none, start


def _answer(mod: Any, topics: list[tuple[str, list[tuple[int, ErrorCode, int]]]]) -> Any:
    """The DeleteRecords answer of ``topics``: each one's name and partitions (index, error, low watermark)."""
    return build(
        mod,
        "DeleteRecordsResponse",
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                mod,
                "DeleteRecordsTopicResult",
                name=name,
                partitions=tuple(
                    build(mod, "DeleteRecordsPartitionResult", partition_index=i, low_watermark=low, error_code=code)
                    for i, code, low in partitions
                ),
            )
            for name, partitions in topics
        ),
    )


def _delete_records_error(ctx: RequestContext, request: Any, code: int) -> Any:
    error = ErrorCode(int(code))
    topics = [(topic.name, [(p.partition_index, error, -1) for p in topic.partitions]) for topic in request.topics]
    return _answer(response_module(request), topics)


SPECS: list[ApiSpec] = [
    ApiSpec(21, 0, 2, handle_delete_records, _delete_records_error, frozenset({TOPIC_NAME})),
]
