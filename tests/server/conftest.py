"""Fixtures that run ``regroup serve`` as a real subprocess on a free loopback port with a temporary data
directory, wait until it accepts connections, and always kill it at teardown."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0  # a deadline, not a wait: a loaded machine can take tens of seconds to start one


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now and that this process has not handed out before (the kernel may give a
    just-closed port again, and a test asking for several ports at once needs them distinct)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class ServerProcess:
    """One ``regroup serve`` process; ``restart()`` starts a new one on the same port and data directory."""

    def __init__(self, data_dir: Path, log_path: Path, extra_args: list[str]) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra_args = extra_args
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def preexec(self) -> None:
        """Runs in the child before ``regroup serve`` starts (a subclass may set resource limits here)."""

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "regroup",
            "serve",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--initial-rebalance-delay-ms",
            "0",
            *self.extra_args,
        ]

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=log, preexec_fn=self.preexec)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"regroup serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"regroup serve did not accept connections in {START_TIMEOUT_S}s:\n{self.log()}")

    def kill(self, sig: int = signal.SIGKILL) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=10)
        finally:
            self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def configured(directory: Path, properties: str, port: int, *args: str) -> ServerProcess:
    """A started ``regroup serve --config`` whose file holds ``properties`` (Kafka's names) and whose first
    listener is on ``port`` (the fixture's ``--port`` names the first listener's port); data and log under
    ``directory``."""
    config = directory / "server.properties"
    config.write_text(properties)
    proc = ServerProcess(directory / "data", directory / "server.log", ["--config", str(config), *args])
    proc.port = port
    proc.start()
    return proc


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def make(*extra_args: str, data_dir: Path | None = None) -> ServerProcess:
        index = len(started)
        server = ServerProcess(data_dir or tmp_path / f"data{index}", tmp_path / f"server{index}.log", list(extra_args))
        started.append(server)
        server.start()
        return server

    yield make
    for server in started:
        server.kill()
    for server in started:
        assert_clean_log(server)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server shared by a test module (tests use distinct group ids)."""
    base = tmp_path_factory.mktemp("regroup-server")
    proc = ServerProcess(base / "data", base / "server.log", [])
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()
    assert_clean_log(proc)


@contextlib.contextmanager
def served(directory: Path, *args: str) -> Iterator[ServerProcess]:
    """A ``regroup serve`` with ``args``, its data and log under ``directory``; killed at the end, and its log
    checked for tracebacks (``assert_clean_log``)."""
    proc = ServerProcess(directory / "data", directory / "server.log", list(args))
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()
    assert_clean_log(proc)


def assert_clean_log(proc: ServerProcess) -> None:
    """No handler or connection error was logged with a traceback (bad input is logged at info, no trace)."""
    text = proc.log()
    assert "Traceback" not in text and " ERROR " not in text, text[-5000:]
