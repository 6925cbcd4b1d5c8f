"""The console's HTTP server of ``regroup serve --http-port``: the paths it serves (the dashboard's page for ``/``
and ``/groups/<id>``, its assets without path traversal, ``/metrics``), what it refuses (other methods, heads
that are not HTTP, too large, too slow, too many clients) — every request answered or closed, the server still
serving afterwards and its log free of tracebacks —, and the flags (``--metrics-port`` as the older name of
``--http-port``, a console exposed without authentication refused)."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regroup.cli.serve import duration_ms
from tests.console.conftest import Console, raw
from tests.server.conftest import free_port, served


def test_the_pages_assets_and_metrics(console: Console) -> None:
    index_status, index_headers, index = console.get("/")
    assert index_status == 200 and index_headers["content-type"] == "text/html; charset=utf-8"
    assert b"<html" in index.lower()
    assert console.get("/groups/some%20group")[2] == index  # the single-page app reads the path itself
    status, headers, _ = console.get("/assets/index.html")
    assert (status, headers["content-type"]) == (200, "text/html; charset=utf-8")
    for name, content_type in (("app.js", "text/javascript"), ("style.css", "text/css")):
        status, headers, body = console.get(f"/assets/{name}")
        if status == 200:  # (the dashboard's files: their content is not this test's business)
            assert headers["content-type"].startswith(content_type) and body
    for bad in ("/assets/../__init__.py", "/assets/%2e%2e/__init__.py", "/assets/..%2fhttp.py", "/assets/.hidden",
                "/assets/", "/assets/nope.js", "/other", "/groups/"):  # fmt: skip
        assert console.get(bad)[0] == 404, bad
    status, headers, body = console.get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    assert b"# TYPE regroup_requests_total counter" in body


def test_bad_requests_are_answered_or_closed(console: Console) -> None:
    port = console.http_port
    assert raw(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET /api/groups HTTP/2.0\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET relative HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET / HTTP/1.1\r\nno colon here\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"\x00\xff\xfe\r\n\x16\x03\x01\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET /api/groups?since_ms=%ff HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    post = raw(port, b"POST /api/groups HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    assert post.startswith(b"HTTP/1.1 405 ") and b"\r\nAllow: GET, HEAD\r\n" in post
    assert raw(port, b"GET / HTTP/1.1\r\nX: " + b"y" * 20_000 + b"\r\n\r\n") == b""  # head too large: closed
    assert raw(port, b"GET / HTT") == b""  # cut short: closed
    head = raw(port, b"HEAD /api/groups HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")  # no body
    assert console.json("/api/groups") == {"groups": []}  # still serving


def test_slow_and_many_clients_do_not_stop_the_others(console: Console) -> None:
    port = console.http_port
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
    try:
        for sock in idle:
            sock.sendall(b"GET /api/gro")  # a head never finished
        assert console.json("/api/groups") == {"groups": []}
        crowd = [socket.create_connection(("127.0.0.1", port)) for _ in range(250)]
        try:
            time.sleep(0.5)  # (all accepted: the server holds its 256 connections)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as late:
                late.sendall(b"GET /api/groups HTTP/1.1\r\n\r\n")
                assert late.recv(100).startswith(b"HTTP/1.1 503 ")
        finally:
            for sock in crowd:
                sock.close()

        def served() -> bool:
            try:
                return console.json("/api/groups") == {"groups": []}
            except AssertionError:
                return False

        deadline = time.monotonic() + 10
        while not served():
            assert time.monotonic() < deadline, "the console did not serve again once the crowd left"
            time.sleep(0.05)
    finally:
        for sock in idle:
            sock.close()


def serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["--port", str(free_port()), "--data-dir", str(tmp_path / "d"), "--log-level", "error", *args]
    return subprocess.run([sys.executable, "-m", "regroup", "serve", *argv], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--http-port", "1", "--metrics-port", "2"], "--http-port 1 and --metrics-port 2 differ"),
        (["--http-port", "70000"], "--http-port"),
        (["--http-port", "0", "--http-host", "0.0.0.0"], "--http-insecure"),
        (["--metrics-port", "0", "--metrics-host", "0.0.0.0"], "--http-insecure"),
        (["--http-port", "0", "--history-window", "5x"], "argument --history-window: not a duration"),
    ],
)
def test_flags_errors_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    result = serve(tmp_path, *args)
    assert (result.returncode, result.stderr.count("\n")) == (2, 1), result.stderr
    assert expected in result.stderr
    assert not (tmp_path / "d").exists()  # nothing left behind


def test_metrics_port_is_the_same_server(tmp_path: Path) -> None:
    port = free_port()
    with served(tmp_path, "--metrics-port", str(port), "--http-port", str(port)) as proc:
        console = Console(proc, port)
        assert console.json("/api/groups") == {"groups": []}
        assert console.get("/metrics")[0] == 200
        assert f"http=http://127.0.0.1:{port}/ metrics=http://127.0.0.1:{port}/metrics" in proc.log()


def test_an_exposed_console_with_the_insecure_flag(tmp_path: Path) -> None:
    port = free_port()
    with served(tmp_path, "--http-port", str(port), "--http-host", "0.0.0.0", "--http-insecure") as proc:
        assert Console(proc, port).json("/api/groups") == {"groups": []}


def test_durations() -> None:
    assert [duration_ms(d) for d in ("0", "90000", "500ms", "90s", "15m", "24h", "7d", " 2H ")] == [
        0, 90_000, 500, 90_000, 900_000, 86_400_000, 604_800_000, 7_200_000,
    ]  # fmt: skip
    for bad in ("", "h", "-1", "1.5h", "1w", "ms"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration_ms(bad)


def test_without_history_the_timeline_is_a_404(tmp_path: Path) -> None:
    port = free_port()
    with served(tmp_path, "--http-port", str(port), "--history-window", "0") as proc:
        console = Console(proc, port)
        assert console.json("/api/groups/g/timeline", 404) == {"error": "this server keeps no rebalance history"}
        assert not (proc.data_dir / "history").exists()
        # nor replays of it
        answer = raw(
            port, b'POST /api/groups/g/replays HTTP/1.1\r\nContent-Length: 30\r\n\r\n{"since_ms": 1, "until_ms": 2}'
        )
        assert answer.startswith(b"HTTP/1.1 404 ") and b"no rebalance history" in answer, answer
        assert not (proc.data_dir / "replays").exists()
