"""The transaction coordinator's APIs (KIP-98, transaction version 1) and the tools' views of it (KIP-664).

Versions: InitProducerId v0–6, AddPartitionsToTxn v0–5 (v4+: the brokers' batched form, with
``verify_only``), AddOffsetsToTxn v0–4, EndTxn v0–4, TxnOffsetCommit v0–4, DescribeProducers v0,
DescribeTransactions v0, ListTransactions v0–2. EndTxn v5, TxnOffsetCommit v5 and the KIP-890 part 2 forms
(an epoch bump per transaction) are not served: clients use them only when the broker advertises transaction
version 2, which this one does not.

- **InitProducerId** without a transactional id: a fresh producer id with epoch 0 (idempotent producers,
  including the KIP-360 epoch bump). With one: the coordinator's session (``TransactionCoordinator``); an
  ongoing transaction of the previous session is aborted first (CONCURRENT_TRANSACTIONS until it is). The
  KIP-939 two-phase-commit flags (v6) are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka does
  while ``transaction.two.phase.commit.enable`` is off.
- **AddPartitionsToTxn**: partitions of unknown topics (or beyond a topic's count) fail the whole request:
  UNKNOWN_TOPIC_OR_PARTITION for them, OPERATION_NOT_ATTEMPTED for the others, as Kafka.
- **EndTxn** is answered once the markers are written and the transaction complete (Kafka answers once the
  PrepareCommit/PrepareAbort is durable and writes the markers after; waiting a little longer lets a
  read_committed consumer see a commit as soon as its producer heard of it). If writing a marker fails, the
  answer goes out anyway (the outcome is decided and durable) and the markers are retried.
- PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for the versions that predate it (InitProducerId < 4, the others
  < 2), as Kafka translates it.

Authorization, as Kafka's ``KafkaApis`` checks it, before the coordinator is asked (a refused request or
partition changes nothing):

- **InitProducerId**: with a transactional id, WRITE on the TransactionalId (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the Cluster or — KIP-679 — WRITE
  on some topic (``authorized.authorize_by_resource_type``), else CLUSTER_AUTHORIZATION_FAILED.
- **AddPartitionsToTxn** v0–3 (clients): WRITE on the TransactionalId (else every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each Topic: the partitions of a topic without it are
  TOPIC_AUTHORIZATION_FAILED, checked before unknown topics, and the whole transaction fails (the other
  partitions OPERATION_NOT_ATTEMPTED). v4+ is the brokers' form: CLUSTER_ACTION on the Cluster, else
  CLUSTER_AUTHORIZATION_FAILED for the request, and no topic check.
- **AddOffsetsToTxn**: WRITE on the TransactionalId, then READ on the Group (GROUP_AUTHORIZATION_FAILED).
- **EndTxn**: WRITE on the TransactionalId.
- **TxnOffsetCommit**: WRITE on the TransactionalId, READ on the Group (each refusal on every partition),
  then READ on each Topic (TOPIC_AUTHORIZATION_FAILED for its partitions, the others committed).
- **DescribeProducers**: READ on each Topic (TOPIC_AUTHORIZATION_FAILED for its partitions, with Kafka's
  message).
- **DescribeTransactions**: DESCRIBE on each TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the
  partitions of topics the principal may not DESCRIBE are left out of a described transaction.
- **ListTransactions**: only the transactional ids the principal may DESCRIBE are listed.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

import re2

from regroup.coordinator.offsets import PlannedTopic
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import OffsetCommitResponse, TxnOffsetCommitRequest
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed, require, require_cluster
from regroup.server.entities import ms
from regroup.server.handlers._common import respond
from regroup.server.handlers.authorized import authorize_by_resource_type
from regroup.server.handlers.offsets import commit_columns, commit_partitions
from regroup.server.offset_answers import commit_topics
from regroup.server.producer_answers import (
    ActiveProducer,
    ProducersPartition,
    ProducersTopic,
    describe_producers_answer,
)
from regroup.server.txn_runtime import TransactionRuntime
from regroup.transactions.state import TopicPartition, TransactionMetadata, TxnState

__all__ = ["SPECS", "txn_of"]

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
BATCHED_ADD_FROM = 4
E = ErrorCode
_RE2 = re2.Options()
_RE2.log_errors = False
_RE2.max_mem = 8 << 20


def txn_of(broker: Broker) -> TransactionRuntime | None:
    """The broker's transaction runtime, if it has one."""
    runtime = getattr(broker, "transactions", None)
    return runtime if isinstance(runtime, TransactionRuntime) else None


def _require_txn_write(broker: Broker, ctx: RequestContext, transactional_id: str) -> None:
    """WRITE on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    require(
        broker,
        ctx,
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        transactional_id,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    )


def _require_group_read(broker: Broker, ctx: RequestContext, group_id: str) -> None:
    """READ on the Group, else GROUP_AUTHORIZATION_FAILED."""
    require(broker, ctx, AclOperation.READ, ResourceType.GROUP, group_id, E.GROUP_AUTHORIZATION_FAILED)


def _may(broker: Broker, ctx: RequestContext, operation: AclOperation, topic: str) -> bool:
    return allowed(broker, ctx, operation, ResourceType.TOPIC, topic)


def fenced_for(code: ErrorCode, version: int, since: int) -> ErrorCode:
    """PRODUCER_FENCED as clients of ``version`` know it (INVALID_PRODUCER_EPOCH before ``since``)."""
    return E.INVALID_PRODUCER_EPOCH if code is E.PRODUCER_FENCED and version < since else code


# ---------------------------------------------------------------------------------------- InitProducerId
def _init_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, producer_id=-1, producer_epoch=-1)


async def init_producer_id(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """WRITE on the TransactionalId; without one, IDEMPOTENT_WRITE on the Cluster or WRITE on some Topic."""
    tid = request.transactional_id
    if tid is not None:
        _require_txn_write(broker, ctx, tid)
    elif not (
        allowed(broker, ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
        or authorize_by_resource_type(broker, ctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _init_error(ctx, request, E.CLUSTER_AUTHORIZATION_FAILED)
    if tid is None:
        producer_id = _allocate(broker)
        return respond(ctx, error_code=E.NONE, producer_id=producer_id, producer_epoch=0)
    if getattr(request, "enable2_pc", False) or getattr(request, "keep_prepared_txn", False):
        return _init_error(ctx, request, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    runtime = txn_of(broker)
    if runtime is None:
        return _init_error(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    timeout_ms = ms(request.transaction_timeout)
    pid, epoch = getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1)
    result = await runtime.call(lambda c, now: c.init_producer_id(tid, timeout_ms, pid, epoch, now))
    if result.error is not E.NONE:
        return _init_error(ctx, request, fenced_for(result.error, ctx.api_version, 4))
    return respond(ctx, error_code=E.NONE, producer_id=result.producer_id, producer_epoch=result.producer_epoch)


def _allocate(broker: Broker) -> int:
    store = broker.topic_store
    allocate = getattr(store, "allocate_producer_id", None)
    if allocate is None:
        raise TypeError(f"{type(store).__name__} cannot allocate producer ids")
    producer_id: int = allocate()
    return producer_id


# ------------------------------------------------------------------------------------ AddPartitionsToTxn
def _partition_rows(topics: Iterable[tuple[str, list[int]]], code_of: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": code_of((name, p))} for p in partitions
            ],
        }
        for name, partitions in topics
    ]


def _grouped(topics: Any) -> list[tuple[str, list[int]]]:
    """The request's topics, a topic named twice merged and a partition named twice once (Kafka reads them into
    one set), in the order first named. (Linear: 10,000 partitions checked against a list held the loop 330 ms.)"""
    merged: dict[str, dict[int, None]] = {}
    for t in topics:
        merged.setdefault(t.name, {}).update(dict.fromkeys(t.partitions))
    return [(name, list(partitions)) for name, partitions in merged.items()]


def _add_partitions_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    if ctx.api_version >= BATCHED_ADD_FROM:
        return respond(ctx, error_code=code, results_by_transaction=[])
    rows = _partition_rows(_grouped(request.v3_and_below_topics), lambda _: code)
    return respond(ctx, results_by_topic_v3_and_below=rows)


async def _add_one(
    broker: Broker,
    ctx: RequestContext,
    tid: str,
    pid: int,
    epoch: int,
    topics: list[tuple[str, list[int]]],
    verify: bool,
) -> dict[TopicPartition, ErrorCode]:
    """Each partition's answer for one transaction's AddPartitionsToTxn (or its verification). A client's
    (v0-3) needs WRITE on the TransactionalId and on each Topic."""
    version = ctx.api_version
    parts = [(name, p) for name, partitions in topics for p in partitions]
    if version < BATCHED_ADD_FROM and not allowed(broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(parts, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    known = broker.topic_store.topics()
    refused: dict[TopicPartition, ErrorCode] = {}
    if version < BATCHED_ADD_FROM:
        denied = {name for name, _ in topics if not _may(broker, ctx, AclOperation.WRITE, name)}
        refused = {tp: E.TOPIC_AUTHORIZATION_FAILED for tp in parts if tp[0] in denied}
    for tp in parts:
        if tp not in refused and (tp[0] not in known or not 0 <= tp[1] < known[tp[0]].partitions):
            refused[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, E.OPERATION_NOT_ATTEMPTED) for tp in parts}
    runtime = txn_of(broker)
    if runtime is None:
        return dict.fromkeys(parts, E.COORDINATOR_NOT_AVAILABLE)
    if not tid:
        return dict.fromkeys(parts, E.INVALID_REQUEST)
    if verify:
        return runtime.coordinator.verify_partitions(tid, pid, epoch, parts)
    result = await runtime.call(lambda c, now: c.add_partitions(tid, pid, epoch, parts, now))
    return dict.fromkeys(parts, fenced_for(result.error, version, 2))


async def add_partitions_to_txn(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """v0-3: WRITE on the TransactionalId, then WRITE on each Topic; v4+: CLUSTER_ACTION on the Cluster."""
    version = ctx.api_version
    if version < BATCHED_ADD_FROM:
        topics = _grouped(request.v3_and_below_topics)
        codes = await _add_one(
            broker,
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            topics,
            False,
        )
        answered = [(name, [(p, codes[(name, p)]) for p in partitions]) for name, partitions in topics]
        empty = respond(ctx, results_by_topic_v3_and_below=[])
        return await commit_topics(empty, answered, "results_by_topic_v3_and_below")
    require_cluster(broker, ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for txn in request.transactions:
        topics = _grouped(txn.topics)
        codes = await _add_one(
            broker, ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, topics, txn.verify_only
        )
        results.append(
            {"transactional_id": txn.transactional_id, "topic_results": _partition_rows(topics, codes.__getitem__)}
        )
    return respond(ctx, error_code=E.NONE, results_by_transaction=results)


# --------------------------------------------------------------------------------- AddOffsetsToTxn, EndTxn
def _error_only(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code)


async def add_offsets_to_txn(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """WRITE on the TransactionalId, then READ on the Group."""
    _require_txn_write(broker, ctx, request.transactional_id)
    _require_group_read(broker, ctx, request.group_id)
    runtime = txn_of(broker)
    if runtime is None:
        return respond(ctx, error_code=E.COORDINATOR_NOT_AVAILABLE)
    tid, pid, epoch, group = request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    result = await runtime.call(lambda c, now: c.add_offsets(tid, pid, epoch, group, now))
    return respond(ctx, error_code=fenced_for(result.error, ctx.api_version, 2))


async def end_txn(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """WRITE on the TransactionalId."""
    _require_txn_write(broker, ctx, request.transactional_id)
    runtime = txn_of(broker)
    if runtime is None:
        return respond(ctx, error_code=E.COORDINATOR_NOT_AVAILABLE)
    tid, pid, epoch = request.transactional_id, request.producer_id, request.producer_epoch
    committed = request.committed
    result = await runtime.call(lambda c, now: c.end_txn(tid, pid, epoch, committed, now), wait_markers=True)
    return respond(ctx, error_code=fenced_for(result.error, ctx.api_version, 2))


# ------------------------------------------------------------------------------------------ TxnOffsetCommit
#: TxnOffsetCommit versions from which a group not added to the transaction is TRANSACTION_ABORTABLE
ABORTABLE_OFFSETS_FROM = 4


def _offsets_rows(topics: Iterable[tuple[str, Iterable[tuple[int, ErrorCode]]]]) -> list[dict[str, Any]]:
    return [
        {"name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in partitions]}
        for name, partitions in topics
    ]


def _txn_offsets_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(
        ctx, topics=_offsets_rows((t.name, ((p.partition_index, code) for p in t.partitions)) for t in request.topics)
    )


def _offsets_refusal(code: ErrorCode, version: int) -> ErrorCode:
    """The coordinator's verification answer as TxnOffsetCommit clients of ``version`` know it (Kafka's
    translations for the group coordinator's transaction verification)."""
    if code is E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH
    if code is E.CONCURRENT_TRANSACTIONS:
        return E.COORDINATOR_NOT_AVAILABLE  # retriable for every client
    if code is E.TRANSACTION_ABORTABLE and version < ABORTABLE_OFFSETS_FROM:
        return E.INVALID_TXN_STATE
    return code


async def txn_offset_commit(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """Offsets committed inside a transaction: partitions of unknown topics are UNKNOWN_TOPIC_OR_PARTITION (as
    Kafka's request layer answers), the group must have been added to the producer's ongoing transaction
    (Kafka's verification, KIP-890 part 1), and the group coordinator validates the member and keeps the
    offsets pending for the producer until the transaction's marker reaches it. WRITE on the TransactionalId,
    READ on the Group, READ on each Topic."""
    _require_txn_write(broker, ctx, request.transactional_id)
    _require_group_read(broker, ctx, request.group_id)
    runtime = txn_of(broker)
    if runtime is None:
        return _txn_offsets_error(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    valid, planned, refused = commit_partitions(broker, ctx, request.topics)
    rows: dict[str, list[tuple[int, ErrorCode]]] = {name: list(partitions) for name, partitions in refused.items()}
    if not valid:
        return await commit_topics(respond(ctx, topics=[]), list(rows.items()))
    tid, group, pid, epoch = request.transactional_id, request.group_id, request.producer_id, request.producer_epoch
    refusal = E.INVALID_GROUP_ID if not group else runtime.coordinator.check_offsets(tid, pid, epoch, group)
    if refusal is not E.NONE:
        code = _offsets_refusal(refusal, ctx.api_version)
        for name, columns in valid:
            rows.setdefault(name, []).extend((p, code) for p in columns.partitions)
        return await commit_topics(respond(ctx, topics=[]), list(rows.items()))
    req = TxnOffsetCommitRequest(
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=getattr(request, "generation_id", -1),
        member_id=getattr(request, "member_id", ""),
        group_instance_id=getattr(request, "group_instance_id", None),
        topics=tuple(valid),
    )
    plans = planned if any(planned) else []
    resp: OffsetCommitResponse = await broker.coordinator.call(
        lambda c, key, now: c.txn_offset_commit(req, key, now, plans), group_id=req.group_id
    )
    for name, codes in resp.topics:
        rows.setdefault(name, []).extend(codes)
    return await commit_topics(respond(ctx, topics=[]), list(rows.items()))


def _plan_txn_commit(broker: Broker, version: int, request: Any) -> tuple[PlannedTopic | None, ...]:
    """A large TxnOffsetCommit's pending records worked out ahead, on the thread that decoded it
    (``ApiSpec.plan_aside``), as OffsetCommit's are: each topic's ``PlannedTopic`` for the request's producer,
    by position, used by the core only once the group and the transaction accept the commit."""
    coordinator, group_id, producer_id = broker.coordinator, request.group_id, request.producer_id
    return tuple(
        coordinator.plan_offset_commit(group_id, topic.name, commit_columns(topic.partitions), -1, producer_id)
        if topic.partitions
        else None
        for topic in request.topics
    )


# --------------------------------------------------------------------------- ListTransactions, Describe...
def _list_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, unknown_state_filters=[], transaction_states=[])


async def list_transactions(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """Only the transactional ids with DESCRIBE on them."""
    runtime = txn_of(broker)
    if runtime is None:
        return _list_error(ctx, request, E.COORDINATOR_NOT_AVAILABLE)
    names = {s.value: s for s in TxnState}
    states = {names[s] for s in request.state_filters if s in names}
    unknown = [s for s in request.state_filters if s not in names]
    pids = set(request.producer_id_filters)
    duration = getattr(request, "duration_filter", -1)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    pattern = None
    if pattern_text:
        try:
            pattern = re2.compile(pattern_text, _RE2)
        except re2.error:
            return _list_error(ctx, request, E.INVALID_REGULAR_EXPRESSION)
    now = runtime.now_ms()
    rows = [
        {"transactional_id": m.transactional_id, "producer_id": m.producer_id, "transaction_state": m.state.value}
        for m in runtime.coordinator.transactions
        if (not request.state_filters or m.state in states)
        and (not pids or m.producer_id in pids)
        and (duration < 0 or now - m.start_ms > duration)
        and (pattern is None or pattern.fullmatch(m.transactional_id) is not None)
        and allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id)
    ]
    return respond(ctx, error_code=E.NONE, unknown_state_filters=unknown, transaction_states=rows)


def _describe_row(tid: str, code: ErrorCode, m: TransactionMetadata | None = None, shown: Any = None) -> dict[str, Any]:
    """One transactional id's row; an error row has Kafka's defaults (0, ""). The start time is -1 before the
    id's first transaction, as Kafka reports it. ``shown(topic)``: whether the topic's partitions are listed."""
    topics: dict[str, list[int]] = {}
    for name, p in sorted(m.partitions if m is not None else ()):
        if shown is None or shown(name):
            topics.setdefault(name, []).append(p)
    start_ms = m.start_ms if m is not None else 0
    return {
        "error_code": code,
        "transactional_id": tid,
        "transaction_state": m.state.value if m is not None else "",
        "transaction_timeout": m.timeout_ms if m is not None else 0,
        "transaction_start_time": datetime.datetime.fromtimestamp(start_ms / 1000, tz=datetime.UTC),
        "producer_id": m.producer_id if m is not None else 0,
        "producer_epoch": m.producer_epoch if m is not None else 0,
        "topics": [{"topic": name, "partitions": tuple(ps)} for name, ps in topics.items()],
    }


def _describe_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, transaction_states=[_describe_row(tid, code) for tid in request.transactional_ids])


async def describe_transactions(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each TransactionalId; only the partitions of topics with DESCRIBE on them are listed."""
    runtime = txn_of(broker)

    def shown(topic: str) -> bool:
        return _may(broker, ctx, AclOperation.DESCRIBE, topic)

    rows = []
    for tid in request.transactional_ids:
        if not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            rows.append(_describe_row(tid, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        m = runtime.coordinator.get(tid) if runtime is not None and tid else None
        code = (
            E.COORDINATOR_NOT_AVAILABLE
            if runtime is None
            else E.INVALID_REQUEST
            if not tid
            else E.TRANSACTIONAL_ID_NOT_FOUND
            if m is None
            else E.NONE
        )
        rows.append(_describe_row(tid, code, m, shown))
    return respond(ctx, transaction_states=rows)


def _producers_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    topics = [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": p, "error_code": code, "error_message": None, "active_producers": []}
                for p in t.partition_indexes
            ],
        }
        for t in request.topics
    ]
    return respond(ctx, topics=topics)


async def describe_producers(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """READ on each Topic. A partition never opened since the store opened has no data, so no producers: it is
    answered without opening its log (``TopicStore.opened_partition``)."""
    store = broker.topic_store
    opened = getattr(store, "opened_partition", None)
    topics: list[ProducersTopic] = []
    for t in request.topics:
        if not _may(broker, ctx, AclOperation.READ, t.name):
            denied, message = int(E.TOPIC_AUTHORIZATION_FAILED), "Topic authorization failed."
            topics.append((t.name, [(p, denied, message, ()) for p in t.partition_indexes]))
            continue
        partitions: list[ProducersPartition] = []
        for p in t.partition_indexes:
            plog = opened(t.name, p) if opened is not None else False
            if plog is False:
                partitions.append((p, int(E.UNKNOWN_TOPIC_OR_PARTITION), None, ()))
            elif plog is True:
                partitions.append((p, 0, None, ()))
            else:
                partitions.append((p, 0, None, _active_producers(plog)))
        topics.append((t.name, partitions))
    return await describe_producers_answer(respond(ctx, topics=[]), topics)


def _active_producers(plog: Any) -> list[ActiveProducer]:
    """The partition's producers with a sequence or an open transaction, by id: (id, epoch, last sequence, last
    timestamp (-1: not kept), coordinator epoch (0 within a transaction, else -1), the transaction's first
    offset (-1 without one))."""
    open_txns = plog.open_transactions()
    sequences = plog.producers.last_sequences()
    producers: list[ActiveProducer] = []
    for pid in sorted(sequences.keys() | open_txns.keys()):
        txn = open_txns.get(pid)
        epoch, last_seq = sequences.get(pid, (txn.producer_epoch if txn else -1, -1))
        in_txn = txn is not None
        producers.append((pid, epoch, last_seq, -1, 0 if in_txn else -1, txn.first_offset if in_txn else -1))
    return producers


SPECS = [
    ApiSpec(INIT_PRODUCER_ID, 0, 6, init_producer_id, _init_error),
    ApiSpec(ADD_PARTITIONS, 0, 5, add_partitions_to_txn, _add_partitions_error),
    ApiSpec(ADD_OFFSETS, 0, 4, add_offsets_to_txn, _error_only),
    ApiSpec(END_TXN, 0, 4, end_txn, _error_only),
    ApiSpec(TXN_OFFSET_COMMIT, 0, 4, txn_offset_commit, _txn_offsets_error, plan_aside=_plan_txn_commit),
    ApiSpec(DESCRIBE_PRODUCERS, 0, 0, describe_producers, _producers_error),
    ApiSpec(DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions, _describe_error),
    ApiSpec(LIST_TRANSACTIONS, 0, 2, list_transactions, _list_error),
]


# -------------------------------------------------------------------- the Produce handler's verification
#: Produce versions from which a partition not added to the transaction is TRANSACTION_ABORTABLE (KIP-890)
ABORTABLE_PRODUCE_FROM = 11


def transactional_producers(records: bytes | None) -> set[tuple[int, int]]:
    """``(producer id, epoch)`` of the transactional batches in a partition's produce data (read from the
    batch headers without validating them: the append does that)."""
    data = records or b""
    found: set[tuple[int, int]] = set()
    pos = 0
    while pos + 61 <= len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if length < 49:
            break
        attributes = int.from_bytes(data[pos + 21 : pos + 23], "big")
        if attributes & 0x10:
            pid = int.from_bytes(data[pos + 43 : pos + 51], "big", signed=True)
            found.add((pid, int.from_bytes(data[pos + 51 : pos + 53], "big", signed=True)))
        pos += 12 + length
    return found


def produce_refusal(
    broker: Broker, transactional_id: str, producer: tuple[int, int], partition: TopicPartition, version: int
) -> ErrorCode:
    """May ``producer``'s transactional batch be appended to ``partition``? Kafka's verification with the
    coordinator (KIP-890 part 1) with its translations for Produce: a fenced epoch is INVALID_PRODUCER_EPOCH,
    a transaction being completed NOT_ENOUGH_REPLICAS (retriable), a partition not in the transaction
    INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11)."""
    runtime = txn_of(broker)
    if runtime is None:
        return E.NOT_ENOUGH_REPLICAS
    code = runtime.coordinator.check_produce(transactional_id, producer[0], producer[1], partition)
    if code is E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH
    if code is E.CONCURRENT_TRANSACTIONS:
        return E.NOT_ENOUGH_REPLICAS
    if code is E.TRANSACTION_ABORTABLE and version < ABORTABLE_PRODUCE_FROM:
        return E.INVALID_TXN_STATE
    return code
