"""Load generator for ``regroup serve``: many protocol-level group members in one asyncio process.

Usage::

    .venv/bin/python bench/server.py                       # both cases, --fsync always then never
    .venv/bin/python bench/server.py --fsync always --join-repeats 1 --hb-seconds 5
    .venv/bin/python bench/server.py --profile             # also: the heartbeat case under cProfile
    .venv/bin/python bench/server.py --fsync '' --profile --hb-layouts 1000:10   # only the profiled run
    .venv/bin/python bench/server.py --json /tmp/bench-server.json
    .venv/bin/python bench/server.py --server-src /tmp/old-src      # the server from another source tree
    .venv/bin/python bench/server.py --before /tmp/base/src --rounds 3 --join-repeats 1   # before/after, alternated

For each fsync policy the harness starts ``python -m regroup serve`` as a subprocess (loopback, a free port
chosen by the server with ``--port 0``, a temporary data directory, ``--initial-rebalance-delay-ms 0``) and
drives it over the Kafka wire protocol: requests are encoded and responses decoded with kio, the way
``tests/server/wire.py`` does, over plain asyncio connections. No Kafka client library is involved.

**Case "join": one 1,000-member classic rebalance.** Every member has its own connection (as a Kafka
consumer has) and speaks JoinGroup v9 / SyncGroup v5, the versions a current Java client sends.

1. The seed member (member 0) forms the group alone: JoinGroup without id → MEMBER_ID_REQUIRED, JoinGroup
   with the id → generation 1, SyncGroup → Stable.
2. Members 1..999 do the first half of KIP-394's two-phase join (MEMBER_ID_REQUIRED; the server remembers
   them as pending members).
3. The seed rejoins (the group goes PreparingRebalance and waits for the pending members), then members
   1..998 rejoin with their ids and are parked. The harness polls DescribeGroups until 999 members are in
   the group, so everyone but the last member is parked before the clock starts.
4. **Clock starts** right before the last member's JoinGroup is written. That join completes the join phase;
   all 1,000 JoinGroup responses go out (the leader's with all 1,000 subscriptions). Each follower sends its
   SyncGroup as soon as it has its JoinGroup response; the leader decodes the 1,000 real
   ``ConsumerProtocolSubscription`` blobs (10 topics x 1,000 partitions), runs regroup's ``range`` assignor,
   encodes 1,000 ``ConsumerProtocolAssignment`` blobs and sends its SyncGroup. The server appends (and under
   ``always`` fsyncs) the group's metadata record and releases every SyncGroup. **Clock stops** when the last
   SyncGroup response has been read. The leader's assignment time is reported separately (it is client work,
   not the server's), as are the server's and this process's CPU seconds inside the window.

Afterwards every assignment is decoded and checked: each of the 10,000 partitions assigned exactly once.
With ``--join-repeats N`` the case runs N times on fresh groups (``bench-join-1`` ...); every group but the
last leaves with one batched LeaveGroup. The median is reported.

**Case "heartbeat": a Stable group heartbeating flat out.** The last join group's members (generation 2)
send Heartbeat v4 as fast as they can for ``--hb-seconds`` after ``--hb-warmup`` seconds not counted: each
member keeps exactly one heartbeat in flight and sends the next one as soon as the answer arrives (Kafka
allows several in-flight requests per connection, so members sharing a connection pipeline). Layouts
``MEMBERS:CONNECTIONS`` (``--hb-layouts``) spread the members round-robin over the connections:
``1000:1000`` is Kafka's one connection per member, ``1000:10`` pools 100 members per connection, ``100:100``
shows the latency with a tenth of the requests in flight. Reported:
responses per second inside the window, latency from writing the request to reading its response (p50, p99,
max), and the CPU the server and this process used. The requests are kio-encoded once per member and only
the correlation id is patched per send; the first response on each connection is decoded with kio in full,
the others are checked by correlation id and error code bytes, so the load generator stays cheap.

``--profile`` adds one more server run (``--fsync always``) under cProfile: the server is started through
this script (``--serve-profiled``), which installs SIGUSR1/SIGUSR2 handlers that start and stop the profiler;
the harness sends them around one heartbeat run (the first layout) and prints the server's top functions.
``--profile-join`` does the same around one join window; ``--profile-out FILE`` keeps the stats files.

``--before DIR --rounds N`` compares two servers in one run: for each policy, N rounds of the server from
``DIR`` ("before") and this run's server ("after"), alternated in the order before, after, after, before,
... so that a drift in the machine's load hits both alike; the summary adds the after/before ratios of the
medians (throughput, p99, server CPU per request).

``--server-src DIR`` runs the server from another copy of the ``regroup`` package (put first on its
``PYTHONPATH``), for before/after comparisons of server changes on the same machine.

Bounds: every phase has a deadline (``PHASE_TIMEOUT_S``), heartbeats stop at the end of their window or after
``--hb-max-requests``, the server is asked to stop with SIGTERM and killed if it has not stopped after
``STOP_TIMEOUT_S``; only 127.0.0.1 is used. Run one benchmark process at a time: the load generator and the
server share the machine's cores, and a second benchmark alongside would distort both.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import cProfile
import functools
import io
import json
import os
import platform
import pstats
import re
import resource
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from regroup.assignors.range import RangeAssignor
from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.server.entities import build

JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE = 11, 12, 13, 14, 15
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V, DESCRIBE_V = 9, 5, 4, 5, 5
NONE, MEMBER_ID_REQUIRED = 0, 79
HOST = "127.0.0.1"
CLIENT_ID = "bench"
PROTOCOL_TYPE, PROTOCOL_NAME = "consumer", "range"
#: Long enough that no member expires while the harness works on another group or layout.
SESSION_MS = REBALANCE_MS = 300_000
TOPICS = {f"bench-topic-{j}": 1_000 for j in range(10)}
PHASE_TIMEOUT_S = 120.0
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
TARGET_JOIN_S = 0.5
TARGET_HB_PER_S = 30_000.0
_CORRELATION_OFFSET = 8  # size (4) + api key (2) + api version (2)
_HB_V4_ERROR = slice(5, 7)  # in a Heartbeat v4 response frame: correlation id (4), tagged fields (1), error code
_SIZE = struct.Struct(">i")
_SERVING = re.compile(rb"serving host=\S+ port=(\d+)")


# ---------------------------------------------------------------------------------------------------------------
# wire


@functools.cache
def _request_codec(api_key: int, version: int) -> tuple[type[Any], Any, Any]:
    request_cls = load_request_schema(api_key, version)
    header_cls = request_cls.__header_schema__
    return request_cls, entity_writer(header_cls), entity_writer(request_cls)


@functools.cache
def _response_codec(api_key: int, version: int) -> tuple[Any, Any]:
    response_cls = load_response_schema(api_key, version)
    return entity_reader(response_cls.__header_schema__), entity_reader(response_cls)


def encode_request(api_key: int, version: int, correlation_id: int, **fields: Any) -> bytes:
    """The framed request: the header of the version's schema, then the body built from ``fields``."""
    request_cls, write_header, write_body = _request_codec(api_key, version)
    header = request_cls.__header_schema__(
        request_api_key=i16(api_key),
        request_api_version=i16(version),
        correlation_id=i32(correlation_id),
        client_id=CLIENT_ID,
    )
    buffer = io.BytesIO()
    write_header(buffer, header)
    write_body(buffer, build(request_cls, **fields))
    payload = buffer.getvalue()
    return _SIZE.pack(len(payload)) + payload


def decode_response(api_key: int, version: int, frame: bytes) -> Any:
    read_header, read_body = _response_codec(api_key, version)
    _, used = read_header(frame, 0)
    body, _ = read_body(frame, used)
    return body


OnFrame = Callable[[bytes, Any], None]


class WireError(Exception):
    """The server broke the protocol (wrong correlation id, closed the connection, an unexpected error code)."""


class KafkaConnection(asyncio.Protocol):
    """One client connection: requests go out in order, responses are matched to them by order and checked by
    correlation id. ``on_frame(frame, context)`` gets each response frame (b"" if the connection is lost)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._pending: collections.deque[tuple[int, OnFrame, Any]] = collections.deque()
        self._next_id = 0
        self._out: list[bytes | bytearray] | None = None
        self.error: BaseException | None = None

    @classmethod
    async def open(cls, port: int) -> KafkaConnection:
        _, protocol = await asyncio.get_running_loop().create_connection(cls, HOST, port)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.error is None:
            self.error = exc or WireError("the server closed the connection")
        pending, self._pending = self._pending, collections.deque()
        for _, on_frame, context in pending:
            on_frame(b"", context)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        offset, end_of_data = 0, len(buffer)
        self._out = []  # requests sent from the callbacks below go out in one write
        try:
            while end_of_data - offset >= 4:
                (size,) = _SIZE.unpack_from(buffer, offset)
                end = offset + 4 + size
                if end > end_of_data:
                    break
                frame = bytes(buffer[offset + 4 : end])
                offset = end
                correlation_id, on_frame, context = self._pending.popleft()
                if _SIZE.unpack_from(frame)[0] != correlation_id:
                    self.error = WireError(f"expected correlation id {correlation_id}, got {frame[:4].hex()}")
                    assert self.transport is not None
                    self.transport.close()
                    return
                on_frame(frame, context)
        finally:
            if offset:
                del buffer[:offset]
            out, self._out = self._out, None
            if out and self.transport is not None:
                self.transport.write(b"".join(out))

    def next_correlation_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def send(self, data: bytes | bytearray, correlation_id: int, on_frame: OnFrame, context: Any) -> None:
        if self.error is not None or self.transport is None:
            on_frame(b"", context)
            return
        self._pending.append((correlation_id, on_frame, context))
        if self._out is not None:
            self._out.append(data)
        else:
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _request(conn: KafkaConnection, api_key: int, version: int, **fields: Any) -> asyncio.Future[Any]:
    """Send a kio-encoded request on ``conn``; the future resolves to the decoded response body."""
    correlation_id = conn.next_correlation_id()
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    data = encode_request(api_key, version, correlation_id, **fields)

    def on_frame(frame: bytes, _: Any) -> None:
        if future.done():
            return
        if not frame:
            future.set_exception(WireError("connection lost before the response"))
            return
        try:
            future.set_result(decode_response(api_key, version, frame))
        except Exception as exc:
            future.set_exception(exc)

    conn.send(data, correlation_id, on_frame, None)
    return future


async def bounded(awaitable: Any, what: str, timeout: float = PHASE_TIMEOUT_S) -> Any:
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except TimeoutError:
        raise WireError(f"{what}: no answer within {timeout:.0f}s") from None


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise WireError(what)


# ---------------------------------------------------------------------------------------------------------------
# the server process


class ServerProcess:
    """``regroup serve`` on a port of its choosing, with a temporary data directory; ``stop()`` always cleans up."""

    def __init__(
        self, fsync: str, data_root: str | None, profile_out: Path | None = None, source: str | None = None
    ) -> None:
        self.fsync = fsync
        self.profile_out = profile_out
        self.source = source
        self.dir = Path(tempfile.mkdtemp(prefix="regroup-bench-server-", dir=data_root))
        self.log_path = self.dir / "server.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        serve = [
            "serve",
            "--host",
            HOST,
            "--port",
            "0",
            "--data-dir",
            str(self.dir / "data"),
            "--fsync",
            self.fsync,
            "--initial-rebalance-delay-ms",
            "0",
            "--stats-interval",
            "3600",
        ]
        if self.profile_out is not None:
            return [sys.executable, str(Path(__file__).resolve()), "--serve-profiled", str(self.profile_out), *serve]
        return [sys.executable, "-m", "regroup", *serve]

    def start(self) -> None:
        env = dict(os.environ)
        if self.source is not None:  # another copy of the regroup package, ahead of the installed one
            env["PYTHONPATH"] = os.pathsep.join(p for p in (self.source, env.get("PYTHONPATH")) if p)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            match = _SERVING.search(self.log_path.read_bytes())
            if match:
                self.port = int(match.group(1))
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"regroup serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"regroup serve did not start within {START_TIMEOUT_S:.0f}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def cpu_seconds(self) -> float:
        """User + system CPU the server process used so far (its own threads included)."""
        user, system = self.cpu_split()
        return user + system

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) CPU seconds the server process used so far, its own threads included: the system part is
        the kernel's work for it (sockets, files, fsync), the user part the interpreter's."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, keep: bool = False) -> int | None:
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait(timeout=STOP_TIMEOUT_S)
            self.proc = None
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        return code


def serve_profiled(out: str, argv: list[str]) -> int:
    """Child mode: ``regroup serve`` with cProfile switched on by SIGUSR1 and off (and saved to ``out``) by
    SIGUSR2. Only the event loop thread is profiled; the log appends run on a worker thread."""
    from regroup.cli.main import main as regroup_main

    profiler = cProfile.Profile()

    def start(signum: int, frame: Any) -> None:
        profiler.enable()

    def stop(signum: int, frame: Any) -> None:
        profiler.disable()
        profiler.dump_stats(out + ".tmp")
        os.replace(out + ".tmp", out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return regroup_main(argv)


# ---------------------------------------------------------------------------------------------------------------
# case "join"


@dataclass(slots=True)
class JoinRun:
    group: str
    members: int
    seconds: float  # last JoinGroup written -> last SyncGroup response read
    join_phase_s: float  # last JoinGroup written -> last JoinGroup response read
    leader_assign_s: float  # the leader's decode + range assign + encode (client work)
    leader_sync_sent_s: float  # last JoinGroup written -> leader's SyncGroup written
    server_cpu_s: float
    client_cpu_s: float
    partitions: int


@dataclass(slots=True)
class JoinedGroup:
    group: str
    generation: int
    member_ids: list[str]
    leader_id: str


def _join_fields(group: str, member_id: str, metadata: bytes) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": SESSION_MS,
        "rebalance_timeout": REBALANCE_MS,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": PROTOCOL_TYPE,
        "protocols": [{"name": PROTOCOL_NAME, "metadata": metadata}],
        "reason": None,
    }


def _sync_fields(group: str, generation: int, member_id: str, assignments: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": PROTOCOL_TYPE,
        "protocol_name": PROTOCOL_NAME,
        "assignments": assignments,
    }


def leader_assignments(members: Sequence[Any]) -> list[dict[str, Any]]:
    """What a Java leader does with its JoinGroup response: decode each member's subscription, assign with
    ``range``, encode each member's assignment."""
    spec = GroupSpec(
        topics=TOPICS,
        members={
            m.member_id: MemberSubscription(topics=decode_subscription(m.metadata).topics, instance_id=None)
            for m in members
        },
    )
    assignment = RangeAssignor().assign(spec)
    return [
        {
            "member_id": member_id,
            "assignment": encode_assignment(
                ConsumerProtocolAssignment(partitions={t: tuple(ps) for t, ps in assignment.get(member_id, {}).items()})
            ),
        }
        for member_id in spec.members
    ]


async def describe(admin: KafkaConnection, group: str) -> Any:
    response = await bounded(
        _request(admin, DESCRIBE, DESCRIBE_V, groups=[group], include_authorized_operations=False), "DescribeGroups"
    )
    return response.groups[0]


async def join_case(
    server: ServerProcess,
    conns: list[KafkaConnection],
    admin: KafkaConnection,
    group: str,
    around_window: Callable[[bool], Awaitable[None]] | None = None,
) -> tuple[JoinRun, JoinedGroup]:
    """One 1,000-member rebalance (see the module doc); members[i] talks over conns[i]. ``around_window(True)``
    is awaited right before the measured window, ``around_window(False)`` right after it (profiling)."""
    n = len(conns)
    metadata = encode_subscription(ConsumerProtocolSubscription(topics=tuple(TOPICS)))

    def join(i: int, member_id: str) -> asyncio.Future[Any]:
        return _request(conns[i], JOIN, JOIN_V, **_join_fields(group, member_id, metadata))

    # 1. the seed forms the group alone (initial rebalance delay 0)
    first = await bounded(join(0, ""), "seed JoinGroup")
    expect(first.error_code == MEMBER_ID_REQUIRED, f"seed: expected MEMBER_ID_REQUIRED, got {first.error_code}")
    seed_id = first.member_id
    joined = await bounded(join(0, seed_id), "seed JoinGroup with id")
    expect(joined.error_code == NONE and joined.leader == seed_id, f"seed join failed: {joined}")
    seed_sync = _sync_fields(group, joined.generation_id, seed_id, leader_assignments(joined.members))
    synced = await bounded(_request(conns[0], SYNC, SYNC_V, **seed_sync), "seed SyncGroup")
    expect(synced.error_code == NONE, f"seed sync failed: {synced.error_code}")

    # 2. everyone else: the first half of the two-phase join
    firsts = await bounded(asyncio.gather(*(join(i, "") for i in range(1, n))), "first JoinGroups")
    expect(all(f.error_code == MEMBER_ID_REQUIRED for f in firsts), "expected MEMBER_ID_REQUIRED for everyone")
    member_ids = [seed_id, *(f.member_id for f in firsts)]

    # 3. the seed and members 1..n-2 rejoin with their ids and park
    join_done: dict[int, float] = {}
    sync_done: dict[int, float] = {}
    assignments: dict[str, bytes] = {}
    leader_times: dict[str, float] = {}
    generation: list[int] = []

    async def member(i: int, join_future: asyncio.Future[Any]) -> None:
        response = await join_future
        join_done[i] = time.perf_counter()
        expect(response.error_code == NONE, f"member {i}: JoinGroup error {response.error_code}")
        given: list[dict[str, Any]] = []
        if response.leader == response.member_id:
            started = time.perf_counter()
            given = leader_assignments(response.members)
            leader_times["assign"] = time.perf_counter() - started
            leader_times["sent"] = time.perf_counter()
            generation.append(response.generation_id)
        fields = _sync_fields(group, response.generation_id, member_ids[i], given)
        sync = await _request(conns[i], SYNC, SYNC_V, **fields)
        sync_done[i] = time.perf_counter()
        expect(sync.error_code == NONE, f"member {i}: SyncGroup error {sync.error_code}")
        assignments[member_ids[i]] = sync.assignment

    tasks = [asyncio.ensure_future(member(0, join(0, seed_id)))]
    tasks += [asyncio.ensure_future(member(i, join(i, member_ids[i]))) for i in range(1, n - 1)]
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while True:
        described = await describe(admin, group)
        if described.group_state == "PreparingRebalance" and len(described.members) == n - 1:
            break
        expect(time.monotonic() < deadline, f"members did not park: {described.group_state}, {len(described.members)}")
        failed = [t for t in tasks if t.done()]
        expect(not failed, f"a member finished before the join completed: {failed[:1]}")
        await asyncio.sleep(0.02)

    # 4. the measured window
    if around_window is not None:
        await around_window(True)
    server_cpu0, client_cpu0 = server.cpu_seconds(), time.process_time()
    t0 = time.perf_counter()
    tasks.append(asyncio.ensure_future(member(n - 1, join(n - 1, member_ids[n - 1]))))
    await bounded(asyncio.gather(*tasks), "the rebalance")
    t_end = max(sync_done.values())
    server_cpu, client_cpu = server.cpu_seconds() - server_cpu0, time.process_time() - client_cpu0
    if around_window is not None:
        await around_window(False)

    # checks: everyone synced generation 2, every partition assigned exactly once
    expect(len(sync_done) == n and generation == [2], f"{len(sync_done)} members synced, generation {generation}")
    seen: collections.Counter[tuple[str, int]] = collections.Counter()
    for blob in assignments.values():
        for topic, partitions in decode_assignment(blob).partitions.items():
            seen.update((topic, p) for p in partitions)
    total = sum(TOPICS.values())
    expect(len(seen) == total and max(seen.values()) == 1, f"bad assignment: {len(seen)} of {total} partitions")
    run = JoinRun(
        group=group,
        members=n,
        seconds=t_end - t0,
        join_phase_s=max(join_done.values()) - t0,
        leader_assign_s=leader_times["assign"],
        leader_sync_sent_s=leader_times["sent"] - t0,
        server_cpu_s=server_cpu,
        client_cpu_s=client_cpu,
        partitions=total,
    )
    return run, JoinedGroup(group, generation[0], member_ids, seed_id)


async def leave_all(conn: KafkaConnection, joined: JoinedGroup) -> None:
    members = [{"member_id": m, "group_instance_id": None, "reason": "bench"} for m in joined.member_ids]
    response = await bounded(_request(conn, LEAVE, LEAVE_V, group_id=joined.group, members=members), "LeaveGroup")
    expect(response.error_code == NONE, f"LeaveGroup error {response.error_code}")


# ---------------------------------------------------------------------------------------------------------------
# case "heartbeat"


@dataclass(slots=True)
class HeartbeatRun:
    members: int
    connections: int
    seconds: float
    responses: int
    per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    errors: int
    server_cpu_s: float
    client_cpu_s: float
    stopped_by: str


class HeartbeatDriver:
    """Every member keeps one heartbeat in flight until ``stop_ns``; responses read inside
    [``window_from_ns``, ``stop_ns``] are counted and their latencies kept."""

    def __init__(
        self,
        templates: list[bytes],
        conns: list[KafkaConnection],
        max_requests: int,
        api: tuple[int, int] = (HEARTBEAT, HEARTBEAT_V),
        error_at: slice = _HB_V4_ERROR,
    ) -> None:
        self.templates = templates
        self.api = api  # (api key, version) of the heartbeat, for decoding the first answer per connection
        self.error_at = error_at  # where the error code sits in a response frame
        self.conns = conns
        self.max_requests = max_requests
        self.sent = 0
        self.latencies_ns: list[int] = []
        self.errors: collections.Counter[int] = collections.Counter()
        self.checked: set[int] = set()
        self.window_from_ns = 0
        self.stop_ns = 0
        self.in_flight = 0
        self.drained: asyncio.Future[None] | None = None
        self.stopped_by = "time"

    def fire(self, member: int) -> None:
        conn = self.conns[member % len(self.conns)]
        correlation_id = conn.next_correlation_id()
        data = bytearray(self.templates[member])
        struct.pack_into(">i", data, _CORRELATION_OFFSET, correlation_id)
        self.sent += 1
        self.in_flight += 1
        conn.send(data, correlation_id, self.on_frame, (member, time.perf_counter_ns()))

    def on_frame(self, frame: bytes, context: tuple[int, int]) -> None:
        member, sent_ns = context
        now = time.perf_counter_ns()
        self.in_flight -= 1
        if not frame:
            self.errors[-1] += 1
        else:
            conn_index = member % len(self.conns)
            if conn_index not in self.checked:  # the first answer on each connection: decode it in full
                self.checked.add(conn_index)
                body = decode_response(*self.api, frame)
                if body.error_code != NONE:
                    self.errors[int(body.error_code)] += 1
                expect(frame[self.error_at] == int(body.error_code).to_bytes(2, "big"), "error code offset")
            elif frame[self.error_at] != b"\x00\x00":
                self.errors[int.from_bytes(frame[self.error_at], "big", signed=True)] += 1
            if self.window_from_ns <= now <= self.stop_ns:
                self.latencies_ns.append(now - sent_ns)
        if now < self.stop_ns and self.sent < self.max_requests and frame:
            self.fire(member)
        else:
            if self.sent >= self.max_requests:
                self.stopped_by = "count"
            if self.in_flight == 0 and self.drained is not None and not self.drained.done():
                self.drained.set_result(None)


async def heartbeat_case(
    server: ServerProcess,
    joined: JoinedGroup,
    members: int,
    connections: int,
    seconds: float,
    warmup: float,
    max_requests: int,
    templates: list[bytes] | None = None,
    api: tuple[int, int] = (HEARTBEAT, HEARTBEAT_V),
    error_at: slice = _HB_V4_ERROR,
) -> HeartbeatRun:
    """Heartbeat v4 from ``joined``'s members, or the pre-encoded requests ``templates`` (one per member, of
    the heartbeat ``api``, error code at ``error_at`` in a response frame)."""
    ids = joined.member_ids[:members]
    conns = [await bounded(KafkaConnection.open(server.port), "connect") for _ in range(connections)]
    try:
        templates = (
            templates[:members]
            if templates is not None
            else [
                encode_request(
                    HEARTBEAT,
                    HEARTBEAT_V,
                    0,
                    group_id=joined.group,
                    generation_id=joined.generation,
                    member_id=member_id,
                    group_instance_id=None,
                )
                for member_id in ids
            ]
        )
        return await heartbeat_window(server, templates, conns, seconds, warmup, max_requests, api, error_at)
    finally:
        for conn in conns:
            conn.close()


async def heartbeat_window(
    server: Any,
    templates: list[bytes],
    conns: list[KafkaConnection],
    seconds: float,
    warmup: float,
    max_requests: int,
    api: tuple[int, int] = (HEARTBEAT, HEARTBEAT_V),
    error_at: slice = _HB_V4_ERROR,
) -> HeartbeatRun:
    """One measured window: each member (``templates``, one request each) heartbeats flat out over ``conns``,
    opened already; ``server`` tells its CPU seconds (``cpu_seconds()``)."""
    driver = HeartbeatDriver(templates, conns, max_requests, api, error_at)
    loop = asyncio.get_running_loop()
    driver.drained = loop.create_future()
    start = time.perf_counter_ns()
    driver.window_from_ns = start + int(warmup * 1e9)
    driver.stop_ns = driver.window_from_ns + int(seconds * 1e9)
    for member in range(len(templates)):
        driver.fire(member)
    await asyncio.sleep(warmup)
    server_cpu0, client_cpu0 = server.cpu_seconds(), time.process_time()
    await asyncio.sleep(max(0.0, (driver.stop_ns - time.perf_counter_ns()) / 1e9))
    server_cpu, client_cpu = server.cpu_seconds() - server_cpu0, time.process_time() - client_cpu0
    await bounded(driver.drained, "heartbeats in flight at the end")
    window_s = (min(driver.stop_ns, time.perf_counter_ns()) - driver.window_from_ns) / 1e9
    latencies = sorted(driver.latencies_ns)
    expect(bool(latencies), "no heartbeat answered inside the window")
    expect(not driver.errors, f"heartbeat errors (code: count): {dict(driver.errors)}")

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1e6

    return HeartbeatRun(
        members=len(templates),
        connections=len(conns),
        seconds=window_s,
        responses=len(latencies),
        per_second=len(latencies) / window_s,
        p50_ms=pct(0.50),
        p99_ms=pct(0.99),
        max_ms=latencies[-1] / 1e6,
        mean_ms=statistics.fmean(latencies) / 1e6,
        errors=sum(driver.errors.values()),
        server_cpu_s=server_cpu,
        client_cpu_s=client_cpu,
        stopped_by=driver.stopped_by,
    )


# ---------------------------------------------------------------------------------------------------------------
# runs


@dataclass(slots=True)
class PolicyResult:
    fsync: str
    tree: str = "after"
    joins: list[JoinRun] = field(default_factory=list)
    heartbeats: list[HeartbeatRun] = field(default_factory=list)


def parse_layouts(text: str) -> list[tuple[int, int]]:
    layouts = []
    for part in text.split(","):
        members, _, connections = part.partition(":")
        layouts.append((int(members), int(connections or members)))
    return layouts


async def open_members(port: int, n: int) -> list[KafkaConnection]:
    conns: list[KafkaConnection] = []
    for start in range(0, n, 100):  # in waves: the listen backlog is finite
        wave = [KafkaConnection.open(port) for _ in range(start, min(n, start + 100))]
        conns += await bounded(asyncio.gather(*wave), "connect")
    return conns


async def run_policy(
    args: argparse.Namespace, server: ServerProcess, fsync: str, report: Callable[[str], None]
) -> PolicyResult:
    result = PolicyResult(fsync)
    admin = await bounded(KafkaConnection.open(server.port), "connect")
    joined: JoinedGroup | None = None
    for r in range(1, args.join_repeats + 1):
        conns = await open_members(server.port, args.members)
        try:
            run, joined_now = await join_case(server, conns, admin, f"bench-join-{r}")
        finally:
            for conn in conns:
                conn.close()
        result.joins.append(run)
        report(
            f"  join {r}: {run.seconds * 1e3:.0f} ms (join phase {run.join_phase_s * 1e3:.0f} ms, leader assign "
            f"{run.leader_assign_s * 1e3:.0f} ms, leader SyncGroup sent at {run.leader_sync_sent_s * 1e3:.0f} ms; "
            f"cpu server {run.server_cpu_s:.2f} s, client {run.client_cpu_s:.2f} s)"
        )
        if joined is not None:
            await leave_all(admin, joined)
        joined = joined_now
    assert joined is not None
    for members, connections in parse_layouts(args.hb_layouts):
        hb = await heartbeat_case(
            server, joined, members, connections, args.hb_seconds, args.hb_warmup, args.hb_max_requests
        )
        result.heartbeats.append(hb)
        report(f"  heartbeat {members}:{connections}: {describe_hb(hb)}")
    admin.close()
    return result


def describe_hb(hb: HeartbeatRun) -> str:
    return (
        f"{hb.per_second:,.0f} req/s over {hb.seconds:.1f} s ({hb.responses:,} responses), latency p50 "
        f"{hb.p50_ms:.2f} ms p99 {hb.p99_ms:.2f} ms max {hb.max_ms:.1f} ms; cpu server "
        f"{hb.server_cpu_s / hb.seconds:.2f} cores, client {hb.client_cpu_s / hb.seconds:.2f} cores"
    )


async def profile_heartbeats(args: argparse.Namespace, server: ServerProcess, out: Path) -> HeartbeatRun:
    admin = await bounded(KafkaConnection.open(server.port), "connect")
    conns = await open_members(server.port, args.members)
    try:
        _, joined = await join_case(server, conns, admin, "bench-profile")
    finally:
        for conn in conns:
            conn.close()
    members, connections = parse_layouts(args.hb_layouts)[0]
    server.signal(signal.SIGUSR1)
    await asyncio.sleep(0.2)
    hb = await heartbeat_case(
        server, joined, members, connections, args.hb_seconds, args.hb_warmup, args.hb_max_requests
    )
    server.signal(signal.SIGUSR2)
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while not out.exists():
        expect(time.monotonic() < deadline, "the profile was not written")
        await asyncio.sleep(0.1)
    admin.close()
    return hb


async def profile_join(args: argparse.Namespace, server: ServerProcess, out: Path) -> JoinRun:
    admin = await bounded(KafkaConnection.open(server.port), "connect")
    conns = await open_members(server.port, args.members)

    async def around(start: bool) -> None:
        server.signal(signal.SIGUSR1 if start else signal.SIGUSR2)
        await asyncio.sleep(0.2)  # let the server take the signal before (after) the window

    try:
        run, _ = await join_case(server, conns, admin, "bench-profile", around)
    finally:
        for conn in conns:
            conn.close()
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while not out.exists():
        expect(time.monotonic() < deadline, "the profile was not written")
        await asyncio.sleep(0.1)
    admin.close()
    return run


def profile_summary(path: Path, top: int) -> str:
    buffer = io.StringIO()
    stats = pstats.Stats(str(path), stream=buffer)
    stats.strip_dirs()
    for key in ("tottime", "cumulative"):
        buffer.write(f"--- server, sorted by {key} ---\n")
        stats.sort_stats(key).print_stats(top)
    return buffer.getvalue()


def fsync_latency_ms(directory: str | None, n: int = 50) -> float:
    """Median time of a 4 KiB write + fsync in the data directory's file system."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = Path(tmp) / "probe"
        samples = []
        with path.open("wb") as f:
            for _ in range(n):
                started = time.perf_counter()
                f.write(b"x" * 4096)
                f.flush()
                os.fsync(f.fileno())
                samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def machine_facts(data_root: str | None) -> dict[str, Any]:
    cpu = None
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "nofile_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "fsync_4k_median_ms": round(fsync_latency_ms(data_root), 3),
        "loadavg_at_start": os.getloadavg(),
    }


@contextlib.contextmanager
def running(server: ServerProcess, keep: bool) -> Iterator[ServerProcess]:
    server.start()
    try:
        yield server
    except BaseException:
        print(server.log_tail(), file=sys.stderr)
        raise
    finally:
        server.stop(keep)


def comparison_table(results: list[PolicyResult]) -> str:
    """Medians over the rounds, before and after, and their ratio (after / before), per policy and layout."""
    rows = [
        "| case | fsync | before (median of rounds) | after | after / before |",
        "|---|---|---|---|---|",
    ]
    policies = list(dict.fromkeys(r.fsync for r in results))
    for fsync in policies:
        by_tree = {tree: [r for r in results if r.fsync == fsync and r.tree == tree] for tree in ("before", "after")}
        layouts = list(dict.fromkeys((hb.members, hb.connections) for r in by_tree["after"] for hb in r.heartbeats))
        for members, connections in layouts:
            med: dict[str, dict[str, float]] = {}
            for tree, runs in by_tree.items():
                hbs = [
                    hb for r in runs for hb in r.heartbeats if hb.members == members and hb.connections == connections
                ]
                med[tree] = {
                    "rps": statistics.median(hb.per_second for hb in hbs),
                    "p99": statistics.median(hb.p99_ms for hb in hbs),
                    "cpu_us": statistics.median(hb.server_cpu_s / hb.responses * 1e6 for hb in hbs),
                }
            b, a = med["before"], med["after"]
            rows.append(
                f"| heartbeat {members}:{connections} | {fsync} | {b['rps']:,.0f} req/s, p99 {b['p99']:.1f} ms, "
                f"server {b['cpu_us']:.1f} µs/req | {a['rps']:,.0f} req/s, p99 {a['p99']:.1f} ms, server "
                f"{a['cpu_us']:.1f} µs/req | throughput {a['rps'] / b['rps']:.3f}, p99 {a['p99'] / b['p99']:.2f}, "
                f"CPU/req {a['cpu_us'] / b['cpu_us']:.3f} |"
            )
        joins = {tree: [j.seconds for r in runs for j in r.joins] for tree, runs in by_tree.items()}
        if joins["before"] and joins["after"]:
            b_join, a_join = statistics.median(joins["before"]) * 1e3, statistics.median(joins["after"]) * 1e3
            rows.append(
                f"| join {results[0].joins[0].members:,} members | {fsync} | {b_join:.0f} ms | {a_join:.0f} ms | "
                f"{a_join / b_join:.2f} |"
            )
    return "\n".join(rows)


def _label(res: PolicyResult) -> str:
    return res.fsync if res.tree == "after" else f"{res.fsync} ({res.tree})"


def summary_table(results: list[PolicyResult]) -> str:
    rows = ["| case | fsync | result | target | met? |", "|---|---|---|---|---|"]
    for res in results:
        if res.joins:
            times = [j.seconds for j in res.joins]
            median, low, high = (statistics.median(times) * 1e3, min(times) * 1e3, max(times) * 1e3)
            rows.append(
                f"| join {res.joins[0].members:,} members: last JoinGroup → last SyncGroup response | {_label(res)} | "
                f"median {median:.0f} ms (n={len(times)}, min {low:.0f}, max {high:.0f}) "
                f"| ≤ {TARGET_JOIN_S * 1e3:.0f} ms | {'met' if median <= TARGET_JOIN_S * 1e3 else 'MISSED'} |"
            )
        for hb in res.heartbeats:
            rows.append(
                f"| heartbeat {hb.members} members / {hb.connections} connections | {_label(res)} | "
                f"{hb.per_second:,.0f} req/s; p50 {hb.p50_ms:.2f} ms, p99 {hb.p99_ms:.2f} ms, max {hb.max_ms:.1f} ms "
                f"| ≥ {TARGET_HB_PER_S:,.0f} req/s | {'met' if hb.per_second >= TARGET_HB_PER_S else 'MISSED'} |"
            )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--serve-profiled"]:
        return serve_profiled(argv[1], argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--fsync", default="always,never", help="fsync policies to run, comma-separated ('' = none)")
    parser.add_argument("--members", type=int, default=1_000, help="members of the join case (default 1000)")
    parser.add_argument("--join-repeats", type=int, default=3, help="join case runs per policy (default 3)")
    parser.add_argument(
        "--hb-layouts", default="1000:1000,1000:10,100:100", help="heartbeat MEMBERS:CONNECTIONS, comma-separated"
    )
    parser.add_argument("--hb-seconds", type=float, default=10.0, help="measured heartbeat window (default 10)")
    parser.add_argument("--hb-warmup", type=float, default=1.0, help="heartbeat warm-up not counted (default 1)")
    parser.add_argument("--hb-max-requests", type=int, default=5_000_000, help="stop heartbeats after this many")
    parser.add_argument("--profile", action="store_true", help="also profile the server during one heartbeat run")
    parser.add_argument("--profile-join", action="store_true", help="also profile the server during one join")
    parser.add_argument("--profile-top", type=int, default=25, help="functions to print per profile listing")
    parser.add_argument("--profile-out", metavar="FILE", help="also keep the server's cProfile stats in FILE")
    parser.add_argument("--data-root", help="where the temporary data directories go (default: the system tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories and server logs")
    parser.add_argument(
        "--server-src",
        metavar="DIR",
        help="run the server from the regroup package under DIR (PYTHONPATH), e.g. a copy of an older version",
    )
    parser.add_argument(
        "--before", metavar="DIR", help="compare with the server from the regroup package under DIR, alternated"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds per policy (and per tree with --before)")
    parser.add_argument("--json", metavar="OUT", help="write machine-readable results to OUT")
    args = parser.parse_args(argv)
    if max(m for m, _ in parse_layouts(args.hb_layouts)) > args.members:
        parser.error("a heartbeat layout has more members than the join case")

    def report(line: str) -> None:
        print(line, flush=True)

    facts = machine_facts(args.data_root)
    report("machine: " + ", ".join(f"{k}={v}" for k, v in facts.items()))
    results: list[PolicyResult] = []
    trees: list[tuple[str, str | None]] = [("after", args.server_src)]
    if args.before:
        trees.insert(0, ("before", args.before))
    for fsync in [p for p in args.fsync.split(",") if p]:
        for round_ in range(1, args.rounds + 1):
            for tree, source in trees if round_ % 2 else trees[::-1]:  # ABBA: a drifting load hits both alike
                report(f"--fsync {fsync}" + (f", {tree} (round {round_})" if args.before else ""))
                with running(ServerProcess(fsync, args.data_root, source=source), args.keep) as server:
                    result = asyncio.run(run_policy(args, server, fsync, report))
                result.tree = tree
                results.append(result)
    profile_text, profiled = None, None
    if args.profile:
        report("--fsync always, heartbeats under cProfile")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "server.prof"
            with running(ServerProcess("always", args.data_root, out, args.server_src), args.keep) as server:
                profiled = asyncio.run(profile_heartbeats(args, server, out))
            report(f"  heartbeat (profiled): {describe_hb(profiled)}")
            profile_text = profile_summary(out, args.profile_top)
            if args.profile_out:
                shutil.copyfile(out, args.profile_out)
        report(profile_text)
    join_profile_text, profiled_join = None, None
    if args.profile_join:
        report("--fsync always, one join window under cProfile")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "server.prof"
            with running(ServerProcess("always", args.data_root, out, args.server_src), args.keep) as server:
                profiled_join = asyncio.run(profile_join(args, server, out))
            report(f"  join (profiled): {profiled_join.seconds * 1e3:.0f} ms")
            join_profile_text = profile_summary(out, args.profile_top)
            if args.profile_out:
                shutil.copyfile(out, args.profile_out + ".join")
        report(join_profile_text)
    report(summary_table(results))
    if args.before:
        report(comparison_table(results))
    if args.json:
        payload = {
            "machine": facts,
            "results": [asdict(r) for r in results],
            "profiled_heartbeat": asdict(profiled) if profiled else None,
            "profile": profile_text,
            "profiled_join": asdict(profiled_join) if profiled_join else None,
            "join_profile": join_profile_text,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
