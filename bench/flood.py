"""One connection floods ``regroup serve`` while a healthy group member heartbeats on another: how long does
the healthy member wait, and how much memory does the server take?

Usage::

    .venv/bin/python bench/flood.py                                  # this tree's server, both flood modes
    .venv/bin/python bench/flood.py --before /tmp/base/src           # and another tree's, alternated
    .venv/bin/python bench/flood.py --modes none --requests 10000 --api metadata
    .venv/bin/python bench/flood.py --json /tmp/bench-flood.json

For each server tree (``--before DIR`` and this tree, alternated before, after, after, before, ... over
``--rounds``) and each mode, the
harness starts ``python -m regroup serve`` (``--fsync never``, a temporary data directory, the tree's
defaults for everything else) and:

1. creates ``--topics`` topics of ``--partitions`` partitions (so a Metadata answer has some size);
2. forms a one-member classic group (JoinGroup v9 twice, SyncGroup v5) on the *healthy* connection;
3. heartbeats on that connection for ``--quiet`` seconds (the baseline), one Heartbeat v4 every
   ``--hb-interval-ms`` on a fixed schedule: a heartbeat is sent when it is due even if earlier ones are
   still unanswered (they pipeline), so a stalled server shows up as the whole queue of late answers rather
   than as one slow sample (no coordinated omission). Latency is from writing a heartbeat to reading its
   answer;
4. opens the *flooding* connection and writes ``--requests`` requests (``--api``: Metadata v12 for all
   topics, or ApiVersions v3) at once, without reading. Mode ``none`` reads nothing for ``--flood-seconds``;
   mode ``slow`` reads at ``--slow-bytes-per-s`` for that long. Heartbeats continue on schedule throughout;
5. then the flooder reads everything as fast as it can; every response must arrive, in request order
   (correlation ids 1, 2, 3, ...). The window ends when the last response is read.

Reported per run: the healthy member's heartbeat latency in the quiet baseline and in the flood window
(p50, p99, max), the server's RSS at the start of the flood and its peak during the window (``VmRSS``
sampled every 20 ms), the responses and bytes the flooder read, and how long the whole flood took.

Bounds: every phase has a deadline, the server is stopped (SIGTERM, then SIGKILL) even on failure, only
127.0.0.1 is used. Run one benchmark at a time: the load generator and the server share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from server_loader import load_server_bench

sb = load_server_bench()

METADATA, METADATA_V = 3, 12
API_VERSIONS, API_VERSIONS_V = 18, 3
CREATE_TOPICS, CREATE_TOPICS_V = 19, 7
FLOOD_TIMEOUT_S = 300.0
RSS_SAMPLE_S = 0.02
_SIZE = struct.Struct(">i")


def flood_request(api: str, correlation_id: int) -> bytes:
    if api == "metadata":
        return bytes(
            sb.encode_request(
                METADATA,
                METADATA_V,
                correlation_id,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    return bytes(
        sb.encode_request(
            API_VERSIONS,
            API_VERSIONS_V,
            correlation_id,
            client_software_name="bench-flood",
            client_software_version="1",
        )
    )


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Flooder(asyncio.Protocol):
    """Writes every request at once; reads nothing (``rate`` 0) or at most ``rate`` bytes per second until
    ``drain()``, then everything. Checks that the correlation ids come back 1, 2, 3, ..."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.responses = 0
        self.bytes_read = 0
        self.expected = 0
        self.error: str | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.draining = False
        self._allowance = 0.0
        self._resume: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.rate == 0:
            transport.pause_reading()

    def data_received(self, data: bytes) -> None:
        self.bytes_read += len(data)
        self.buffer += data
        offset = 0
        while len(self.buffer) - offset >= 4:
            (size,) = _SIZE.unpack_from(self.buffer, offset)
            if len(self.buffer) - offset - 4 < size:
                break
            (correlation_id,) = _SIZE.unpack_from(self.buffer, offset + 4)
            self.responses += 1
            if correlation_id != self.responses and self.error is None:
                self.error = f"response {self.responses} has correlation id {correlation_id}"
            offset += 4 + size
        del self.buffer[:offset]
        if self.responses >= self.expected and not self.done.done():
            self.done.set_result(None)
        if not self.draining and self.rate > 0:
            self._allowance -= len(data)
            if self._allowance < 0 and self.transport is not None:
                self.transport.pause_reading()
                delay = -self._allowance / self.rate
                self._resume = asyncio.get_running_loop().call_later(delay, self._refill, delay)

    def _refill(self, elapsed: float) -> None:
        self._resume = None
        self._allowance += elapsed * self.rate
        if self.transport is not None and not self.draining:
            self.transport.resume_reading()

    def drain(self) -> None:
        self.draining = True
        if self._resume is not None:
            self._resume.cancel()
        if self.transport is not None:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.error = self.error or f"connection lost after {self.responses} responses: {exc}"
            self.done.set_result(None)


class LoopLag:
    """How late this process's own event loop wakes up from a 10 ms sleep: a load generator that cannot
    keep up shows here, not as the server's latency."""

    def __init__(self) -> None:
        self.lags: list[tuple[float, float]] = []  # (woke at, seconds late)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.lags.append((now, now - before - 0.01))

    def max_between(self, start: float, end: float) -> float:
        return max((lag for at, lag in self.lags if start <= at < end), default=0.0)


class Heartbeats:
    """One Heartbeat v4 every ``interval`` seconds on ``conn`` on a fixed schedule; latencies by window."""

    def __init__(self, conn: Any, template: bytes, interval: float) -> None:
        self.conn = conn
        self.template = template
        self.interval = interval
        self.latencies: list[tuple[float, float]] = []  # (sent at, latency s)
        self.errors: collections.Counter[int] = collections.Counter()
        self.outstanding = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        deadline = time.monotonic() + FLOOD_TIMEOUT_S
        while self.outstanding and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def _run(self) -> None:
        next_at = time.perf_counter()
        while True:
            self._fire()
            next_at += self.interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    def _fire(self) -> None:
        correlation_id = self.conn.next_correlation_id()
        data = bytearray(self.template)
        struct.pack_into(">i", data, 8, correlation_id)
        self.outstanding += 1
        self.conn.send(data, correlation_id, self._on_frame, time.perf_counter())

    def _on_frame(self, frame: bytes, sent: float) -> None:
        self.outstanding -= 1
        if not frame:
            self.errors[-1] += 1
            return
        if frame[5:7] != b"\x00\x00":
            self.errors[int.from_bytes(frame[5:7], "big", signed=True)] += 1
        self.latencies.append((sent, time.perf_counter() - sent))

    def between(self, start: float, end: float) -> list[float]:
        return sorted(lat for sent, lat in self.latencies if start <= sent < end)


def percentiles(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"n": 0, "p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3

    return {"n": len(latencies), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": latencies[-1] * 1e3}


@dataclass(slots=True)
class FloodRun:
    tree: str
    mode: str
    api: str
    requests: int
    quiet: dict[str, float]
    flood: dict[str, float]  # the whole window: first flood byte written -> last flood response read
    hold: dict[str, float]  # while the flooder reads nothing (none) or slowly (slow)
    drain: dict[str, float]  # while it reads everything it is owed
    heartbeat_errors: int
    rss_start_mb: float
    rss_peak_mb: float
    rss_growth_mb: float
    generator_lag_max_ms: float  # the load generator's own event loop, late by at most this in the window
    flood_total_s: float
    responses: int
    response_bytes: int
    in_order: bool
    error: str | None


async def form_group(conn: Any, group: str) -> bytes:
    """A one-member classic group; returns the member's pre-encoded Heartbeat v4."""
    metadata = sb.encode_subscription(sb.Subscription(topics=("bench-topic-0",)))
    fields = sb._join_fields(group, "", metadata)
    first = await sb.bounded(sb._request(conn, sb.JOIN, sb.JOIN_V, **fields), "JoinGroup")
    member_id = first.member_id
    joined = await sb.bounded(sb._request(conn, sb.JOIN, sb.JOIN_V, **{**fields, "member_id": member_id}), "rejoin")
    sb.expect(joined.error_code == 0, f"JoinGroup error {joined.error_code}")
    sync = sb._sync_fields(group, joined.generation_id, member_id, [{"member_id": member_id, "assignment": b""}])
    synced = await sb.bounded(sb._request(conn, sb.SYNC, sb.SYNC_V, **sync), "SyncGroup")
    sb.expect(synced.error_code == 0, f"SyncGroup error {synced.error_code}")
    return bytes(
        sb.encode_request(
            sb.HEARTBEAT,
            sb.HEARTBEAT_V,
            0,
            group_id=group,
            generation_id=joined.generation_id,
            member_id=member_id,
            group_instance_id=None,
        )
    )


async def create_topics(conn: Any, topics: int, partitions: int) -> None:
    if topics == 0:
        return
    spec = [
        {
            "name": f"bench-topic-{i}",
            "num_partitions": partitions,
            "replication_factor": 1,
            "assignments": [],
            "configs": [],
        }
        for i in range(topics)
    ]
    created = await sb.bounded(
        sb._request(conn, CREATE_TOPICS, CREATE_TOPICS_V, topics=spec, timeout=5000, validate_only=False),
        "CreateTopics",
    )
    sb.expect(all(t.error_code == 0 for t in created.topics), "CreateTopics failed")


async def flood_case(args: argparse.Namespace, server: Any, tree: str, mode: str) -> FloodRun:
    assert server.proc is not None
    pid = server.proc.pid
    healthy = await sb.bounded(sb.KafkaConnection.open(server.port), "connect")
    await create_topics(healthy, args.topics, args.partitions)
    template = await form_group(healthy, "bench-flood")
    payload = b"".join(flood_request(args.api, i) for i in range(1, args.requests + 1))  # before the clock runs
    heartbeats = Heartbeats(healthy, template, args.hb_interval_ms / 1e3)
    heartbeats.start()
    lag = LoopLag()
    lag.start()
    quiet_start = time.perf_counter()
    await asyncio.sleep(args.quiet)
    rate = 0.0 if mode == "none" else args.slow_bytes_per_s
    loop = asyncio.get_running_loop()
    rss_start = rss_bytes(pid)
    rss_peak = rss_start
    flood_start = time.perf_counter()
    _, flooder = await loop.create_connection(lambda: Flooder(rate), sb.HOST, server.port)
    flooder.expected = args.requests
    assert flooder.transport is not None
    flooder.transport.write(payload)
    drain_at = flood_start + args.flood_seconds
    drained_at = drain_at
    deadline = flood_start + FLOOD_TIMEOUT_S
    while not flooder.done.done() and time.perf_counter() < deadline:
        if not flooder.draining and time.perf_counter() >= drain_at:
            drained_at = time.perf_counter()
            flooder.drain()
        rss_peak = max(rss_peak, rss_bytes(pid))
        await asyncio.sleep(RSS_SAMPLE_S)
    flood_end = time.perf_counter()
    rss_peak = max(rss_peak, rss_bytes(pid))
    lag.stop()
    await heartbeats.stop()
    flooder.transport.close()
    healthy.close()
    error = flooder.error
    if not flooder.done.done():
        error = error or f"only {flooder.responses} of {args.requests} responses within {FLOOD_TIMEOUT_S:.0f}s"
    return FloodRun(
        tree=tree,
        mode=mode,
        api=args.api,
        requests=args.requests,
        quiet=percentiles(heartbeats.between(quiet_start, flood_start)),
        flood=percentiles(heartbeats.between(flood_start, flood_end)),
        hold=percentiles(heartbeats.between(flood_start, min(drained_at, flood_end))),
        drain=percentiles(heartbeats.between(drained_at, flood_end)),
        heartbeat_errors=sum(heartbeats.errors.values()),
        rss_start_mb=rss_start / 2**20,
        rss_peak_mb=rss_peak / 2**20,
        rss_growth_mb=(rss_peak - rss_start) / 2**20,
        generator_lag_max_ms=lag.max_between(flood_start, flood_end) * 1e3,
        flood_total_s=flood_end - flood_start,
        responses=flooder.responses,
        response_bytes=flooder.bytes_read,
        in_order=flooder.error is None and flooder.responses == args.requests,
        error=error,
    )


def describe(run: FloodRun) -> str:
    q, f = run.quiet, run.flood
    return (
        f"{run.tree:>6} {run.mode:>4}: heartbeat quiet p99 {q['p99_ms']:.1f} ms; flood p50 {f['p50_ms']:.1f} "
        f"p99 {f['p99_ms']:.1f} max {f['max_ms']:.1f} ms (n={f['n']:.0f}, errors {run.heartbeat_errors}; "
        f"p99 holding {run.hold['p99_ms']:.1f}, draining {run.drain['p99_ms']:.1f}); "
        f"RSS {run.rss_start_mb:.0f} -> peak {run.rss_peak_mb:.0f} MB (+{run.rss_growth_mb:.0f}); "
        f"{run.responses:,} responses ({run.response_bytes / 2**20:.1f} MiB) in {run.flood_total_s:.1f} s, "
        f"generator loop late by up to {run.generator_lag_max_ms:.0f} ms, "
        f"{'in order' if run.in_order else 'FAILED: ' + str(run.error)}"
    )


def table(runs: list[FloodRun]) -> str:
    rows = [
        "| tree | mode | heartbeat p50 / p99 / max (ms) | quiet p99 (ms) | server RSS growth | flood done in | order |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        f = run.flood
        rows.append(
            f"| {run.tree} | {run.mode} | {f['p50_ms']:.1f} / {f['p99_ms']:.1f} / {f['max_ms']:.0f} | "
            f"{run.quiet['p99_ms']:.1f} | +{run.rss_growth_mb:.0f} MB (peak {run.rss_peak_mb:.0f}) | "
            f"{run.flood_total_s:.1f} s | {'ok' if run.in_order else 'FAILED'} |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--before", metavar="DIR", help="also run the server from the regroup package under DIR")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the trees this many times (default 1)")
    parser.add_argument("--modes", default="none,slow", help="flood modes: none (never reads), slow (default both)")
    parser.add_argument("--api", choices=("metadata", "apiversions"), default="metadata", help="flood request")
    parser.add_argument("--requests", type=int, default=10_000, help="requests the flooder pipelines (10000)")
    parser.add_argument("--topics", type=int, default=10, help="topics created first (default 10)")
    parser.add_argument("--partitions", type=int, default=10, help="partitions per topic (default 10)")
    parser.add_argument("--quiet", type=float, default=2.0, help="heartbeat baseline seconds before the flood")
    parser.add_argument("--flood-seconds", type=float, default=10.0, help="seconds the flooder reads slowly/never")
    parser.add_argument("--slow-bytes-per-s", type=float, default=256 * 1024, help="mode slow's read rate")
    parser.add_argument("--hb-interval-ms", type=float, default=10.0, help="healthy heartbeat period (10 ms)")
    parser.add_argument("--data-root", help="where the temporary data directories go (default: the system tmp)")
    parser.add_argument("--json", metavar="OUT", help="write machine-readable results to OUT")
    args = parser.parse_args(argv)
    trees: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        trees.insert(0, ("before", args.before))
    facts = sb.machine_facts(args.data_root)
    print("machine: " + ", ".join(f"{k}={v}" for k, v in facts.items()), flush=True)
    runs: list[FloodRun] = []
    for round_ in range(1, args.rounds + 1):
        for mode in [m for m in args.modes.split(",") if m]:
            for tree, source in trees if round_ % 2 else trees[::-1]:  # ABBA: a drifting load hits both alike
                server = sb.ServerProcess("never", args.data_root, source=source)
                with sb.running(server, keep=False):
                    run = asyncio.run(flood_case(args, server, tree, mode))
                runs.append(run)
                print("  " + describe(run), flush=True)
    print(table(runs))
    if args.json:
        payload = {"machine": facts, "args": vars(args), "runs": [asdict(r) for r in runs]}
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0 if all(r.in_order for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
