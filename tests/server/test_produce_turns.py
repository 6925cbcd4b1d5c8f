"""A Produce to thousands of partitions appends over several turns of the event loop (``handlers/data.py``,
``PRODUCE_SLICE_S``) while its connection's later requests wait for it (``Session.hold``), as Kafka handles a
connection's requests one at a time: a second Produce pipelined behind it to the same partitions gets the next
offsets in every partition, and a ListOffsets behind both sees all of their records. Meanwhile another
connection is answered: the Produce does not hold the whole server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.server.conftest import ServerProcess
from tests.server.wire import WireClient, create_topics, encode_request
from tests.server_data.batches import make_batch

PRODUCE, LIST_OFFSETS, API_VERSIONS = 0, 2, 18
#: partitions never written before: about 0.1 ms each to create and append, so a few hundred turns' worth
PARTITIONS = 3_000

MakeServer = Callable[..., ServerProcess]
#: the produces beside the healthy connection: their partitions' files are made off the loop, so in one step each
#: would hold it about 140 ms here (about 28 µs a partition's append)
STALL_PARTITIONS = 5_000
#: the round trips allowed beside them, but one (a pause of the machine's own): twelve times the slowest seen here
#: (8 ms), under a Produce in one step; each of the three Produces in one step would make one round trip that long
MAX_ROUND_TRIP_S = 0.1


def send_produce(client: WireClient, topic: str, value: bytes, partitions: int = PARTITIONS) -> int:
    return client.send(
        PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=60_000,
        topic_data=[
            {
                "name": topic,
                "partition_data": [{"index": p, "records": make_batch([value])} for p in range(partitions)],
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
def test_another_connection_is_answered_while_a_long_produce_appends(make_server: MakeServer, tmp_path: Path) -> None:
    """Another connection's ApiVersions round trips while one connection produces to 5,000 partitions never
    written, three topics in turn: the slowest of them stays far below one Produce's whole work.

    The healthy connection runs in a small process of its own: in this one its round trips would also wait for
    this process's interpreter lock and for its collector, which sees everything the test run collected."""
    server = make_server("--fsync", "never")
    with WireClient(server.port, timeout=120) as admin:
        for i in range(3):  # (one a request: a CreateTopics may ask for 10,000 partitions at most)
            create_topics(admin, {f"produce-stall-{i}": STALL_PARTITIONS})
    stop = tmp_path / "stop"
    frame = encode_request(API_VERSIONS, 3, 1, "healthy", **API_VERSIONS_BODY)
    healthy = subprocess.Popen(
        [sys.executable, "-c", HEALTHY_CLIENT, str(server.port), frame.hex(), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert healthy.stdout is not None
        assert healthy.stdout.readline().strip() == "connected"
        time.sleep(0.3)
        began = time.perf_counter()
        with WireClient(server.port, timeout=120) as producer:
            for i in range(3):
                send_produce(producer, f"produce-stall-{i}", b"v", STALL_PARTITIONS)
                response = producer.receive()
                assert all(p.error_code == 0 for p in response.responses[0].partition_responses)
        producing_s = time.perf_counter() - began
        stop.touch()
        output, _ = healthy.communicate(timeout=30)
    finally:
        healthy.kill()
    assert healthy.returncode == 0
    round_trips = json.loads(output)
    assert len(round_trips) > 10
    slowest = sorted(round_trips)[-3:]
    assert slowest[-2] < MAX_ROUND_TRIP_S, (slowest, producing_s)


API_VERSIONS_BODY = {"client_software_name": "healthy", "client_software_version": "1"}

#: the healthy client: connects to the port (argv 1), sends the frame (argv 2, hex) and reads its answer again and
#: again, 2 ms apart, until the file (argv 3) exists; then prints its round trips in seconds as JSON
HEALTHY_CLIENT = """
import json, os, socket, sys, time

def read(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)

port, frame, stop = int(sys.argv[1]), bytes.fromhex(sys.argv[2]), sys.argv[3]
round_trips = []
with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
    print("connected", flush=True)
    while not os.path.exists(stop):
        began = time.perf_counter()
        sock.sendall(frame)
        read(sock, int.from_bytes(read(sock, 4), "big"))
        round_trips.append(time.perf_counter() - began)
        time.sleep(0.002)
print(json.dumps(round_trips))
"""
