"""The ``regroup serve`` process: restart after kill -9 keeps acknowledged commits and groups, SIGTERM shuts
down cleanly, bad arguments exit 2 with one line, ``--events`` writes the simulator's event schema."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from regroup.model.eventlog import FIELDS
from tests.server.conftest import ServerProcess, assert_clean_log, configured, free_port
from tests.server.test_groups import assignment, join_v9
from tests.server.test_offsets_admin import commit
from tests.server.wire import API_VERSIONS, DESCRIBE, HEARTBEAT, OFFSET_FETCH, SYNC, WireClient, create_topics

MakeServer = Callable[..., ServerProcess]


def form_stable_group(client: WireClient, group: str) -> str:
    join_v9(client, group)
    member_id = client.receive().member_id
    join_v9(client, group, member_id)
    assert client.receive().generation_id == 1
    synced = client.call(
        SYNC,
        5,
        group_id=group,
        generation_id=1,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": member_id, "assignment": assignment(0, 1)}],
    )
    assert synced.error_code == 0
    return member_id


def test_acknowledged_commits_and_groups_survive_kill_9(make_server: MakeServer) -> None:
    server = make_server()
    with WireClient(server.port, client_id="survivor") as client:
        create_topics(client, {"t": 2})
        member_id = form_stable_group(client, "durable")
        acked = commit(
            client, 8, "durable", {("t", 0): 42, ("t", 1): 43}, generation_id_or_member_epoch=1, member_id=member_id
        )
        assert set(acked.values()) == {0}
    server.kill(signal.SIGKILL)
    server.start()
    with WireClient(server.port) as client:
        fetched = client.call(
            OFFSET_FETCH,
            8,
            require_stable=True,
            groups=[
                {"group_id": "durable", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
            ],
        )
        assert [(p.partition_index, p.committed_offset) for p in fetched.groups[0].topics[0].partitions] == [
            (0, 42),
            (1, 43),
        ]
        described = client.call(DESCRIBE, 5, groups=["durable"], include_authorized_operations=False).groups[0]
        assert described.group_state == "Stable"
        assert [(m.member_id, m.client_id, m.member_assignment) for m in described.members] == [
            (member_id, "survivor", assignment(0, 1)),
        ]
        # the member carries on where it was (its session timer restarted on load)
        beat = client.call(
            HEARTBEAT, 4, group_id="durable", generation_id=1, member_id=member_id, group_instance_id=None
        )
        assert beat.error_code == 0


@pytest.mark.parametrize("fsync", ["always", "interval", "never"])
def test_sigterm_shuts_down_cleanly_and_the_log_reopens(make_server: MakeServer, fsync: str) -> None:
    server = make_server("--fsync", fsync)
    with WireClient(server.port) as client:
        create_topics(client, {"t": 1})
        assert set(commit(client, 8, "g", {("t", 0): 1}).values()) == {0}
    assert server.kill(signal.SIGTERM) == 0
    assert "stopped" in server.log()
    server.start()  # the data directory lock was released
    with WireClient(server.port) as client:
        fetched = client.call(OFFSET_FETCH, 5, group_id="g", topics=None)
        assert fetched.topics[0].partitions[0].committed_offset == 1


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "regroup", "serve", *args], capture_output=True, text=True, timeout=30)


def test_port_in_use_exits_2_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("--port", str(port), "--data-dir", str(tmp_path / "d"), "--log-level", "error")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("regroup: cannot listen on 127.0.0.1:")


def test_unusable_data_dir_exits_2_with_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_cli("--port", str(free_port()), "--data-dir", str(blocker / "data"), "--log-level", "error")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "data dir" in result.stderr


def test_data_dir_in_use_and_bad_arguments_exit_2(make_server: MakeServer, tmp_path: Path) -> None:
    server = make_server()
    result = run_cli("--port", str(free_port()), "--data-dir", str(server.data_dir), "--log-level", "error")
    assert (result.returncode, result.stderr.count("\n")) == (2, 1) and "in use" in result.stderr
    for bad in (["--port", "70000"], ["--fsync", "sometimes"], ["--events", str(tmp_path / "no" / "dir" / "e")]):
        result = run_cli("--data-dir", str(tmp_path / "d2"), "--log-level", "error", *bad)
        assert (result.returncode, result.stderr.count("\n")) == (2, 1), (bad, result.stderr)


def test_events_file_uses_the_simulator_schema(make_server: MakeServer, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    server = make_server("--events", str(events))
    with WireClient(server.port, client_id="ev") as client:
        member_id = form_stable_group(client, "observed")
    server.kill(signal.SIGTERM)
    rows = [json.loads(line) for line in events.read_text().splitlines()]
    assert rows and all(tuple(row) == FIELDS for row in rows)
    assert [row["seq"] for row in rows] == list(range(len(rows)))
    states = [
        (r["state"], r["generation"]) for r in rows if r["type"] == "group_state" and "group=observed " in r["detail"]
    ]
    assert states == [("Empty", 0), ("PreparingRebalance", 0), ("CompletingRebalance", 1), ("Stable", 1)]
    joined = [r for r in rows if r["type"] == "member_state"]
    assert [(r["member"], r["member_id"], r["state"]) for r in joined] == [("ev", member_id, "Joined")]
    assigned = [(r["member_id"], r["topic"], r["partition"]) for r in rows if r["type"] == "group_assignment"]
    assert assigned == [(member_id, "t", 0), (member_id, "t", 1)]


def test_connections_arriving_during_start_find_every_listener_serving(tmp_path: Path) -> None:
    """Clients knocking on every listener's port while the server opens them (as a client that retries its
    bootstrap servers does): once the server is up, each listener still accepts and answers ApiVersions, and
    nothing was logged with a traceback (a connection accepted before the server could take it once closed
    its listener for good)."""
    ports = [free_port() for _ in range(4)]
    names = ["ONE", "TWO", "THREE", "FOUR"]
    properties = (
        "listeners=" + ",".join(f"{n}://127.0.0.1:{p}" for n, p in zip(names, ports, strict=True)) + "\n"
        "listener.security.protocol.map=" + ",".join(f"{n}:PLAINTEXT" for n in names) + "\n"
    )
    stop = threading.Event()
    accepted = [0] * len(ports)

    def knock(index: int) -> None:
        while not stop.is_set():
            try:
                socket.create_connection(("127.0.0.1", ports[index]), timeout=0.5).close()
                accepted[index] += 1
            except OSError:
                time.sleep(0.0005)

    knockers = [threading.Thread(target=knock, args=(i,), daemon=True) for i in range(len(ports))]
    for thread in knockers:
        thread.start()
    try:
        server = configured(tmp_path, properties, ports[0])
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in knockers:
            thread.join()
    try:
        assert all(accepted), accepted
        for port in ports:
            with WireClient(port) as client:
                assert client.call(API_VERSIONS, 2).error_code == 0
        assert_clean_log(server)
    finally:
        server.kill()
