"""``GET /api/groups/<id>/timeline`` and ``GET /api/events`` of ``regroup serve --http-port`` with real clients:
a classic group of confluent-kafka consumers (``range``) and a KIP-848 group (``group.protocol=consumer``) that
a second member joins and then leaves. The timeline records each rebalance with its generation (classic) or
epoch (consumer), and the partitions' ownership intervals, which never overlap for one partition; the history
survives a restart (``history/`` under the data directory); ``since_ms``/``until_ms`` narrow it. The event
stream delivers the rows live, as they happen."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.harness import eventually
from tests.clients.kip848 import SERVER_ARGS, consumer_config
from tests.console.conftest import Console
from tests.server.conftest import free_port, served
from tests.server.wire import WireClient, create_topics

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "events"
PARTITIONS = 4
SETTLE_S = 60.0


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    http_port = free_port()
    with served(tmp_path, "--http-port", str(http_port), *SERVER_ARGS) as proc:
        yield Console(proc, http_port)


def consumer(port: int, group: str, name: str, protocol: str) -> Any:
    made = confluent_kafka.Consumer(
        consumer_config(f"127.0.0.1:{port}", group, name, protocol, "range" if protocol == "classic" else None)
    )
    made.subscribe([TOPIC])
    return made


def stable_with(console: Console, group: str, members: list[Any]) -> dict[str, Any]:
    """Poll ``members`` until the group is Stable with exactly them, holding every partition between them."""

    def check() -> dict[str, Any]:
        for member in members:
            member.poll(0.05)
        doc = console.json(f"/api/groups/{group}")
        mine = {m.memberid(): sorted(tp.partition for tp in m.assignment()) for m in members}
        theirs = {m["member_id"]: m["assignment"].get(TOPIC, []) for m in doc["members"]}
        every = sorted(p for ps in theirs.values() for p in ps)
        assert doc["state"] == "Stable" and mine == theirs and every == list(range(PARTITIONS)), (doc, mine)
        return doc

    return eventually(check, SETTLE_S, f"{group} to settle with {len(members)} members", interval=0.1)


def check_intervals(ownership: list[dict[str, Any]]) -> None:
    assert ownership
    for interval in ownership:
        assert set(interval) == {"member_id", "topic", "partition", "from_ms", "to_ms"}
        assert interval["to_ms"] is None or interval["to_ms"] >= interval["from_ms"]
    by_partition: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for interval in ownership:
        by_partition.setdefault((interval["topic"], interval["partition"]), []).append(interval)
    assert sorted(by_partition) == [(TOPIC, p) for p in range(PARTITIONS)]
    for intervals in by_partition.values():
        intervals.sort(key=lambda i: i["from_ms"])
        for before, after in itertools.pairwise(intervals):
            assert before["to_ms"] is not None and before["to_ms"] <= after["from_ms"], (before, after)


@pytest.mark.parametrize(("protocol", "number"), [("classic", "generation"), ("consumer", "epoch")])
def test_a_join_and_a_leave_are_rebalances(console: Console, tmp_path: Path, protocol: str, number: str) -> None:
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    group = f"{protocol}-g"
    first = consumer(console.port, group, "first", protocol)
    second = None
    try:
        stable_with(console, group, [first])
        second = consumer(console.port, group, "second", protocol)
        joined = stable_with(console, group, [first, second])
        second.close()
        second = None
        alone = stable_with(console, group, [first])
        doc = console.json(f"/api/groups/{group}/timeline")
    finally:
        for member in (first, second):
            if member is not None:
                with contextlib.suppress(Exception):
                    member.close()

    assert set(doc) == {"group_id", "rebalances", "ownership"} and doc["group_id"] == group
    rebalances = doc["rebalances"]
    assert len(rebalances) >= 3, rebalances  # the first member's, the join's, the leave's
    for r in rebalances:
        assert {"start_ms", "end_ms", number, "reason"} <= set(r) and isinstance(r[number], int)
    numbers = [r[number] for r in rebalances]
    assert numbers == sorted(numbers)
    key = "generation" if protocol == "classic" else "epoch"
    assert numbers[-1] == alone[key] and joined[key] in numbers
    starts = [r["start_ms"] for r in rebalances]
    assert starts == sorted(starts)
    check_intervals(doc["ownership"])
    members = {i["member_id"] for i in doc["ownership"]}
    assert len(members) == 2  # both members held partitions at some time

    # narrowed: nothing before the first rebalance started, everything from it on
    first_start = starts[0]
    assert console.json(f"/api/groups/{group}/timeline?until_ms={first_start - 1}")["rebalances"] == []
    since = console.json(f"/api/groups/{group}/timeline?since_ms={first_start}")["rebalances"]
    assert since[: len(rebalances)] == rebalances  # (and the last member's leave, since)
    assert set(console.json(f"/api/groups/{group}/timeline?since_ms=x", 400)) == {"error"}
    assert set(console.json("/api/groups/nope/timeline", 404)) == {"error"}


def test_the_history_survives_a_restart(console: Console) -> None:
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    member = consumer(console.port, "kept", "only", "classic")
    try:
        stable_with(console, "kept", [member])
    finally:
        member.close()
    before = console.json("/api/groups/kept/timeline")
    assert before["rebalances"]
    assert list((console.proc.data_dir / "history").iterdir())
    console.proc.restart()
    after = eventually(lambda: console.json("/api/groups/kept/timeline"), 10, "the console after a restart")
    kept = [(r["start_ms"], r["generation"]) for r in after["rebalances"]]
    assert kept[: len(before["rebalances"])] == [(r["start_ms"], r["generation"]) for r in before["rebalances"]]


def read_events(sock: socket.socket, buffer: bytes, until: float) -> Iterator[tuple[str, str]]:
    """(field, value) of each line of a Server-Sent Events stream (``buffer``: what was read past the head)."""
    while time.monotonic() < until:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            name, _, value = line.decode().partition(":")
            yield name, value.removeprefix(" ")
        sock.settimeout(max(0.01, until - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return
        if not chunk:
            return
        buffer += chunk


def test_the_event_stream_is_live(console: Console) -> None:
    with WireClient(console.port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    rows: list[dict[str, Any]] = []
    with socket.create_connection(("127.0.0.1", console.http_port), timeout=10) as sock:
        sock.sendall(b"GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        head, rest = received.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"\r\nContent-Type: text/event-stream\r\n" in head
        member = consumer(console.port, "live", "watched", "consumer")
        try:
            lines = read_events(sock, rest, time.monotonic() + SETTLE_S)
            assert next(lines) == ("retry", "3000")
            event = None
            for name, value in lines:
                member.poll(0.01)
                if name == "event":
                    event = value
                elif name == "data":
                    assert event == "row"
                    rows.append(json.loads(value))
                if {"assigned", "group_state"} <= {r["type"] for r in rows}:
                    break
        finally:
            member.close()
    kinds = [r["type"] for r in rows]
    assert "member_state" in kinds and "group_state" in kinds and "assigned" in kinds, kinds
    joined = next(r for r in rows if r["type"] == "member_state")
    assert (joined["state"], joined["member"]) == ("Joined", "watched") and joined["detail"].startswith("group=live")
    assert all(r["seq"] == rows[0]["seq"] + i for i, r in enumerate(rows))  # in order, none missing
