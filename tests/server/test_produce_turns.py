"""A Produce to thousands of partitions appends over several turns of the event loop (``handlers/data.py``,
``PRODUCE_SLICE_S``) while its connection's later requests wait for it (``Session.hold``), as Kafka handles a
connection's requests one at a time: a second Produce pipelined behind it to the same partitions gets the next
offsets in every partition, and a ListOffsets behind both sees all of their records. Meanwhile another
connection is answered: the Produce does not hold the whole server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from tests.server.conftest import ServerProcess
from tests.server.wire import WireClient, create_topics, encode_request
from tests.server_data.batches import make_batch

PRODUCE, LIST_OFFSETS, API_VERSIONS = 0, 2, 18
#: partitions never written before: about 0.1 ms each to create and append, so a few hundred turns' worth
PARTITIONS = 3_000

MakeServer = Callable[..., ServerProcess]
#: the slowest round trip allowed beside the produces (generous: it catches a Produce holding the loop again)
MAX_ROUND_TRIP_S = 0.15


def send_produce(client: WireClient, topic: str, value: bytes) -> int:
    return client.send(
        PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=60_000,
        topic_data=[
            {
                "name": topic,
                "partition_data": [{"index": p, "records": make_batch([value])} for p in range(PARTITIONS)],
            }
        ],
    )


def test_pipelined_requests_behind_a_long_produce_see_all_of_it(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    with WireClient(server.port, timeout=120) as client:
        create_topics(client, {"produce-turns": PARTITIONS})
        send_produce(client, "produce-turns", b"first")
        send_produce(client, "produce-turns", b"second")
        client.send(
            LIST_OFFSETS,
            7,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": "produce-turns",
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(PARTITIONS)
                    ],
                }
            ],
        )
        first, second, offsets = client.receive(), client.receive(), client.receive()
    for response, base in ((first, 0), (second, 1)):
        parts = response.responses[0].partition_responses
        assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(p, 0, base) for p in range(PARTITIONS)]
    ends = [(p.partition_index, p.error_code, p.offset) for p in offsets.topics[0].partitions]
    assert ends == [(p, 0, 2) for p in range(PARTITIONS)]


@pytest.mark.serial  # latency-bound: run alone, after the parallel run
def test_another_connection_is_answered_while_a_long_produce_appends(make_server: MakeServer) -> None:
    """Another connection's ApiVersions round trips while one connection produces to 3,000 partitions never
    written, three topics in turn: the slowest of them stays far below one Produce's whole work."""
    server = make_server("--fsync", "never")
    with WireClient(server.port, timeout=120) as admin:
        create_topics(admin, {f"produce-stall-{i}": PARTITIONS for i in range(3)})
    round_trips: list[float] = []
    done = threading.Event()

    def healthy() -> None:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            correlation = 0
            while not done.is_set():
                correlation += 1
                began = time.perf_counter()
                sock.sendall(encode_request(API_VERSIONS, 3, correlation, "healthy", **API_VERSIONS_BODY))
                read_frame(sock)
                round_trips.append(time.perf_counter() - began)
                time.sleep(0.002)

    thread = threading.Thread(target=healthy, daemon=True)
    thread.start()
    time.sleep(0.3)
    began = time.perf_counter()
    with WireClient(server.port, timeout=120) as producer:
        for i in range(3):
            send_produce(producer, f"produce-stall-{i}", b"v")
            response = producer.receive()
            assert all(p.error_code == 0 for p in response.responses[0].partition_responses)
    producing_s = time.perf_counter() - began
    done.set()
    thread.join(30)
    assert len(round_trips) > 10
    # in one step each Produce held the loop for about 450 ms here; over turns the slowest round trip was 26 ms
    assert max(round_trips) < MAX_ROUND_TRIP_S, (max(round_trips), producing_s)


API_VERSIONS_BODY = {"client_software_name": "healthy", "client_software_version": "1"}


def read_frame(sock: socket.socket) -> bytes:
    size = int.from_bytes(_read(sock, 4), "big")
    return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("closed")
        chunks += chunk
    return bytes(chunks)
