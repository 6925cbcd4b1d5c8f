"""The transaction APIs on the wire, against a real ``regroup serve``: Kafka's error codes per API and version
(PRODUCER_FENCED as INVALID_PRODUCER_EPOCH for the old versions, INVALID_TXN_STATE or TRANSACTION_ABORTABLE
by version), Produce verified against the coordinator, read_committed Fetch and ListOffsets, TxnOffsetCommit
verified against the transaction, and the tools' views (ListTransactions, DescribeTransactions,
DescribeProducers)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from tests.server.conftest import ServerProcess
from tests.server.wire import WireClient, create_topics
from tests.server_data.batches import make_batch

PRODUCE, FETCH, LIST_OFFSETS, INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = (
    0,
    1,
    2,
    22,
    24,
    25,
    26,
    28,
)
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66
TIMEOUT_MS = 60_000


def init(c: WireClient, tid: str | None, version: int = 4, timeout_ms: int = TIMEOUT_MS, **extra: Any) -> Any:
    return c.call(INIT, version, transactional_id=tid, transaction_timeout=timeout_ms, **extra)


def add(c: WireClient, tid: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3) -> list[Any]:
    if version >= 4:
        txn = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": False,
               "topics": [{"name": t, "partitions": ps} for t, ps in parts.items()]}  # fmt: skip
        response = c.call(ADD_PARTITIONS, version, transactions=[txn])
        assert response.error_code == E.none
        return [(t.name, r.partition_index, r.partition_error_code) for t in response.results_by_transaction[0]
                .topic_results for r in t.results_by_partition]  # fmt: skip
    response = c.call(
        ADD_PARTITIONS,
        version,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in parts.items()],
    )
    return [
        (t.name, r.partition_index, r.partition_error_code)
        for t in response.results_by_topic_v3_and_below
        for r in t.results_by_partition
    ]


def end(c: WireClient, tid: str, pid: int, epoch: int, committed: bool, version: int = 3) -> Any:
    return c.call(
        END_TXN, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=committed
    ).error_code


def produce(c: WireClient, topic: str, records: bytes, tid: str | None, version: int = 9) -> tuple[Any, int]:
    response = c.call(
        PRODUCE,
        version,
        transactional_id=tid,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )
    p = response.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return make_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, attributes=0x10)


def fetch(c: WireClient, topic: str, isolation: int, version: int = 11) -> Any:
    response = c.call(
        FETCH,
        version,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
        forgotten_topics_data=[],
        rack_id="",
    )
    return response.responses[0].partitions[0]


def latest(c: WireClient, topic: str, isolation: int) -> int:
    response = c.call(
        LIST_OFFSETS,
        5,
        replica_id=-1,
        isolation_level=isolation,
        topics=[{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    )
    return int(response.topics[0].partitions[0].offset)


@pytest.fixture
def client(server: ServerProcess) -> Any:
    with WireClient(server.port) as c:
        yield c


@pytest.fixture
def topic(client: WireClient) -> str:
    name = "tx-" + uuid.uuid4().hex[:8]
    create_topics(client, {name: 2})
    return name


def test_init_producer_id_refusals(client: WireClient) -> None:
    assert init(client, "tx-a", timeout_ms=900_001).error_code == E.invalid_transaction_timeout
    assert init(client, "tx-a", timeout_ms=0).error_code == E.invalid_transaction_timeout
    assert init(client, "").error_code == E.invalid_request
    assert init(client, "tx-a", version=3, producer_id=5, producer_epoch=-1).error_code == E.invalid_request
    assert init(client, "tx-a", version=6, enable2_pc=True).error_code == E.transactional_id_authorization_failed
    first = init(client, "tx-" + uuid.uuid4().hex[:6])
    assert first.error_code == E.none and first.producer_id >= 0 and first.producer_epoch == 0


@pytest.mark.parametrize(("version", "fenced"), [(3, E.invalid_producer_epoch), (4, E.producer_fenced)])
def test_init_producer_id_names_the_fencing_error_by_version(client: WireClient, version: int, fenced: E) -> None:
    tid = "tx-" + uuid.uuid4().hex[:6]
    s = init(client, tid)
    init(client, tid)  # epoch 1
    stale = init(client, tid, version=version, producer_id=s.producer_id, producer_epoch=7)
    assert stale.error_code == fenced


def test_add_partitions_and_end_txn_errors(client: WireClient, topic: str) -> None:
    tid = "tx-" + topic
    s = init(client, tid)
    pid, epoch = s.producer_id, s.producer_epoch
    assert add(client, tid, pid, epoch, {topic: [0], "nope-" + topic: [0]}) == [
        (topic, 0, E.operation_not_attempted),
        ("nope-" + topic, 0, E.unknown_topic_or_partition),
    ]
    assert add(client, tid, pid, epoch, {topic: [7]}) == [(topic, 7, E.unknown_topic_or_partition)]
    assert add(client, "unknown-" + tid, pid, epoch, {topic: [0]}) == [(topic, 0, E.invalid_producer_id_mapping)]
    assert add(client, tid, pid + 1, epoch, {topic: [0]}) == [(topic, 0, E.invalid_producer_id_mapping)]
    assert add(client, tid, pid, epoch + 1, {topic: [0]}, version=1) == [(topic, 0, E.invalid_producer_epoch)]
    assert add(client, tid, pid, epoch + 1, {topic: [0]}, version=2) == [(topic, 0, E.producer_fenced)]
    assert end(client, tid, pid, epoch, True) == E.invalid_txn_state  # nothing begun
    assert add(client, tid, pid, epoch, {topic: [0, 1]}) == [(topic, 0, E.none), (topic, 1, E.none)]
    assert end(client, tid, pid, epoch + 1, True, version=1) == E.invalid_producer_epoch
    assert end(client, tid, pid, epoch + 1, True, version=2) == E.producer_fenced
    assert end(client, tid, pid, epoch, True) == E.none
    assert end(client, tid, pid, epoch, True) == E.none  # a retry of a completed commit
    assert end(client, tid, pid, epoch, False) == E.invalid_txn_state
    # the brokers' batched form (v4+), with verify_only
    assert add(client, tid, pid, epoch, {topic: [1]}, version=4) == [(topic, 1, E.none)]
    txn = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": True,
           "topics": [{"name": topic, "partitions": [0, 1]}]}  # fmt: skip
    verified = client.call(ADD_PARTITIONS, 5, transactions=[txn]).results_by_transaction[0].topic_results[0]
    assert [(r.partition_index, r.partition_error_code) for r in verified.results_by_partition] == [
        (0, E.transaction_abortable),
        (1, E.none),
    ]
    assert end(client, tid, pid, epoch, False) == E.none


@pytest.mark.parametrize(("version", "outside"), [(9, E.invalid_txn_state), (11, E.transaction_abortable)])
def test_produce_is_verified_against_the_transaction(client: WireClient, topic: str, version: int, outside: E) -> None:
    tid = "tx-" + topic
    s = init(client, tid)
    pid, epoch = s.producer_id, s.producer_epoch
    batch = txn_batch(pid, epoch, 0, [b"a"])
    assert produce(client, topic, batch, None, version) == (E.transactional_id_authorization_failed, -1)
    assert produce(client, topic, batch, tid, version) == (outside, -1)  # not added to the transaction
    add(client, tid, pid, epoch, {topic: [0]})
    assert produce(client, topic, txn_batch(pid, epoch + 1, 0, [b"a"]), tid, version)[0] == E.invalid_producer_epoch
    assert produce(client, topic, batch, tid, version) == (E.none, 0)
    plain = make_batch([b"p"], producer_id=pid, producer_epoch=epoch, base_sequence=1)
    assert produce(client, topic, plain, tid, version)[0] == E.invalid_txn_state  # outside its open transaction


def test_read_committed_reads_below_the_lso_and_learns_the_aborts(client: WireClient, topic: str) -> None:
    tid = "tx-" + topic
    s = init(client, tid)
    pid, epoch = s.producer_id, s.producer_epoch
    assert produce(client, topic, make_batch([b"plain"]), None)[0] == E.none  # offset 0
    add(client, tid, pid, epoch, {topic: [0]})
    assert produce(client, topic, txn_batch(pid, epoch, 0, [b"x", b"y"]), tid) == (E.none, 1)  # 1-2
    assert (latest(client, topic, 0), latest(client, topic, 1)) == (3, 1)
    part = fetch(client, topic, 1)
    assert (part.high_watermark, part.last_stable_offset, part.aborted_transactions) == (3, 1, ())
    assert end(client, tid, pid, epoch, False) == E.none  # the ABORT marker is offset 3
    part = fetch(client, topic, 1)
    assert (part.high_watermark, part.last_stable_offset) == (4, 4)
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 1)]
    assert fetch(client, topic, 0).aborted_transactions is None  # read_uncommitted: no list


def test_txn_offset_commit_needs_the_group_in_the_transaction(client: WireClient, topic: str) -> None:
    tid, group = "tx-" + topic, "g-" + topic
    s = init(client, tid)
    pid, epoch = s.producer_id, s.producer_epoch
    add(client, tid, pid, epoch, {topic: [0]})

    def commit(version: int, t: str = topic) -> list[Any]:
        response = client.call(
            TXN_OFFSET_COMMIT,
            version,
            transactional_id=tid,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}]}],
        )  # fmt: skip
        return [(x.name, p.partition_index, p.error_code) for x in response.topics for p in x.partitions]

    assert commit(3) == [(topic, 0, E.invalid_txn_state)]
    assert commit(4) == [(topic, 0, E.transaction_abortable)]
    assert commit(4, "nope-" + topic) == [("nope-" + topic, 0, E.unknown_topic_or_partition)]
    added = client.call(ADD_OFFSETS, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group)
    assert added.error_code == E.none
    assert commit(3) == [(topic, 0, E.none)]
    stable = client.call(9, 7, group_id=group, topics=[{"name": topic, "partition_indexes": [0]}], require_stable=True)
    assert stable.topics[0].partitions[0].error_code == E.unstable_offset_commit
    assert end(client, tid, pid, epoch, True) == E.none
    fetched = client.call(9, 7, group_id=group, topics=[{"name": topic, "partition_indexes": [0]}], require_stable=True)
    assert (fetched.topics[0].partitions[0].error_code, fetched.topics[0].partitions[0].committed_offset) == (
        E.none,
        5,
    )


def test_the_tools_views(client: WireClient, topic: str) -> None:
    tid = "tx-" + topic
    s = init(client, tid)
    pid, epoch = s.producer_id, s.producer_epoch
    add(client, tid, pid, epoch, {topic: [1, 0]})
    produce(client, topic, txn_batch(pid, epoch, 0, [b"a"]), tid)
    described = client.call(DESCRIBE_TXNS, 0, transactional_ids=[tid, "nope-" + tid, ""]).transaction_states
    assert [(d.transactional_id, d.error_code) for d in described] == [
        (tid, E.none),
        ("nope-" + tid, E.transactional_id_not_found),
        ("", E.invalid_request),
    ]
    mine = described[0]
    assert (mine.transaction_state, mine.producer_id, mine.producer_epoch) == ("Ongoing", pid, epoch)
    assert [(t.topic, list(t.partitions)) for t in mine.topics] == [(topic, [0, 1])]
    listed = client.call(
        LIST_TXNS, 1, state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid], duration_filter=-1
    )
    assert listed.error_code == E.none and list(listed.unknown_state_filters) == ["Bogus"]
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
        (tid, pid, "Ongoing")
    ]
    by_pattern = client.call(
        LIST_TXNS, 2, state_filters=[], producer_id_filters=[], duration_filter=-1, transactional_id_pattern="tx-.*"
    )
    assert tid in {t.transactional_id for t in by_pattern.transaction_states}
    bad = client.call(
        LIST_TXNS, 2, state_filters=[], producer_id_filters=[], duration_filter=-1, transactional_id_pattern="("
    )
    assert bad.error_code == E.invalid_regular_expression
    producers = client.call(DESCRIBE_PRODUCERS, 0, topics=[{"name": topic, "partition_indexes": [0, 9]}])
    p0, p9 = producers.topics[0].partitions
    assert p9.error_code == E.unknown_topic_or_partition
    assert [(a.producer_id, a.producer_epoch, a.current_txn_start_offset) for a in p0.active_producers] == [
        (pid, epoch, 0)
    ]
    assert end(client, tid, pid, epoch, True) == E.none
    described = client.call(DESCRIBE_TXNS, 0, transactional_ids=[tid]).transaction_states[0]
    assert (described.transaction_state, list(described.topics)) == ("CompleteCommit", [])


def test_a_transactional_id_over_its_limit_is_invalid_request(client: WireClient) -> None:
    long_id = "t" * 1025  # --max-transactional-id-bytes defaults to 1024
    assert init(client, long_id).error_code == E.invalid_request
    assert init(client, "t" * 1024).error_code == E.none
