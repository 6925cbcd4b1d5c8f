"""The server's log: rebalance events as key=value lines (without ``--events``) and the periodic request-rate
line."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from tests.server.conftest import ServerProcess
from tests.server.test_process import form_stable_group
from tests.server.wire import HEARTBEAT, WireClient

MakeServer = Callable[..., ServerProcess]


def wait_for_log(server: ServerProcess, pattern: str, timeout: float = 15.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        match = re.search(pattern, server.log(), re.MULTILINE)
        if match or time.monotonic() > deadline:
            assert match, f"no {pattern!r} in:\n{server.log()[-3000:]}"
            return match
        time.sleep(0.1)


def test_rebalance_events_and_request_rates_are_logged(make_server: MakeServer) -> None:
    server = make_server("--stats-interval", "1")
    with WireClient(server.port, client_id="logged") as client:
        member_id = form_stable_group(client, "logged-group")
        for _ in range(5):
            assert (
                client.call(HEARTBEAT, 4, group_id="logged-group", generation_id=1, member_id=member_id).error_code == 0
            )
    states = re.findall(r"regroup\.server\.rebalances group=logged-group state=(\w+) generation=(\d+)", server.log())
    assert states == [("Empty", "0"), ("PreparingRebalance", "0"), ("CompletingRebalance", "1"), ("Stable", "1")]
    assert f"leader={member_id} members=1" in server.log()
    # every request of the burst lands in some one-second window; a window's line carries its total and rate
    rates = wait_for_log(server, r"requests last_1s total=(\d+) per_s=([\d.]+) connections=\d+ (.*)$")
    assert float(rates.group(2)) == int(rates.group(1))
    deadline = time.monotonic() + 15
    while (counted := counted_requests(server)) != {"JoinGroup": 2, "SyncGroup": 1, "Heartbeat": 5}:
        assert time.monotonic() < deadline, counted
        time.sleep(0.2)


def counted_requests(server: ServerProcess) -> dict[str, int]:
    counted: dict[str, int] = {}
    for line in re.findall(r"requests last_1s total=\d+ per_s=[\d.]+ connections=\d+ (.*)$", server.log(), re.M):
        for name, n in re.findall(r"(\w+)=(\d+)", line):
            counted[name] = counted.get(name, 0) + int(n)
    return counted
