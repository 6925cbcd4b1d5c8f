"""The connection layer's own CPU per request (``network/connection.py``), without the rest of the server:
what its framing, ordering, budgets and back-pressure bookkeeping cost on the fast path.

Usage::

    .venv/bin/python bench/connection.py                              # this tree
    .venv/bin/python bench/connection.py --before /tmp/base/src       # and another tree's, alternated

A ``Connection`` is fed real request frames (ApiVersions v2 headers) through ``data_received``, one frame per
read (a client with one request in flight) and 100 per read (a pipelining client); its dispatcher answers at
once with a fixed 12-byte response and its transport takes every write. What is timed is therefore only the
connection's work plus decoding the request header. Each tree runs in its own subprocess (its ``regroup``
package first on ``PYTHONPATH``); rounds alternate before, after, after, before, ...; each figure is the
best of 5 repeats of ``--reads`` reads, in CPU time (``time.process_time``), and the summary gives the
median over rounds. Stubs stand in for the dispatcher and the socket on purpose: on the shared 2-vCPU
machine of docs/benchmarks.md, whole-server throughput swings by more than the few tenths of a microsecond
this measures; ``bench/server.py --before`` gives the whole-server picture.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, ClassVar

LAYOUTS = (1, 100)  # requests per read


def _frame(correlation_id: int) -> bytes:
    payload = struct.pack(">hhih", 18, 2, correlation_id, 1) + b"x"  # ApiVersions v2, client id "x"
    return struct.pack(">i", len(payload)) + payload


async def _measure(per_read: int, reads: int) -> float:
    from regroup.network.connection import Connection

    class Dispatcher:
        versions: ClassVar[dict[int, tuple[int, int]]] = {18: (0, 4)}

        async def respond(self, request: Any, *, client_host: str, connection_id: int) -> bytes:
            return b"\x00\x00\x00\x08" + b"x" * 8

    class Transport(asyncio.Transport):
        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return ("127.0.0.1", 1) if name == "peername" else default

        def write(self, data: Any) -> None:
            pass

        def get_write_buffer_size(self) -> int:
            return 0

        def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
            pass

        def pause_reading(self) -> None:
            pass

        def resume_reading(self) -> None:
            pass

        def close(self) -> None:
            pass

    connection = Connection(Dispatcher(), 1)  # type: ignore[arg-type]
    connection.connection_made(Transport())
    data = b"".join(_frame(i) for i in range(per_read))

    async def feed(n: int) -> None:
        for _ in range(n):
            connection.data_received(data)
            if getattr(connection, "_next_turn", None) is not None:  # a turn's budget ran out: let it run
                await asyncio.sleep(0)

    await feed(2_000)
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        await feed(reads)
        best = min(best, (time.process_time() - started) / (reads * per_read))
    return best


def child(reads: int) -> int:
    results = [asyncio.run(_measure(per_read, reads // per_read)) for per_read in LAYOUTS]
    print(" ".join(f"{r * 1e6:.4f}" for r in results))
    return 0


def run_tree(source: str | None, reads: int) -> list[float]:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--reads", str(reads)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    return [float(x) for x in out.split()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--before", metavar="DIR", help="also measure the regroup package under DIR")
    parser.add_argument("--rounds", type=int, default=4, help="rounds (default 4)")
    parser.add_argument("--reads", type=int, default=200_000, help="requests per repeat (default 200000)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.reads)
    trees: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        trees.insert(0, ("before", args.before))
    results: dict[str, list[list[float]]] = {tree: [] for tree, _ in trees}
    for round_ in range(1, args.rounds + 1):
        for tree, source in trees if round_ % 2 else trees[::-1]:
            got = run_tree(source, args.reads)
            results[tree].append(got)
            line = ", ".join(f"{n}/read {us:.3f} µs" for n, us in zip(LAYOUTS, got, strict=True))
            print(f"  round {round_} {tree}: {line}", flush=True)
    rows = ["| requests per read | " + " | ".join(t for t, _ in trees) + " |", "|---" * (len(trees) + 1) + "|"]
    for i, per_read in enumerate(LAYOUTS):
        medians = [statistics.median(r[i] for r in results[tree]) for tree, _ in trees]
        cells = [f"{m:.3f} µs" for m in medians]
        if len(medians) == 2:
            cells[1] += f" ({medians[1] - medians[0]:+.3f})"
        rows.append(f"| {per_read} | " + " | ".join(cells) + " |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
