"""CreatePartitions (v0–v3): growing a topic of the embedded topic store, as Kafka's controller does it.

Per request: a topic named more than once gets one INVALID_REQUEST result (whatever its entries say) and is
left alone. Per topic, in Kafka's order: UNKNOWN_TOPIC_OR_PARTITION; INVALID_PARTITIONS when the count is
not larger than the topic's; INVALID_REPLICA_ASSIGNMENT when a manual assignment does not list one replica
list per new partition, or a list is not exactly ``[0]`` (empty, a broker that is not registered, a broker
twice, or more replicas than the topic's replication factor of 1). Then the store's limits:
``--max-partitions-per-topic`` (INVALID_PARTITIONS, as CreateTopics answers it) and ``--max-partitions``
(POLICY_VIOLATION); and a request adding more than 10,000 partitions in all has the topics past that bound
refused with POLICY_VIOLATION (Kafka's controller refuses such an oversized batch).

``validate_only`` checks everything and changes nothing. Otherwise each topic's new count is durable before
the answer (``TopicStore.grow_partitions``: one atomic rename of its ``topic.json``, written on the topic
store's worker thread, the count taken on the loop once renamed; the growths of the store follow one another,
each holding ``grow_lock`` from its checks until its write is done; a topic deleted meanwhile is
UNKNOWN_TOPIC_OR_PARTITION, a failed write KAFKA_STORAGE_ERROR), a request of many topics giving the event loop
a turn every ``GROW_SLICE_S`` (the topics grown in a slice make one cluster image), and
the coordinator gets the new cluster image at once, so KIP-848 consumer groups recompute their targets; classic
members learn the new count from Metadata. ``timeout_ms`` cannot run out: the change is complete when the
handler answers, so a client that asks not to wait (timeout ≤ 0) gets the outcome as well.

Authorization (Kafka's ``ControllerApis.createPartitions``): ALTER on each Topic. A topic without it is
TOPIC_AUTHORIZATION_FAILED (after the duplicate check, before any other), is left alone and does not count
towards the request's 10,000-partition bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from contextlib import AbstractContextManager
from typing import Any

from kio.schema.errors import ErrorCode

from regroup.model.errors import ErrorCode as CoreErrorCode
from regroup.network.limits import TOPIC_NAME
from regroup.security.acl import AclOperation
from regroup.server.api import NODE_ID, ApiSpec, Broker, RequestContext
from regroup.server.handlers._common import respond
from regroup.server.handlers.topics import MAX_PARTITIONS_PER_REQUEST, UNAUTHORIZED, may, store_of
from regroup.server.time_slices import TimeSlices
from regroup.server.topics import PartitionLimitError, TopicStore

__all__ = ["CREATE_PARTITIONS", "SPECS", "handle_create_partitions"]

CREATE_PARTITIONS = 37

log = logging.getLogger(__name__)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}


#: a request growing many topics gives the event loop a turn once this long was spent on them since the last
GROW_SLICE_S = 0.004


class _ImageSlices(TimeSlices):
    """Time slices whose topic changes the store publishes together: one new cluster image for the coordinator
    per slice, not one per topic (``TopicStore.batched``)."""

    __slots__ = ("_batch", "_store")

    def __init__(self, store: TopicStore, slice_s: float) -> None:
        super().__init__(slice_s)
        self._store = store
        self._batch: AbstractContextManager[None] | None = None
        self._open()

    def _open(self) -> None:
        self._batch = self._store.batched()
        self._batch.__enter__()

    def end(self) -> None:
        """Publish this slice's changes (idempotent)."""
        if self._batch is not None:
            batch, self._batch = self._batch, None
            batch.__exit__(None, None, None)

    def before_turn(self) -> None:
        self.end()

    def restart(self) -> None:
        super().restart()
        self._open()


async def handle_create_partitions(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """ALTER on each Topic."""
    slices = _ImageSlices(store_of(broker), GROW_SLICE_S)
    try:
        return await _create_partitions(broker, ctx, request, slices)
    finally:
        slices.end()


async def _create_partitions(broker: Broker, ctx: RequestContext, request: Any, slices: TimeSlices) -> Any:
    store = store_of(broker)
    named = Counter(topic.name for topic in request.topics)
    results: list[dict[str, Any]] = []
    reported: set[str] = set()
    added_in_request = 0
    for topic in request.topics:
        await slices.tick()
        if named[topic.name] > 1:
            if topic.name not in reported:
                reported.add(topic.name)
                results.append(_result(topic.name, ErrorCode.invalid_request, "Duplicate topic name."))
            continue
        if not may(broker, ctx, AclOperation.ALTER, topic.name):
            results.append(_result(topic.name, UNAUTHORIZED, None))
            continue
        lock = store.grow_lock
        await lock.acquire()
        released = False
        try:
            added = _check(store, topic)
            if added_in_request + added > MAX_PARTITIONS_PER_REQUEST:
                raise _Refused(
                    ErrorCode.policy_violation,
                    f"A request may add at most {MAX_PARTITIONS_PER_REQUEST} partitions in all; these "
                    f"{added} would bring it to {added_in_request + added}.",
                )
            store.check_new_partitions(topic.name, topic.count)
            added_in_request += added
            if not request.validate_only:
                released = True  # (by the write's end, however this request ends)
                await _grow(store, topic.name, topic.count, lock)
        except _Refused as refused:
            results.append(_result(topic.name, refused.code, str(refused)))
            continue
        except PartitionLimitError as exc:
            results.append(_result(topic.name, exc.code, str(exc)))
            continue
        finally:
            if not released:
                lock.release()
        results.append(_result(topic.name, ErrorCode.none, None))
    return respond(ctx, results=results)


async def _grow(store: TopicStore, name: str, count: int, lock: asyncio.Lock) -> None:
    """Grow the topic (its ``topic.json`` written on the store's worker thread) and release ``lock`` once that
    write is done; UNKNOWN_TOPIC_OR_PARTITION if the topic was deleted meanwhile, KAFKA_STORAGE_ERROR if the write
    failed (nothing changed, or only the final fsync: the new count taken, not acknowledged)."""
    try:
        info, written = store.grow_partitions(name, count)
    except BaseException:
        lock.release()
        raise
    written.add_done_callback(lambda _: lock.release())
    error: BaseException | None
    try:
        error = await asyncio.shield(written)
    except OSError as exc:
        error = exc
    now = store.topic(name)
    if now is None or now.topic_id != info.topic_id:
        raise _Refused(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
    if error is not None:
        log.error("growing topic %s failed: %s: %s", name, type(error).__name__, error)
        raise _Refused(ErrorCode.kafka_storage_error, f"{type(error).__name__}: {error}")


def _check(store: TopicStore, topic: Any) -> int:
    """Kafka's checks of one topic's new count and manual assignment; the number of partitions added."""
    info = store.topic(topic.name)
    if info is None:
        raise _Refused(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
    if topic.count == info.partitions:
        raise _Refused(ErrorCode.invalid_partitions, f"Topic already has {info.partitions} partition(s).")
    if topic.count < info.partitions:
        message = f"Topic {topic.name} has {info.partitions} partition(s); {topic.count} is not an increase."
        raise _Refused(ErrorCode.invalid_partitions, message)
    added = int(topic.count) - info.partitions
    if topic.assignments is None:
        return added
    if len(topic.assignments) != added:
        message = f"{added} partition(s) would be added, but the request assigns replicas to {len(topic.assignments)}."
        raise _Refused(ErrorCode.invalid_replica_assignment, message)
    for offset, assignment in enumerate(topic.assignments):
        _check_replicas(info.partitions + offset, list(assignment.broker_ids))
    return added


def _check_replicas(partition: int, replicas: list[int]) -> None:
    """A manual replica list for a new partition: broker 0, once (Kafka checks the sorted list in this order;
    its last check, the topic's replication factor, cannot fail once these pass: there is one broker)."""
    if not replicas:
        message = f"The replica list of new partition {partition} is empty."
        raise _Refused(ErrorCode.invalid_replica_assignment, message)
    previous: int | None = None
    for broker_id in sorted(replicas):
        if broker_id != NODE_ID:
            message = f"The replica list of new partition {partition} names broker {broker_id}, which does not exist."
            raise _Refused(ErrorCode.invalid_replica_assignment, message)
        if broker_id == previous:
            message = f"The replica list of new partition {partition} names broker {broker_id} more than once."
            raise _Refused(ErrorCode.invalid_replica_assignment, message)
        previous = broker_id


def _error_response(ctx: RequestContext, request: Any, code: CoreErrorCode) -> Any:
    error = ErrorCode(int(code))
    return respond(ctx, results=[_result(topic.name, error, None) for topic in request.topics])


SPECS: list[ApiSpec] = [
    # topic names are the handler's to judge: a name no topic has is UNKNOWN_TOPIC_OR_PARTITION, as in Kafka
    ApiSpec(CREATE_PARTITIONS, 0, 3, handle_create_partitions, _error_response, frozenset({TOPIC_NAME})),
]
