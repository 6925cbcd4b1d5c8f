"""Transactions against ``regroup serve`` with real clients: confluent-kafka's (librdkafka) transactional
producer, aiokafka's and kafka-python's. A commit is seen by read_committed consumers, an abort never
(read_uncommitted sees both); an open transaction holds the last stable offset; a second producer with the
same transactional.id fences the first (a fatal error for it) and aborts its transaction; a transaction past
its timeout is aborted and its producer fenced; a kill -9 with a transaction open or with its commit decided
but its markers not written is finished after the restart (aborted, or committed), never half visible."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from regroup.storage.transaction_log import TransactionLog
from regroup.transactions.records import new_txn_record
from regroup.transactions.state import TxnState
from tests.server.conftest import ServerProcess

ck = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.timeout(120)


def bootstrap(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.port}"


def create_topic(server: ServerProcess, partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "t-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap(server)})  # (kept alive until the result is in)
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(20)
    return name


def txn_producer(server: ServerProcess, tid: str, **extra: Any) -> Any:
    return ck.Producer({"bootstrap.servers": bootstrap(server), "transactional.id": tid, **extra})


def read_values(
    server: ServerProcess, topic: str, isolation: str, *, expect: int | None = None, partitions: int = 1
) -> list[bytes]:
    """Every value a consumer of ``isolation`` reads from the start of ``topic``: until ``expect`` values
    came and a second more passed (to catch extras), or for three seconds."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap(server),
            "group.id": "reader-" + uuid.uuid4().hex[:6],
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        end = time.monotonic() + (20 if expect else 3)
        while time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
            if expect is not None and len(values) >= expect:
                end = min(end, time.monotonic() + 1.0)
        return values
    finally:
        consumer.close()


def plain_produce(server: ServerProcess, topic: str, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap(server), "acks": "all"})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(20) == 0


def fatal_error(action: Any) -> Any:
    """The KafkaError ``action()`` raises (it must raise)."""
    with pytest.raises(ck.KafkaException) as raised:
        action()
    return raised.value.args[0]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "data", tmp_path / "server.log", [])
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()
    text = proc.log()
    assert "Traceback" not in text and " ERROR " not in text, text[-5000:]


def test_commit_is_visible_abort_never_is(server: ServerProcess) -> None:
    topic = create_topic(server, partitions=2)
    producer = txn_producer(server, "tx-" + topic)
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, b"c%d" % i, partition=i % 2)
    producer.commit_transaction(20)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, b"a%d" % i, partition=i % 2)
    assert producer.flush(20) == 0  # the aborted records reach the log
    producer.abort_transaction(20)
    committed = {b"c%d" % i for i in range(10)}
    aborted = {b"a%d" % i for i in range(6)}
    assert sorted(read_values(server, topic, "read_committed", expect=10, partitions=2)) == sorted(committed)
    everything = read_values(server, topic, "read_uncommitted", expect=16, partitions=2)
    assert sorted(everything) == sorted(committed | aborted)


def test_an_open_transaction_holds_the_last_stable_offset(server: ServerProcess) -> None:
    topic = create_topic(server)
    plain_produce(server, topic, [b"before"])
    producer = txn_producer(server, "tx-" + topic)
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, b"in-txn", partition=0)
    assert producer.flush(20) == 0
    plain_produce(server, topic, [b"after"])
    assert read_values(server, topic, "read_committed") == [b"before"]  # "after" waits behind the transaction
    assert read_values(server, topic, "read_uncommitted", expect=3) == [b"before", b"in-txn", b"after"]
    producer.commit_transaction(20)
    assert read_values(server, topic, "read_committed", expect=3) == [b"before", b"in-txn", b"after"]


def test_a_second_producer_fences_the_first(server: ServerProcess) -> None:
    topic = create_topic(server)
    tid = "tx-" + topic
    first = txn_producer(server, tid)
    first.init_transactions(20)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    assert first.flush(20) == 0
    second = txn_producer(server, tid)
    second.init_transactions(30)  # aborts the first one's transaction (CONCURRENT_TRANSACTIONS meanwhile)

    def carry_on() -> None:
        first.produce(topic, b"zombie-2", partition=0)
        first.flush(10)
        first.commit_transaction(10)

    error = fatal_error(carry_on)
    assert error.fatal() and error.code() == ck.KafkaError._FENCED
    second.begin_transaction()
    second.produce(topic, b"live", partition=0)
    second.commit_transaction(20)
    assert read_values(server, topic, "read_committed", expect=1) == [b"live"]


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(server: ServerProcess) -> None:
    topic = create_topic(server)
    producer = txn_producer(server, "tx-" + topic, **{"transaction.timeout.ms": 1000})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, b"too-slow", partition=0)
    assert producer.flush(20) == 0
    plain_produce(server, topic, [b"after"])
    time.sleep(2.5)  # the coordinator aborts it one timeout after it started
    assert read_values(server, topic, "read_committed", expect=1) == [b"after"]  # the LSO moved on

    def carry_on() -> None:
        producer.produce(topic, b"more", partition=0)
        producer.flush(10)
        producer.commit_transaction(10)

    error = fatal_error(carry_on)
    assert error.fatal() and error.code() == ck.KafkaError._FENCED
    assert "timed out: aborting it" in server.log()


def test_kill_9_with_a_transaction_open_aborts_it_after_restart(server: ServerProcess) -> None:
    topic = create_topic(server)
    tid = "tx-" + topic
    producer = txn_producer(server, tid)
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, b"half", partition=0)
    assert producer.flush(20) == 0
    server.restart()  # kill -9: the transaction stays open in the log and in the coordinator
    plain_produce(server, topic, [b"after"])
    assert read_values(server, topic, "read_committed") == []  # still held by the open transaction
    successor = txn_producer(server, tid)
    successor.init_transactions(30)  # fences the dead producer and aborts its transaction
    assert read_values(server, topic, "read_committed", expect=1) == [b"after"]
    assert sorted(read_values(server, topic, "read_uncommitted", expect=2)) == [b"after", b"half"]


def test_kill_9_after_the_commit_was_decided_completes_it_after_restart(server: ServerProcess) -> None:
    """The coordinator's PrepareCommit is durable but no marker was written (a crash between the two): the
    restarted server writes the markers, so the transaction is committed — in every partition."""
    topic = create_topic(server, partitions=2)
    tid = "tx-" + topic
    producer = txn_producer(server, tid)
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce(topic, b"p0", partition=0)
    producer.produce(topic, b"p1", partition=1)
    assert producer.flush(20) == 0
    server.kill()
    log = TransactionLog.open(server.data_dir / "transactions")
    try:
        m = log.load().get(tid)
        assert m is not None and m.state is TxnState.ONGOING and len(m.partitions) == 2
        log.append([new_txn_record(m.evolve(state=TxnState.PREPARE_COMMIT))])  # what EndTxn wrote before the crash
    finally:
        log.close()
    server.start()
    assert sorted(read_values(server, topic, "read_committed", expect=2, partitions=2)) == [b"p0", b"p1"]
    log_text = server.log()
    assert "completing 1 transaction(s) found preparing" in log_text


def test_a_transaction_with_offsets_decided_before_a_crash_completes_at_start(server: ServerProcess) -> None:
    """As above, with consumer offsets sent to the transaction: completing it at start also completes the
    group's pending offsets, through the group coordinator's writer, which runs before the port opens (the
    server used to wait for it forever and never listened)."""
    topic = create_topic(server)
    tid, group = "tx-" + topic, "g-" + topic
    producer = txn_producer(server, tid)
    producer.init_transactions(20)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap(server), "group.id": group, "enable.auto.commit": False})
    try:
        producer.begin_transaction()
        producer.produce(topic, b"out", partition=0)
        offsets = [ck.TopicPartition(topic, 0, 7)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 20)
        assert producer.flush(20) == 0
    finally:
        consumer.close()
    server.kill()
    log = TransactionLog.open(server.data_dir / "transactions")
    try:
        m = log.load().get(tid)
        assert m is not None and m.state is TxnState.ONGOING
        log.append([new_txn_record(m.evolve(state=TxnState.PREPARE_COMMIT))])  # what EndTxn wrote before the crash
    finally:
        log.close()
    server.start()
    assert read_values(server, topic, "read_committed", expect=1) == [b"out"]
    check = ck.Consumer({"bootstrap.servers": bootstrap(server), "group.id": group, "enable.auto.commit": False})
    try:
        [committed] = check.committed([ck.TopicPartition(topic, 0)], timeout=20)
        assert committed.offset == 7
    finally:
        check.close()
    assert "completing 1 transaction(s) found preparing" in server.log()


def test_aiokafka_transactions_commit_and_abort(server: ServerProcess) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = create_topic(server)

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap(server), transactional_id="aio-" + topic)
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(5):
                    await producer.send_and_wait(topic, b"c%d" % i, partition=0)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    for i in range(3):
                        await producer.send_and_wait(topic, b"a%d" % i, partition=0)
                    raise RuntimeError("abort it")
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_values(server, topic, "read_committed", expect=5) == [b"c%d" % i for i in range(5)]
    assert read_values(server, topic, "read_uncommitted", expect=8) == [
        *(b"c%d" % i for i in range(5)),
        *(b"a%d" % i for i in range(3)),
    ]


def test_kafka_python_transactions_commit_and_abort(server: ServerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    topic = create_topic(server)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap(server), transactional_id="kp-" + topic)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, b"c%d" % i, partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"a0", partition=0).get(10)
        producer.abort_transaction()
    finally:
        producer.close()
    assert read_values(server, topic, "read_committed", expect=3) == [b"c0", b"c1", b"c2"]
    assert read_values(server, topic, "read_uncommitted", expect=4) == [b"c0", b"c1", b"c2", b"a0"]
