"""Many partitions against a real ``regroup serve`` whose open-file limit is 256 (set in the child with
``setrlimit``): CreateTopics over Kafka's 10,000 partitions per request or over the total is POLICY_VIOLATION,
over the per-topic limit INVALID_PARTITIONS (auto-creation too), and creates nothing; 22,000 partitions are
created, 600 of them produced to, and still served — new connections accepted — before and after a kill -9 and
restart."""

from __future__ import annotations

import os
import resource
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServerProcess, assert_clean_log
from tests.server.wire import CREATE_TOPICS, WireClient
from tests.server_data.batches import make_batch

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
INVALID_PARTITIONS, POLICY_VIOLATION = 37, 44
FD_LIMIT = 256
BIG = 9_000  # per topic: under Kafka's 10,000 partitions per CreateTopics


class LimitedServer(ServerProcess):
    """``regroup serve`` with ``RLIMIT_NOFILE`` lowered to :data:`FD_LIMIT` before it runs."""

    def preexec(self) -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    def open_fds(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LimitedServer]:
    limits = ["--max-partitions-per-topic", str(BIG), "--max-partitions", "22000", "--fsync", "never"]
    srv = LimitedServer(tmp_path / "data", tmp_path / "server.log", limits)
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()
    assert_clean_log(srv)


def create(client: WireClient, name: str, partitions: int, validate_only: bool = False) -> Any:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
    return client.call(CREATE_TOPICS, 7, topics=[topic], timeout=5000, validate_only=validate_only).topics[0]


def produce(client: WireClient, topic: str, partitions: list[int], value: bytes) -> list[tuple[int, int]]:
    """``(error code, base offset)`` per partition of one acks=-1 Produce v9."""
    data = [{"index": p, "records": make_batch([value + b"%d" % p])} for p in partitions]
    response = client.call(
        PRODUCE, 9, transactional_id=None, acks=-1, timeout=30_000, topic_data=[{"name": topic, "partition_data": data}]
    )
    return [(r.error_code, r.base_offset) for r in response.responses[0].partition_responses]


def topic_names(client: WireClient) -> set[str]:
    listed = client.call(METADATA, 1, topics=None)
    return {t.name for t in listed.topics}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts the server's descriptors through /proc")
def test_many_partitions_under_a_low_descriptor_limit(server: LimitedServer) -> None:
    with WireClient(server.port, timeout=30) as client:
        over = create(client, "big", BIG + 1)
        assert (over.error_code, over.num_partitions) == (INVALID_PARTITIONS, -1)
        assert f"limit of {BIG} per topic" in over.error_message
        batch = create(client, "batch", 10_001)  # Kafka's cap on one request comes first
        assert batch.error_code == POLICY_VIOLATION and "Excessively large" in batch.error_message
        assert create(client, "big", BIG).error_code == 0
        assert create(client, "big2", BIG).error_code == 0
        total = create(client, "more", 4001)
        assert total.error_code == POLICY_VIOLATION and "limit of 22000" in total.error_message
        assert create(client, "more", 4000, validate_only=True).error_code == 0
        assert create(client, "more", 4000).error_code == 0  # exactly at the total
        auto = client.call(METADATA, 4, topics=[{"name": "auto"}], allow_auto_topic_creation=True)
        assert [(t.name, t.error_code) for t in auto.topics] == [("auto", POLICY_VIOLATION)]
        assert topic_names(client) == {"big", "big2", "more"}
        described = client.call(METADATA, 12, topics=[{"name": "big", "topic_id": None}],
                                allow_auto_topic_creation=False, include_topic_authorized_operations=False)  # fmt: skip
        assert len(described.topics[0].partitions) == BIG
        spread = list(range(0, BIG, 15))[:600]  # more partitions than segment files may stay open
        for i in range(0, len(spread), 300):
            assert produce(client, "big", spread[i : i + 300], b"first-") == [(0, 0)] * 300
        peers = [WireClient(server.port) for _ in range(40)]  # accept() still has descriptors to give
        try:
            assert all(peer.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1").error_code == 0
                       for peer in peers)  # fmt: skip
        finally:
            for peer in peers:
                peer.close()
        assert server.open_fds() < FD_LIMIT // 2
    server.kill(signal.SIGKILL)
    server.start()
    with WireClient(server.port, timeout=30) as client:
        assert topic_names(client) == {"big", "big2", "more"}
        assert produce(client, "big", spread[:300], b"again-") == [(0, 1)] * 300
        fetched = client.call(
            FETCH,
            11,
            replica_id=-1,
            max_wait=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[{"topic": "big", "partitions": [{"partition": spread[-1], "current_leader_epoch": -1,
                     "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            forgotten_topics_data=[],
            rack_id="",
        )  # fmt: skip
        part = fetched.responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 1 and b"first-%d" % spread[-1] in part.records
    assert server.open_fds() < FD_LIMIT // 2
