"""One client's expensive requests must not stall the others: while one connection asks for the Metadata of every
topic (40,000 partitions) in a loop, another client's ApiVersions round trips stay fast, and the stall
watchdog's metrics are served.

Before Metadata was answered from cached encoded entries, each of those answers held the event loop for about
a second on a loaded two-core machine, and the healthy client's p99 was about that. The bound here is
generous (``P99_BOUND_S``): what it catches is the server being blocked for a whole answer, not a slow
machine. Both clients send raw frames and check only correlation ids, so the test process's own CPU (and the
GIL) stays out of the healthy client's measurement."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

from regroup.server.watchdog import LOG_EVERY_S
from tests.server.conftest import ServerProcess, free_port
from tests.server.test_metrics import scrape, value
from tests.server.wire import API_VERSIONS, OFFSET_COMMIT, WireClient, create_topics, encode_request

#: latency-bound: run alone, after the parallel run (`make unit`)
pytestmark = pytest.mark.serial

MakeServer = Callable[..., ServerProcess]
METADATA = 3
TOPICS = {f"stall-{i:02d}": 2_000 for i in range(20)}  # 40,000 partitions
#: how long the healthy client measures while the heavy one loops
MEASURE_S = 4.0
#: between two healthy round trips
PAUSE_S = 0.005
P99_BOUND_S = 0.2


def read_frame(sock: socket.socket) -> bytes:
    """One response frame, read without quadratic copying (Metadata answers here are ~1 MB)."""
    size = struct.unpack(">i", _read(sock, 4))[0]
    return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes:
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        received = sock.recv_into(view[got:], n - got)
        if not received:
            raise ConnectionError(f"connection closed after {got} of {n} bytes")
        got += received
    return bytes(buffer)


def heavy_loop(port: int, stop: threading.Event, answered: list[int]) -> None:
    """All-topics Metadata v12, one in flight, until ``stop``; counts the answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        correlation_id = 0
        while not stop.is_set():
            correlation_id += 1
            sock.sendall(
                encode_request(
                    METADATA,
                    12,
                    correlation_id,
                    "heavy",
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            frame = read_frame(sock)
            assert struct.unpack_from(">i", frame)[0] == correlation_id
            answered.append(len(frame))


def healthy_round_trips(port: int, seconds: float) -> list[float]:
    """ApiVersions v3 round trips for ``seconds``: the latency of each."""
    latencies: list[float] = []
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = time.monotonic() + seconds
        correlation_id = 0
        while time.monotonic() < deadline:
            correlation_id += 1
            request = encode_request(
                API_VERSIONS,
                3,
                correlation_id,
                "healthy",
                client_software_name="regroup-tests",
                client_software_version="1",
            )
            began = time.perf_counter()
            sock.sendall(request)
            frame = read_frame(sock)
            latencies.append(time.perf_counter() - began)
            assert struct.unpack_from(">i", frame)[0] == correlation_id
            time.sleep(PAUSE_S)
    return latencies


def test_a_heavy_metadata_loop_does_not_stall_other_clients(make_server: MakeServer) -> None:
    metrics_port = free_port()
    server = make_server("--fsync", "never", "--metrics-port", str(metrics_port))
    with WireClient(server.port, timeout=60) as admin:
        names = sorted(TOPICS)
        for first in range(0, len(names), 5):  # (at most 10,000 partitions per CreateTopics)
            create_topics(admin, {name: TOPICS[name] for name in names[first : first + 5]})
    stop = threading.Event()
    answered: list[int] = []
    heavy = threading.Thread(target=heavy_loop, args=(server.port, stop, answered), daemon=True)
    heavy.start()
    try:
        deadline = time.monotonic() + 60
        while not answered and time.monotonic() < deadline:  # the loop is running (and the cache is warm)
            time.sleep(0.01)
        assert answered, "no all-topics Metadata answered within 60 s"
        latencies = sorted(healthy_round_trips(server.port, MEASURE_S))
    finally:
        stop.set()
        heavy.join(timeout=120)
    assert len(answered) >= 5, f"the heavy client got only {len(answered)} answers: no load to speak of"
    assert answered[-1] > sum(TOPICS.values()) * 20  # (each answer held every partition)
    p99 = latencies[int(len(latencies) * 0.99)]
    assert p99 < P99_BOUND_S, (
        f"healthy ApiVersions p99 {p99 * 1000:.0f} ms (max {latencies[-1] * 1000:.0f} ms, n={len(latencies)}) "
        f"beside {len(answered)} all-topics Metadata answers"
    )
    text, samples = scrape(metrics_port)
    assert "# HELP regroup_event_loop_stalls_total " in text
    assert "# TYPE regroup_event_loop_longest_turn_seconds gauge" in text
    assert value(samples, "regroup_event_loop_stall_threshold_seconds") == 0.1
    assert 0 < value(samples, "regroup_event_loop_longest_turn_seconds") < 60


def test_a_request_holding_the_loop_is_logged_and_counted_under_its_api(make_server: MakeServer) -> None:
    """An OffsetCommit of 40,000 partitions is one atomic step of the core (every offset validated and written
    as one batch). Its records are planned on the decoding thread, off the loop; a topic naming a partition it
    does not have has its plan narrowed on the loop. What is left on the loop (the narrowing, the checks, the
    apply of 40,000 offsets) took about 34 ms here: well over a 10 ms threshold."""
    metrics_port = free_port()
    server = make_server("--fsync", "never", "--metrics-port", str(metrics_port), "--stall-warn-ms", "10")
    topics = {f"committed-{i}": 10_000 for i in range(4)}  # (at most 10,000 partitions per CreateTopics)
    with WireClient(server.port, timeout=60) as client:
        for name, count in topics.items():
            create_topics(client, {name: count})
        commit = {
            "group_id": "stall-group",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": p,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for p in range(count + 1)  # (partition ``count``: unknown)
                    ],
                }
                for name, count in topics.items()
            ],
        }
        # the watchdog logs one line naming a request a second at most (a line naming none, such as the decoding
        # thread holding the interpreter's lock while it reads the 40,000 partitions, is limited apart): a few
        # commits, each after that second has passed, until one is logged
        logged: list[str] = []
        for _ in range(5):
            time.sleep(LOG_EVERY_S)
            correlation_id = client.send(OFFSET_COMMIT, 9, **commit)
            committed = client.receive()
            codes = {(t.name, p.partition_index): p.error_code for t in committed.topics for p in t.partitions}
            assert {code for (name, p), code in codes.items() if p < topics[name]} == {0}
            assert {code for (name, p), code in codes.items() if p == topics[name]} == {3}
            wanted = f" by OffsetCommit v9 correlation_id={correlation_id} client_id='wire-test' connection="
            logged = [line for line in server.log().splitlines() if "regroup.server.watchdog" in line]
            if any(wanted in line for line in logged):
                break
        else:
            raise AssertionError(logged)
    _, samples = scrape(metrics_port)
    assert value(samples, "regroup_event_loop_stalls_total", api="OffsetCommit") >= 1
    assert value(samples, "regroup_event_loop_longest_turn_seconds") >= 0.01
