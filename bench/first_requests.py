"""The first request of an API version in a fresh ``regroup serve``: how long does it hold the event loop?

Usage::

    .venv/bin/python bench/first_requests.py                               # this tree's server
    .venv/bin/python bench/first_requests.py --before /tmp/before/src --rounds 3

A server process meets each API version's first request once: kio's modules for that version are imported and
their readers and writers composed then (4-10 ms each, ``network/codec.prepare_version``). For each tree
(``--before DIR`` first, alternated over ``--rounds``) the harness starts ``python -m regroup serve`` with the
stall watchdog at ``--stall-warn-ms`` (default 2 ms) and its metrics on, sends from one connection one request of
each version in ``FIRST_REQUESTS`` (admin and inspection APIs, each answered at once on an empty server), 50 ms
apart, and reads the watchdog's counts (``regroup_event_loop_stalls_total``): the request steps over the
threshold by API, and the loop's lateness over it that no request step explains (``none``: the loop waiting, for
the interpreter's lock among other things). The longest turn is the watchdog's since start (start-up included).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from server_loader import load_server_bench
from stall import StallServer, scrape

sb = load_server_bench()

#: (api key, version, fields): requests a fresh server answers at once, none of a group membership API
FIRST_REQUESTS: list[tuple[int, int, dict[str, Any]]] = [
    (3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
    (15, 5, {"groups": ["bench-first"], "include_authorized_operations": False}),
    (10, 4, {"key_type": 0, "coordinator_keys": ["bench-first"]}),
    (16, 4, {"states_filter": [], "types_filter": []}),
    (60, 0, {"include_cluster_authorized_operations": False}),
    (
        32,
        4,
        {
            "resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        },
    ),
    (69, 0, {"group_ids": ["bench-first"], "include_authorized_operations": False}),
    (9, 8, {"groups": [{"group_id": "bench-first", "topics": None}], "require_stable": False}),
    (66, 0, {"state_filters": [], "producer_id_filter": []}),
]
GAP_S = 0.05


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return data

    return exactly(int.from_bytes(exactly(4), "big"))


def one_server(source: str | None, data_root: str | None, stall_warn_ms: int) -> dict[str, float]:
    """Start a server of ``source``, send ``FIRST_REQUESTS``; the watchdog's stalls by API, and its longest turn."""
    server = StallServer("never", data_root, source=source)
    server.stall_warn_ms = stall_warn_ms
    server.start()
    try:
        time.sleep(0.5)  # (the start-up's own turns are over)
        port = server.metrics_port()
        with socket.create_connection((sb.HOST, server.port), timeout=30) as sock:
            for correlation, (api_key, version, fields) in enumerate(FIRST_REQUESTS, 1):
                sock.sendall(sb.encode_request(api_key, version, correlation, **fields))
                _read_frame(sock)
                time.sleep(GAP_S)
        time.sleep(0.2)
        samples = scrape(port)
    finally:
        server.stop()
    counts = {
        labels.split('"')[1]: value
        for (name, labels), value in samples.items()
        if name == "regroup_event_loop_stalls_total" and value
    }
    counts["longest turn, ms"] = samples.get(("regroup_event_loop_longest_turn_seconds", ""), 0.0) * 1000
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="DIR", help="also run the server from the regroup package under DIR")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--stall-warn-ms", type=int, default=2)
    parser.add_argument("--data-root", help="where the temporary data directories go")
    args = parser.parse_args(argv)
    trees: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        trees.insert(0, ("before", args.before))
    print("| tree | round | request steps over the threshold, by API | none | longest turn, ms |")
    print("|---|---|---|---|---|")
    for round_ in range(args.rounds):
        order = trees if round_ % 2 == 0 else trees[::-1]
        for label, source in order:
            counts = one_server(source, args.data_root, args.stall_warn_ms)
            longest = counts.pop("longest turn, ms")
            none = counts.pop("none", 0)
            named = ", ".join(f"{api} {n:.0f}" for api, n in sorted(counts.items())) or "-"
            print(f"| {label} | {round_ + 1} | {named} | {none:.0f} | {longest:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
