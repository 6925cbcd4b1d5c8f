"""What an open dashboard costs the groups: heartbeat throughput of ``regroup serve`` with its HTTP console on,
a dashboard's requests running and the rebalance history's window full, against the same server without a
console, side by side in one run.

Usage::

    .venv/bin/python bench/console.py                      # 3 rounds, alternating none / console
    .venv/bin/python bench/console.py --rounds 5 --hb-seconds 10 --history-rows 500000
    .venv/bin/python bench/console.py --json /tmp/bench-console.json

Each round starts the servers of ``--kinds``, one after the other (the next round in the reverse order):

* **none**: ``regroup serve`` as ``bench/server.py`` starts it (no ``--http-port``: no console, no history);
* **console**: the same plus ``--http-port 0`` (history window 24 h). Before it starts, its history directory
  is filled with ``--history-rows`` event rows of ``--history-groups`` classic groups (each rebalance a
  PreparingRebalance, CompletingRebalance and Stable row and one assignment row per partition, all within the
  last hour), which it loads at start; while heartbeats run, a thread plays an open dashboard: one
  Server-Sent Events stream on ``/api/events`` read as it comes, and every ``--poll-s`` seconds (the page's
  own refresh when no rows arrive) the list (``/api/groups``), the heartbeating group's page
  (``/api/groups/<id>``) and its timeline (in full, then from the previous fetch on), as the page asks.
* **console-idle** (``--kinds none,console-idle,console``): the console on with an empty history and no
  dashboard open: what the console costs by being on; **console-history**: its history full, no dashboard.

In both, ``bench/server.py``'s cases run: one 1,000-member classic rebalance (``--members``), then that group's
members heartbeat flat out over ``--connections`` connections for ``--hb-seconds`` after ``--hb-warmup``.
Reported per server: heartbeats per second, p50 / p99 latency, the server's CPU seconds; then the ratio
console / none of the medians over the rounds. Heartbeats produce no event rows, so what the console costs
them is its HTTP requests and stream on the same event loop, and the history's memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from regroup.model.eventlog import FIELDS
from server_loader import load_server_bench

sb = load_server_bench()
_HTTP = re.compile(rb"http=http://([^/\s]+)/")
GROUP = "bench-join-1"


class ConsoleServer(sb.ServerProcess):  # type: ignore[misc,name-defined]
    """``regroup serve`` with its HTTP console on a port of its choosing and a history already written."""

    def __init__(self, fsync: str, data_root: str | None, rows: int, groups: int) -> None:
        super().__init__(fsync, data_root)
        fill_history(self.dir / "data" / "history", rows, groups)

    def command(self) -> list[str]:
        return [*super().command(), "--http-port", "0", "--history-window", "24h"]

    def http_base(self) -> str:
        match = _HTTP.search(self.log_path.read_bytes())
        if match is None:
            raise RuntimeError("the server did not name its HTTP port")
        return f"http://{match.group(1).decode()}"


def fill_history(directory: Path, rows: int, groups: int) -> None:
    """``rows`` event rows of ``groups`` classic groups rebalancing over the last hour, in the history log's
    segment format (JSON lines of the event-log schema)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    start = now - 3_600_000
    written = 0
    partitions = 32
    per_rebalance = 3 + partitions
    rebalances = max(1, rows // (per_rebalance * groups))
    step = 3_600_000 // (rebalances + 1)
    seq = 0

    def row(t: int, kind: str, **values: Any) -> str:
        nonlocal seq
        seq += 1
        out = dict.fromkeys(FIELDS)
        out.update(values, seq=seq, t=t, type=kind)
        return json.dumps(out, separators=(",", ":"))

    with (directory / "000000000001.jsonl").open("w") as f:
        for r in range(rebalances):
            for g in range(groups):
                t = start + r * step + g
                detail = f"group=history-{g} type=classic protocol=range rebalance=eager leader=m-0"
                lines = [
                    row(t, "group_state", state="PreparingRebalance", generation=r, detail=f"{detail} cause=join"),
                    row(t + 5, "group_state", state="CompletingRebalance", generation=r + 1, detail=detail),
                    row(t + 9, "group_state", state="Stable", generation=r + 1, detail=detail),
                ]
                lines += [
                    row(
                        t + 9,
                        "group_assignment",
                        member=f"c{(p + r) % 8}",
                        member_id=f"m-{(p + r) % 8}",
                        generation=r + 1,
                        topic="t",
                        partition=p,
                        detail=f"group=history-{g}",
                    )
                    for p in range(partitions)
                ]
                f.write("\n".join(lines) + "\n")
                written += len(lines)
                if written >= rows:
                    return


class Dashboard:
    """An open dashboard's requests, in a thread: the event stream, and the page's fetches every ``poll_s``."""

    def __init__(self, base: str, poll_s: float) -> None:
        self.base = base
        self.poll_s = poll_s
        self.fetches = 0
        self.stream_bytes = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._poll, daemon=True),
            threading.Thread(target=self._stream, daemon=True),
        ]

    def __enter__(self) -> Dashboard:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._threads[0].join(timeout=30)

    def _get(self, path: str) -> None:
        with urllib.request.urlopen(self.base + path, timeout=30) as response:
            response.read()
        self.fetches += 1

    def _poll(self) -> None:
        """As the group page does with no rows arriving: the list, the group, and its timeline, in full the first
        time and from the last fetch on after that (``since_ms``)."""
        since: int | None = None
        while not self._stop.is_set():
            try:
                self._get("/api/groups")
                self._get(f"/api/groups/{GROUP}")
                now = int(time.time() * 1000)
                self._get(f"/api/groups/{GROUP}/timeline" + ("" if since is None else f"?since_ms={since}"))
                since = now
            except Exception as exc:  # reported, not fatal to the measurement
                self.errors.append(repr(exc))
            self._stop.wait(self.poll_s)

    def _stream(self) -> None:
        try:
            with urllib.request.urlopen(self.base + "/api/events", timeout=3600) as response:
                while not self._stop.is_set():
                    chunk = response.read1(65536)
                    if not chunk:
                        return
                    self.stream_bytes += len(chunk)
        except Exception as exc:
            if not self._stop.is_set():
                self.errors.append(repr(exc))


async def measure(server: Any, args: argparse.Namespace, dashboard: bool) -> dict[str, Any]:
    admin = await sb.bounded(sb.KafkaConnection.open(server.port), "connect")
    conns = await sb.open_members(server.port, args.members)
    try:
        _, joined = await sb.join_case(server, conns, admin, GROUP)
    finally:
        for conn in conns:
            conn.close()
    extra: dict[str, Any] = {}
    if dashboard:
        with Dashboard(server.http_base(), args.poll_s) as page:
            hb = await sb.heartbeat_case(
                server, joined, args.members, args.connections, args.hb_seconds, args.hb_warmup, 10**9
            )
        extra = {"dashboard_fetches": page.fetches, "stream_bytes": page.stream_bytes, "dashboard_errors": page.errors}
    else:
        hb = await sb.heartbeat_case(
            server, joined, args.members, args.connections, args.hb_seconds, args.hb_warmup, 10**9
        )
    admin.close()
    return {
        "per_second": hb.per_second,
        "p50_ms": hb.p50_ms,
        "p99_ms": hb.p99_ms,
        "server_cpu_s": hb.server_cpu_s,
        **extra,
    }


KINDS = ("none", "console", "console-idle", "console-history")


def run_one(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """``none``: no console; ``console``: the console with its history full and a dashboard open;
    ``console-idle``: the console on, an empty history, no dashboard (what the console costs by being on);
    ``console-history``: the console on with its history full, no dashboard."""
    t0 = time.perf_counter()
    if kind == "none":
        server = sb.ServerProcess(args.fsync, args.data_root)
    else:
        rows = 0 if kind == "console-idle" else args.history_rows
        server = ConsoleServer(args.fsync, args.data_root, rows, args.history_groups)
    server.start()
    started_s = time.perf_counter() - t0
    try:
        result = asyncio.run(measure(server, args, kind == "console"))
    finally:
        server.stop()
    result["start_s"] = round(started_s, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two servers (default 3)")
    parser.add_argument("--members", type=int, default=1000, help="group members (default 1000)")
    parser.add_argument("--connections", type=int, default=10, help="connections they share (default 10)")
    parser.add_argument("--hb-seconds", type=float, default=8.0, help="measured seconds (default 8)")
    parser.add_argument("--hb-warmup", type=float, default=2.0, help="seconds not counted first (default 2)")
    parser.add_argument("--history-rows", type=int, default=300_000, help="rows in the history (default 300000)")
    parser.add_argument("--history-groups", type=int, default=100, help="groups in the history (default 100)")
    parser.add_argument(
        "--poll-s", type=float, default=5.0, help="the dashboard's fetch period (default 5 s, the page's own)"
    )
    parser.add_argument(
        "--kinds", default="none,console", help=f"servers to alternate, among {', '.join(KINDS)} (default none,console)"
    )
    parser.add_argument("--fsync", default="never", help="the servers' --fsync (default never)")
    parser.add_argument("--data-root", help="where the temporary data directories go")
    parser.add_argument("--json", metavar="OUT", help="write the results to OUT")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        parser.error(f"--kinds: {', '.join(unknown) or 'none given'} (known: {', '.join(KINDS)})")
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for kind in order:
            result = run_one(kind, args)
            results[kind].append(result)
            print(
                f"round {r + 1} {kind:8s} {result['per_second']:9.0f} hb/s  p50 {result['p50_ms']:.2f} ms  "
                f"p99 {result['p99_ms']:.2f} ms  server cpu {result['server_cpu_s']:.1f} s"
                + (
                    f"  (fetches {result['dashboard_fetches']}, stream {result['stream_bytes']} B, "
                    f"start {result['start_s']} s, errors {len(result['dashboard_errors'])})"
                    if kind == "console"
                    else ""
                ),
                flush=True,
            )
    base = kinds[0]
    reference = statistics.median(r["per_second"] for r in results[base])
    for kind in kinds[1:]:
        median = statistics.median(r["per_second"] for r in results[kind])
        print(f"median heartbeats/s: {base} {reference:.0f}, {kind} {median:.0f}; ratio {median / reference:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
