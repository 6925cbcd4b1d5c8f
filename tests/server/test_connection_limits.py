"""Connection limits (``--max-connections``, ``--max-connections-per-ip``: Kafka's ``max.connections`` and
``max.connections.per.ip``): a connection over a limit is closed at once, refusals are counted in the
metrics and logged once per address per interval, and room comes back when connections close. And
``accept()`` failing because the process is out of file descriptors neither spins nor floods the log, and
accepting resumes once descriptors free up.

Other client hosts are played by connecting from other loopback addresses (127.0.0.2, ...: Linux routes
all of 127/8 to the loopback interface)."""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerProcess, assert_clean_log, free_port
from tests.server.test_metrics import scrape, value
from tests.server.test_process import run_cli
from tests.server.wire import API_VERSIONS, WireClient

MakeServer = Callable[..., ServerProcess]
A, B = "127.0.0.1", "127.0.0.2"


def admitted(port: int, source: str) -> WireClient:
    client = WireClient(port, source=source)
    assert client.call(API_VERSIONS, 2).error_code == 0
    return client


def refused(port: int, source: str) -> bool:
    """Connect from ``source``: True if the server closes the connection at once without reading."""
    with WireClient(port, source=source) as client:
        return client.is_closed_by_server(timeout=5)


def eventually_admitted(port: int, source: str, refusals: list[str], reason: str) -> WireClient:
    """A closed connection is released when the server sees the close; until then a new one may still be
    refused (for ``reason``, recorded)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        client = WireClient(port, source=source)
        if not client.is_closed_by_server(timeout=0.3):
            assert client.call(API_VERSIONS, 2).error_code == 0
            return client
        client.close()
        refusals.append(reason)
    raise AssertionError(f"no room for a connection from {source} after others closed")


def test_total_and_per_address_limits_are_enforced_and_recovered(make_server: MakeServer) -> None:
    metrics_port = free_port()
    server = make_server("--max-connections", "5", "--max-connections-per-ip", "3", "--metrics-port", str(metrics_port))
    port = server.port
    refusals: list[str] = []
    a = [admitted(port, A) for _ in range(3)]
    for _ in range(10):  # a client retrying in a loop: every attempt closed, one log line
        assert refused(port, A)
        refusals.append("max_connections_per_ip")
    b = [admitted(port, B) for _ in range(2)]  # five open: the total limit
    assert refused(port, B)
    refusals.append("max_connections")
    assert all(c.call(API_VERSIONS, 2).error_code == 0 for c in a + b)  # the admitted ones are untouched

    a.pop().close()  # room for one more in total, and B has two of its three
    b.append(eventually_admitted(port, B, refusals, "max_connections"))
    a.pop().close()
    assert refused(port, B)  # B is at its own limit now, whatever the total
    refusals.append("max_connections_per_ip")
    a.append(eventually_admitted(port, A, refusals, "max_connections"))

    _, samples = scrape(metrics_port)
    assert value(samples, "regroup_connections") == 5
    for reason in ("max_connections", "max_connections_per_ip"):
        got = value(samples, "regroup_connections_refused_total", reason=reason)
        assert got == refusals.count(reason), (reason, got, refusals)
    assert value(samples, "regroup_connections_refused_total", reason="open_files") == 0
    for client in a + b:
        client.close()
    log = server.log()
    assert log.count(f"refusing connection from {A}:") == 1, log
    assert log.count(f"refusing connection from {B}:") == 1, log
    assert "--max-connections-per-ip" in log and "(--max-connections)" in log


def test_connection_limit_flags_are_checked() -> None:
    for bad in (
        ["--max-connections", "0"],
        ["--max-connections-per-ip", "-1"],
        ["--connection-max-in-flight", "0"],
        ["--connection-max-queued-bytes", "x"],
    ):
        result = run_cli("--log-level", "error", *bad)
        assert (result.returncode, result.stderr.count("\n")) == (2, 1), (bad, result.stderr)


OPEN_FILES = 128


class FewFilesServer(ServerProcess):
    """``regroup serve`` under an open-file limit of ``OPEN_FILES`` (soft and hard: it cannot raise it)."""

    def command(self) -> list[str]:
        limit = f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, ({OPEN_FILES}, {OPEN_FILES}))"
        run = "import sys; from regroup.cli.main import main; sys.exit(main(sys.argv[1:]))"
        return [sys.executable, "-c", f"{limit}\n{run}", *self.command_args()]

    def command_args(self) -> list[str]:
        return ServerProcess.command(self)[3:]  # after: python -m regroup


@pytest.fixture(params=["asyncio", "uvloop"])
def few_files_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[FewFilesServer, int]]:
    metrics_port = free_port()
    args = ["--metrics-port", str(metrics_port), "--event-loop", request.param]
    server = FewFilesServer(tmp_path / "data", tmp_path / "server.log", args)
    server.start()
    try:
        yield server, metrics_port
    finally:
        server.kill()
    assert_clean_log(server)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # clock ticks (USER_HZ is 100 on Linux)


METRICS_HEAD_TIMEOUT_S = 10


def open_descriptors(pid: int) -> int:
    """How many descriptors process ``pid`` has open (``/proc``; its limit when none is free)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_running_out_of_file_descriptors_neither_spins_nor_floods_and_recovers(
    few_files_server: tuple[FewFilesServer, int],
) -> None:
    """asyncio's loop leaves a connection it cannot accept waiting in the backlog, retries every second and logs
    once per interval; uvloop's (libuv) accepts and closes it at once, so the client reconnects. Either way: no busy
    loop, and new connections are served once descriptors are free again."""
    server, metrics_port = few_files_server
    assert server.proc is not None
    deadline = time.monotonic() + 10
    while " serving " not in server.log():  # the start-up line names the loop; it follows the port's opening
        assert time.monotonic() < deadline, server.log()[-3000:]
        time.sleep(0.05)
    uvloop = "event_loop=uvloop" in server.log()
    assert uvloop or "event_loop=asyncio" in server.log()
    assert "leaves room for" in server.log()  # the start-up warning: the limit caps --max-connections
    # The start-up check's connection (ServerProcess.start) must be gone before the descriptors run out: on a
    # loaded machine the server may accept it only now, and its close would free a descriptor for the waiting
    # client below.
    deadline = time.monotonic() + 10
    while True:
        _, samples = scrape(metrics_port)
        if value(samples, "regroup_connections_opened_total") >= 1 and value(samples, "regroup_connections") == 0:
            break
        assert time.monotonic() < deadline, samples
        time.sleep(0.05)
    # Scrape connections are not Kafka connections: nothing counts them, so they can take every descriptor.
    hogs = []
    for _ in range(OPEN_FILES + 20):
        hog = socket.create_connection(("127.0.0.1", metrics_port), timeout=5)
        hogs.append(hog)
    opened = time.monotonic()
    try:
        deadline = time.monotonic() + 10
        while not uvloop and "cannot accept connections" not in server.log():
            assert time.monotonic() < deadline, server.log()[-3000:]
            time.sleep(0.05)
        waiting = WireClient(server.port, timeout=20)  # the kernel completes the handshake
        waiting.send(API_VERSIONS, 2)
        cpu_before = cpu_seconds(server.proc.pid)
        # asyncio retries accept() every second; meanwhile the server's descriptors are counted
        fewest = OPEN_FILES
        until = time.monotonic() + 3
        while time.monotonic() < until:
            fewest = min(fewest, open_descriptors(server.proc.pid))
            time.sleep(0.02)
        assert cpu_seconds(server.proc.pid) - cpu_before < 0.5  # no busy loop
        if not uvloop and fewest >= OPEN_FILES and time.monotonic() - opened < METRICS_HEAD_TIMEOUT_S - 1:
            # still out of descriptors all along (the metrics endpoint drops a scrape connection whose request head
            # has not arrived in 10 s, and a loaded machine may close one sooner, either giving a descriptor back):
            # nobody has answered the waiting client. (On uvloop the connection is accepted on a reserved
            # descriptor and closed at once, or answered when a descriptor happens to be free by then: either way
            # the client is not left hanging.)
            waiting.sock.settimeout(0.1)
            with pytest.raises(TimeoutError):
                waiting.sock.recv(1, socket.MSG_PEEK)
    finally:
        for hog in hogs:
            hog.close()
    if not uvloop:
        waiting.sock.settimeout(20)
        try:
            answered = waiting.receive().error_code
        except ConnectionError:
            # accepted while the hogs' descriptors were still being given back, its first request then short of
            # one more (a module to import): closed with the server's own-failure warning, which a loaded
            # fresh-clone run saw; a client reconnects, as below
            assert "cannot handle its request" in server.log(), server.log()[-3000:]
        else:
            assert answered == 0  # accepted and answered once descriptors were free again
    waiting.close()
    # the server closes the scrape connections as it reads their ends: until then descriptors may still be short,
    # and uvloop turns a new connection away at once (a client reconnects, as this one does)
    deadline = time.monotonic() + 20
    while True:
        try:
            with WireClient(server.port) as fresh:
                assert fresh.call(API_VERSIONS, 2).error_code == 0
            break
        except (ConnectionError, OSError):
            assert uvloop and time.monotonic() < deadline
            time.sleep(0.2)
    lines = [line for line in server.log().splitlines() if "cannot accept connections" in line]
    if uvloop:
        assert lines == []
        return
    assert len(lines) == 1, lines  # once per interval, however many retries failed
    assert re.search(r" WARNING regroup\.network\.admission cannot accept connections: Too many open files", lines[0])
