"""The server's own CPU per heartbeat, from a request frame read to its answer written, in process: the whole
path (connection, decoding, dispatcher, handler, coordinator runtime and core, encoding) without the client,
the socket or the scheduler of a shared machine in the figure.

Usage::

    .venv/bin/python bench/heartbeat_path.py                              # this tree
    .venv/bin/python bench/heartbeat_path.py --before /tmp/base/src       # and another tree's, alternated

A ``regroup`` server (``server/app.Server``, ``--fsync never``) runs in the benchmark's own event loop. A
classic group of ``--members`` members forms over real sockets (``bench/server.py``'s join), and a KIP-848
group of as many members through ConsumerGroupHeartbeat. Then one connection of the server, on a transport
that takes every write, is fed every member's steady heartbeat (Heartbeat v4; ConsumerGroupHeartbeat v1 with
member id and epoch), 100 frames per read, as a pipelining client sends them. Each answer is checked once
(error code NONE). Each tree runs in its own subprocess; rounds alternate before, after, after, before, ...;
a round's figure is the best of 5 repeats of ``--reads`` heartbeats in CPU time (``time.process_time``), and
the summary gives the median over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server_loader import load_server_bench

PER_READ = 100
CONSUMER_GROUP_HEARTBEAT, HEARTBEAT = 68, 12


class _Transport(asyncio.Transport):
    """Takes every write; the last one is kept for the answer check."""

    def __init__(self) -> None:
        super().__init__()
        self.last = b""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.last = bytes(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


class _CpuClock:
    """``join_case`` asks the server for its CPU time: here the server is this process."""

    def cpu_seconds(self) -> float:
        return time.process_time()


async def _consumer_members(sb: Any, port: int, group: str, n: int) -> list[tuple[str, int]]:
    """``n`` KIP-848 members of ``group``, joined and reconciled: (member id, epoch) each."""
    conn = await sb.KafkaConnection.open(port)
    members: list[tuple[str, int]] = []
    for i in range(n):
        member_id = f"bench-member-{i:06d}-xxxxxxxx"
        fields = {
            "group_id": group,
            "member_id": member_id,
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 300_000,
            "subscribed_topic_names": ["bench-hb-path-topic"],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        }
        response = await sb._request(conn, CONSUMER_GROUP_HEARTBEAT, 1, **fields)
        sb.expect(response.error_code == 0, f"ConsumerGroupHeartbeat: {response.error_code} {response.error_message}")
        members.append((member_id, response.member_epoch))
    # everyone at the group's latest epoch
    out: list[tuple[str, int]] = []
    for member_id, epoch in members:
        fields = {"group_id": group, "member_id": member_id, "member_epoch": epoch}
        response = await sb._request(conn, CONSUMER_GROUP_HEARTBEAT, 1, **_steady(fields))
        sb.expect(response.error_code == 0, f"ConsumerGroupHeartbeat: {response.error_code} {response.error_message}")
        out.append((member_id, response.member_epoch))
    conn.transport.close()
    return out


def _steady(fields: dict[str, Any]) -> dict[str, Any]:
    """A steady ConsumerGroupHeartbeat: member id and epoch, every other field null (unchanged)."""
    return {
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": -1,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None,
        **fields,
    }


def _reads(frames: list[bytes]) -> list[bytes]:
    return [b"".join(frames[i : i + PER_READ]) for i in range(0, len(frames), PER_READ)]


async def _feed(connection: Any, reads: list[bytes], total: int) -> None:
    fed = 0
    while fed < total:
        for data in reads:
            connection.data_received(data)
            await asyncio.sleep(0)  # one read per turn of the loop, as from a socket
            fed += PER_READ
            if fed >= total:
                return


async def _measure(members: int, reads: int) -> tuple[float, float]:
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.server.app import Server, ServerConfig, _security, listeners_of
    from regroup.storage.record_log import FsyncPolicy

    sb = load_server_bench()
    with tempfile.TemporaryDirectory(prefix="regroup-bench-hb-path-") as tmp:
        cfg = ServerConfig(
            host="127.0.0.1",
            port=0,
            data_dir=Path(tmp),
            fsync=FsyncPolicy.NEVER,
            stats_interval_s=3600.0,
            coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        )
        server = Server(cfg)
        await server.start()
        try:
            port = server._listeners[0].sockets[0].getsockname()[1]
            security = _security(listeners_of(cfg)[0], None)
            conns = await sb.open_members(port, members)
            admin = await sb.KafkaConnection.open(port)
            _, joined = await sb.join_case(_CpuClock(), conns, admin, "bench-hb-path-classic")
            consumers = await _consumer_members(sb, port, "bench-hb-path-consumer", members)
            connection = server._new_connection(security)
            transport = _Transport()
            connection.connection_made(transport)
            classic = [
                sb.encode_request(
                    HEARTBEAT,
                    4,
                    i,
                    group_id=joined.group,
                    generation_id=joined.generation,
                    member_id=member_id,
                    group_instance_id=None,
                )
                for i, member_id in enumerate(joined.member_ids)
            ]
            kip848 = [
                sb.encode_request(
                    CONSUMER_GROUP_HEARTBEAT,
                    1,
                    i,
                    **_steady({"group_id": "bench-hb-path-consumer", "member_id": m, "member_epoch": e}),
                )
                for i, (m, e) in enumerate(consumers)
            ]
            results = []
            for frames, api_key, version in ((classic, HEARTBEAT, 4), (kip848, CONSUMER_GROUP_HEARTBEAT, 1)):
                batches = _reads(frames)
                await _feed(connection, batches, len(frames))
                answer = sb.decode_response(api_key, version, _last_frame(transport.last))
                sb.expect(answer.error_code == 0, f"api {api_key}: error {answer.error_code}")
                best = float("inf")
                for _ in range(5):
                    started = time.process_time()
                    await _feed(connection, batches, reads)
                    best = min(best, (time.process_time() - started) / reads)
                results.append(best)
            for conn in [*conns, admin]:
                conn.transport.close()
            return results[0], results[1]
        finally:
            await server.close()


def _last_frame(data: bytes) -> bytes:
    offset = 0
    last = b""
    while offset + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, offset)
        last = data[offset + 4 : offset + 4 + size]
        offset += 4 + size
    return last


def child(members: int, reads: int) -> int:
    classic, kip848 = asyncio.run(_measure(members, reads))
    print(f"{classic * 1e6:.4f} {kip848 * 1e6:.4f}")
    return 0


def run_tree(source: str | None, members: int, reads: int) -> list[float]:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--members", str(members), "--reads", str(reads)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise SystemExit(f"heartbeat_path: a run failed: {out.stderr.strip().splitlines()[-1:]}")
    return [float(x) for x in out.stdout.split()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--before", metavar="DIR", help="also measure the regroup package under DIR")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--members", type=int, default=1000, help="members per group (default 1000)")
    parser.add_argument("--reads", type=int, default=50_000, help="heartbeats per repeat (default 50000)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.members < 2 or args.reads < PER_READ or args.rounds < 1:
        parser.error("--members must be at least 2, --reads at least 100, --rounds at least 1")
    if args.child:
        return child(args.members, args.reads)
    trees: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        trees = [("before", args.before), ("after", None)]
    figures: dict[str, list[list[float]]] = {name: [] for name, _ in trees}
    for round_ in range(args.rounds):
        order = trees if round_ % 2 == 0 else list(reversed(trees))
        for name, source in order:
            result = run_tree(source, args.members, args.reads)
            figures[name].append(result)
            print(f"round {round_ + 1} {name}: Heartbeat {result[0]:.2f} us, ConsumerGroupHeartbeat {result[1]:.2f} us")
    print("| tree | Heartbeat v4 µs (per s) | ConsumerGroupHeartbeat v1 µs (per s) |")
    print("|---|---|---|")
    medians = {}
    for name, _ in trees:
        classic = statistics.median(r[0] for r in figures[name])
        kip848 = statistics.median(r[1] for r in figures[name])
        medians[name] = (classic, kip848)
        print(f"| {name} | {classic:.2f} ({1e6 / classic:,.0f}) | {kip848:.2f} ({1e6 / kip848:,.0f}) |")
    if "before" in medians:
        (b0, b1), (a0, a1) = medians["before"], medians["after"]
        print(f"| after / before CPU | {a0 / b0:.3f} | {a1 / b1:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
