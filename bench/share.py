"""Share groups against consumer groups on ``regroup serve``: records per second through ShareFetch +
ShareAcknowledge against Fetch + OffsetCommit for the same records, side by side in one run, and what each
acknowledgement costs the coordinator's record log.

Usage::

    .venv/bin/python bench/share.py                                   # 6 rounds of 300,000 records, ~1 min
    .venv/bin/python bench/share.py --rounds 12 --records 30000 --max-records 1000
    .venv/bin/python bench/share.py --fetch-max-bytes 52428800        # Fetch with Kafka's default sizes
    .venv/bin/python bench/share.py --share-max-bytes 60483           # ShareFetch bounded like the Fetch
    .venv/bin/python bench/share.py --rounds 0 --profile              # only: the server under cProfile
    .venv/bin/python bench/share.py --json /tmp/bench-share.json

One server, started the way ``bench/server.py`` starts it (its ``ServerProcess``: loopback, a temporary data
directory, ``--fsync always``, the default event loop), and one topic of ``--partitions`` partitions filled
before the first round with ``--records`` records of ``--value-bytes`` bytes (no key, no compression), produced
in batches of ``--batch-records`` records (Produce v9, acks=-1; the batches are round-robin over the
partitions). The batch size matters: both variants hand out whole batches of the log, the Fetch variant's
request size is counted in batches, and the number of records per partition sets how much of the log a
ShareFetch reads (see the summary's page faults). The client is a raw-wire one: requests kio-encoded with
``bench/server.py``'s codec, one blocking socket, one request at a time, as a consumer's fetch loop; no Kafka
client library. Neither client parses the records beyond the batch headers.

**Variant "share": ShareFetch with the acknowledgements piggybacked.** Before the clock (each round a fresh
group): IncrementalAlterConfigs sets the group's ``share.auto.offset.reset=earliest`` (resource type GROUP),
ShareGroupHeartbeat v1 joins with the topic (the member gets every partition). **Clock starts.** ShareFetch v1
opens the share session (epoch 0, every partition named), then each ShareFetch carries the acknowledgements of
the previous response's acquired records (ACCEPT, one batch per acquired range: what a consumer in implicit
acknowledgement mode sends with its next poll), with MaxRecords ``--max-records``, BatchSize the same, MaxBytes
``--share-max-bytes`` (default 50 MiB, Kafka's ``fetch.max.bytes``), MinBytes 1, MaxWaitMs 500. Once every
record is acquired, a ShareAcknowledge v1 at session epoch -1 carries the last acknowledgements and closes the
session (what a consumer does on close). **Clock stops** at its response. Every acknowledgement must come back NONE and
every acquired range must lie in the batches returned; the round's records must each be acquired once, at
delivery count 1. After the clock, DescribeShareGroupOffsets must show every partition's start offset at its
log end, and the member leaves (epoch -1). A heartbeat is sent inside the window when the member's heartbeat
interval has passed (at the default 5 s and rounds of a few seconds: rarely).

**Variant "fetch": Fetch + OffsetCommit, a classic consumer committing after every poll.** A fresh group id
each round, used as Kafka's "simple" group (generation -1, member id ""; no membership). **Clock starts.**
Fetch v13 (no fetch session, read_uncommitted, MinBytes 1, MaxWaitMs 500, 1 MiB per partition) from each
partition's position, then OffsetCommit v8 of the new positions of the partitions that moved, until every
record is read. The Fetch's MaxBytes is sized to the share variant's MaxRecords: whole batches of
``ceil(max_records / batch_records)`` batches (plus half a batch of slack), so that both variants move about
the same records per round trip; ``--fetch-max-bytes`` overrides it. Both variants put a different partition
first in each request (the share handler rotates its partitions; the Fetch client does the same). **Clock
stops** at the last OffsetCommit's response. After the clock, OffsetFetch must show every partition committed
at its log end.

Rounds: ``--warmup`` round(s) of each variant not counted, then ``--rounds`` rounds alternating share, fetch,
then fetch, share, ... so that load from other work on the machine hits both alike. Reported per variant: records
per second (median and range over the rounds), the server's CPU per record (the on-CPU time of all its threads,
``/proc/PID/task/*/schedstat``, nanoseconds), this process's CPU per record, round trips and their mean time,
the server's minor page faults per round trip (``/proc/PID/stat``: memory touched for the first time), and the
share / fetch ratios as the median of the per-round ratios. **The record log's cost:** the bytes the
round added to ``<data dir>/coordinator/*.log``, read back between the rounds with regroup's own frame decoder
(``storage/format.py``) and record decoder (``records/serde.py``): appends (one frame each, one fsync each under
``--fsync always``), records by kind, bytes per acknowledged (committed) record and per request that wrote.

``--profile`` adds, per variant, a fresh server under cProfile (``bench/server.py``'s ``--serve-profiled``: the
event loop thread only, switched on by SIGUSR1 and off by SIGUSR2) around one round after a warm-up round,
and prints its top functions.

Bounds: each round has ``bench/server.py``'s phase deadline and the socket a timeout; the server is stopped
with SIGTERM (SIGKILL after 30 s) even on failure; only 127.0.0.1 is used. Run one benchmark at a time: the
client and the server share the machine's cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from regroup.records import serde
from regroup.storage.format import decode_frame
from server_loader import load_server_bench

REPO = Path(__file__).resolve().parents[1]


sb = load_server_bench()

PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS, INCREMENTAL_ALTER_CONFIGS = 0, 1, 8, 9, 19, 44
SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE, DESCRIBE_SHARE_GROUP_OFFSETS = 76, 78, 79, 90
VERSIONS = {
    PRODUCE: 9,
    FETCH: 13,
    OFFSET_COMMIT: 8,
    OFFSET_FETCH: 8,
    CREATE_TOPICS: 7,
    INCREMENTAL_ALTER_CONFIGS: 1,
    SHARE_GROUP_HEARTBEAT: 1,
    SHARE_FETCH: 1,
    SHARE_ACKNOWLEDGE: 1,
    DESCRIBE_SHARE_GROUP_OFFSETS: 0,
}
API_NAMES = {
    PRODUCE: "Produce",
    FETCH: "Fetch",
    OFFSET_COMMIT: "OffsetCommit",
    OFFSET_FETCH: "OffsetFetch",
    CREATE_TOPICS: "CreateTopics",
    INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat",
    SHARE_FETCH: "ShareFetch",
    SHARE_ACKNOWLEDGE: "ShareAcknowledge",
    DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
}
GROUP_RESOURCE, SET = 32, 0
ACCEPT = 1
OPEN_EPOCH, FINAL_EPOCH = 0, -1
FETCH_MAX_BYTES = 52_428_800  # Kafka's fetch.max.bytes
PARTITION_MAX_BYTES = 1_048_576  # Kafka's max.partition.fetch.bytes
MAX_WAIT_MS = 500
SOCKET_TIMEOUT_S = 30.0
VARIANTS = ("share", "fetch")
TOPIC = "bench-share"
_SIZE = struct.Struct(">i")
_BATCH_HEAD = 61  # a v2 record batch's header


# ---------------------------------------------------------------------------------------------------------------
# the server, its record log


class Server(sb.ServerProcess):  # type: ignore[misc,name-defined]
    """``bench/server.py``'s server process under ``--fsync always``, its CPU read per thread."""

    def __init__(self, data_root: str | None, profile_out: Path | None = None) -> None:
        super().__init__("always", data_root, profile_out)

    @property
    def coordinator_dir(self) -> Path:
        return Path(self.dir) / "data" / "coordinator"

    def minor_faults(self) -> int:
        """The server's minor page faults so far (``/proc/PID/stat``: fresh memory touched for the first time)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])

    def cpu_seconds(self) -> float:
        """The on-CPU time of the server's threads so far (``schedstat``, nanoseconds)."""
        assert self.proc is not None
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that just ended
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9


@contextlib.contextmanager
def running(server: Server, keep: bool) -> Iterator[Server]:
    server.start()
    try:
        yield server
    except BaseException:
        print(server.log_tail(), file=sys.stderr)
        raise
    finally:
        server.stop(keep)


@dataclass(slots=True)
class LogGrowth:
    """What a round added to the coordinator's record log."""

    bytes: int = 0
    appends: int = 0  # frames: one write, and under --fsync always one fsync, each
    records: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    snapshots: int = 0


class LogMark:
    """The coordinator's segment files' sizes at one moment; ``growth()`` decodes what was appended since."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.sizes = {p.name: p.stat().st_size for p in directory.glob("*.log")}
        self.snapshots = {p.name for p in directory.glob("snapshot-*.bin")}

    def growth(self) -> LogGrowth:
        out = LogGrowth()
        kinds: Counter[str] = Counter()
        for path in sorted(self.directory.glob("*.log")):
            data = path.read_bytes()
            pos = self.sizes.get(path.name, 0)
            out.bytes += len(data) - pos
            while pos < len(data):
                frame = decode_frame(data, pos)
                out.appends += 1
                out.records += len(frame.payloads)
                for payload in frame.payloads:
                    record = serde.decode(payload)
                    kinds[type(record.key).__name__ + ("" if record.value is not None else " (tombstone)")] += 1
                pos = frame.end
        out.kinds = dict(kinds)
        out.snapshots = len({p.name for p in self.directory.glob("snapshot-*.bin")} - self.snapshots)
        return out


# ---------------------------------------------------------------------------------------------------------------
# the client


class Connection:
    """One blocking connection, one request at a time (a consumer's fetch loop talking to its broker)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((sb.HOST, port), timeout=SOCKET_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")
        self.correlation_id = 0
        self.calls: Counter[str] = Counter()

    def call(self, api_key: int, **fields: Any) -> Any:
        version = VERSIONS[api_key]
        self.correlation_id += 1
        self.sock.sendall(sb.encode_request(api_key, version, self.correlation_id, **fields))
        (size,) = _SIZE.unpack(self._read(4))
        frame = self._read(size)
        sb.expect(_SIZE.unpack_from(frame)[0] == self.correlation_id, f"{API_NAMES[api_key]}: wrong correlation id")
        self.calls[API_NAMES[api_key]] += 1
        return sb.decode_response(api_key, version, frame)

    def _read(self, n: int) -> bytes:
        data = self.reader.read(n)
        sb.expect(len(data) == n, "the server closed the connection")
        return bytes(data)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def batch_span(records: bytes) -> tuple[int, int, int]:
    """(first offset, end offset, records) of the v2 batches in ``records`` (headers only)."""
    pos, first, end, count = 0, -1, 0, 0
    while pos + _BATCH_HEAD <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big", signed=True)
        length = int.from_bytes(records[pos + 8 : pos + 12], "big")
        last_delta = int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
        count += int.from_bytes(records[pos + 57 : pos + 61], "big")
        first = base if first < 0 else first
        end = base + last_delta + 1
        pos += 12 + length
    return first, end, count


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    end_offsets: list[int]
    batch_records: int
    batch_bytes: float  # the mean size of a produced batch

    @property
    def records(self) -> int:
        return sum(self.end_offsets)


def create_and_fill(
    conn: Connection, partitions: int, records: int, batch_records: int, value_bytes: int
) -> tuple[Topic, float]:
    """The topic, filled with ``records`` records in batches of ``batch_records``, round-robin over the
    partitions (one Produce per round of batches); also the seconds the produce took."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.server_data.batches import make_batch

    created = conn.call(
        CREATE_TOPICS,
        topics=[
            {"name": TOPIC, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        ],
        timeout=30_000,
        validate_only=False,
    )
    (made,) = created.topics
    sb.expect(made.error_code == 0 and made.topic_id is not None, f"CreateTopics: {made.error_code}")
    value = b"v" * value_bytes
    ends = [0] * partitions
    sizes: list[int] = []
    left, started, now_ms = records, time.perf_counter(), int(time.time() * 1000)
    while left:
        data = []
        for p in range(partitions):
            n = min(batch_records, left)
            if n == 0:
                break
            batch = make_batch([value] * n, timestamps=[now_ms] * n)
            sizes.append(len(batch))
            data.append({"index": p, "records": batch})
            ends[p] += n
            left -= n
        produced = conn.call(
            PRODUCE,
            transactional_id=None,
            acks=-1,
            timeout=30_000,
            topic_data=[{"name": TOPIC, "partition_data": data}],
        )
        codes = [p.error_code for t in produced.responses for p in t.partition_responses]
        sb.expect(all(c == 0 for c in codes), f"Produce: {codes}")
    topic = Topic(TOPIC, made.topic_id, partitions, ends, batch_records, statistics.fmean(sizes))
    return topic, time.perf_counter() - started


# ---------------------------------------------------------------------------------------------------------------
# the variants


@dataclass(slots=True)
class Sample:
    variant: str
    round: int
    records: int
    seconds: float
    server_cpu_s: float
    client_cpu_s: float
    calls: dict[str, int]  # requests inside the window, by API
    round_trips: int
    writes: int  # requests that acknowledged or committed
    server_faults: int  # the server's minor page faults
    log: LogGrowth

    @property
    def per_second(self) -> float:
        return self.records / self.seconds

    def row(self) -> dict[str, Any]:
        return {**asdict(self), "per_second": self.per_second}


class Window:
    """The clock, the server's and this process's CPU, and the coordinator log, around one round."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.mark = LogMark(server.coordinator_dir)
        self.cpu = server.cpu_seconds()
        self.faults = server.minor_faults()
        self.client = time.process_time()
        self.started = time.perf_counter()

    def close(self, variant: str, round_: int, records: int, conn: Connection, writes: int) -> Sample:
        seconds = time.perf_counter() - self.started
        client = time.process_time() - self.client
        cpu = self.server.cpu_seconds() - self.cpu
        faults = self.server.minor_faults() - self.faults
        calls = dict(conn.calls)
        trips = sum(calls.values())
        return Sample(variant, round_, records, seconds, cpu, client, calls, trips, writes, faults, self.mark.growth())


def share_round(server: Server, topic: Topic, group: str, round_: int, max_records: int, max_bytes: int) -> Sample:
    """One share-group member reads every record of the topic, acknowledging each fetch's records with the next."""
    conn = Connection(server.port)
    try:
        altered = conn.call(
            INCREMENTAL_ALTER_CONFIGS,
            resources=[
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": group,
                    "configs": [{"name": "share.auto.offset.reset", "config_operation": SET, "value": "earliest"}],
                }
            ],
            validate_only=False,
        )
        sb.expect(all(r.error_code == 0 for r in altered.responses), f"IncrementalAlterConfigs: {altered}")
        member_id = str(uuid.uuid4())
        joined = conn.call(
            SHARE_GROUP_HEARTBEAT, group_id=group, member_id=member_id, member_epoch=0, rack_id=None,
            subscribed_topic_names=[topic.name],
        )  # fmt: skip
        sb.expect(joined.error_code == 0, f"ShareGroupHeartbeat: {joined.error_code} {joined.error_message}")
        assigned = {p for t in joined.assignment.topic_partitions for p in t.partitions} if joined.assignment else set()
        sb.expect(assigned == set(range(topic.partitions)), f"assigned {sorted(assigned)}")
        member_epoch, interval_s = joined.member_epoch, joined.heartbeat_interval.total_seconds()
        conn.calls.clear()

        window = Window(server)
        deadline = time.monotonic() + sb.PHASE_TIMEOUT_S
        last_heartbeat = time.monotonic()
        session_epoch, acquired, acknowledged, writes = OPEN_EPOCH, 0, 0, 0
        pending: dict[int, list[tuple[int, int]]] = {}
        seen: dict[int, int] = {}  # partition -> records acquired so far (each range must continue the last)

        def acknowledgements() -> list[dict[str, Any]]:
            return [
                {
                    "partition_index": p,
                    "acknowledgement_batches": [
                        {"first_offset": f, "last_offset": la, "acknowledge_types": [ACCEPT]} for f, la in runs
                    ],
                }
                for p, runs in sorted(pending.items())
            ]

        while acquired < topic.records:
            sb.expect(time.monotonic() < deadline, f"share round: {acquired} of {topic.records} records acquired")
            if session_epoch == OPEN_EPOCH:
                partitions = [{"partition_index": p, "acknowledgement_batches": []} for p in range(topic.partitions)]
            else:
                partitions = acknowledgements()
            fetched = conn.call(
                SHARE_FETCH, group_id=group, member_id=member_id, share_session_epoch=session_epoch,
                max_wait=MAX_WAIT_MS, min_bytes=1, max_bytes=max_bytes, max_records=max_records,
                batch_size=max_records, forgotten_topics_data=[],
                topics=[{"topic_id": topic.topic_id, "partitions": partitions}] if partitions else [],
            )  # fmt: skip
            sb.expect(fetched.error_code == 0, f"ShareFetch: {fetched.error_code} {fetched.error_message}")
            session_epoch += 1
            if pending:
                writes += 1
                acknowledged += sum(la - f + 1 for runs in pending.values() for f, la in runs)
            pending = {}
            for t in fetched.responses:
                for p in t.partitions:
                    sb.expect(p.error_code == 0 and p.acknowledge_error_code == 0, f"ShareFetch partition: {p}")
                    runs = [(int(a.first_offset), int(a.last_offset)) for a in p.acquired_records]
                    if not runs:
                        continue
                    sb.expect(all(a.delivery_count == 1 for a in p.acquired_records), "a record delivered twice")
                    first, end, _ = batch_span(p.records or b"")
                    sb.expect(first <= runs[0][0] and runs[-1][1] < end, f"acquired {runs} outside [{first}, {end})")
                    for f, la in runs:
                        sb.expect(f == seen.get(p.partition_index, 0), f"partition {p.partition_index}: a gap at {f}")
                        seen[p.partition_index] = la + 1
                        acquired += la - f + 1
                    pending[p.partition_index] = runs
            if time.monotonic() - last_heartbeat >= interval_s:
                beat = conn.call(
                    SHARE_GROUP_HEARTBEAT, group_id=group, member_id=member_id, member_epoch=member_epoch,
                    rack_id=None, subscribed_topic_names=None,
                )  # fmt: skip
                sb.expect(beat.error_code == 0, f"ShareGroupHeartbeat: {beat.error_code}")
                member_epoch, last_heartbeat = beat.member_epoch, time.monotonic()
        last = conn.call(
            SHARE_ACKNOWLEDGE, group_id=group, member_id=member_id, share_session_epoch=FINAL_EPOCH,
            topics=[{"topic_id": topic.topic_id, "partitions": acknowledgements()}],
        )  # fmt: skip
        sb.expect(last.error_code == 0, f"ShareAcknowledge: {last.error_code} {last.error_message}")
        sb.expect(all(p.error_code == 0 for t in last.responses for p in t.partitions), f"ShareAcknowledge: {last}")
        writes += 1
        acknowledged += sum(la - f + 1 for runs in pending.values() for f, la in runs)
        sample = window.close("share", round_, acknowledged, conn, writes)
        sb.expect(acknowledged == acquired == topic.records, f"acknowledged {acknowledged} of {topic.records}")

        described = conn.call(
            DESCRIBE_SHARE_GROUP_OFFSETS,
            groups=[
                {"group_id": group, "topics": [{"topic_name": topic.name, "partitions": list(range(topic.partitions))}]}
            ],
        )
        starts = {p.partition_index: p.start_offset for g in described.groups for t in g.topics for p in t.partitions}
        sb.expect(starts == dict(enumerate(topic.end_offsets)), f"share start offsets {starts}")
        left = conn.call(
            SHARE_GROUP_HEARTBEAT, group_id=group, member_id=member_id, member_epoch=-1, rack_id=None,
            subscribed_topic_names=None,
        )  # fmt: skip
        sb.expect(left.error_code == 0, f"ShareGroupHeartbeat (leave): {left.error_code}")
        return sample
    finally:
        conn.close()


def fetch_round(server: Server, topic: Topic, group: str, round_: int, max_bytes: int) -> Sample:
    """A classic consumer reads every record of the topic and commits its positions after every fetch."""
    conn = Connection(server.port)
    try:
        window = Window(server)
        deadline = time.monotonic() + sb.PHASE_TIMEOUT_S
        positions = [0] * topic.partitions
        delivered, writes, first = 0, 0, 0
        while delivered < topic.records:
            sb.expect(time.monotonic() < deadline, f"fetch round: {delivered} of {topic.records} records read")
            order = [(first + k) % topic.partitions for k in range(topic.partitions)]
            first = (first + 1) % topic.partitions
            fetched = conn.call(
                FETCH, cluster_id=None, replica_id=-1, max_wait=MAX_WAIT_MS, min_bytes=1, max_bytes=max_bytes,
                isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[{
                    "topic_id": topic.topic_id,
                    "partitions": [
                        {"partition": p, "current_leader_epoch": -1, "fetch_offset": positions[p],
                         "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": PARTITION_MAX_BYTES}
                        for p in order
                    ],
                }],
            )  # fmt: skip
            sb.expect(fetched.error_code == 0, f"Fetch: {fetched.error_code}")
            moved: dict[int, int] = {}
            for t in fetched.responses:
                for p in t.partitions:
                    sb.expect(p.error_code == 0, f"Fetch partition {p.partition_index}: {p.error_code}")
                    start, end, _ = batch_span(p.records or b"")
                    if end > positions[p.partition_index]:
                        sb.expect(start <= positions[p.partition_index], f"Fetch: a gap before {start}")
                        delivered += end - positions[p.partition_index]
                        positions[p.partition_index] = moved[p.partition_index] = end
            if not moved:
                continue
            committed = conn.call(
                OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=[{
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                         "committed_metadata": ""}
                        for p, o in sorted(moved.items())
                    ],
                }],
            )  # fmt: skip
            codes = [p.error_code for t in committed.topics for p in t.partitions]
            sb.expect(all(c == 0 for c in codes), f"OffsetCommit: {codes}")
            writes += 1
        sample = window.close("fetch", round_, delivered, conn, writes)
        sb.expect(delivered == topic.records, f"read {delivered} of {topic.records}")

        offsets = conn.call(
            OFFSET_FETCH,
            groups=[
                {
                    "group_id": group,
                    "topics": [{"name": topic.name, "partition_indexes": list(range(topic.partitions))}],
                }
            ],
            require_stable=False,
        )
        found = {p.partition_index: p.committed_offset for g in offsets.groups for t in g.topics for p in t.partitions}
        sb.expect(found == dict(enumerate(topic.end_offsets)), f"committed offsets {found}")
        return sample
    finally:
        conn.close()


def fetch_bytes_for(topic: Topic, max_records: int) -> int:
    """The Fetch's MaxBytes that returns the whole batches holding about ``max_records`` records."""
    batches = max(math.ceil(max_records / topic.batch_records), 1)
    return int((batches + 0.5) * topic.batch_bytes)


def run_variant(variant: str, server: Server, topic: Topic, round_: int, args: argparse.Namespace) -> Sample:
    group = f"bench-{variant}-{round_}-{uuid.uuid4().hex[:8]}"
    if variant == "share":
        return share_round(server, topic, group, round_, args.max_records, args.share_max_bytes)
    max_bytes = args.fetch_max_bytes or fetch_bytes_for(topic, args.max_records)
    return fetch_round(server, topic, group, round_, max_bytes)


def describe(s: Sample) -> str:
    calls = ", ".join(f"{n} {k}" for k, n in sorted(s.calls.items()))
    return (
        f"{s.per_second:,.0f} records/s ({s.records:,} in {s.seconds:.2f} s), server CPU "
        f"{s.server_cpu_s / s.records * 1e6:.1f} µs/record, client {s.client_cpu_s / s.records * 1e6:.1f} µs/record; "
        f"{calls}; {s.server_faults / s.round_trips:.0f} server page faults per round trip; "
        f"coordinator log +{s.log.bytes:,} B in {s.log.appends} appends, {s.log.records} records"
    )


# ---------------------------------------------------------------------------------------------------------------
# cProfile


def profile_variant(args: argparse.Namespace, variant: str, tmp: Path) -> tuple[Sample, str]:
    """A fresh server under cProfile (switched on around one round, after a warm-up round)."""
    out = tmp / f"server-{variant}.prof"
    server = Server(args.data_root, out)
    with running(server, args.keep):
        conn = Connection(server.port)
        try:
            topic, _ = create_and_fill(conn, args.partitions, args.records, args.batch_records, args.value_bytes)
        finally:
            conn.close()
        run_variant(variant, server, topic, 0, args)
        server.signal(signal.SIGUSR1)
        sample = run_variant(variant, server, topic, 1, args)
        server.signal(signal.SIGUSR2)
        deadline = time.monotonic() + sb.PHASE_TIMEOUT_S
        while not out.exists():
            sb.expect(time.monotonic() < deadline, "the profile was not written")
            time.sleep(0.1)
    if args.profile_out:
        shutil.copyfile(out, f"{args.profile_out}.{variant}")
    return sample, sb.profile_summary(out, args.profile_top)


# ---------------------------------------------------------------------------------------------------------------
# summary


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _rate(s: Sample) -> float:
    return s.per_second


def _server_us(s: Sample) -> float:
    return s.server_cpu_s / s.records * 1e6


def _client_us(s: Sample) -> float:
    return s.client_cpu_s / s.records * 1e6


def paired(samples: Sequence[Sample], metric: Callable[[Sample], float]) -> list[float]:
    """``metric`` of share / ``metric`` of fetch, round by round."""
    fetch = {s.round: metric(s) for s in samples if s.variant == "fetch"}
    return [metric(s) / fetch[s.round] for s in samples if s.variant == "share" and s.round in fetch]


def throughput_table(samples: Sequence[Sample]) -> list[str]:
    rows = [
        "| variant | records/s (median; min–max) | server CPU / record | client CPU / record | round trips / round "
        "| records / round trip | ms / round trip | server page faults / round trip |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        mine = [s for s in samples if s.variant == variant]
        if not mine:
            continue
        rates = [_rate(s) for s in mine]
        calls = Counter[str]()
        for s in mine:
            calls.update(s.calls)
        trips = ", ".join(f"{n / len(mine):.0f} {k}" for k, n in sorted(calls.items()))
        per_trip = [s.records / s.round_trips for s in mine]
        ms = [s.seconds / s.round_trips * 1e3 for s in mine]
        rows.append(
            f"| {variant} | {_median(rates):,.0f} ({min(rates):,.0f}–{max(rates):,.0f}, n={len(mine)}) | "
            f"{_median([_server_us(s) for s in mine]):.1f} µs | {_median([_client_us(s) for s in mine]):.1f} µs | "
            f"{trips} | {_median(per_trip):.0f} | {_median(ms):.2f} | "
            f"{_median([s.server_faults / s.round_trips for s in mine]):.0f} |"
        )
    return rows


def ratio_lines(samples: Sequence[Sample]) -> list[str]:
    lines = []
    for name, metric in (
        ("records/s", _rate),
        ("server CPU / record", _server_us),
        ("client CPU / record", _client_us),
    ):
        ratios = paired(samples, metric)
        if ratios:
            lines.append(
                f"share / fetch, {name}: {_median(ratios):.3f} (median of {len(ratios)} rounds' ratios; "
                f"{min(ratios):.3f}–{max(ratios):.3f})"
            )
    return lines


def log_table(samples: Sequence[Sample]) -> list[str]:
    rows = [
        "| variant | requests that write / round | appends (fsyncs) / round | records appended / round "
        "| bytes / round | bytes / append | bytes / acknowledged (committed) record |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        mine = [s for s in samples if s.variant == variant]
        if not mine:
            continue
        kinds = Counter[str]()
        for s in mine:
            kinds.update(s.log.kinds)
        what = ", ".join(f"{n / len(mine):.0f} {k}" for k, n in kinds.most_common())
        rows.append(
            f"| {variant} | {_median([s.writes for s in mine]):.0f} | {_median([s.log.appends for s in mine]):.0f} | "
            f"{_median([s.log.records for s in mine]):.0f} ({what}) | {_median([s.log.bytes for s in mine]):,.0f} | "
            f"{_median([s.log.bytes / max(s.log.appends, 1) for s in mine]):.0f} | "
            f"{_median([s.log.bytes / s.records for s in mine]):.2f} |"
        )
    return rows


# ---------------------------------------------------------------------------------------------------------------
# main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=6, help="measured rounds of each variant (default 6)")
    parser.add_argument("--warmup", type=int, default=1, help="rounds of each variant not counted (default 1)")
    parser.add_argument("--records", type=int, default=300_000, help="records in the topic (default 300000)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    parser.add_argument("--max-records", type=int, default=500, help="ShareFetch MaxRecords (default 500)")
    parser.add_argument("--batch-records", type=int, default=100, help="records per produced batch (default 100)")
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes of each record's value (default 100)")
    parser.add_argument(
        "--fetch-max-bytes", type=int, help="the Fetch's MaxBytes (default: the batches of --max-records records)"
    )
    parser.add_argument(
        "--share-max-bytes", type=int, default=FETCH_MAX_BYTES, help="the ShareFetch's MaxBytes (default 52428800)"
    )
    parser.add_argument("--profile", action="store_true", help="also profile the server during one round of each")
    parser.add_argument("--profile-top", type=int, default=25, help="functions to print per profile listing")
    parser.add_argument("--profile-out", metavar="PREFIX", help="also keep the cProfile stats in PREFIX.<variant>")
    parser.add_argument("--data-root", help="where the temporary data directories go (default: the system tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories and server logs")
    parser.add_argument("--json", metavar="OUT", help="write machine-readable results to OUT")
    args = parser.parse_args(argv)
    if args.records < 1 or args.partitions < 1 or args.max_records < 1 or args.batch_records < 1:
        parser.error("--records, --partitions, --max-records and --batch-records must be positive")

    def report(line: str) -> None:
        print(line, flush=True)

    began = time.monotonic()
    facts = sb.machine_facts(args.data_root)
    report("machine: " + ", ".join(f"{k}={v}" for k, v in facts.items()))
    samples: list[Sample] = []
    results: dict[str, Any] = {"machine": facts, "args": vars(args)}
    if args.rounds > 0:
        server = Server(args.data_root)
        with running(server, args.keep):
            conn = Connection(server.port)
            try:
                topic, produce_s = create_and_fill(
                    conn, args.partitions, args.records, args.batch_records, args.value_bytes
                )
            finally:
                conn.close()
            fetch_bytes = args.fetch_max_bytes or fetch_bytes_for(topic, args.max_records)
            report(
                f"topic {topic.name}: {topic.partitions} partitions, end offsets {topic.end_offsets}, batches of "
                f"{topic.batch_records} records ({topic.batch_bytes:.0f} bytes), produced in {produce_s:.1f} s; "
                f"ShareFetch MaxRecords {args.max_records} MaxBytes {args.share_max_bytes:,}, Fetch MaxBytes "
                f"{fetch_bytes:,}"
            )
            results["topic"] = asdict(topic) | {"produce_s": produce_s, "fetch_max_bytes": fetch_bytes}
            for n in range(args.warmup):
                for variant in VARIANTS:
                    report(f"warm-up {variant}: {describe(run_variant(variant, server, topic, -n - 1, args))}")
            for round_ in range(1, args.rounds + 1):
                for variant in VARIANTS if round_ % 2 else VARIANTS[::-1]:
                    sample = run_variant(variant, server, topic, round_, args)
                    samples.append(sample)
                    report(f"round {round_} {variant}: {describe(sample)}")
    profiles: dict[str, str] = {}
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="regroup-bench-share-", dir=args.data_root) as tmp:
            for variant in VARIANTS:
                sample, text = profile_variant(args, variant, Path(tmp))
                report(f"{variant} under cProfile: {describe(sample)}")
                profiles[variant] = text
                report(f"=== {variant} ===\n{text}")
    report(f"\nwall time {time.monotonic() - began:.0f} s, load average at the end {os.getloadavg()}")
    if samples:
        report("\n" + "\n".join(throughput_table(samples)))
        report("\n".join(ratio_lines(samples)))
        report("\n" + "\n".join(log_table(samples)))
    if args.json:
        results["samples"] = [s.row() for s in samples]
        results["profiles"] = profiles
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
