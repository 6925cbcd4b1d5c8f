"""A client that loops OffsetCommit, OffsetFetch and ListOffsets of 10,000 partitions must not stall the others:
another client's ApiVersions round trips keep a bounded p99.

Before these answers were encoded by hand a chunk of partitions at a time (``server/offset_answers.py``), each
held the event loop for its whole request: ListOffsets about 90 ms (950 ms the first time, opening 10,000
partition logs), OffsetFetch about 100 ms, OffsetCommit 270-450 ms. What is left of OffsetCommit is the
coordinator's own work per partition (docs/benchmarks.md, "Server: stalls"), so the bound is generous
(``P99_BOUND_S``): it catches a request blocking the loop for its whole answer again, not a slow machine. Both
clients send raw frames and check only correlation ids."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

from tests.server.conftest import ServerProcess
from tests.server.test_stall import healthy_round_trips, read_frame
from tests.server.wire import WireClient, create_topics, encode_request

#: latency-bound: run alone, after the parallel run (`make unit`)
pytestmark = pytest.mark.serial

MakeServer = Callable[..., ServerProcess]
LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 2, 8, 9
TOPIC, GROUP, PARTITIONS = "offsets-stall", "offsets-stall-group", 10_000
MEASURE_S = 4.0
P99_BOUND_S = 0.25


def heavy_requests() -> list[bytes]:
    """OffsetCommit v9 of every partition (a group without members), OffsetFetch v9 of all of the group's
    offsets, ListOffsets v8 (latest) of every partition; correlation id 0, patched per send."""
    commit = encode_request(
        OFFSET_COMMIT,
        9,
        0,
        "heavy",
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": p,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in range(PARTITIONS)
                ],
            }
        ],
    )
    fetch = encode_request(
        OFFSET_FETCH,
        9,
        0,
        "heavy",
        groups=[{"group_id": GROUP, "member_id": None, "member_epoch": -1, "topics": None}],
        require_stable=False,
    )
    list_offsets = encode_request(
        LIST_OFFSETS,
        8,
        0,
        "heavy",
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(PARTITIONS)
                ],
            }
        ],
    )
    return [commit, fetch, list_offsets]


def heavy_loop(port: int, stop: threading.Event, answered: list[int]) -> None:
    """The heavy requests in turn, one in flight, until ``stop``; the size of each answer."""
    requests = heavy_requests()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        correlation_id = 0
        while not stop.is_set():
            correlation_id += 1
            request = bytearray(requests[correlation_id % len(requests)])
            struct.pack_into(">i", request, 8, correlation_id)  # size, api key, version, then the correlation id
            sock.sendall(request)
            frame = read_frame(sock)
            assert struct.unpack_from(">i", frame)[0] == correlation_id
            answered.append(len(frame))


def test_heavy_offset_requests_do_not_stall_other_clients(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    with WireClient(server.port, timeout=60) as admin:
        create_topics(admin, {TOPIC: PARTITIONS})
    stop = threading.Event()
    answered: list[int] = []
    heavy = threading.Thread(target=heavy_loop, args=(server.port, stop, answered), daemon=True)
    heavy.start()
    try:
        deadline = time.monotonic() + 60
        while len(answered) < 3 and time.monotonic() < deadline:  # each request answered once (logs, offsets)
            time.sleep(0.01)
        assert len(answered) >= 3, "the heavy requests were not answered within 60 s"
        latencies = sorted(healthy_round_trips(server.port, MEASURE_S))
    finally:
        stop.set()
        heavy.join(timeout=120)
    assert len(answered) >= 9, f"the heavy client got only {len(answered)} answers: no load to speak of"
    assert max(answered) > PARTITIONS * 20  # (the fetch and list answers held every partition)
    p99 = latencies[int(len(latencies) * 0.99)]
    assert p99 < P99_BOUND_S, (
        f"healthy ApiVersions p99 {p99 * 1000:.0f} ms (max {latencies[-1] * 1000:.0f} ms, n={len(latencies)}) "
        f"beside {len(answered)} OffsetCommit/OffsetFetch/ListOffsets answers of {PARTITIONS} partitions"
    )
