"""``POST /api/groups/<id>/replays`` of ``regroup serve --http-port`` with real clients: a classic group of
confluent-kafka consumers (``range``) that a second member joins and then leaves is replayed over that window
(``regroup lab replay --no-spark`` in a child process); the comparison comes back with the recorded run's
rebalances as the timeline counts them, and the report is served. Bad bodies, unknown groups and unknown replays
are answered with their errors."""

from __future__ import annotations

import contextlib
import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.kip848 import SERVER_ARGS
from tests.console.conftest import Console, raw
from tests.console.test_timeline import PARTITIONS, TOPIC, consumer, stable_with
from tests.server.conftest import free_port, served
from tests.server.wire import WireClient, create_topics

REPLAY_WAIT_S = 120.0


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    http_port = free_port()
    with served(tmp_path, "--http-port", str(http_port), *SERVER_ARGS) as proc:
        yield Console(proc, http_port)


def post(console: Console, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", console.http_port, timeout=10)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        data = response.read()
        assert response.getheader("Content-Type") == "application/json", data
        return response.status, json.loads(data)
    finally:
        connection.close()


def churn(console: Console, group: str, protocol: str) -> tuple[int, int]:
    """A group formed by one member, then a second one joining and leaving: the window (since, until) of the
    join and the leave, after the formation."""
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    first = consumer(console.port, group, "first", protocol)
    second = None
    try:
        stable_with(console, group, [first])
        formed = console.json(f"/api/groups/{group}/timeline")["rebalances"]
        assert formed and all(r["end_ms"] is not None for r in formed)
        since = max(r["end_ms"] for r in formed) + 1
        time.sleep(0.2)
        second = consumer(console.port, group, "second", protocol)
        stable_with(console, group, [first, second])
        second.close()
        second = None
        stable_with(console, group, [first])
        after = console.json(f"/api/groups/{group}/timeline?since_ms={since}")["rebalances"]
        assert all(r["end_ms"] is not None for r in after), after
        return since, max(r["end_ms"] for r in after) + 1  # (the first member's leave is after the window)
    finally:
        for member in (first, second):
            if member is not None:
                with contextlib.suppress(Exception):
                    member.close()


def wait_done(console: Console, group: str, replay_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + REPLAY_WAIT_S
    while True:
        doc: dict[str, Any] = console.json(f"/api/groups/{group}/replays/{replay_id}")
        if doc["status"] != "running":
            return doc
        assert time.monotonic() < deadline, f"the replay still runs after {REPLAY_WAIT_S} s"
        time.sleep(0.5)


@pytest.mark.parametrize(
    ("protocol", "recorded_as"), [("classic", ("range", "eager")), ("consumer", ("uniform", "consumer"))]
)
def test_a_window_of_churn_is_replayed(console: Console, protocol: str, recorded_as: tuple[str, str]) -> None:
    group = f"replayed-{protocol}"
    since, until = churn(console, group, protocol)
    body = {
        "since_ms": since,
        "until_ms": until,
        "strategies": ["range", "cooperative-sticky"],
        "protocols": ["eager", "cooperative"],
    }
    status, started = post(console, f"/api/groups/{group}/replays", json.dumps(body).encode())
    assert status == 202 and started["status"] == "running" and set(started) == {"replay_id", "status"}, started
    replay_id = started["replay_id"]
    assert console.json(f"/api/groups/{group}/replays/{replay_id}/report", 404)  # (not done yet, or 404 anyway)

    doc = wait_done(console, group, replay_id)
    assert set(doc) == {"replay_id", "group_id", "since_ms", "until_ms", "status", "error", "result"}
    assert doc["status"] == "done" and doc["error"] is None, doc
    assert (doc["replay_id"], doc["group_id"], doc["since_ms"], doc["until_ms"]) == (replay_id, group, since, until)
    result = doc["result"]
    plan = result["plan"]
    assert plan["kind"] == "server" and plan["group_id"] == group
    assert (plan["since_ms"], plan["until_ms"]) == (since, until)
    assert plan["initial"] == ["first"] and plan["topics"] == {TOPIC: PARTITIONS}
    assert [(e["action"], e["member"]) for e in plan["events"]] == [("join", "second"), ("leave", "second")]
    assert (plan["strategy"], plan["protocol"]) == recorded_as

    # the recorded run's rebalances are the timeline's within the window (each started and ended in it)
    timeline = console.json(f"/api/groups/{group}/timeline?since_ms={since}&until_ms={until}")["rebalances"]
    assert all(since <= r["start_ms"] and r["end_ms"] <= until for r in timeline), timeline
    recorded = result["recorded"]
    assert (recorded["strategy"], recorded["protocol"]) == (f"{recorded_as[0]} (recorded)", recorded_as[1])
    assert recorded["rebalances"] == len(timeline) >= 2, (recorded, timeline)
    assert recorded["moved"] == sum(r["moved"] for r in timeline), (recorded, timeline)

    pairs = {(a["strategy"], a["protocol"]) for a in result["alternatives"]}
    assert pairs == {("range", "eager"), ("cooperative-sticky", "eager"), ("cooperative-sticky", "cooperative")}
    for alternative in result["alternatives"]:
        assert alternative["rebalances"] >= 1
        versus = alternative["versus_recorded"]
        assert versus["rebalances"] == alternative["rebalances"] - recorded["rebalances"]
        assert versus["moved"] == alternative["moved"] - recorded["moved"]
    assert [s.split(" ")[0] for s in result["skipped"]] == ["range/cooperative"], result["skipped"]

    code, headers, report = console.get(f"/api/groups/{group}/replays/{replay_id}/report")
    assert code == 200 and headers["content-type"].startswith("text/html") and b"<html" in report[:2000].lower()
    assert (console.proc.data_dir / "replays" / replay_id / "events.jsonl").is_file()

    # another group's path does not show this replay; an unknown replay is a 404
    assert set(console.json(f"/api/groups/other/replays/{replay_id}", 404)) == {"error"}
    assert set(console.json(f"/api/groups/{group}/replays/nope", 404)) == {"error"}
    assert set(console.json(f"/api/groups/{group}/replays/..%2F..", 404)) == {"error"}


def test_bad_replay_requests(console: Console) -> None:
    group = "bad"
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    member = consumer(console.port, group, "only", "classic")
    try:
        stable_with(console, group, [member])
    finally:
        member.close()
    path = f"/api/groups/{group}/replays"
    good = {"since_ms": 1, "until_ms": 2}
    for body in (
        b"not json",
        b"\xff\xfe\x00",
        b"[1, 2]",
        b'{"since_ms": 1}',
        json.dumps({"since_ms": 5, "until_ms": 5}).encode(),
        json.dumps({"since_ms": 9, "until_ms": 5}).encode(),
        json.dumps({"since_ms": "1", "until_ms": 5}).encode(),
        json.dumps({"since_ms": True, "until_ms": 5}).encode(),
        json.dumps({**good, "strategies": "range"}).encode(),
        json.dumps({**good, "strategies": ["--out"]}).encode(),
        json.dumps({**good, "protocols": [1]}).encode(),
        json.dumps({**good, "spark": "yes"}).encode(),
        json.dumps({**good, "extra": 1}).encode(),
        b"1" * 5000,
    ):
        status, doc = post(console, path, body)
        assert status == 400 and set(doc) == {"error"}, (body[:40], status, doc)

    status, doc = post(console, "/api/groups/nope/replays", json.dumps(good).encode())
    assert status == 404 and set(doc) == {"error"}, doc
    # a window without the group's rows (before it existed) is refused, not started
    status, doc = post(console, path, json.dumps(good).encode())
    assert status == 400 and "no rows" in doc["error"], doc

    too_big = json.dumps({**good, "strategies": ["x" * 60] * 300}).encode()
    assert len(too_big) > 16 * 1024
    answer = raw(
        console.http_port,
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(too_big)}\r\n\r\n".encode() + too_big,
    )
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    answer = raw(console.http_port, f"POST {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 411 "), answer[:200]
    answer = raw(console.http_port, f"POST {path} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 411 "), answer[:200]
    answer = raw(console.http_port, f"POST {path} HTTP/1.1\r\nContent-Length: ²\r\n\r\n".encode("latin-1"))
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    # a client that waits for "100 Continue" before its body gets it
    answer = raw(
        console.http_port, f"POST {path} HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{{}}".encode()
    )
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 "), answer[:200]
    # a body cut short closes the connection without an answer
    assert raw(console.http_port, f"POST {path} HTTP/1.1\r\nContent-Length: 100\r\n\r\n{{".encode()) == b""
    # POST elsewhere is still a 405, and the other paths answer as before
    answer = raw(console.http_port, b"POST /api/groups HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 405 "), answer[:200]
    assert console.json(f"/api/groups/{group}")["group_id"] == group
    assert set(console.json(f"/api/groups/{group}/replays", 404)) == {"error"}
