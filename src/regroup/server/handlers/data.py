"""Produce, Fetch and ListOffsets over the embedded partition logs (InitProducerId is the transaction
coordinator's, ``handlers/transactions.py``).

Versions: Produce v3–v13 (v13 addresses topics by id), Fetch v4–v18 (v13+ by topic id), ListOffsets v1–v11.
Single node, so the high watermark is the log end offset; the last stable offset is the first offset of the
earliest transaction still open in the partition (or the log end offset).

- **Produce**: each partition's batches are appended as received (offsets assigned by the log, CreateTime
  kept: ``log_append_time`` is -1 — unless the topic has ``message.timestamp.type=LogAppendTime``: then each
  batch is stamped with the broker's clock first and ``log_append_time`` answers it). A record without a key
  in a compacted topic is INVALID_RECORD, as in Kafka. ``acks`` 1 and -1 mean the same here; with the default
  ``ALWAYS`` fsync policy the data is on disk before the response. Under ``ALWAYS`` the fsyncs are a group
  commit (``server/group_sync.py``): a produce appends on the event loop and waits; the partitions appended to since the
  last round are fsynced together on worker threads, and every produce waiting on them is answered once all
  its partitions are on disk (records are read by Fetch and counted in the high watermark only then, so no
  consumer sees a record a crash could take back). Under ``INTERVAL`` the records are read at once and the
  store fsyncs them on the same worker threads within the interval (its own timer, ``TopicStore.sync``),
  never on the loop. ``acks=0`` appends without waiting for the fsync; the client expects no response, so the
  connection layer must not write the one returned. Idempotent batches are
  checked per producer id and partition (duplicates answer with the original offsets). Transactional batches
  need the request's transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request, as
  Kafka) and are verified with the transaction coordinator per partition (``transactions.produce_refusal``:
  the producer's session and that the partition was added to its transaction). A disk error fails just that
  partition with KAFKA_STORAGE_ERROR (after a failed fsync its log refuses writes until the server restarts).
  A Produce of many partitions appends for ``PRODUCE_SLICE_S`` at most, then gives the event loop a turn and
  goes on: its connection's later requests wait meanwhile (``Session.hold``), so they see all of its records,
  as in Kafka, which handles a connection's requests one at a time; a topic deleted between two turns is gone
  for the rest of the request. When it writes first to ``FILES_ASIDE_MIN`` partitions or more never written
  before, their directories and first segments are made on the topic store's worker thread first
  (``TopicStore.make_files``), the connection held meanwhile. The answer is encoded by hand, ``CHUNK``
  partitions between two yields (``server/produce_answers.py``).
- **Fetch**: no fetch sessions. A full fetch (session epoch 0 or -1) is answered with ``session_id`` 0, which
  tells the client sessions are not in use so it keeps sending full fetches; an incremental one gets
  FETCH_SESSION_ID_NOT_FOUND. Long polling: when fewer than ``min_bytes`` are available the handler waits for
  an append to a requested partition, at most ``max_wait``. read_committed (isolation level 1) reads below the
  last stable offset only, with the aborted transactions whose data overlaps what it returns. A Fetch of many
  partitions reads for ``FETCH_SLICE_S`` at most between two turns of the loop (a partition read later may have
  grown meanwhile, as in Kafka, which reads partitions one after another too); the answer is encoded by hand,
  ``CHUNK`` partitions between two yields (``server/fetch_answers.py``).
- **ListOffsets**: -2 earliest, -1 latest, -3 max timestamp, -4 earliest local (= earliest), -5 latest tiered
  (-1: no tiered storage), otherwise the first offset whose timestamp is ≥ the target (-1 if none). With
  read_committed, latest is the last stable offset and a timestamp lookup finding an offset at or past it
  answers -1, as Kafka. A partition never opened (never written since the store opened) is answered as the
  empty log it is, without opening it. Every offset is read in the request's first step; the answer is then
  encoded by hand, ``CHUNK`` partitions between two yields to the event loop (``server/offset_answers.py``).

Authorization, as Kafka's ``KafkaApis`` checks it, before any partition is touched:

- **Produce**: a request holding transactional batches needs WRITE on its TransactionalId, else the whole
  request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (checked first); then WRITE on each Topic: the partitions
  of a topic without it are TOPIC_AUTHORIZATION_FAILED (ahead of the unknown-topic check) and nothing is
  appended to them; the others are appended as usual.
- **Fetch**: a consumer's fetch needs READ on each Topic: partitions of a topic without it are
  TOPIC_AUTHORIZATION_FAILED and not read (with topic ids, an id no topic has stays UNKNOWN_TOPIC_ID: ids are
  resolved before the check). A follower's fetch (replica id ≥ 0) needs CLUSTER_ACTION on the Cluster instead,
  else every partition is TOPIC_AUTHORIZATION_FAILED.
- **ListOffsets**: DESCRIBE on each Topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

from kio.schema.errors import ErrorCode

from regroup.network.deferred import Deferred
from regroup.network.limits import TOPIC_NAME
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import ApiSpec, AtOnce, Broker, RequestContext
from regroup.server.authz import allowed, authorizer_of, permits
from regroup.server.encoded import PreEncoded, response_type, splice_pieces
from regroup.server.fetch_answers import FETCH_TOPIC_ID_FROM, FetchPartition, FetchTopic, fetch_answer
from regroup.server.handlers.topics import (
    NO_THROTTLE,
    UNAUTHORIZED,
    build,
    may,
    may_on_cluster,
    response_module,
    store_of,
)
from regroup.server.handlers.transactions import produce_refusal, transactional_producers
from regroup.server.offset_answers import CHUNK, Pacer, list_offsets_partitions, list_offsets_topic, pause
from regroup.server.produce_answers import (
    PRODUCE_TOPIC_ID_FROM,
    ProducePartition,
    one_partition_answer,
    produce_answer,
)
from regroup.server.produce_frames import split_produce
from regroup.server.time_slices import HeldSlices, TimeSlices
from regroup.server.topics import FILES_ASIDE_MIN, AppendWaiter, TopicStore
from regroup.storage.compaction import has_keyless_record
from regroup.storage.format import StorageError
from regroup.storage.partition_log import AppendRejected, OffsetOutOfRange, PartitionLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.timestamps import stamp_log_append_time

__all__ = ["SPECS", "handle_fetch", "handle_list_offsets", "handle_produce"]

log = logging.getLogger(__name__)

ZSTD = 4
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition
NO_TIMESTAMP = -1
NOT_ON_DISK = "the records could not be written to disk"


def _resolve(store: TopicStore, topic: Any) -> tuple[str | None, ErrorCode]:
    """The topic name of a request entry addressed by name (``name``/``topic``) or, in newer versions, by id."""
    if hasattr(topic, "name") or hasattr(topic, "topic"):
        name: str = topic.name if hasattr(topic, "name") else topic.topic
        return (name, ErrorCode.none) if store.topic(name) else (name, UNKNOWN_TOPIC)
    info = store.topic_by_id(topic.topic_id)
    return (info.name, ErrorCode.none) if info else (None, ErrorCode.unknown_topic_id)


# ---------------------------------------------------------------------- Produce

#: a Produce appends for this long at most before it gives the event loop a turn (holding its connection's later
#: requests meanwhile): appending to a thousand partitions never written before takes about 100 ms. 2.5 ms rather
#: than 5 cut a healthy member's heartbeat p99 beside Produces of 10,000 partitions from 19-24 to 10-14 ms
#: (docs/benchmarks.md, "Fetch and Produce in shorter slices")
PRODUCE_SLICE_S = 0.0025
#: a Produce naming this many partitions or more reads its batches' producers between slices too
SCAN_SLICED_FROM = 256


def _topic_id(store: TopicStore, name: str | None) -> object:
    info = store.topic(name) if name is not None else None
    return None if info is None else info.topic_id


def _gone(topic: Any) -> ErrorCode:
    """What the rest of a topic deleted while a Produce appended to it answers."""
    return UNKNOWN_TOPIC if hasattr(topic, "name") else ErrorCode.unknown_topic_id


async def _make_files_aside(
    store: TopicStore, slices: HeldSlices, topics: list[tuple[Any, str | None, ErrorCode]], denied: list[bool]
) -> None:
    """Have the files of the partitions this Produce writes first (never written before) made on the topic store's
    worker thread, when there are ``FILES_ASIDE_MIN`` of them: their first appends then find them made."""
    wanted: list[tuple[PartitionLog, tuple[Path, Path]]] = []
    for (topic, name, error), refused in zip(topics, denied, strict=True):
        if name is None or error is not ErrorCode.none or refused:
            continue
        for part in topic.partition_data:
            await slices.tick()
            plog = store.partition(name, part.index)
            files = plog.unmade_files() if plog is not None else None
            if plog is not None and files is not None:
                wanted.append((plog, files))
    if len(wanted) >= FILES_ASIDE_MIN:
        slices.hold()
        await store.make_files(wanted)
        slices.restart()


async def _producers_by_partition(request: Any, slices: HeldSlices) -> list[set[tuple[int, int]]]:
    """(producer id, epoch) of each partition's transactional batches, in request order: read between slices
    when the request names ``SCAN_SLICED_FROM`` partitions or more (a batch header each, about a microsecond a
    partition: 10,000 of them held the loop for several milliseconds before anything was appended)."""
    parts = [part for t in request.topic_data for part in t.partition_data]
    if len(parts) < SCAN_SLICED_FROM:
        return [transactional_producers(part.records) for part in parts]
    found = []
    for part in parts:
        await slices.tick()
        found.append(transactional_producers(part.records))
    return found


async def handle_produce(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """WRITE on the TransactionalId of transactional batches, WRITE on each Topic."""
    with HeldSlices(PRODUCE_SLICE_S, ctx) as slices:
        return await _produce(broker, ctx, request, slices)


async def _produce(broker: Broker, ctx: RequestContext, request: Any, slices: HeldSlices) -> Any:
    mod = response_module(request)
    store = store_of(broker)
    version = ctx.api_version
    refuse: tuple[ErrorCode, str] | None = None
    topic_data = request.topic_data
    if len(topic_data) == 1 and len(topic_data[0].partition_data) < SCAN_SLICED_FROM:  # (the usual Produce)
        per_partition = [transactional_producers(part.records) for part in topic_data[0].partition_data]
    else:
        per_partition = await _producers_by_partition(request, slices)
    producers = set().union(*per_partition)
    if producers and request.transactional_id is None:
        refuse = ErrorCode.transactional_id_authorization_failed, "transactional records need a transactional id"
    elif producers and not allowed(
        broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        refuse = ErrorCode.transactional_id_authorization_failed, "Transactional Id authorization failed."
    elif request.acks not in (0, 1, -1):
        refuse = ErrorCode.invalid_required_acks, f"acks must be 0, 1 or -1, not {request.acks}"
    elif len(producers) > 1:
        refuse = ErrorCode.invalid_producer_id_mapping, "transactional records of more than one producer"
    whole_request = refuse is not None and refuse[0] is ErrorCode.transactional_id_authorization_failed
    pending = iter(per_partition)
    grouped = request.acks != 0  # under ALWAYS: appended now, answered once the group commit has them on disk
    durable: dict[PartitionLog, int] = {}
    # each partition's answer: index, error, base offset, log append time, log start offset, error message
    rows: list[tuple[list[Any], PartitionLog | None]] = []
    responses: list[tuple[Any, list[list[Any]]]] = []
    topics = [(topic, *_resolve(store, topic)) for topic in request.topic_data]
    ids = [_topic_id(store, name) for _, name, _ in topics]
    denied = [
        name is not None and not whole_request and not may(broker, ctx, AclOperation.WRITE, name)
        for _, name, _ in topics
    ]
    if refuse is None and len(per_partition) >= FILES_ASIDE_MIN:
        await _make_files_aside(store, slices, topics, denied)
    for (topic, name, topic_error), topic_id, refused in zip(topics, ids, denied, strict=True):
        if slices.yielded and topic_error is ErrorCode.none and _topic_id(store, name) != topic_id:
            topic_error = _gone(topic)
        topic_refusal = (UNAUTHORIZED, "Topic authorization failed.") if refused else refuse
        partitions: list[list[Any]] = []
        for part in topic.partition_data:
            if await slices.tick() and topic_error is ErrorCode.none and _topic_id(store, name) != topic_id:
                topic_error = _gone(topic)  # deleted meanwhile (and maybe created again)
            code, message = topic_refusal or (topic_error, None)
            plog = store.partition(name, part.index) if name is not None else None
            if code is ErrorCode.none and plog is None:
                code = UNKNOWN_TOPIC
            result: tuple[int, int] = (-1, -1)
            append_ms = NO_TIMESTAMP
            transactional = next(pending)
            if code is ErrorCode.none and plog is not None and transactional and name is not None:
                (producer,) = transactional
                refusal = produce_refusal(broker, request.transactional_id, producer, (name, part.index), version)
                code = ErrorCode(int(refusal))
            if code is ErrorCode.none and plog is not None and name is not None:
                policy = store.configs.policy(name)
                if policy.compact and has_keyless_record(bytes(part.records or b"")):
                    code, message = ErrorCode.invalid_record, "Compacted topic cannot accept message without key."
                    plog = None
                if plog is not None and policy.log_append_time:  # message.timestamp.type=LogAppendTime
                    append_ms = int(time.time() * 1000)
                    part = _Stamped(part.index, stamp_log_append_time(bytes(part.records or b""), append_ms))
                if plog is not None:
                    deferred = plog.fsync_policy is FsyncPolicy.ALWAYS
                    code, message, result = _append(
                        plog, part.records, version, sync=request.acks != 0 and not deferred
                    )
                    if deferred and code is ErrorCode.none:
                        if grouped:  # (a duplicate too: the batch it repeats may still be on its way to disk)
                            durable[plog] = plog.written_end
                        else:
                            store.group_sync.schedule(plog)
            appended = code is ErrorCode.none
            row = [part.index, code, result[0], append_ms if appended else NO_TIMESTAMP, result[1], message]
            rows.append((row, plog if appended else None))
            partitions.append(row)
        responses.append((name if version < PRODUCE_TOPIC_ID_FROM else topic.topic_id, partitions))
    slices.release()
    if durable:
        failed = await store.group_sync.wait(durable)
        for row, plog in rows:
            if plog is not None and plog in failed:
                row[1:] = [ErrorCode.kafka_storage_error, -1, NO_TIMESTAMP, -1, NOT_ON_DISK]
    answer = [(topic, [cast(ProducePartition, tuple(row)) for row in partitions]) for topic, partitions in responses]
    return await produce_answer(_empty_produce_answer(mod), answer, version)


#: what a Produce answered at once needs of its remembered part: (topic name, or from v13 None; the topic id from
#: v13, else None; the partition; the empty answer of the request's version)
_ProducePrepared = tuple[str | None, uuid.UUID | None, int, Any]


def _produce_prepared(version: int, request: Any) -> _ProducePrepared | None:
    """``_ProducePrepared`` of a decoded Produce (``server/produce_frames.py`` says which part is remembered).
    None, always the general path: acks 0 (no answer), another acks (refused there), a transactional id (a
    transaction's checks), or another layout."""
    if request.acks not in (1, -1) or request.transactional_id is not None or len(request.topic_data) != 1:
        return None
    topic = request.topic_data[0]
    if len(topic.partition_data) != 1:
        return None
    by_id = version >= PRODUCE_TOPIC_ID_FROM
    empty = _empty_produce_answer(response_module(request))
    return None if by_id else topic.name, topic.topic_id if by_id else None, topic.partition_data[0].index, empty


def _produce_at_once(
    broker: Broker,
    principal: str,
    client_host: str,
    client_id: str | None,
    version: int,
    prepared: _ProducePrepared,
    records: bytes,
) -> Any:
    """A usual Produce answered at once: one partition of a topic that exists, WRITE on the Topic allowed, the
    records not transactional, a topic that neither compacts nor stamps LogAppendTime; the same append
    (``_append``) and the same answer as ``handle_produce``'s: at once, or, when the log is fsynced before an
    answer (``always``), a ``Deferred`` settled once the group commit's round has it on disk. Else None, and
    ``handle_produce`` answers it."""
    store = store_of(broker)
    name, topic_id, index, empty = prepared
    if name is None:
        info = None if topic_id is None else store.topic_by_id(topic_id)
        if info is None:
            return None
        name = info.name
    elif not store.topic(name):
        return None
    if not permits(broker, principal, client_host, AclOperation.WRITE, ResourceType.TOPIC, name):
        return None
    plog = store.partition(name, index)
    if plog is None:
        return None
    policy = store.configs.policy(name)
    if policy.compact or policy.log_append_time or transactional_producers(records):
        return None
    deferred = plog.fsync_policy is FsyncPolicy.ALWAYS
    code, message, result = _append(plog, records, version, sync=not deferred)
    try:  # (appended: whatever goes wrong now closes the connection, never appends a second time)
        topic = name if topic_id is None else topic_id
        row = (index, code, result[0], NO_TIMESTAMP, result[1], message)
        if deferred and code is ErrorCode.none:
            later: Deferred[Any] = Deferred()
            synced = functools.partial(_produce_synced, later, plog, empty, topic, row, version)
            if store.group_sync.wait_then({plog: plog.written_end}, synced):
                return later
        return one_partition_answer(empty, topic, row, version)
    except Exception as exc:
        log.exception("Produce v%d answered at once: its answer failed after the append", version)
        return Deferred.failed(exc)


def _produce_synced(
    later: Deferred[Any],
    plog: PartitionLog,
    empty: Any,
    topic: str | uuid.UUID,
    row: ProducePartition,
    version: int,
    failed: set[PartitionLog],
) -> None:
    """(``_produce_at_once`` under ``always``) The group commit's round ended: the answer, a storage error if
    the log's fsync failed (as ``handle_produce`` answers)."""
    if plog in failed:
        row = (row[0], ErrorCode.kafka_storage_error, -1, NO_TIMESTAMP, -1, NOT_ON_DISK)
    try:
        answer = one_partition_answer(empty, topic, row, version)
    except Exception as exc:  # (the connection closes, as for a handler's response that does not encode)
        later.fail(exc)
        return
    later.settle(answer)


@functools.cache
def _empty_produce_answer(mod: ModuleType) -> Any:
    """The ProduceResponse of ``mod``'s version with no topics, not throttled (one per version, shared)."""
    return build(mod, "ProduceResponse", responses=(), throttle_time=NO_THROTTLE)


class _Stamped:
    """A partition's produce data after LogAppendTime stamping."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes) -> None:
        self.index = index
        self.records = records


def _append(
    plog: PartitionLog, records: bytes | None, version: int, *, sync: bool
) -> tuple[ErrorCode, str | None, tuple[int, int]]:
    """``(error, message, (base offset, log start offset))`` of appending one partition's records."""
    data = bytes(records or b"")
    if len(data) >= 23:  # the v2 attributes field: refuse what Kafka refuses before touching the log
        attributes = int.from_bytes(data[21:23], "big")
        if version < 7 and attributes & 0x07 == ZSTD:
            return ErrorCode.unsupported_compression_type, "zstd needs Produce v7 or newer", (-1, -1)
    try:
        info = plog.append(data, sync=sync)
    except AppendRejected as exc:
        return ErrorCode[exc.reason.value], str(exc), (-1, -1)
    except (OSError, StorageError) as exc:  # a disk failure: this partition fails, the server stays up
        log.error("append to %s failed: %s: %s", plog.directory, type(exc).__name__, exc)
        return ErrorCode.kafka_storage_error, f"{type(exc).__name__}: {exc}", (-1, -1)
    return ErrorCode.none, None, (info.base_offset, info.log_start_offset)


# ---------------------------------------------------------------------- Fetch


#: a Fetch reads its partitions for this long at most before it gives the event loop a turn: reading 10,000
#: partitions (their segments opened, read and closed again by the open-files cache) takes about 150 ms. 2.5 ms
#: rather than 5 cut a healthy member's heartbeat p99 beside Fetches of 10,000 partitions from 22-25 to 14-15 ms
FETCH_SLICE_S = 0.0025


async def handle_fetch(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    store = store_of(broker)
    if getattr(request, "session_epoch", -1) not in (0, -1):  # incremental: no session was ever created
        return build(
            mod,
            "FetchResponse",
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
        )
    wanted = [(_readable(broker, ctx, request, _resolve(store, t)), t) for t in request.topics]
    keys = [
        (name, p.partition)
        for (name, error), t in wanted
        if name is not None and error is ErrorCode.none
        for p in t.partitions
    ]
    max_wait_s = max(request.max_wait.total_seconds(), 0.0)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_s
    slices = _FetchSlices(store, keys if max_wait_s > 0 else [])
    try:
        while True:
            responses, size, errors = await _read_all(store, wanted, request, ctx.api_version, slices)
            remaining = deadline - loop.time()
            if size >= request.min_bytes or errors or not keys or remaining <= 0:
                break
            waiter, slices.waiter = slices.waiter or store.append_waiter(keys), None
            try:
                await waiter.wait(remaining)
            finally:
                waiter.close()
    finally:
        if slices.waiter is not None:
            slices.waiter.close()
    empty = build(
        mod, "FetchResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=0, responses=()
    )
    return await fetch_answer(empty, responses, ctx.api_version)


class _FetchSlices(TimeSlices):
    """A Fetch's read pass in slices: before its first turn given to the loop, a long poll registers for the
    appends to its partitions (``waiter``), so one made to a partition already read is not missed."""

    __slots__ = ("_keys", "_store", "waiter")

    def __init__(self, store: TopicStore, keys: list[tuple[str, int]]) -> None:
        super().__init__(FETCH_SLICE_S)
        self._store = store
        self._keys = keys
        self.waiter: AppendWaiter | None = None

    def before_turn(self) -> None:
        if self.waiter is None and self._keys:
            self.waiter = self._store.append_waiter(self._keys)


def _readable(
    broker: Broker, ctx: RequestContext, request: Any, resolved: tuple[str | None, ErrorCode]
) -> tuple[str | None, ErrorCode]:
    """A fetched topic's ``(name, error)`` after the ACLs: a follower (replica id ≥ 0) needs CLUSTER_ACTION on
    the Cluster, a consumer READ on the Topic; without it TOPIC_AUTHORIZATION_FAILED."""
    name = resolved[0]
    if authorizer_of(broker) is None or name is None:  # (None: an id no topic has, UNKNOWN_TOPIC_ID in any case)
        return resolved
    replica_state = getattr(request, "replica_state", None)
    replica_id = replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1)
    if replica_id >= 0:
        permitted = may_on_cluster(broker, ctx, AclOperation.CLUSTER_ACTION)
    else:
        permitted = may(broker, ctx, AclOperation.READ, name)
    return resolved if permitted else (name, UNAUTHORIZED)


async def _read_all(
    store: TopicStore,
    wanted: list[tuple[tuple[str | None, ErrorCode], Any]],
    request: Any,
    version: int,
    slices: TimeSlices,
) -> tuple[list[FetchTopic], int, bool]:
    """One pass over the requested partitions, ``FETCH_SLICE_S`` at most between two turns of the loop:
    ``(topics answered, bytes of records, any error)``."""
    budget = getattr(request, "max_bytes", 2**31 - 1)
    committed_only = getattr(request, "isolation_level", 0) == 1
    by_id = version >= FETCH_TOPIC_ID_FROM
    total, errors, responses = 0, False, list[FetchTopic]()
    for (name, topic_error), topic in wanted:
        partitions: list[FetchPartition] = []
        for p in topic.partitions:
            await slices.tick()
            plog = store.partition(name, p.partition) if name is not None and topic_error is ErrorCode.none else None
            code = topic_error if topic_error is not ErrorCode.none else (ErrorCode.none if plog else UNKNOWN_TOPIC)
            records = b""
            aborted: list[tuple[int, int]] | None = [] if committed_only else None
            if plog is not None:
                try:
                    limit = plog.last_stable_offset if committed_only else None
                    size = min(p.partition_max_bytes, budget - total)
                    records = plog.read(p.fetch_offset, size, min_one=total == 0, max_offset=limit)
                    if committed_only and records:
                        aborted = list(plog.aborted_transactions(p.fetch_offset, _end_offset(records)))
                except OffsetOutOfRange:
                    code = ErrorCode.offset_out_of_range
                except (OSError, StorageError) as exc:
                    log.error("read from %s failed: %s: %s", plog.directory, type(exc).__name__, exc)
                    code = ErrorCode.kafka_storage_error
            errors |= code is not ErrorCode.none
            total += len(records)
            if plog is not None and code is ErrorCode.none:
                offsets = (plog.log_end_offset, plog.last_stable_offset, plog.log_start_offset)
            else:
                offsets = (-1, -1, -1)
            partitions.append((p.partition, int(code), *offsets, aborted, records))
        responses.append((topic.topic_id if by_id else name, partitions))
    return responses, total, errors


def _end_offset(records: bytes) -> int:
    """The offset after the last of the whole batches ``records`` holds (as read from a partition log)."""
    pos, end = 0, 0
    while pos + 61 <= len(records):
        length = int.from_bytes(records[pos + 8 : pos + 12], "big")
        last_delta = int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
        end = int.from_bytes(records[pos : pos + 8], "big", signed=True) + last_delta + 1
        pos += 12 + length
    return end


# ---------------------------------------------------------------------- ListOffsets


async def handle_list_offsets(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Topic.

    Read in slices of ``PRODUCE_SLICE_S`` (the connection's later requests held meanwhile) and encoded by hand
    (``server/offset_answers.py``), ``CHUNK`` partitions between two yields to the event loop; a partition never
    opened is answered as the empty log it is, without opening it."""
    mod = response_module(request)
    store = store_of(broker)
    committed_only = getattr(request, "isolation_level", 0) == 1
    version = ctx.api_version
    pacer = Pacer()
    parts: list[bytes] = []
    errors: list[int] = []
    # the offsets are read in slices of PRODUCE_SLICE_S (a lookup by timestamp reads a batch from disk: 10,000 of
    # them held the loop 135 ms); from the first turn given to the loop the connection's later requests are held,
    # so a Produce behind this request does not show in its answer, as it cannot in Kafka's, where a
    # connection's requests are handled one at a time
    answers: list[tuple[str, list[tuple[int, int, int, int]]]] = []
    with HeldSlices(PRODUCE_SLICE_S, ctx) as slices:
        for topic in request.topics:
            name = topic.name
            missing = UNKNOWN_TOPIC if may(broker, ctx, AclOperation.DESCRIBE, name) else UNAUTHORIZED
            rows: list[tuple[int, int, int, int]] = []
            for p in topic.partitions:
                await slices.tick()  # (before the lookup: a topic deleted meanwhile is unknown, not a closed log)
                index = p.partition_index
                plog = store.opened_partition(name, index) if missing is UNKNOWN_TOPIC else False
                if plog is False:
                    rows.append((index, missing, -1, -1))
                    continue
                found = _offset_for(_EMPTY_LOG if isinstance(plog, bool) else plog, p.timestamp, committed_only)
                rows.append((index, 0, found[0], found[1]))
            answers.append((name, rows))
    for name, rows in answers:
        head, tail = list_offsets_topic(name, len(rows), version)
        parts.append(head)
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            if pacer.due(len(chunk)):
                await pause()
            parts.append(list_offsets_partitions(chunk, version, errors))
        parts.append(tail)
    empty = build(mod, "ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=())
    return PreEncoded(response_type(empty), splice_pieces(empty, "topics", len(request.topics), parts), tuple(errors))


class _Offsets(Protocol):
    """What ListOffsets reads of a partition log."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    def max_timestamp(self) -> tuple[int, int] | None: ...
    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None: ...


class _EmptyLog:
    """A partition never opened: no records, every offset 0 (``TopicStore.opened_partition``)."""

    log_start_offset = log_end_offset = last_stable_offset = 0

    def max_timestamp(self) -> tuple[int, int] | None:
        return None

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        return None


_EMPTY_LOG = _EmptyLog()


def _offset_for(plog: _Offsets, timestamp: int, committed_only: bool = False) -> tuple[int, int]:
    """``(timestamp, offset)`` to answer for a ListOffsets target (read_committed: nothing at or past the LSO)."""
    fetchable = plog.last_stable_offset if committed_only else plog.log_end_offset
    if timestamp == LATEST:
        return -1, fetchable
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, plog.log_start_offset
    if timestamp == LATEST_TIERED or timestamp < LATEST_TIERED:
        return -1, -1
    found = plog.max_timestamp() if timestamp == MAX_TIMESTAMP else plog.offset_for_timestamp(timestamp)
    return found if found is not None and found[1] < fetchable else (-1, -1)


# ---------------------------------------------------------------------- error responses (every slot)


def _produce_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    responses = tuple(
        build(
            mod,
            "TopicProduceResponse",
            name=getattr(topic, "name", None),
            topic_id=getattr(topic, "topic_id", None),
            partition_responses=tuple(
                build(
                    mod,
                    "PartitionProduceResponse",
                    index=part.index,
                    error_code=error,
                    base_offset=-1,
                    log_append_time=None,
                    log_start_offset=-1,
                    record_errors=(),
                    error_message=None,
                )
                for part in topic.partition_data
            ),
        )
        for topic in request.topic_data
    )
    return build(mod, "ProduceResponse", responses=responses, throttle_time=NO_THROTTLE)


def _fetch_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    responses = tuple(
        build(
            mod,
            "FetchableTopicResponse",
            topic=getattr(topic, "topic", None),
            topic_id=getattr(topic, "topic_id", None),
            partitions=tuple(
                build(
                    mod,
                    "PartitionData",
                    partition_index=p.partition,
                    error_code=error,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=b"",
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(mod, "FetchResponse", throttle_time=NO_THROTTLE, error_code=error, session_id=0, responses=responses)


def _list_offsets_error(ctx: RequestContext, request: Any, code: int) -> Any:
    mod, error = response_module(request), ErrorCode(int(code))
    topics = tuple(
        build(
            mod,
            "ListOffsetsTopicResponse",
            name=topic.name,
            partitions=tuple(
                build(
                    mod,
                    "ListOffsetsPartitionResponse",
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(mod, "ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=topics)


_TOPIC_NAMES = frozenset({TOPIC_NAME})  # an unknown (over-long) name is UNKNOWN_TOPIC_OR_PARTITION here

SPECS: list[ApiSpec] = [
    ApiSpec(
        0,
        3,
        13,
        handle_produce,
        _produce_error,
        _TOPIC_NAMES,
        at_once=AtOnce(_produce_prepared, _produce_at_once, split=split_produce, alone=True),
    ),
    ApiSpec(1, 4, 18, handle_fetch, _fetch_error, _TOPIC_NAMES),
    ApiSpec(2, 1, 11, handle_list_offsets, _list_offsets_error, _TOPIC_NAMES),
]
