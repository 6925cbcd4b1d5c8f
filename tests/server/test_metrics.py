"""``--metrics-port``: the Prometheus endpoint of ``regroup serve``. Protocol-level traffic with known request
counts and error codes, then a real kafka-python consumer, and the counters are checked to have moved by
exactly that traffic; the HTTP endpoint refuses what is not a scrape; a busy metrics port exits 2."""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.server.conftest import ServerProcess, free_port
from tests.server.test_consumer_wire import heartbeat
from tests.server.test_offsets_admin import commit
from tests.server.test_process import form_stable_group
from tests.server.wire import HEARTBEAT, WireClient, create_topics

MakeServer = Callable[..., ServerProcess]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> tuple[str, Samples]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples: Samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-z_]+ ", line), line
            continue
        match = _SAMPLE.match(line)
        assert match, line
        labels = frozenset(_LABEL.findall(match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def metrics_server(make_server: MakeServer) -> tuple[ServerProcess, int]:
    port = free_port()
    return make_server("--metrics-port", str(port)), port


def test_counters_move_by_exactly_the_traffic(make_server: MakeServer) -> None:
    server, port = metrics_server(make_server)
    text, before = scrape(port)
    assert "# TYPE regroup_request_duration_seconds histogram" in text
    assert value(before, "regroup_requests_total", api="JoinGroup") == 0
    with WireClient(server.port, client_id="metrics") as client:
        create_topics(client, {"m": 1})
        member_id = form_stable_group(client, "metered")  # JoinGroup x2 (MEMBER_ID_REQUIRED first), SyncGroup
        for _ in range(3):
            assert client.call(HEARTBEAT, 4, group_id="metered", generation_id=1, member_id=member_id).error_code == 0
        assert client.call(HEARTBEAT, 4, group_id="metered", generation_id=1, member_id="nobody").error_code == 25
        assert commit(client, 8, "other", {("m", 0): 1, ("m", 1): 1, ("gone", 0): 1}) == {
            ("m", 0): 0,
            ("m", 1): 3,
            ("gone", 0): 3,
        }
        _, after = scrape(port)
        assert value(after, "regroup_connections") == 1
    for api, n in {"JoinGroup": 2, "SyncGroup": 1, "Heartbeat": 4, "OffsetCommit": 1, "CreateTopics": 1}.items():
        assert value(after, "regroup_requests_total", api=api) == n, api
        assert value(after, "regroup_request_duration_seconds_count", api=api) == n, api
        assert value(after, "regroup_request_duration_seconds_bucket", api=api, le="+Inf") == n, api
        assert value(after, "regroup_request_bytes_total", api=api) > 0
        assert value(after, "regroup_response_bytes_total", api=api) > 0
    errors = {
        (dict(labels)["api"], dict(labels)["error"]): n
        for (name, labels), n in after.items()
        if name == "regroup_response_errors_total"
    }
    assert errors == {
        ("JoinGroup", "MEMBER_ID_REQUIRED"): 1,
        ("Heartbeat", "UNKNOWN_MEMBER_ID"): 1,
        ("OffsetCommit", "UNKNOWN_TOPIC_OR_PARTITION"): 2,
    }
    assert value(after, "regroup_groups", state="Stable", type="classic", protocol_type="consumer") == 1
    assert value(after, "regroup_groups", state="Empty", type="classic", protocol_type="") == 1  # "other"
    assert value(after, "regroup_group_members", type="classic") == 1
    assert ("regroup_group_members", frozenset({("type", "consumer")})) in after  # every group type, even at 0
    assert value(after, "regroup_group_members", type="consumer") == 0
    assert value(after, "regroup_rebalances_started_total") == 1
    assert value(after, "regroup_rebalances_completed_total") == 1
    # the new group persisted empty, its metadata when it became Stable, and the one valid offset commit
    assert value(after, "regroup_coordinator_records_appended_total") == 3
    assert value(after, "regroup_coordinator_log_bytes") > 0
    assert (value(after, "regroup_topics"), value(after, "regroup_partitions")) == (1, 1)
    assert value(after, "regroup_open_segment_files") == 0  # nothing produced: the partition has no files yet
    assert value(after, "regroup_connections_opened_total") >= 2  # create_topics' check and the client


def test_members_are_counted_by_group_type(make_server: MakeServer) -> None:
    server, port = metrics_server(make_server)
    with WireClient(server.port, client_id="c1") as client:
        create_topics(client, {"k": 2})
        for member in ("m-1", "m-2"):
            joined = heartbeat(
                client, group_id="modern", member_id=member, subscribed_topic_names=["k"], topic_partitions=[]
            )
            assert joined.error_code == 0
        form_stable_group(client, "old")
        _, after = scrape(port)
    assert value(after, "regroup_group_members", type="consumer") == 2
    assert value(after, "regroup_group_members", type="classic") == 1
    assert (
        value(after, "regroup_groups", state="Reconciling", type="consumer", protocol_type="consumer")
        + value(after, "regroup_groups", state="Stable", type="consumer", protocol_type="consumer")
        == 1
    )


class SentRequests(logging.Handler):
    """kafka-python's own account of the requests it sent (its protocol parser logs each at debug)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sent: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("%s Sending request") and isinstance(record.args, tuple):
            self.sent[type(record.args[2]).__name__.split("_")[0].removesuffix("Request")] += 1


def test_a_real_consumer_is_counted(make_server: MakeServer) -> None:
    kafka = pytest.importorskip("kafka")
    server, port = metrics_server(make_server)
    bootstrap = f"127.0.0.1:{server.port}"
    with WireClient(server.port) as client:
        create_topics(client, {"kp-metered": 2})
    _, before = scrape(port)
    parser_log = logging.getLogger("kafka.protocol.parser")
    sent, level = SentRequests(), parser_log.level
    parser_log.addHandler(sent)
    parser_log.setLevel(logging.DEBUG)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-metrics", client_id="kp-m")
    try:
        assert "kp-metered" in consumer.topics()
        consumer.subscribe(["kp-metered"])
        for _ in range(40):
            consumer.poll(timeout_ms=250)
            if consumer.assignment():
                break
        assert {tp.partition for tp in consumer.assignment()} == {0, 1}
    finally:
        consumer.close()
        parser_log.removeHandler(sent)
        parser_log.setLevel(level)
    _, after = scrape(port)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # the group's requests, as many as the client says it sent: each answered before the next or before close()
    assert sent.sent["JoinGroup"] >= 2 and sent.sent["SyncGroup"] >= 1 and sent.sent["LeaveGroup"] == 1
    for api in ("FindCoordinator", "JoinGroup", "SyncGroup", "OffsetFetch", "LeaveGroup"):
        assert delta("regroup_requests_total", api=api) == sent.sent[api], api
        assert delta("regroup_request_duration_seconds_count", api=api) == sent.sent[api], api
    assert delta("regroup_response_errors_total", api="JoinGroup", error="MEMBER_ID_REQUIRED") == 1
    assert delta("regroup_rebalances_completed_total") == sent.sent["SyncGroup"]  # one per generation synced
    assert value(after, "regroup_groups", state="Empty", type="classic", protocol_type="consumer") == 1
    assert value(after, "regroup_group_members", type="classic") == 0


def http(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_endpoint_answers_only_scrapes(make_server: MakeServer) -> None:
    _, port = metrics_server(make_server)
    with pytest.raises(urllib.error.HTTPError) as not_found:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
    assert not_found.value.code == 404
    post = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as not_allowed:
        urllib.request.urlopen(post, timeout=10)
    assert not_allowed.value.code == 405
    assert http(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert http(port, b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"y" * 20000 + b"\r\n\r\n") == b""  # head too big
    head = http(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    _, samples = scrape(port)
    assert value(samples, "regroup_connections") == 0  # scrapes are not Kafka connections


def test_metrics_flags_errors_exit_2(make_server: MakeServer, tmp_path: Path) -> None:
    _, busy_port = metrics_server(make_server)
    for bad in (["--metrics-port", "70000"], ["--metrics-port", str(busy_port)]):
        args = ["--port", str(free_port()), "--data-dir", str(tmp_path / "d"), "--log-level", "error", *bad]
        result = subprocess.run(
            [sys.executable, "-m", "regroup", "serve", *args], capture_output=True, text=True, timeout=30
        )
        assert (result.returncode, result.stderr.count("\n")) == (2, 1), (bad, result.stderr)
