"""Fixtures of the real-client conformance suite: a fresh ``regroup serve`` subprocess per test (the
``ServerProcess`` of ``tests/server/conftest.py``: free loopback port, temporary data directory,
``--initial-rebalance-delay-ms 0``, ``restart()`` = kill -9 and start again on the same port and data
directory), killed at teardown; its log must show no traceback or error. Group state changes go to
``events.jsonl`` next to the server's log, for diagnosing a failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerProcess, served


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with served(tmp_path, "--events", str(tmp_path / "events.jsonl")) as proc:
        yield proc


@pytest.fixture
def kip848_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """Like ``server``, with a 500 ms KIP-848 heartbeat interval (and a 10 s session) so consumer groups
    reconcile quickly (``tests/clients/kip848.py``)."""
    from tests.clients.kip848 import SERVER_ARGS

    with served(tmp_path, "--events", str(tmp_path / "events.jsonl"), *SERVER_ARGS) as proc:
        yield proc
