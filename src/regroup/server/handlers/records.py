"""DeleteRecords (v0–v2): move a partition's log start offset up, durably; the records below it are gone.

As Kafka answers it (``ReplicaManager.deleteRecords``, ``UnifiedLog.maybeIncrementLogStartOffset``): the
offset -1 means the high watermark (the log end offset here); any other negative offset, or one beyond the high
watermark, is OFFSET_OUT_OF_RANGE; a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION; a
topic whose ``cleanup.policy`` does not include ``delete`` is POLICY_VIOLATION. Asking for an offset below the
current log start changes nothing. The answer's ``low_watermark`` is the log start offset afterwards (-1 with
an error). The new log start is fsynced before the answer (``log-start-offset`` in the partition's directory);
older segments wholly below it are taken out of the log at once, and their files removed on a worker thread
(``server/log_cleaner.remove_dropped``) before the answer goes: the event loop deletes no file, and serves
other requests between two partitions. A crash before the files are gone leaves older segments below the
persisted log start offset, which the reopened log keeps out of reach (and the next DeleteRecords or cleaning
pass drops). Fetch below it is OFFSET_OUT_OF_RANGE and ListOffsets' earliest answers it.

Authorization (Kafka's ``KafkaApis.handleDeleteRecordsRequest``): DELETE on each Topic. The partitions of a
topic without it are TOPIC_AUTHORIZATION_FAILED (low watermark -1), checked before the topic's existence, and
keep their records.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from regroup.network.limits import TOPIC_NAME
from regroup.security.acl import AclOperation
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.handlers.topics import NO_THROTTLE, UNAUTHORIZED, build, may, response_module, store_of
from regroup.server.log_cleaner import remove_dropped
from regroup.server.topics import TopicStore
from regroup.storage.format import StorageError
from regroup.storage.partition_log import DroppedSegments, OffsetOutOfRange

__all__ = ["SPECS", "handle_delete_records"]

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1


async def handle_delete_records(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DELETE on each Topic."""
    mod = response_module(request)
    store = store_of(broker)
    topics = []
    removals: list[tuple[Path, DroppedSegments]] = []
    for topic in request.topics:
        deletable = may(broker, ctx, AclOperation.DELETE, topic.name)
        partitions = []
        for p in topic.partitions:
            code, low = UNAUTHORIZED, -1
            if deletable:
                code, low = _delete(store, topic.name, p.partition_index, p.offset, removals)
                await asyncio.sleep(0)  # one partition's durable write per turn of the loop
            partitions.append(
                build(
                    mod,
                    "DeleteRecordsPartitionResult",
                    partition_index=p.partition_index,
                    low_watermark=low,
                    error_code=code,
                )
            )
        topics.append(build(mod, "DeleteRecordsTopicResult", name=topic.name, partitions=tuple(partitions)))
    for directory, exc in await remove_dropped(removals):
        log.error("removing the deleted segments of %s failed: %s: %s", directory, type(exc).__name__, exc)
    return build(mod, "DeleteRecordsResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


def _delete(
    store: TopicStore, name: str, index: int, offset: int, removals: list[tuple[Path, DroppedSegments]]
) -> tuple[ErrorCode, int]:
    """``(error, low watermark)`` of deleting the records of one partition below ``offset``; the files of the
    segments it takes out of the log go to ``removals``."""
    plog = store.partition(name, index) if store.topic(name) is not None else None
    if plog is None:
        return ErrorCode.unknown_topic_or_partition, -1
    target = plog.log_end_offset if offset == HIGH_WATERMARK else offset
    if target < 0 or target > plog.log_end_offset:
        return ErrorCode.offset_out_of_range, -1
    if not store.configs.policy(name).delete:
        return ErrorCode.policy_violation, -1
    try:
        start, dropped = plog.move_log_start(target)
    except OffsetOutOfRange:
        return ErrorCode.offset_out_of_range, -1
    except (OSError, StorageError) as exc:
        log.error("deleting records of %s failed: %s: %s", plog.directory, type(exc).__name__, exc)
        return ErrorCode.kafka_storage_error, -1
    if dropped:
        try:
            removals.append((plog.directory, DroppedSegments.open(plog.directory, dropped)))
        except OSError as exc:  # the records are gone all the same; the files, until the next start drops them
            log.error("removing the deleted segments of %s failed: %s: %s", plog.directory, type(exc).__name__, exc)
    return ErrorCode.none, start


def _delete_records_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    topics = tuple(
        build(
            mod,
            "DeleteRecordsTopicResult",
            name=topic.name,
            partitions=tuple(
                build(
                    mod,
                    "DeleteRecordsPartitionResult",
                    partition_index=p.partition_index,
                    low_watermark=-1,
                    error_code=error,
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(mod, "DeleteRecordsResponse", throttle_time=NO_THROTTLE, topics=topics)


SPECS: list[ApiSpec] = [
    ApiSpec(21, 0, 2, handle_delete_records, _delete_records_error, frozenset({TOPIC_NAME})),
]
