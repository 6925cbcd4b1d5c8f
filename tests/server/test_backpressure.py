"""One connection's burst must not stall the others, nor grow the server without bound: a client pipelines
thousands of Metadata requests without reading them (or reading slowly) while a healthy group member
heartbeats on its own connection on a fixed schedule. The member's heartbeats keep being answered promptly,
the server's memory stays flat, and the flooder, once it reads, gets every response in request order.

Also the in-flight bound with a parked request: requests pipelined behind a JoinGroup that waits for a
rebalance are held in order, and past ``--connection-max-in-flight`` not read at all, until it finishes.

Latency bounds here are deliberately generous (p99 under a second on a shared machine; the 100 ms target is
shown by ``bench/flood.py``, docs/benchmarks.md); before the bounds existed the healthy member waited for
the flooder's whole read to be handled, seconds at a time."""

from __future__ import annotations

import collections
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

from tests.server.conftest import ServerProcess
from tests.server.test_groups import SUB
from tests.server.test_process import form_stable_group
from tests.server.wire import API_VERSIONS, HEARTBEAT, JOIN, WireClient, create_topics, encode_request

MakeServer = Callable[..., ServerProcess]
METADATA = 3
FLOOD = 5_000  # Metadata requests pipelined at once: one read of the server's, 30 MB of responses
TOPICS = {f"flood-{i}": 10 for i in range(10)}  # so that each Metadata answer costs something (about 3 KB)
HOLD_S = 1.5  # how long the flooder does not read (or reads slowly) before it reads everything
HEARTBEAT_EVERY_S = 0.01
P99_BOUND_S = 1.0
RSS_GROWTH_BOUND = 100 * 2**20
_SIZE = struct.Struct(">i")


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError(f"closed with {left} of {n} bytes to go")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = _SIZE.unpack(read_exactly(sock, 4))
    return read_exactly(sock, size)


class Heartbeater:
    """A group member's Heartbeat v4 every ``HEARTBEAT_EVERY_S`` on a fixed schedule, on its own connection:
    a heartbeat is sent when due even if earlier ones are unanswered, so a stalled server shows as every late
    answer, not as one slow sample. ``latencies`` are (sent at, seconds to the answer)."""

    def __init__(self, port: int, group: str, member_id: str) -> None:
        self.client = WireClient(port, client_id="healthy", timeout=60)
        self.template = bytearray(
            encode_request(
                HEARTBEAT, 4, 0, "healthy", group_id=group, generation_id=1, member_id=member_id, group_instance_id=None
            )
        )
        self.sent: collections.deque[tuple[int, float]] = collections.deque()
        self.latencies: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, daemon=True), threading.Thread(target=self._receive)]

    def __enter__(self) -> Heartbeater:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self.client.close()

    def _send(self) -> None:
        due, correlation_id = time.monotonic(), 0
        while not self._stop.is_set():
            correlation_id += 1
            _SIZE.pack_into(self.template, 8, correlation_id)
            self.sent.append((correlation_id, time.monotonic()))
            self.client.send_raw(bytes(self.template))
            due += HEARTBEAT_EVERY_S
            time.sleep(max(0.0, due - time.monotonic()))

    def _receive(self) -> None:
        while not (self._stop.is_set() and not self.sent):
            if not self.sent:
                time.sleep(0.001)
                continue
            frame = read_frame(self.client.sock)
            correlation_id, sent_at = self.sent.popleft()
            (got,) = _SIZE.unpack_from(frame)
            error = int.from_bytes(frame[5:7], "big")  # header: correlation id, tagged fields; then error code
            if got != correlation_id or error:
                self.errors.append(f"heartbeat {correlation_id}: correlation id {got}, error {error}")
            self.latencies.append((sent_at, time.monotonic() - sent_at))

    def p99_between(self, start: float, end: float) -> float:
        window = sorted(latency for sent_at, latency in self.latencies if start <= sent_at <= end)
        assert len(window) >= 50, len(window)
        return window[int(0.99 * len(window))]


def metadata_flood(n: int) -> bytes:
    fields = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    return b"".join(encode_request(METADATA, 12, i, "flooder", **fields) for i in range(1, n + 1))


class Flooder:
    """Writes ``payload`` from a thread (its writes block once the server stops reading) and reads the
    responses: nothing (``rate`` 0) or ``rate`` bytes per second until ``drain()``, then all of them."""

    def __init__(self, port: int, payload: bytes, expected: int, rate: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.payload, self.expected, self.rate = payload, expected, rate
        self.correlation_ids: list[int] = []
        self._drain = threading.Event()
        self._writer = threading.Thread(target=self.sock.sendall, args=(payload,), daemon=True)
        self._reader = threading.Thread(target=self._read)

    def start(self) -> None:
        self._writer.start()
        self._reader.start()

    def drain(self) -> None:
        self._drain.set()

    def join(self) -> None:
        self._reader.join(timeout=120)
        self._writer.join(timeout=10)
        self.sock.close()

    def _read(self) -> None:
        while self.rate == 0 and not self._drain.wait(0.01):
            pass
        buffer = bytearray()
        while len(self.correlation_ids) < self.expected:
            if self._drain.is_set():
                chunk = self.sock.recv(1 << 20)
            else:
                chunk = self.sock.recv(int(self.rate * 0.02))
                time.sleep(0.02)
            if not chunk:
                return
            buffer += chunk
            offset = 0
            while len(buffer) - offset >= 8:
                (size,) = _SIZE.unpack_from(buffer, offset)
                if len(buffer) - offset - 4 < size:
                    break
                self.correlation_ids.append(_SIZE.unpack_from(buffer, offset + 4)[0])
                offset += 4 + size
            del buffer[:offset]


@pytest.mark.serial  # latency-bound: run alone, after the parallel run (`make unit`)
@pytest.mark.parametrize("rate", [0, 512 * 1024], ids=["never-reads", "slow-reader"])
def test_a_flood_on_one_connection_does_not_stall_another_clients_heartbeats(
    make_server: MakeServer, rate: int
) -> None:
    server = make_server("--fsync", "never")
    assert server.proc is not None
    with WireClient(server.port, client_id="healthy-setup") as setup:
        create_topics(setup, TOPICS)
        member_id = form_stable_group(setup, "healthy")
    payload = metadata_flood(FLOOD)
    with Heartbeater(server.port, "healthy", member_id) as healthy:
        time.sleep(0.3)
        rss_start = peak = rss(server.proc.pid)
        flooder = Flooder(server.port, payload, FLOOD, rate)
        flood_start = time.monotonic()
        flooder.start()
        while time.monotonic() < flood_start + HOLD_S:
            peak = max(peak, rss(server.proc.pid))
            time.sleep(0.02)
        flooder.drain()
        while flooder._reader.is_alive() and time.monotonic() < flood_start + 120:
            peak = max(peak, rss(server.proc.pid))
            time.sleep(0.02)
        flood_end = time.monotonic()
        flooder.join()
    assert flooder.correlation_ids == list(range(1, FLOOD + 1))  # every response, in request order
    assert not healthy.errors, healthy.errors[:5]
    p99 = healthy.p99_between(flood_start, flood_end)
    assert p99 < P99_BOUND_S, f"healthy heartbeats' p99 {p99 * 1e3:.0f} ms while another connection flooded"
    assert peak - rss_start < RSS_GROWTH_BOUND, f"server RSS grew {(peak - rss_start) / 2**20:.0f} MB"


def test_requests_behind_a_parked_join_wait_at_the_in_flight_bound_and_keep_their_order(
    make_server: MakeServer,
) -> None:
    """A JoinGroup parks; ApiVersions pipelined behind it on the same connection are held (their responses
    must not overtake it) and past ``--connection-max-in-flight`` not even read. When the join completes,
    everything is answered in request order."""
    server = make_server("--connection-max-in-flight", "4")
    join = {
        "group_id": "parked",
        "session_timeout": 30_000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
    }
    with WireClient(server.port, client_id="a") as a, WireClient(server.port, client_id="b", timeout=30) as b:
        a_id = a.call(JOIN, 5, member_id="", rebalance_timeout=30_000, **join).member_id
        assert a.call(JOIN, 5, member_id=a_id, rebalance_timeout=30_000, **join).generation_id == 1
        b_id = b.call(JOIN, 5, member_id="", rebalance_timeout=30_000, **join).member_id
        b.send(JOIN, 5, member_id=b_id, rebalance_timeout=30_000, **join)  # parks until a rejoins
        for _ in range(20):
            b.send(API_VERSIONS, 2)
        time.sleep(0.5)
        b.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            b.sock.recv(1, socket.MSG_PEEK)  # nothing may overtake the parked JoinGroup
        b.sock.settimeout(30)
        a.send(JOIN, 5, member_id=a_id, rebalance_timeout=30_000, **join)
        assert a.receive().generation_id == 2
        joined = b.receive()  # receive() checks the correlation id: the join first, then the rest in order
        assert (joined.error_code, joined.generation_id) == (0, 2)
        for _ in range(20):
            assert b.receive().error_code == 0
