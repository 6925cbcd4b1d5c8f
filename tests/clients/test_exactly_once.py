"""Exactly-once consume-transform-produce against ``regroup serve``, with the server killed -9 and restarted
while it runs: a confluent-kafka consumer (read_committed, in a group, no auto-commit) and a transactional
producer that writes each batch's transformed records and the batch's consumed offsets
(``send_offsets_to_transaction``) in one transaction. On an abortable error the transaction is aborted and
the consumer rewound to the group's committed offsets; a fenced producer is replaced. At the end every
source record appears exactly once downstream (read_committed) and the group's committed offsets are the
source's end offsets.

``make test`` runs one kill; ``REGROUP_EOS_KILLS=N`` (``make eos-soak``) runs N kills over more records."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.clients.test_transactions import bootstrap, read_values
from tests.server.conftest import ServerProcess

ck = pytest.importorskip("confluent_kafka")

KILLS = int(os.environ.get("REGROUP_EOS_KILLS", "1"))
PARTITIONS = 3
RECORDS = 300 * KILLS
pytestmark = pytest.mark.timeout(120 + 60 * KILLS, method="thread")  # (a client call blocked in C is not interruptible)


def _consumer(server: ServerProcess, group: str, topic: str) -> Any:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap(server),
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.subscribe([topic])
    return consumer


def _producer(server: ServerProcess, tid: str) -> Any:
    # metadata.recovery.strategy none: librdkafka 2.x re-bootstraps when every broker of the cluster is down
    # (a one-node cluster, killed), and its transactional producer then keeps the group coordinator's old,
    # decommissioned broker handle for send_offsets_to_transaction, which never returns (seen with 2.16.1,
    # whatever the call's timeout). Without re-bootstrapping it reconnects to the same broker, as it should.
    config = {"transactional.id": tid, "linger.ms": 5, "metadata.recovery.strategy": "none"}
    producer = ck.Producer({"bootstrap.servers": bootstrap(server), **config})
    producer.init_transactions(60)
    return producer


def _rewind(consumer: Any) -> None:
    """Back to the group's committed offsets (the start where nothing was committed yet)."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, 30):
        consumer.seek(ck.TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def _committed(consumer: Any, topic: str) -> dict[int, int]:
    tps = [ck.TopicPartition(topic, p) for p in range(PARTITIONS)]
    return {tp.partition: tp.offset for tp in consumer.committed(tps, 30)}


def test_consume_transform_produce_exactly_once_across_kill_9(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", tmp_path / "server.log", ["--initial-rebalance-delay-ms", "0"])
    server.start()
    try:
        _run(server)
    finally:
        server.kill()


def _run(server: ServerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    source, sink = "src-" + uuid.uuid4().hex[:6], "dst-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bootstrap(server)})
    for future in admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(sink, PARTITIONS, 1)]).values():
        future.result(20)
    plain = ck.Producer({"bootstrap.servers": bootstrap(server), "acks": "all", "enable.idempotence": True})
    for i in range(RECORDS):
        plain.produce(source, b"%05d" % i, partition=i % PARTITIONS)
    assert plain.flush(30) == 0
    group, tid = "eos-" + source, "eos-tx-" + source
    consumer = _consumer(server, group, source)
    producer = _producer(server, tid)
    kill_at = [RECORDS * (k + 1) // (KILLS + 1) for k in range(KILLS)]
    done = 0  # records whose transaction committed
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + 90 + 45 * KILLS
    try:
        while time.monotonic() < deadline:
            messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
            if not messages:
                if done >= RECORDS and _committed(consumer, source) == {p: RECORDS // PARTITIONS for p in range(3)}:
                    break
                continue
            try:
                producer.begin_transaction()
                for m in messages:
                    producer.produce(sink, b"out-" + m.value(), partition=m.partition())
                if kill_at and done >= kill_at[0]:
                    kill_at.pop(0)
                    server.restart()  # kill -9 in the middle of the transaction, start again
                    outcomes["killed"] += 1
                if producer.flush(60):
                    raise ck.KafkaException(ck.KafkaError(ck.KafkaError._TIMED_OUT, "undelivered", retriable=True))
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
                )
                producer.commit_transaction(60)
                done += len(messages)
                outcomes["committed"] += 1
            except ck.KafkaException as exc:
                error = exc.args[0]
                if error.fatal():
                    outcomes["fenced"] += 1
                    producer = _producer(server, tid)  # a new session fences the old one and aborts its transaction
                elif error.txn_requires_abort():
                    outcomes["aborted"] += 1
                    producer.abort_transaction(60)
                else:
                    outcomes[f"retried {error.name()}"] += 1
                    try:
                        producer.abort_transaction(60)
                    except ck.KafkaException:
                        producer = _producer(server, tid)
                _rewind(consumer)
        committed = _committed(consumer, source)
    finally:
        consumer.close()
    assert outcomes["killed"] == KILLS, outcomes
    assert committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}, (committed, outcomes)
    out = read_values(server, sink, "read_committed", expect=RECORDS, partitions=PARTITIONS)
    counts = Counter(out)
    assert sorted(counts) == [b"out-%05d" % i for i in range(RECORDS)], outcomes
    assert set(counts.values()) == {1}, ({v: n for v, n in counts.items() if n > 1}, outcomes)
