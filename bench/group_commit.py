"""Group commit under load: OffsetCommit and Produce (acks=-1) from many connections against ``regroup serve``
with ``--fsync always`` and ``--fsync interval``.

Usage::

    .venv/bin/python bench/group_commit.py                                   # this tree only
    .venv/bin/python bench/group_commit.py --before /tmp/gc-before/src       # another tree's server alongside
    .venv/bin/python bench/group_commit.py --before /tmp/gc-before/src --rounds 2 --clients 1,10,50
    .venv/bin/python bench/group_commit.py --before /tmp/a/src --after /tmp/b/src  # two frozen trees
    .venv/bin/python bench/group_commit.py --window 3 --warmup 0.5 --json /tmp/bench-gc.json

For each fsync policy (``--policies``, default ``always,interval``) and each server tree (``--before DIR``, put
first on the server's ``PYTHONPATH`` the way ``bench/server.py`` does, and this tree), alternated before, after,
after, before, ... over the policies and ``--rounds``, the harness starts ``python -m regroup serve`` (loopback,
a port of its choosing, a fresh temporary data directory), creates one topic of as many partitions as the
largest client count (CreateTopics v7) and then runs, for each client count C (``--clients``):

- **commit**: C connections, each committing ``--commit-partitions`` partitions of that topic with OffsetCommit
  v9 for a group of its own that has no members (generation -1, member id ""), the way an admin tool or a
  consumer using ``assign()`` commits; each commit's offsets one more than the previous one's (cycling through 1..64);
- **produce**: C connections, each producing one small v2 batch (``--records`` records of ``--value-bytes``
  bytes) to a partition of its own with Produce v9, acks=-1.

Each connection keeps exactly one request in flight: the next is written as soon as the answer to the previous
one is read. Requests are encoded once and only the correlation id is patched per send; every 64th answer (and
the first) is decoded in full and checked for errors. After ``--warmup`` seconds not counted, answers are
counted for ``--window`` seconds: requests per second, and latency from writing a request to reading its answer
(p50, p99, max). With ``--before`` the summary adds after/before ratios of the medians over the rounds.

``--fsync-delay-ms X`` plays a slower disk on a fast one: both servers (through a ``sitecustomize`` put first on
their ``PYTHONPATH``) sleep X ms before every ``fsync``, ``fdatasync`` and whole file system sync (``syncfs``),
outside the interpreter's lock as a real fsync waits; a fast disk lets the server's CPU bound every case, and
hides what grouping fsyncs buys.

Run one benchmark at a time: the load generator and the server share the machine's cores. The default run
(two trees, two policies, C = 1, 10, 50, 1 s + 4 s windows) takes about two and a half minutes;
``--rounds 3`` about six and a half.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from crc32c import crc32c

from server_loader import load_server_bench

sb = load_server_bench()

PRODUCE, OFFSET_COMMIT, CREATE_TOPICS = 0, 8, 19
PRODUCE_V, OFFSET_COMMIT_V, CREATE_TOPICS_V = 9, 9, 7
TOPIC = "bench-group-commit"
GROUP_PREFIX = "bench-gc-"
CHECK_EVERY = 64
CASES = ("commit", "produce")
_BASE_TS = 1_700_000_000_000


# ---------------------------------------------------------------------------------------------------------------
# requests


def record_batch(records: int, value_bytes: int, timestamp_ms: int = _BASE_TS) -> bytes:
    """One uncompressed v2 record batch of ``records`` records without key (offsets assigned by the broker),
    stamped ``timestamp_ms``."""
    body = bytearray()
    value = b"v" * value_bytes
    for i in range(records):
        record = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(value)) + value + _varint(0)
        body += _varint(len(record)) + record
    after_crc = struct.pack(">hiqqqhii", 0, records - 1, timestamp_ms, timestamp_ms, -1, -1, -1, records) + bytes(body)
    head = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c(after_crc))
    return head + after_crc


def _varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def commit_request(group: str, partitions: Sequence[int], offset: int) -> bytes:
    parts = [
        {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": None}
        for p in partitions
    ]
    return bytes(
        sb.encode_request(
            OFFSET_COMMIT,
            OFFSET_COMMIT_V,
            0,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[{"name": TOPIC, "partitions": parts}],
        )
    )


def produce_request(partition: int, batch: bytes) -> bytes:
    return bytes(
        sb.encode_request(
            PRODUCE,
            PRODUCE_V,
            0,
            transactional_id=None,
            acks=-1,
            timeout=30_000,
            topic_data=[{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}],
        )
    )


def response_errors(api_key: int, frame: bytes) -> list[int]:
    """The non-zero error codes of a decoded OffsetCommit or Produce answer."""
    body = sb.decode_response(api_key, PRODUCE_V if api_key == PRODUCE else OFFSET_COMMIT_V, frame)
    if api_key == PRODUCE:
        codes = [p.error_code for t in body.responses for p in t.partition_responses]
    else:
        codes = [p.error_code for t in body.topics for p in t.partitions]
    return [int(c) for c in codes if int(c) != 0]


# ---------------------------------------------------------------------------------------------------------------
# the driver


@dataclass
class CaseResult:
    tree: str
    policy: str
    case: str
    clients: int
    requests: int
    seconds: float
    per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    server_cpu_s: float
    #: the server's CPU per answered request in the window, microseconds: the interpreter's, the kernel's
    user_us: float = 0.0
    system_us: float = 0.0


@dataclass
class _Lane:
    """One connection and its request in flight."""

    conn: Any
    frames: list[bytes]  # requests sent in turn (commit: offsets rising; produce: the same batch)
    sent_at: float = 0.0
    turn: int = 0
    count: int = 0


class Driver:
    """C connections, each keeping one request in flight; latencies recorded once ``counting`` is set."""

    def __init__(self, api_key: int, lanes: list[_Lane]) -> None:
        self.api_key = api_key
        self.lanes = lanes
        self.counting = False
        self.running = True
        self.latencies: list[float] = []
        self.error: BaseException | None = None

    def start(self) -> None:
        for lane in self.lanes:
            self._send(lane)

    def _send(self, lane: _Lane) -> None:
        frame = bytearray(lane.frames[lane.turn % len(lane.frames)])
        lane.turn += 1
        correlation_id = lane.conn.next_correlation_id()
        struct.pack_into(">i", frame, 8, correlation_id)  # size (4) + api key (2) + api version (2)
        lane.sent_at = time.perf_counter()
        lane.conn.send(frame, correlation_id, self._answered, lane)

    def _answered(self, frame: bytes, lane: _Lane) -> None:
        now = time.perf_counter()
        if not frame:
            if self.running and self.error is None:
                self.error = sb.WireError(f"connection lost: {lane.conn.error!r}")
            return
        if lane.count % CHECK_EVERY == 0:
            errors = response_errors(self.api_key, frame)
            if errors and self.error is None:
                self.error = sb.WireError(f"api {self.api_key} answered errors {errors[:5]}")
        lane.count += 1
        if self.counting:
            self.latencies.append(now - lane.sent_at)
        if self.running:
            self._send(lane)


async def run_case(
    server: Any, tree: str, case: str, clients: int, args: argparse.Namespace, batch: bytes
) -> CaseResult:
    conns = [await sb.KafkaConnection.open(server.port) for _ in range(clients)]
    try:
        lanes = []
        for i, conn in enumerate(conns):
            if case == "commit":
                partitions = [(i + k) % max(args.clients_max, 1) for k in range(args.commit_partitions)]
                group = f"{GROUP_PREFIX}{tree}-{clients}-{i}"
                frames = [commit_request(group, partitions, offset) for offset in range(1, 65)]
            else:
                frames = [produce_request(i, batch)]
            lanes.append(_Lane(conn, frames))
        driver = Driver(OFFSET_COMMIT if case == "commit" else PRODUCE, lanes)
        driver.start()
        await asyncio.sleep(args.warmup)
        driver.counting = True
        (user0, system0), t0 = server.cpu_split(), time.perf_counter()
        await asyncio.sleep(args.window)
        driver.counting = False
        (user1, system1), seconds = server.cpu_split(), time.perf_counter() - t0
        user, system = user1 - user0, system1 - system0
        driver.running = False
        await _drain(lanes)
        if driver.error is not None:
            raise driver.error
        lat = sorted(driver.latencies)
        if not lat:
            raise sb.WireError(f"{case} C={clients}: no answer inside the window")
        return CaseResult(
            tree=tree,
            policy=server.fsync,
            case=case,
            clients=clients,
            requests=len(lat),
            seconds=round(seconds, 3),
            per_s=len(lat) / seconds,
            p50_ms=_pct(lat, 0.50) * 1e3,
            p99_ms=_pct(lat, 0.99) * 1e3,
            max_ms=lat[-1] * 1e3,
            server_cpu_s=round(user + system, 3),
            user_us=user / max(len(lat), 1) * 1e6,
            system_us=system / max(len(lat), 1) * 1e6,
        )
    finally:
        for conn in conns:
            conn.close()


async def _drain(lanes: list[_Lane], timeout: float = 30.0) -> None:
    """Wait for the requests still in flight (each connection has at most one)."""
    deadline = time.monotonic() + timeout
    while any(lane.conn._pending for lane in lanes) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def _pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def create_topic(port: int, partitions: int) -> None:
    conn = await sb.KafkaConnection.open(port)
    try:
        topic = {"name": TOPIC, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        body = await sb.bounded(
            sb._request(conn, CREATE_TOPICS, CREATE_TOPICS_V, topics=[topic], timeout=30_000, validate_only=False),
            "CreateTopics",
        )
        codes = [int(t.error_code) for t in body.topics]
        sb.expect(codes == [0], f"CreateTopics answered {codes}")
    finally:
        conn.close()


async def run_server(tree: str, source: str | None, policy: str, args: argparse.Namespace) -> list[CaseResult]:
    batch = record_batch(args.records, args.value_bytes)
    server = sb.ServerProcess(policy, args.data_root, source=source)
    results = []
    with sb.running(server, keep=False):
        await create_topic(server.port, args.clients_max)
        for clients in args.clients:
            for case in args.cases:
                res = await run_case(server, tree, case, clients, args, batch)
                print(
                    f"  {tree:6} {policy:8} {case:7} C={clients:<3} {res.per_s:9.0f}/s  p50 {res.p50_ms:7.2f}  "
                    f"p99 {res.p99_ms:7.2f}  max {res.max_ms:7.2f} ms  server cpu {res.server_cpu_s:.2f}s "
                    f"(per request: user {res.user_us:.0f} us, system {res.system_us:.0f} us)",
                    flush=True,
                )
                results.append(res)
    return results


# ---------------------------------------------------------------------------------------------------------------
# report


@dataclass
class Report:
    machine: dict[str, Any]
    args: dict[str, Any]
    results: list[CaseResult] = field(default_factory=list)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(results: list[CaseResult], with_before: bool) -> str:
    keys: list[tuple[str, str, int]] = []
    for r in results:
        key = (r.policy, r.case, r.clients)
        if key not in keys:
            keys.append(key)
    trees = ["before", "after"] if with_before else ["after"]
    head = "| fsync | case | C | " + " | ".join(
        f"{t} req/s, p50 / p99 / max ms; server CPU per request, user + system µs" for t in trees
    )
    head += " | after/before req/s | after/before p99 |" if with_before else " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for policy, case, clients in keys:
        cells = []
        med: dict[str, tuple[float, float]] = {}
        for tree in trees:
            rows = [r for r in results if (r.policy, r.case, r.clients, r.tree) == (policy, case, clients, tree)]
            if not rows:
                cells.append("n/a")
                continue
            per_s, p50 = _median([r.per_s for r in rows]), _median([r.p50_ms for r in rows])
            p99, mx = _median([r.p99_ms for r in rows]), _median([r.max_ms for r in rows])
            user, system = _median([r.user_us for r in rows]), _median([r.system_us for r in rows])
            med[tree] = (per_s, p99)
            cells.append(f"{per_s:,.0f}, {p50:.2f} / {p99:.2f} / {mx:.1f}; {user:.0f} + {system:.0f}")
        line = f"| {policy} | {case} | {clients} | " + " | ".join(cells)
        if with_before:
            if "before" in med and "after" in med:
                line += f" | {med['after'][0] / med['before'][0]:.2f}x | {med['after'][1] / med['before'][1]:.2f}x |"
            else:
                line += " | n/a | n/a |"
        else:
            line += " |"
        lines.append(line)
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--before", metavar="SRC", help="another tree's src directory, run alongside this one")
    p.add_argument("--after", metavar="SRC", help="the after tree's src directory (default: this tree's regroup)")
    p.add_argument("--rounds", type=int, default=1, help="rounds of each (policy, tree) (default 1)")
    p.add_argument("--policies", default="always,interval", help="fsync policies, comma-separated")
    p.add_argument("--clients", default="1,10,50", help="connection counts, comma-separated (default 1,10,50)")
    p.add_argument("--cases", default=",".join(CASES), help="commit, produce or both (default both)")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds not counted before each window (default 1)")
    p.add_argument("--window", type=float, default=4.0, help="seconds counted per case (default 4)")
    p.add_argument("--commit-partitions", type=int, default=5, help="partitions per OffsetCommit (default 5)")
    p.add_argument("--records", type=int, default=10, help="records per produced batch (default 10)")
    p.add_argument("--value-bytes", type=int, default=100, help="bytes per record value (default 100)")
    p.add_argument("--data-root", help="where the servers' temporary data directories go (default: the temp dir)")
    p.add_argument("--json", help="write the results here")
    p.add_argument(
        "--fsync-delay-ms",
        type=float,
        default=0.0,
        help="make every fsync, fdatasync and syncfs of both servers this much slower (a slower disk; default 0)",
    )
    args = p.parse_args(argv)
    args.clients = [int(c) for c in args.clients.split(",") if c]
    args.clients_max = max(args.clients)
    args.cases = [c for c in args.cases.split(",") if c]
    args.policies = [c for c in args.policies.split(",") if c]
    unknown = set(args.cases) - set(CASES)
    if unknown:
        p.error(f"unknown cases {sorted(unknown)}")
    return args


#: the servers' ``sitecustomize`` for ``--fsync-delay-ms``: every fsync, fdatasync and syncfs sleeps first
_SLOW_DISK = """import os, time
_DELAY_S = {delay_s!r}
def _slowed(real):
    def slowed(fd):
        time.sleep(_DELAY_S)
        return real(fd)
    return slowed
os.fsync = _slowed(os.fsync)
if hasattr(os, "fdatasync"):
    os.fdatasync = _slowed(os.fdatasync)
try:  # a tree that syncs a whole file system at once (``storage/files.sync_filesystem``) is slowed there too
    from regroup.storage import files as _files
except Exception:
    _files = None
if getattr(_files, "_SYNCFS", None) is not None:
    _files._SYNCFS = _slowed(_files._SYNCFS)
"""


def slow_disk(delay_ms: float) -> str:
    """A directory holding the ``sitecustomize`` that slows the servers' fsyncs by ``delay_ms``, put first on the
    ``PYTHONPATH`` the servers inherit."""
    directory = tempfile.mkdtemp(prefix="regroup-bench-slow-disk-")
    (Path(directory) / "sitecustomize.py").write_text(_SLOW_DISK.format(delay_s=delay_ms / 1000))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (directory, os.environ.get("PYTHONPATH")) if p)
    return directory


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.fsync_delay_ms > 0:
        slow_disk(args.fsync_delay_ms)
    after = str(Path(args.after).resolve()) if args.after else None
    trees: list[tuple[str, str | None]] = [("after", after)]
    if args.before:
        trees = [("before", str(Path(args.before).resolve())), ("after", after)]
    machine = sb.machine_facts(args.data_root)
    print(f"machine: {json.dumps(machine)}", flush=True)
    report = Report(machine, {k: v for k, v in vars(args).items()})
    started = time.perf_counter()
    flip = False
    for _ in range(args.rounds):
        for policy in args.policies:
            for tree, source in reversed(trees) if flip else trees:  # before, after, after, before, ...
                report.results.extend(asyncio.run(run_server(tree, source, policy, args)))
            flip = not flip
    print(f"\n{table(report.results, args.before is not None)}")
    print(f"\n({time.perf_counter() - started:.0f} s; latency: request written to answer read; medians over rounds)")
    if args.json:
        out = {"machine": report.machine, "args": report.args, "results": [asdict(r) for r in report.results]}
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
