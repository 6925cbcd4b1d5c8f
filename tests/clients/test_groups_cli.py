"""``regroup groups list | describe | lag | timeline`` against ``regroup serve`` with real confluent-kafka consumers: a
classic group (``range``) and a KIP-848 consumer group (``group.protocol=consumer``), offsets committed by the
members, more records produced afterwards so the lag is not zero; the JSON documents are checked field by
field (members, assignments covering every partition, lag = log end offset - committed offset) and the tables
for their columns; ``timeline`` reads the rebalances of a group a member joined and left from the server's HTTP
console, as a table and as JSON. Errors (unknown group, no broker listening, bad arguments) are one line on
stderr with a non-zero exit code, never a traceback.

The CLI runs in-process (``regroup.cli.main.main``) for the checks that wait on the group, and as a subprocess
for the exit codes a shell sees."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from regroup.cli.main import main
from tests.clients.harness import eventually
from tests.clients.kip848 import consumer_config
from tests.server.conftest import ServerProcess, free_port, served
from tests.server.wire import WireClient, create_topics

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "orders"
PARTITIONS = 4
FIRST = 10  # records per partition before the commits
MORE = (3, 0, 5, 1)  # records per partition produced after them
COMMITTED = (4, 10, 0, 7)  # what the members commit, per partition
SETTLE_S = 90.0  # a deadline, not a wait


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["groups", *args])
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], port: int, *args: str) -> Any:
    code, out, err = cli(capsys, *args, "--bootstrap-server", f"127.0.0.1:{port}", "--json")
    assert (code, err) == (0, ""), (code, err)
    return json.loads(out)


def produce(port: int, per_partition: tuple[int, ...], tag: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all"})
    failures: list[Any] = []
    for partition, count in enumerate(per_partition):
        for i in range(count):
            producer.produce(
                TOPIC, value=f"{tag}-{partition}-{i}".encode(), partition=partition, on_delivery=_failed(failures)
            )
    assert producer.flush(60) == 0, "records not acknowledged in 60 s"
    assert not failures, failures


def _failed(failures: list[Any]) -> Any:
    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    return on_delivery


@contextlib.contextmanager
def consumers(port: int, group: str, protocol: str, count: int) -> Iterator[list[Any]]:
    made: list[Any] = []
    try:
        for i in range(count):
            assignor = "range" if protocol == "classic" else None
            config = consumer_config(f"127.0.0.1:{port}", group, f"{group}-c{i}", protocol, assignor)
            consumer = confluent_kafka.Consumer(config)
            made.append(consumer)
            consumer.subscribe([TOPIC])
        yield made
    finally:
        for consumer in made:
            with contextlib.suppress(Exception):
                consumer.close()


def settled(capsys: pytest.CaptureFixture[str], port: int, group: str, members: list[Any]) -> dict[str, Any]:
    """Poll the members until ``describe`` shows them all, Stable, with disjoint assignments covering the topic,
    each as its member sees it; the describe document."""

    def check() -> dict[str, Any] | None:
        for consumer in members:
            consumer.poll(0.05)
        doc = cli_json(capsys, port, "describe", group)
        mine = {c.memberid(): sorted(tp.partition for tp in c.assignment()) for c in members}
        theirs = {m["member_id"]: m["assignment"].get(TOPIC, []) for m in doc["members"]}
        every = sorted(p for ps in theirs.values() for p in ps)
        ok = doc["state"] == "Stable" and mine == theirs and every == list(range(PARTITIONS))
        return doc if ok else None

    return eventually(check, SETTLE_S, f"group {group} to settle", interval=0.2)


def commit(members: list[Any]) -> None:
    """Each member commits ``COMMITTED`` for the partitions it owns (synchronously)."""
    for consumer in members:
        owned = [tp.partition for tp in consumer.assignment()]
        if owned:
            offsets = [confluent_kafka.TopicPartition(TOPIC, p, COMMITTED[p]) for p in owned]
            consumer.commit(offsets=offsets, asynchronous=False)


def check_lag(lag: dict[str, Any], group: str, owners: dict[int, str]) -> None:
    ends = [FIRST + more for more in MORE]
    assert lag["group_id"] == group
    assert lag["lag"] == {TOPIC: {str(p): ends[p] - COMMITTED[p] for p in range(PARTITIONS)}}
    assert lag["partitions"] == [
        {
            "topic": TOPIC,
            "partition": p,
            "committed": COMMITTED[p],
            "end": ends[p],
            "lag": ends[p] - COMMITTED[p],
            "owner": owners[p],
        }
        for p in range(PARTITIONS)
    ]


def total_lag() -> int:
    return sum(FIRST + MORE[p] - COMMITTED[p] for p in range(PARTITIONS))


def setup_topic(port: int) -> None:
    with WireClient(port) as client:
        create_topics(client, {TOPIC: PARTITIONS})
    produce(port, (FIRST,) * PARTITIONS, "first")


# ------------------------------------------------------------------------------------------------ groups
def test_a_classic_group(server: ServerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    setup_topic(server.port)
    with consumers(server.port, "classic-g", "classic", 2) as members:
        described = settled(capsys, server.port, "classic-g", members)
        commit(members)
        produce(server.port, MORE, "more")

        assert set(described) == {"group_id", "type", "state", "generation", "protocol", "members"}
        assert (described["group_id"], described["type"], described["protocol"]) == ("classic-g", "classic", "range")
        assert described["generation"] is None
        by_client = {m["client_id"]: m for m in described["members"]}
        assert sorted(by_client) == ["classic-g-c0", "classic-g-c1"]
        for m in described["members"]:
            assert set(m) == {"member_id", "client_id", "host", "instance_id", "assignment"}
            assert m["instance_id"] is None and m["host"].endswith("127.0.0.1")
        # range over one topic of 4 partitions, 2 members: 2 contiguous partitions each
        assert sorted(m["assignment"][TOPIC] for m in described["members"]) == [[0, 1], [2, 3]]
        owners = {p: m["member_id"] for m in described["members"] for p in m["assignment"][TOPIC]}

        check_lag(cli_json(capsys, server.port, "lag", "classic-g"), "classic-g", owners)
        listed = cli_json(capsys, server.port, "list")
        assert listed == {
            "groups": [
                {
                    "group_id": "classic-g",
                    "type": "classic",
                    "state": "Stable",
                    "protocol": "range",
                    "members": 2,
                    "lag": total_lag(),
                }
            ]
        }

        code, out, err = cli(capsys, "lag", "classic-g", "--bootstrap-server", f"127.0.0.1:{server.port}")
        assert (code, err) == (0, "")
        head, columns, *rows = out.splitlines()
        assert head == f"group classic-g: classic, Stable, total lag {total_lag()}"
        assert columns.split() == ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "OWNER"]
        assert [r.split()[:5] for r in rows] == [
            [TOPIC, str(p), str(COMMITTED[p]), str(FIRST + MORE[p]), str(FIRST + MORE[p] - COMMITTED[p])]
            for p in range(PARTITIONS)
        ]
        assert all(columns.index("OWNER") == r.index(owners[p]) for p, r in enumerate(rows))  # aligned

    # the members gone: the group is Empty, its offsets (and so its lag) stay
    def empty() -> dict[str, Any] | None:
        doc = cli_json(capsys, server.port, "list")
        return doc if doc["groups"] and doc["groups"][0]["state"] == "Empty" else None

    listed = eventually(empty, SETTLE_S, "the group to be Empty")
    assert listed["groups"][0] | {"state": "?"} == {
        "group_id": "classic-g",
        "type": "classic",
        "state": "?",
        "protocol": "",
        "members": 0,
        "lag": total_lag(),
    }
    lag = cli_json(capsys, server.port, "lag", "classic-g")
    assert [row["owner"] for row in lag["partitions"]] == [None] * PARTITIONS
    assert [row["lag"] for row in lag["partitions"]] == [FIRST + MORE[p] - COMMITTED[p] for p in range(PARTITIONS)]


def test_a_consumer_protocol_group_beside_a_classic_one(
    kip848_server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    port = kip848_server.port
    setup_topic(port)
    with consumers(port, "kip848-g", "consumer", 2) as members, consumers(port, "classic-g", "classic", 1) as solo:
        described = settled(capsys, port, "kip848-g", members)
        settled(capsys, port, "classic-g", solo)
        commit(members)
        produce(port, MORE, "more")
        for consumer in solo:
            consumer.poll(0.05)

        assert set(described) == {"group_id", "type", "state", "epoch", "assignor", "members"}
        assert (described["group_id"], described["type"], described["assignor"]) == ("kip848-g", "consumer", "uniform")
        assert isinstance(described["epoch"], int) and described["epoch"] >= 2  # one bump per member joining
        assert sorted(m["client_id"] for m in described["members"]) == ["kip848-g-c0", "kip848-g-c1"]
        assert sorted(len(m["assignment"][TOPIC]) for m in described["members"]) == [2, 2]
        owners = {p: m["member_id"] for m in described["members"] for p in m["assignment"][TOPIC]}

        check_lag(cli_json(capsys, port, "lag", "kip848-g"), "kip848-g", owners)
        listed = {g["group_id"]: g for g in cli_json(capsys, port, "list")["groups"]}
        assert listed["kip848-g"] == {
            "group_id": "kip848-g",
            "type": "consumer",
            "state": "Stable",
            "assignor": "uniform",
            "members": 2,
            "lag": total_lag(),
        }
        # the classic group committed nothing: no lag to add up
        assert listed["classic-g"] | {"state": "?"} == {
            "group_id": "classic-g",
            "type": "classic",
            "state": "?",
            "protocol": "range",
            "members": 1,
            "lag": 0,
        }

        code, out, err = cli(capsys, "list", "--bootstrap-server", f"127.0.0.1:{port}")
        assert (code, err) == (0, "")
        assert [line.split() for line in out.splitlines()] == [
            ["GROUP", "TYPE", "STATE", "ASSIGNOR", "MEMBERS", "LAG"],
            ["classic-g", "classic", listed["classic-g"]["state"], "range", "1", "0"],
            ["kip848-g", "consumer", "Stable", "uniform", "2", str(total_lag())],
        ]
        code, out, err = cli(capsys, "describe", "kip848-g", "--bootstrap-server", f"127.0.0.1:{port}")
        assert (code, err) == (0, "")
        head = out.splitlines()[0]
        assert head.startswith("group kip848-g: consumer, Stable, epoch ") and head.endswith(", assignor uniform")


# ------------------------------------------------------------------------------------------------ errors
def regroup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "regroup", "groups", *args], capture_output=True, text=True, timeout=120
    )


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_an_unknown_group_is_one_line_and_exit_1(server: ServerProcess) -> None:
    for command in ("describe", "lag"):
        proc = regroup(command, "no-such-group", "--bootstrap-server", f"127.0.0.1:{server.port}")
        assert (proc.returncode, proc.stdout) == (1, "")
        assert one_line(proc.stderr) == "regroup: unknown group 'no-such-group'"
    proc = regroup("list", "--json", "--bootstrap-server", f"127.0.0.1:{server.port}")
    assert (proc.returncode, json.loads(proc.stdout), proc.stderr) == (0, {"groups": []}, "")


def test_no_broker_listening_is_one_line_and_exit_1() -> None:
    port = free_port()
    for args in (["list"], ["describe", "g"], ["lag", "g", "--json"]):
        started = time.monotonic()
        proc = regroup(*args, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "5")
        assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
        line = one_line(proc.stderr)
        assert line.startswith(f"regroup: cannot connect to 127.0.0.1:{port}: "), line
        assert time.monotonic() - started < 100


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["list", "--bootstrap-server", "nohost"], "regroup: --bootstrap-server: expected host:port, got 'nohost'"),
        (["list", "--bootstrap-server", "h:99999"], "regroup: --bootstrap-server: expected host:port, got 'h:99999'"),
        (["describe"], "regroup: the following arguments are required: group"),
        (["lag", "g", "--timeout", "0"], "regroup: --timeout: must be a positive number of seconds"),
        (
            ["nope"],
            "regroup: groups: invalid choice: 'nope' (choose from 'list', 'describe', 'lag', 'timeline')",
        ),
        (["timeline", "g", "--http", "ftp://h:1"], "regroup: --http: expected http://host:port, got 'ftp://h:1'"),
        (["timeline", "g", "--since-ms", "x"], "regroup: argument --since-ms: invalid int value: 'x'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], expected: str) -> None:
    proc = regroup(*args)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert one_line(proc.stderr) == expected


def test_a_missing_subcommand_prints_the_usage() -> None:
    proc = regroup()
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines()[-1] == "regroup: groups: missing command (one of list, describe, lag, timeline)"
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------------------ timeline
def test_the_timeline_of_a_group_a_member_joined_and_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    http_port = free_port()
    with served(tmp_path, "--http-port", str(http_port)) as proc:
        setup_topic(proc.port)
        url = f"http://127.0.0.1:{http_port}"
        with consumers(proc.port, "tl-g", "classic", 1) as first:
            settled(capsys, proc.port, "tl-g", first)
            with consumers(proc.port, "tl-g", "classic", 2) as pair:
                second = pair[1:]
                pair[0].close()  # (only the second of this pair joins the first member)
                settled(capsys, proc.port, "tl-g", first + second)
            settled(capsys, proc.port, "tl-g", first)

            code, out, err = cli(capsys, "timeline", "tl-g", "--http", url, "--json")
            assert (code, err) == (0, "")
            doc = json.loads(out)
            assert set(doc) == {"group_id", "rebalances", "ownership"} and doc["group_id"] == "tl-g"
            generations = [r["generation"] for r in doc["rebalances"]]
            assert len(generations) >= 3 and generations == sorted(generations)
            assert {i["partition"] for i in doc["ownership"]} == set(range(PARTITIONS))

            code, out, err = cli(capsys, "timeline", "tl-g", "--http", url)
            assert (code, err) == (0, "")
            head, columns, *rows = out.splitlines()
            assert head == f"group tl-g: {len(generations)} rebalances, {len(doc['ownership'])} ownership intervals"
            assert columns.split() == ["START", "TOOK", "GENERATION", "REASON", "MEMBER", "MOVED", "UNOWNED_MS"]
            assert [int(r.split()[2]) for r in rows] == generations
            assert all(r.split()[0].endswith("Z") and r.split()[1].endswith("ms") for r in rows)

            last = doc["rebalances"][-1]["start_ms"]
            code, out, err = cli(capsys, "timeline", "tl-g", "--http", url, "--json", "--since-ms", str(last))
            assert (code, err) == (0, "")
            since = [r["generation"] for r in json.loads(out)["rebalances"]]
            assert since[-1] == generations[-1] and since == generations[-len(since) :] and len(since) < 3

        proc_ = regroup("timeline", "no-such-group", "--http", url)
        assert (proc_.returncode, proc_.stdout) == (1, "")
        assert one_line(proc_.stderr) == "regroup: unknown group 'no-such-group' (not in the rebalance history)"

    proc_ = regroup("timeline", "tl-g", "--http", f"http://127.0.0.1:{free_port()}", "--timeout", "5")
    assert (proc_.returncode, proc_.stdout) == (1, "")
    assert one_line(proc_.stderr).startswith("regroup: cannot reach http://127.0.0.1:")
