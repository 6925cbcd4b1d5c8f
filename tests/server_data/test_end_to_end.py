"""End to end: ``regroup serve`` as a subprocess, kafka-python's KafkaProducer and KafkaConsumer (assigned
partitions, no group). 1,000 records into a 3-partition topic and back — also after a kill -9, since an
acknowledged produce (acks=all, fsync policy ``always``) must survive it."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

kafka = pytest.importorskip("kafka")
from kafka.admin import NewTopic  # noqa: E402

TOPIC = "e2e"
COUNT = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir, self.log, self.port = data_dir, log, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "regroup", "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=out)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return
            time.sleep(0.05)
        raise AssertionError(f"regroup serve did not come up:\n{self.log.read_text()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "data", tmp_path / "server.log")
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


def consume_all(bootstrap: str) -> dict[int, list[tuple[int, bytes, bytes]]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([kafka.TopicPartition(TOPIC, p) for p in range(3)])
        got: dict[int, list[tuple[int, bytes, bytes]]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < COUNT and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                got[tp.partition] += [(m.offset, m.key, m.value) for m in messages]
        return got
    finally:
        consumer.close()


def test_produce_and_consume_1000_records_survive_kill_9(server: Server) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 1)])
    finally:
        admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(COUNT):
            producer.send(TOPIC, key=str(i).encode(), value=f"value-{i}".encode(), partition=i % 3)
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)
    expected = {
        p: [(n, str(i).encode(), f"value-{i}".encode()) for n, i in enumerate(range(p, COUNT, 3))] for p in range(3)
    }
    assert consume_all(server.bootstrap) == expected
    server.kill()  # every record was acknowledged: all must be back after a kill -9
    server.start()
    assert consume_all(server.bootstrap) == expected


def test_acks_0_gets_no_response_and_the_connection_keeps_working(server: Server) -> None:
    """Kafka sends no response to Produce with acks=0; answering would break the client's correlation ids."""
    topic = "fire-and-forget"
    admin = kafka.KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, acks=0, linger_ms=0)
    try:
        for i in range(50):
            producer.send(topic, value=f"v{i}".encode(), partition=0)
            producer.flush(timeout=10)  # one request per record: many acks=0 requests on one connection
        # the same connection still answers metadata requests correctly
        assert producer.partitions_for(topic) == {0}
    finally:
        producer.close(timeout=5)
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < 50 and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=500).values():
                values += [m.value for m in messages]
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(50)]
