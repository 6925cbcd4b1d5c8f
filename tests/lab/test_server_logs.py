"""A log written by a real ``regroup serve --events`` under real clients (confluent-kafka: a classic eager group,
a classic cooperative group and a KIP-848 group, two members each, which then close) is analysed as fully as a
simulator log: each group's protocol, strategy and type are read from the log, and the rebalance in which the
members' closing emptied the group is not counted, nor are the leaves that emptied it.

How the members close is made certain, whatever the machine's speed: in the eager group both leave within the
rebalance that empties it (neither member polls any more, so neither can rejoin after the other left); in the
other two, one member leaves, the group settles with the other, and then that one leaves (a cooperative rejoin
and a KIP-848 assignment need no poll, so two closes a heartbeat apart would make a rebalance between them)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import runner, tables
from tests.clients.kip848 import SERVER_ARGS
from tests.server.conftest import ServerProcess, assert_clean_log
from tests.server.wire import WireClient, create_topics

GROUPS = {
    "ge": {"partition.assignment.strategy": "range", "session.timeout.ms": 6000, "heartbeat.interval.ms": 200},
    "gc": {
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 200,
    },
    "gk": {"group.protocol": "consumer", "group.remote.assignor": "range"},
}
EXPECTED = {"ge": ("range", "eager"), "gc": ("cooperative-sticky", "cooperative"), "gk": ("server-range", "consumer")}
#: the groups whose members leave together (in the rebalance that empties the group); in the others one member
#: leaves first and the group settles with the other before it leaves
LEAVE_TOGETHER = {"ge"}


class Member(threading.Thread):
    def __init__(self, port: int, group: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.config = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": group,
            "client.id": name,
            "enable.auto.commit": False,
            **GROUPS[group],
        }
        #: stop polling: the rebalance callbacks run inside poll, so a member that no longer polls cannot take
        #: part in a rebalance another member's leaving starts (it neither rejoins nor takes new partitions)
        self.pause = threading.Event()
        self.paused = threading.Event()  # set once the member polls no more
        self.stop = threading.Event()  # close the consumer (leave the group)
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self.config)
        try:
            consumer.subscribe(["lab"])
            while not self.pause.is_set() and not self.stop.is_set():
                consumer.poll(0.05)
            self.paused.set()
            self.stop.wait()
        except BaseException as exc:
            self.error = exc
        finally:
            self.paused.set()
            consumer.close()


def _events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _group_of(event: dict[str, Any]) -> str:
    return next((t[6:] for t in (event["detail"] or "").split() if t.startswith("group=")), "")


def _settled(path: Path, members: int, since: float, groups: Iterable[str] = GROUPS) -> bool:
    """Every one of ``groups`` has ``members`` members and has been Stable for at least ``since`` seconds."""
    events = _events(path)
    now = time.time() * 1000
    for group in groups:
        mine = [e for e in events if _group_of(e) == group]
        joined = sum(1 for e in mine if e["type"] == "member_state" and e["state"] == "Joined")
        left = sum(1 for e in mine if e["type"] == "member_state" and e["state"] == "Left")
        states = [e for e in mine if e["type"] == "group_state"]
        if joined - left != members or not states or states[-1]["state"] != "Stable":
            return False
        if now - states[-1]["t"] < since * 1000:
            return False
    return True


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def server_events(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("serve")
    events = folder / "events.jsonl"
    server = ServerProcess(folder / "data", folder / "server.log", ["--events", str(events), *SERVER_ARGS])
    server.start()
    members: list[Member] = []
    try:
        with WireClient(server.port) as client:
            create_topics(client, {"lab": 6})
        for i in range(2):
            for group in GROUPS:
                members.append(Member(server.port, group, f"{group}-{i}"))
                members[-1].start()
            _wait(lambda n=i + 1: _settled(events, n, since=1.5), 60, f"{i + 1} members in every group")
        for m in members:  # from here on a member takes part in a rebalance only where its client does it alone
            m.pause.set()
        _wait(lambda: all(m.paused.is_set() for m in members), 60, "every member to stop polling")
        first = [m for m in members if m.name.endswith("-0")]
        for m in first + [m for m in members if m.name[:2] in LEAVE_TOGETHER and m not in first]:
            m.stop.set()
        apart = [g for g in GROUPS if g not in LEAVE_TOGETHER]
        _wait(lambda: _settled(events, 1, since=1.5, groups=apart), 60, f"{apart} to settle with one member")
        for m in members:
            m.stop.set()
        for m in members:
            m.join(timeout=60)
        _wait(lambda: _settled_empty(events), 60, "every group empty")
        assert [m.error for m in members] == [None] * len(members)
    finally:
        for m in members:
            m.stop.set()
        server.kill()
    assert_clean_log(server)
    yield events


def _settled_empty(path: Path) -> bool:
    events = _events(path)
    last = {_group_of(e): e["state"] for e in events if e["type"] == "group_state"}
    return all(last.get(g) == "Empty" for g in GROUPS)


def test_each_group_of_a_server_log_is_analysed_with_its_protocol_and_strategy(server_events: Path) -> None:
    outcome = runner.analyze_task(str(server_events))
    assert not isinstance(outcome, str), outcome
    names = [c for c, _ in tables.RUN_COLUMNS]
    runs = {r["group_id"]: r for r in (dict(zip(names, run, strict=True)) for run, _ in outcome)}
    assert set(runs) == set(GROUPS)
    rebalance_names = [c for c, _ in tables.REBALANCE_COLUMNS]
    for run_tuple, rebalance_tuples in outcome:
        run = dict(zip(names, run_tuple, strict=True))
        rows = [dict(zip(rebalance_names, r, strict=True)) for r in rebalance_tuples]
        group = run["group_id"]
        assert (run["strategy"], run["protocol"]) == EXPECTED[group], run
        assert all((r["strategy"], r["protocol"]) == EXPECTED[group] for r in rows)
        # the members closing at the end emptied the group: that is neither a rebalance nor churn
        assert rows[-1]["phase"] == "emptied" and rows[-1]["group_size"] == 0, rows[-1]
        assert rows[-1]["fraction_kept"] is None
        assert [r["phase"] for r in rows[:-1]] == ["churn"] * (len(rows) - 1)
        assert run["rebalances"] == len(rows) - 1 >= 2
        assert run["settled"] is True and run["members"] == 2
        if group in LEAVE_TOGETHER:  # both leaves emptied the group: neither is churn
            assert (run["changes"], run["churn"], run["churn_events"]) == (2, "join", 2)
            assert (rows[-2]["group_size"], rows[-2]["partitions_assigned"]) == (2, 6)  # before closing
        else:  # the first leave is churn (it left a member behind); the last one emptied the group
            assert (run["changes"], run["churn"], run["churn_events"]) == (3, "mixed", 3)
            assert (rows[-2]["group_size"], rows[-2]["partitions_assigned"]) == (1, 6)  # the one left has all
        if run["protocol"] == "consumer":  # no JoinGroup or SyncGroup in KIP-848
            assert run["sync_bytes"] is None and all(r["sync_bytes"] is None for r in rows)
        else:
            assert run["sync_bytes"] is not None and run["sync_bytes"] > 0
