"""Helpers of the console's tests: a ``regroup serve`` with its HTTP console on a free port (the ``served``
process of ``tests/server/conftest.py``: its log must show no traceback), and plain HTTP requests to it."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServerProcess, free_port, served


class Console:
    """A served ``regroup serve --http-port P``: ``proc`` the process, ``http_port`` its console's port."""

    def __init__(self, proc: ServerProcess, http_port: int) -> None:
        self.proc = proc
        self.http_port = http_port

    @property
    def port(self) -> int:
        return self.proc.port

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-cased names, body) of ``GET path``."""
        connection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=10)
        try:
            connection.request("GET", path, headers=headers or {})
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def json(self, path: str, status: int = 200) -> Any:
        code, headers, body = self.get(path)
        assert code == status, (path, code, body[:500])
        assert headers["content-type"] == "application/json"
        return json.loads(body)


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    http_port = free_port()
    with served(tmp_path, "--http-port", str(http_port), "--events", str(tmp_path / "events.jsonl")) as proc:
        yield Console(proc, http_port)


def raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` and read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)  # (all sent: a head cut short ends here)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)
