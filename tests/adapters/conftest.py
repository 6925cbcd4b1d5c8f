"""One ``regroup serve`` per test module (the ``ServerProcess`` of ``tests/server/conftest.py``: free loopback
port, temporary data directory, ``--initial-rebalance-delay-ms 0``), killed at the end and its log checked for
tracebacks; tests use their own topics and group ids. Group state changes go to ``events.jsonl`` next to the
server's log, for diagnosing a failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.conftest import ServerProcess, served


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("adapters")
    with served(directory, "--events", str(directory / "events.jsonl")) as proc:
        yield proc
