"""Reading a share group's records (KIP-932): ShareFetch (v1–v2) and ShareAcknowledge (v1–v2).

A member fetches through a share session (``server/share_sessions.py``): epoch 0 opens it with the partitions
named, later epochs add and forget partitions, -1 closes it. Acknowledgements ride on ShareFetch or come in
ShareAcknowledge; each partition's acknowledgement is all or nothing, is durable before the response, and
its outcome is the partition's ``acknowledge_error_code`` (ShareFetch) or ``error_code`` (ShareAcknowledge).
An acknowledgement at epoch 0 is INVALID_REQUEST (nothing was acquired in a session that did not exist).

Acquisition: for each session partition, in turn from one request to the next, the coordinator says where
its next available record is; the handler reads the log from there (whole batches, within ``max_bytes``) and
asks the coordinator to acquire only offsets that read covers, so every acquired offset is in the batches
returned (offsets without a record, such as transaction markers, are the client's to acknowledge as gaps).
``max_records`` bounds the records acquired per request. With nothing to acquire the request waits up to
``max_wait`` for an append to one of its partitions (and looks again every 100 ms: records released by an
expired lock or another member become available without an append).

``share.isolation.level=read_committed`` (the group's own setting, read on every fetch): the handler reads
below the partition's last stable offset only, so records of open transactions wait for their marker, and
hands the coordinator the batches of aborted transactions it read (found from the log's aborted-transaction
index, as Kafka's ``SharePartition`` finds them); the coordinator archives their records instead of
delivering them. A pass that only archived such records looks again at once.

Authorization (Kafka's ``KafkaApis``): READ on the Group, else the whole request is GROUP_AUTHORIZATION_FAILED;
READ on each Topic, else its partitions are TOPIC_AUTHORIZATION_FAILED (not fetched, not acknowledged). A
partition the topic does not have is UNKNOWN_TOPIC_OR_PARTITION (a topic id unknown: UNKNOWN_TOPIC_ID).
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from typing import Any

from regroup.coordinator.share.group import partition_order
from regroup.coordinator.share.isolation import LogBatch, aborted_batches
from regroup.coordinator.share.membership import MAX_MEMBER_ID_LENGTH
from regroup.coordinator.share.partition import AckBatch
from regroup.model.errors import ErrorCode
from regroup.protocol.share import ShareAcquisition, ShareRead
from regroup.protocol.share_fetch import REJECT, RENEW
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import NODE_ID, ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed, require
from regroup.server.encoded import PreEncoded
from regroup.server.group_configs import READ_COMMITTED, SHARE_ISOLATION
from regroup.server.handlers._common import respond
from regroup.server.handlers.share_groups import initialize_partitions, require_share_groups
from regroup.server.inspection_answers import topics_answer
from regroup.server.offset_answers import CHUNK
from regroup.server.share_sessions import FINAL_EPOCH, OPEN_EPOCH, SessionError, ShareSessions
from regroup.server.time_slices import HeldSlices
from regroup.server.topics import TopicStore
from regroup.storage.batches import HEADER, parse_header
from regroup.storage.format import StorageError
from regroup.storage.markers import CONTROL, TRANSACTIONAL, read_marker
from regroup.storage.partition_log import OffsetOutOfRange, PartitionLog

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
#: the version that brought RENEW acknowledgements (KIP-1222) and acquire modes (KIP-1206)
RENEW_FROM = 2
#: how often a waiting ShareFetch looks again for records released without an append
RECHECK_S = 0.1
#: the most one partition's read returns (Kafka's ``max.partition.fetch.bytes`` default)
PARTITION_MAX_BYTES = 1024 * 1024
#: the partitions one core call reads and acquires, or acknowledges (the loop gets a turn between calls: a
#: session of 10,000 partitions was one step of 150 ms)
PARTITIONS_PER_CALL = 100
#: a ShareFetch or ShareAcknowledge walks its partitions for this long at most before it gives the event loop a
#: turn, holding its connection's later requests meanwhile (as a Produce does)
SHARE_SLICE_S = 0.0025
#: an answered partition's units of the answer's pacing (``offset_answers.Pacer``): packed by hand
#: (``server/share_answers.py``), about twice an offset row's cost
ANSWERED_PARTITION_WEIGHT = 2

TopicPartition = tuple[uuid.UUID, int]
_LEADER = {"leader_id": NODE_ID, "leader_epoch": 0}


def sessions_of(broker: Broker) -> ShareSessions:
    sessions = getattr(broker, "share_sessions", None)
    if not isinstance(sessions, ShareSessions):
        raise TypeError("the share handlers need the broker's share sessions")
    return sessions


def _store(broker: Broker) -> TopicStore:
    store = broker.topic_store
    if not isinstance(store, TopicStore):
        raise TypeError("the share handlers need regroup.server.topics.TopicStore")
    return store


def _batches(rows: Any) -> tuple[AckBatch, ...]:
    return tuple(
        AckBatch(int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types)) for b in rows
    )


class _Topics:
    """The request's topics: names by id, and the partitions that may be read (known and authorized)."""

    def __init__(self, broker: Broker, ctx: RequestContext, store: TopicStore) -> None:
        self._broker, self._ctx, self._store = broker, ctx, store
        self.names: dict[uuid.UUID, str | None] = {}
        self.errors: dict[uuid.UUID, ErrorCode] = {}
        self._counts: dict[uuid.UUID, int] = {}

    def partition_error(self, tp: TopicPartition) -> ErrorCode:
        """``check`` of the partition's topic, then UNKNOWN_TOPIC_OR_PARTITION for a partition the topic does not
        have (as Kafka answers a partition missing from its metadata)."""
        error = self.check(tp[0])
        if error is ErrorCode.NONE and not 0 <= tp[1] < self._counts[tp[0] or uuid.UUID(int=0)]:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return error

    def check(self, topic_id: uuid.UUID | None) -> ErrorCode:
        tid = topic_id or uuid.UUID(int=0)
        if tid not in self.errors:
            info = self._store.topic_by_id(tid)
            if info is None:
                self.names[tid], self.errors[tid] = None, ErrorCode.UNKNOWN_TOPIC_ID
            elif not allowed(self._broker, self._ctx, AclOperation.READ, ResourceType.TOPIC, info.name):
                self.names[tid], self.errors[tid] = info.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                self.names[tid], self.errors[tid] = info.name, ErrorCode.NONE
                self._counts[tid] = info.partitions
        return self.errors[tid]


async def _acknowledge(
    broker: Broker,
    group_id: str,
    member_id: str,
    acks: dict[TopicPartition, tuple[AckBatch, ...]],
    slices: HeldSlices,
) -> dict[TopicPartition, ErrorCode]:
    """The acknowledgements, ``PARTITIONS_PER_CALL`` partitions a core call (each partition's is all or nothing;
    the loop gets a turn between calls): each partition's outcome."""
    found: dict[TopicPartition, ErrorCode] = {}
    items = list(acks.items())
    for start in range(0, len(items), PARTITIONS_PER_CALL):
        await slices.tick()
        chunk = dict(items[start : start + PARTITIONS_PER_CALL])

        def op(c: Any, key: Any, now: int, chunk: dict[TopicPartition, tuple[AckBatch, ...]] = chunk) -> Any:
            return c.share_acknowledge(group_id, member_id, chunk, key, now)

        outcome = await broker.coordinator.call(op)
        if isinstance(outcome, dict):
            found.update((tp, ErrorCode(int(code))) for tp, code in outcome.items())
        else:
            found.update((tp, ErrorCode(int(outcome))) for tp in chunk)
    return found


def _types_allowed(batches: tuple[AckBatch, ...], version: int, renewing: bool) -> bool:
    """Acknowledgement types 0-3 (gap, accept, release, reject); 4 (renew, KIP-1222) only from version 2 in a
    request flagged IsRenewAck."""
    top = RENEW if version >= RENEW_FROM and renewing else REJECT
    return all(0 <= t <= top for b in batches for t in b.types)


async def release_member(broker: Broker, group_id: str, member_id: str) -> None:
    """The member's session closed: what it still holds in the group goes back."""
    await release_share_member(broker.coordinator, group_id, member_id)


async def release_share_member(runtime: Any, group_id: str, member_id: str) -> None:
    """What ``member_id`` holds in the share group goes back (its session closed, or its connection dropped):
    ``PARTITIONS_PER_CALL`` of the group's partitions a core write, the loop given a turn between two (a member
    that held records of 10,000 partitions took one step of 70 ms). ``runtime``: the coordinator runtime."""
    partitions: list[TopicPartition] = []

    def listed(c: Any, key: Any, now: int) -> Any:
        partitions.extend(c.share_partitions(group_id))
        return c.share_release_member(group_id, member_id, now, partitions=())

    await runtime.write(listed)
    for start in range(0, len(partitions), PARTITIONS_PER_CALL):
        chunk = partitions[start : start + PARTITIONS_PER_CALL]
        await runtime.write(lambda c, key, now, chunk=chunk: c.share_release_member(group_id, member_id, now, chunk))


async def _initialize(broker: Broker, group_id: str, missing: list[TopicPartition]) -> None:
    """Partitions fetched before the group had state for them (a fetch ahead of the heartbeat that assigned them,
    or after their offsets were deleted) start where ``share.auto.offset.reset`` says."""
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in missing:
        by_topic.setdefault(topic_id, []).append(p)
    await initialize_partitions(broker, group_id, tuple((t, tuple(ps)) for t, ps in by_topic.items()))


def _trim(records: bytes, last_offset: int) -> bytes:
    """The whole batches of ``records`` that start at or before ``last_offset``."""
    pos = 0
    while pos + 61 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big", signed=True)
        if base > last_offset:
            break
        pos += 12 + int.from_bytes(records[pos + 8 : pos + 12], "big")
    return records[:pos]


def _end_offset(records: bytes) -> int:
    pos, end = 0, 0
    while pos + 61 <= len(records):
        length = int.from_bytes(records[pos + 8 : pos + 12], "big")
        last_delta = int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
        end = int.from_bytes(records[pos : pos + 8], "big", signed=True) + last_delta + 1
        pos += 12 + length
    return end


def _read_committed(broker: Broker, group_id: str) -> bool:
    """Whether the group's ``share.isolation.level`` is read_committed (its own setting; Kafka's default is
    read_uncommitted)."""
    configs = getattr(broker, "group_configs", None)
    value = None if configs is None else configs.overrides(group_id).get(SHARE_ISOLATION)
    return value == READ_COMMITTED


def _log_batches(records: bytes) -> list[LogBatch]:
    """The batches of a read of the log, as the read_committed walk needs them."""
    found: list[LogBatch] = []
    pos = 0
    while pos + HEADER.size <= len(records):
        h = parse_header(records, pos)
        marker = read_marker(records, pos, h) if h.attributes & CONTROL else None
        transactional = bool(h.attributes & TRANSACTIONAL)
        aborts = marker is not None and not marker.committed
        found.append(LogBatch(h.base_offset, h.last_offset, h.producer_id, transactional, aborts))
        pos += h.size
    return found


def _share_read(plog: PartitionLog, first: int, data: bytes, end: int, committed: bool) -> ShareRead:
    """What the coordinator may acquire of ``data``, read from ``first``: up to ``end`` (the log end, or the last
    stable offset under read_committed), and under read_committed the batches of aborted transactions."""
    covered = min(end, _end_offset(data))
    if not committed:
        return ShareRead(first, covered)
    aborted = plog.aborted_transactions(first, covered)
    return ShareRead(first, covered, aborted_batches(_log_batches(data), aborted) if aborted else ())


async def _acquire(
    broker: Broker,
    store: TopicStore,
    group_id: str,
    member_id: str,
    partitions: list[tuple[TopicPartition, str]],
    max_records: int,
    max_bytes: int,
    slices: HeldSlices,
) -> tuple[ShareAcquisition | ErrorCode, dict[TopicPartition, bytes]]:
    """One pass, ``PARTITIONS_PER_CALL`` partitions a core call at most and no more than ``SHARE_SLICE_S`` of
    reading (a read of records costs: 100 partitions with records took 25 ms), the loop given a turn between
    calls: read where each partition's next available record is and acquire what was read, within ``max_bytes``
    and ``max_records`` in all. Partitions the group has no state for yet are initialized first
    (``share.auto.offset.reset``), then their chunk is read. Under read_committed only below the last stable
    offset, and the records of aborted transactions read are archived, not acquired."""
    reads: dict[TopicPartition, bytes] = {}
    committed = _read_committed(broker, group_id)
    acquired: dict[TopicPartition, tuple[tuple[int, int, int], ...]] = {}
    archived = lock_ms = 0
    budget, left = max_bytes, max_records
    start, initialized = 0, False
    while start < len(partitions) and budget > 0 and left > 0:
        await slices.tick()
        chunk = partitions[start : start + PARTITIONS_PER_CALL]
        missing: list[TopicPartition] = []
        spent, walked = [0], [len(chunk)]

        def op(
            c: Any,
            key: Any,
            now: int,
            chunk: list[tuple[TopicPartition, str]] = chunk,
            missing: list[TopicPartition] = missing,
            spent: list[int] = spent,
            walked: list[int] = walked,
            check: bool = not initialized,
            budget: int = budget,
            left: int = left,
        ) -> Any:
            if check:
                missing.extend(c.share_uninitialized(group_id, [tp for tp, _ in chunk]))
                if missing:  # (initialized first, then the chunk is read again: nothing acquired now)
                    return c.share_acquire(group_id, member_id, {}, 0, key, now)
            wanted: dict[TopicPartition, ShareRead] = {}
            records = left
            stop = time.perf_counter() + SHARE_SLICE_S
            for i, (tp, name) in enumerate(chunk):
                if i and time.perf_counter() > stop:  # (reads of records cost: the rest in the next call)
                    walked[0] = i
                    break
                plog = store.opened_partition(name, tp[1])
                if not isinstance(plog, PartitionLog) or budget <= 0 or records <= 0:
                    continue  # (a log never opened since the store opened has no record to read)
                end = plog.last_stable_offset if committed else plog.log_end_offset
                first = c.share_next_available(group_id, tp, end)
                if first is None:
                    continue
                try:  # (only the batches the records still wanted need: the acquisition is bounded by them)
                    data = plog.read(
                        first,
                        min(PARTITION_MAX_BYTES, budget),
                        min_one=not reads,
                        max_offset=end if committed else None,
                        through_offset=first + records - 1,
                    )
                except (OffsetOutOfRange, OSError, StorageError):  # (the log start moved past it, or unreadable)
                    continue
                if not data:
                    continue
                budget -= len(data)
                spent[0] += len(data)
                reads[tp] = data
                wanted[tp] = _share_read(plog, first, data, end, committed)
                records -= wanted[tp].end_offset - first  # at most that many acquired here (fewer if in flight)
            return c.share_acquire(group_id, member_id, wanted, left, key, now)

        outcome = await broker.coordinator.call(op)
        if missing:
            await _initialize(broker, group_id, missing)
            initialized = True
            continue
        if not isinstance(outcome, ShareAcquisition):
            return outcome, reads
        lock_ms, archived = outcome.lock_ms, archived + outcome.archived
        for tp, runs in outcome.acquired.items():
            acquired[tp] = runs
            left -= sum(last - first + 1 for first, last, _ in runs)
        budget -= spent[0]
        start += walked[0]
        initialized = False
    return ShareAcquisition(acquired=acquired, lock_ms=lock_ms, archived=archived), reads


# ---------------------------------------------------------------------------------------------- ShareFetch
def _fetch_error(ctx: RequestContext, request: Any, code: ErrorCode, message: str | None = None) -> Any:
    return respond(
        ctx, error_code=code, error_message=message, acquisition_lock_timeout=0, responses=[], node_endpoints=[]
    )


async def share_fetch(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """READ on the Group; READ on each Topic."""
    with HeldSlices(SHARE_SLICE_S, ctx) as slices:
        if sum(len(t.partitions) for t in request.topics) > PARTITIONS_PER_CALL:
            await slices.turn()  # (its decoding took a few milliseconds of this step already)
        return await _share_fetch(broker, ctx, request, slices)


async def _share_fetch(broker: Broker, ctx: RequestContext, request: Any, slices: HeldSlices) -> Any:
    require_share_groups(broker)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    require(broker, ctx, AclOperation.READ, ResourceType.GROUP, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id or not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        return _fetch_error(ctx, request, ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
    renewing = bool(getattr(request, "is_renew_ack", False))
    if renewing and (request.max_bytes or request.min_bytes or request.max_records or request.max_wait):
        message = "MaxBytes, MinBytes, MaxRecords and MaxWaitMs must be 0 in a renewing acknowledgement."
        return _fetch_error(ctx, request, ErrorCode.INVALID_REQUEST, message)
    store = _store(broker)
    topics = _Topics(broker, ctx, store)
    epoch = request.share_session_epoch
    added: list[TopicPartition] = []
    acks: dict[TopicPartition, tuple[AckBatch, ...]] = {}
    for t in request.topics:
        tid = t.topic_id or uuid.UUID(int=0)
        for p in t.partitions:
            await slices.tick()
            tp = (tid, int(p.partition_index))
            added.append(tp)
            if p.acknowledgement_batches:  # (a client may name a partition twice: its batches are merged)
                acks[tp] = acks.get(tp, ()) + _batches(p.acknowledgement_batches)
    forgotten: list[TopicPartition] = []
    for t in request.forgotten_topics_data:
        for p in t.partitions:
            await slices.tick()
            forgotten.append((t.topic_id or uuid.UUID(int=0), int(p)))
    if epoch == OPEN_EPOCH and acks:
        return _fetch_error(
            ctx, request, ErrorCode.INVALID_REQUEST, "Acknowledgements sent when opening a share session."
        )
    sessions = sessions_of(broker)
    try:
        session = sessions.advance(group_id, member_id, epoch, added, forgotten, ctx.connection_id)
    except SessionError as exc:
        return _fetch_error(ctx, request, exc.code, str(exc))

    rows: dict[TopicPartition, dict[str, Any]] = {}

    def row(tp: TopicPartition) -> dict[str, Any]:
        return rows.setdefault(
            tp,
            {
                "partition_index": tp[1],
                "error_code": ErrorCode.NONE,
                "acknowledge_error_code": ErrorCode.NONE,
                "current_leader": _LEADER,
                "records": b"",
                "acquired_records": [],
            },
        )

    valid_acks = {}
    for tp, batches in acks.items():
        await slices.tick()
        error = topics.partition_error(tp)
        if error is ErrorCode.NONE and not _types_allowed(batches, ctx.api_version, renewing):
            error = ErrorCode.INVALID_REQUEST
        if error is ErrorCode.NONE:
            valid_acks[tp] = batches
        else:
            row(tp)["acknowledge_error_code"] = error
    for tp, error in (await _acknowledge(broker, group_id, member_id, valid_acks, slices)).items():
        row(tp)["acknowledge_error_code"] = error

    lock_ms = 0
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        await release_member(broker, group_id, member_id)
    elif not renewing:
        readable: list[tuple[TopicPartition, str]] = []
        order = list(session.partitions)
        if order:
            shift = session.epoch % len(order)  # a different partition first each time
            order = order[shift:] + order[:shift]
        for tp in order:
            await slices.tick()
            error = topics.partition_error(tp)
            name = topics.names.get(tp[0])
            if error is not ErrorCode.NONE or name is None:
                row(tp)["error_code"] = error
            else:
                readable.append((tp, name))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(request.max_wait.total_seconds(), 0.0)
        max_records = max(int(request.max_records), 1)
        max_bytes = int(request.max_bytes)
        while readable and max_bytes > 0:  # (MaxBytes 0: nothing is read, so nothing is acquired, as in Kafka)
            outcome, reads = await _acquire(
                broker, store, group_id, member_id, readable, max_records, max_bytes, slices
            )
            if not isinstance(outcome, ShareAcquisition):
                if rows:  # acknowledgements were made: answer them, with the error in place of records
                    for tp, _ in readable:
                        row(tp)["error_code"] = ErrorCode(int(outcome))
                    break
                return _fetch_error(ctx, request, ErrorCode(int(outcome)))
            lock_ms = outcome.lock_ms
            for tp, runs in outcome.acquired.items():
                await slices.tick()
                r = row(tp)
                r["records"] = _trim(reads[tp], runs[-1][1])
                r["acquired_records"] = [
                    {"first_offset": f, "last_offset": la, "delivery_count": n} for f, la, n in runs
                ]
            remaining = deadline - loop.time()
            if outcome.acquired or remaining <= 0:
                break
            if outcome.archived:  # (aborted records were passed over: what follows them may be acquirable now)
                continue
            slices.release()  # (a ShareFetch waiting for records holds nothing: the member's heartbeats go on)
            await store.wait_for_append([(name, tp[1]) for tp, name in readable], min(remaining, RECHECK_S))
            slices.restart()
    if epoch != FINAL_EPOCH:  # the first response of a session names every partition, later ones the new ones
        for tp in session.partitions if epoch == OPEN_EPOCH else added:
            await slices.tick()
            row(tp)
    return await _answer(ctx, rows, lock_ms, slices)


# ---------------------------------------------------------------------------------------- ShareAcknowledge
def _ack_error(ctx: RequestContext, request: Any, code: ErrorCode, message: str | None = None) -> Any:
    return respond(
        ctx, error_code=code, error_message=message, acquisition_lock_timeout=0, responses=[], node_endpoints=[]
    )


async def share_acknowledge(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """READ on the Group; READ on each Topic."""
    with HeldSlices(SHARE_SLICE_S, ctx) as slices:
        return await _share_acknowledge(broker, ctx, request, slices)


async def _share_acknowledge(broker: Broker, ctx: RequestContext, request: Any, slices: HeldSlices) -> Any:
    require_share_groups(broker)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    require(broker, ctx, AclOperation.READ, ResourceType.GROUP, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id or not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        return _ack_error(ctx, request, ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
    renewing = bool(getattr(request, "is_renew_ack", False))
    epoch = request.share_session_epoch
    if epoch == OPEN_EPOCH:
        return _ack_error(
            ctx, request, ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a session."
        )
    sessions = sessions_of(broker)
    try:
        sessions.advance(group_id, member_id, epoch, [], [], ctx.connection_id)
    except SessionError as exc:
        return _ack_error(ctx, request, exc.code, str(exc))
    topics = _Topics(broker, ctx, _store(broker))
    errors: dict[TopicPartition, ErrorCode] = {}
    acks: dict[TopicPartition, tuple[AckBatch, ...]] = {}
    for t in request.topics:
        tid = t.topic_id or uuid.UUID(int=0)
        for p in t.partitions:
            await slices.tick()
            tp = (tid, int(p.partition_index))
            error = topics.partition_error(tp)
            batches = acks.get(tp, ()) + _batches(p.acknowledgement_batches)
            if error is ErrorCode.NONE and _types_allowed(batches, ctx.api_version, renewing):
                acks[tp] = batches
            else:
                errors[tp] = error if error is not ErrorCode.NONE else ErrorCode.INVALID_REQUEST
    errors.update(await _acknowledge(broker, group_id, member_id, acks, slices))
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        await release_member(broker, group_id, member_id)
    rows = {}
    for tp, error in errors.items():
        await slices.tick()
        rows[tp] = {"partition_index": tp[1], "error_code": error, "current_leader": _LEADER}
    return await _answer(ctx, rows, 0, slices)


async def _answer(
    ctx: RequestContext, rows: dict[TopicPartition, dict[str, Any]], lock_ms: int, slices: HeldSlices
) -> PreEncoded:
    """The ShareFetch or ShareAcknowledge answer of ``rows`` (each partition's fields), by topic id then
    partition: each partition packed by hand (``server/share_answers.py``), the loop given a turn between chunks
    (``ANSWERED_PARTITION_WEIGHT`` units a partition), the topics and partitions spliced into the answer."""
    keyed: list[tuple[tuple[int, int], TopicPartition]] = []
    for tp in rows:  # (the sort keys made between slices; sorting them is about a millisecond for 10,000)
        await slices.tick()
        keyed.append((partition_order(tp), tp))
    keyed.sort()
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for _, tp in keyed:
        await slices.tick()
        by_topic.setdefault(tp[0], []).append(rows[tp])
    if len(rows) * ANSWERED_PARTITION_WEIGHT > CHUNK:
        slices.hold()  # (the answer is written between yields: later requests wait for it)
    empty = respond(
        ctx,
        error_code=ErrorCode.NONE,
        error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=[],
        node_endpoints=[],
    )
    topics = [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in by_topic.items()]
    return await topics_answer(empty, topics, ANSWERED_PARTITION_WEIGHT)


SPECS = [
    ApiSpec(SHARE_FETCH, 1, 2, share_fetch, _fetch_error),
    ApiSpec(SHARE_ACKNOWLEDGE, 1, 2, share_acknowledge, _ack_error),
]
