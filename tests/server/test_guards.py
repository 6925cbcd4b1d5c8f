"""The server's guards against requests it cannot serve normally, on a real ``regroup serve``: identifiers over
their limits are answered with INVALID_REQUEST (and nothing of them is kept), a frame the schema forbids is
logged at INFO with the peer and the API and its connection closed, error codes carry Kafka's names in the
metrics, and a client that goes away mid-request leaves no error in the log."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.server.conftest import ServerProcess, free_port
from tests.server.test_groups import SUB
from tests.server.test_offsets_admin import commit
from tests.server.wire import (
    API_VERSIONS,
    CREATE_TOPICS,
    DESCRIBE,
    HEARTBEAT,
    JOIN,
    OFFSET_FETCH,
    WireClient,
    create_topics,
    encode_request,
)

MakeServer = Callable[..., ServerProcess]
INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND = 42, 17, 25, 69
MiB = 1024 * 1024


def join(client: WireClient, group: str, instance_id: str | None, version: int = 5) -> object:
    return client.call(
        JOIN,
        version,
        group_id=group,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id="",
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": SUB}],
    )


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_huge_instance_ids_are_refused_and_never_stored(make_server: MakeServer) -> None:
    server = make_server()
    with WireClient(server.port, timeout=30) as client:
        for n in range(20):
            response = join(client, f"big-{n}", "i" * MiB, version=9)
            assert response.error_code == INVALID_REQUEST
        # the group was never created: nothing about it was written
        described = client.call(DESCRIBE, 5, groups=["big-0"], include_authorized_operations=False)
        assert described.groups[0].group_state == "Dead"
        assert join(client, "small", "i" * 1024).error_code != INVALID_REQUEST  # the default limit itself is fine
    assert directory_bytes(server.data_dir / "coordinator") < MiB
    log = server.log()
    assert log.count("carries a group instance id of 1048576 bytes") == 1  # logged once, then counted


def test_limits_follow_the_flags_and_cover_every_identifier(make_server: MakeServer) -> None:
    server = make_server(
        "--max-group-id-bytes", "8", "--max-client-id-bytes", "16", "--max-instance-id-bytes", "16",
        "--max-member-id-bytes", "100",
    )  # fmt: skip
    with WireClient(server.port) as client:
        ok = client.call(HEARTBEAT, 4, group_id="12345678", generation_id=1, member_id="m")
        assert ok.error_code == UNKNOWN_MEMBER_ID
        long_group = client.call(HEARTBEAT, 4, group_id="123456789", generation_id=1, member_id="m")
        assert long_group.error_code == INVALID_REQUEST
        long_member = client.call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m" * 101)
        assert long_member.error_code == INVALID_REQUEST
        # DescribeGroups answers per group: every slot carries the error
        described = client.call(DESCRIBE, 5, groups=["a", "123456789"], include_authorized_operations=False)
        assert [g.error_code for g in described.groups] == [INVALID_REQUEST, INVALID_REQUEST]
    with WireClient(server.port, client_id="c" * 17) as client:
        assert client.call(API_VERSIONS, 3, client_software_name="x", client_software_version="1").error_code == (
            INVALID_REQUEST
        )
    with WireClient(server.port, client_id="c" * 16) as client:
        assert client.call(API_VERSIONS, 3, client_software_name="x", client_software_version="1").error_code == 0


def test_topic_names_keep_kafkas_own_error_where_the_api_has_one(make_server: MakeServer) -> None:
    server = make_server()
    with WireClient(server.port) as client:
        topics = [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for name in ("t" * 250, "fine")
        ]
        created = client.call(CREATE_TOPICS, 7, topics=topics, timeout=5000, validate_only=False)
        assert [(t.name, t.error_code) for t in created.topics] == [("t" * 250, INVALID_TOPIC_EXCEPTION), ("fine", 0)]


def test_a_member_id_limit_too_small_for_generated_ids_is_a_one_line_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "regroup",
            "serve",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path),
            "--max-member-id-bytes",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--max-member-id-bytes (100) must be at least 2085" in lines[0], done.stderr


def test_a_null_the_schema_forbids_is_logged_at_info_with_peer_and_api(make_server: MakeServer) -> None:
    server = make_server()
    healthy = WireClient(server.port)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as bad:
        bad.sendall(bytes.fromhex("00000014000f000000000005000672656c696162ffffffff"))  # DescribeGroups v0, null groups
        assert bad.recv(1) == b""
        port = bad.getsockname()[1]
    assert healthy.call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m").error_code == UNKNOWN_MEMBER_ID
    healthy.close()
    deadline = time.monotonic() + 5
    while f"127.0.0.1:{port}" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [line for line in server.log().splitlines() if f"127.0.0.1:{port}" in line]
    assert any(" INFO " in line and "DescribeGroups v0" in line and "null" in line for line in lines), lines


def test_error_codes_are_named_in_the_metrics(make_server: MakeServer) -> None:
    metrics_port = free_port()
    server = make_server("--metrics-port", str(metrics_port))
    with WireClient(server.port) as client:
        client.call(
            CREATE_TOPICS,
            7,
            topics=[{"name": "x", "num_partitions": 0, "replication_factor": 1, "assignments": [], "configs": []}],
            timeout=5000,
            validate_only=False,
        )
        client.call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m")
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    errors = [line for line in text.splitlines() if line.startswith("regroup_response_errors_total{")]
    assert 'regroup_response_errors_total{api="CreateTopics",error="INVALID_PARTITIONS"} 1' in errors, errors
    assert 'regroup_response_errors_total{api="Heartbeat",error="UNKNOWN_MEMBER_ID"} 1' in errors, errors
    assert not any('error="' + str(n) for line in errors for n in range(-1, 200) if f'error="{n}"' in line)


def test_clients_leaving_during_multi_group_offset_fetches_leave_no_error(make_server: MakeServer) -> None:
    """OffsetFetch v8 over several groups waits for the commits another client is making durable; each fetching
    connection is closed right after sending, so its request is cancelled while it waits."""
    server = make_server()
    with WireClient(server.port) as setup:
        create_topics(setup, {"t": 1})
    stop = threading.Event()

    def committing() -> None:
        with WireClient(server.port) as client:
            n = 0
            while not stop.is_set():
                n += 1
                commit(client, 8, f"c{n % 8}", {("t", 0): n})

    committer = threading.Thread(target=committing)
    committer.start()
    request = encode_request(
        OFFSET_FETCH,
        8,
        1,
        "leaver",
        groups=[{"group_id": f"c{n}", "topics": None} for n in range(8)],
        require_stable=False,
    )
    try:
        for _ in range(300):
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
                sock.sendall(request * 4)
    finally:
        stop.set()
        committer.join()
    with WireClient(server.port) as client:  # still served
        assert client.call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m").error_code == UNKNOWN_MEMBER_ID
    time.sleep(0.5)
    assert "never retrieved" not in server.log()
