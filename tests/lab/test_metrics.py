"""Exact metrics on hand-built event logs: every column of both tables, worked out by hand in logs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from regroup.lab import tables
from regroup.lab.errors import LabInputError
from regroup.lab.eventfiles import read_groups
from regroup.lab.metrics import Context, analyze, parse_labels
from regroup.lab.payload import (
    assignment_bytes,
    heartbeat_assignment_bytes,
    heartbeat_owned_bytes,
    heartbeat_topics_bytes,
    join_bytes,
    subscription_bytes,
    sync_bytes,
)
from tests.lab.logs import eager_story, kip848_story, server_log

SUB1 = subscription_bytes(["t"], {}, 1)
SUB2 = subscription_bytes(["t"], {}, 2)


def test_payload_arithmetic() -> None:
    assert join_bytes([10, 20, 30]) == (60, 180)
    assert join_bytes([]) == (0, 0)
    assert sync_bytes([5, 7]) == 24
    # owned partitions make the subscription longer; the encoding is Kafka's, so sizes are stable
    assert subscription_bytes(["t"], {"t": [0, 1]}, 3) > subscription_bytes(["t"], {}, 3)
    assert assignment_bytes({"t": [0, 1]}) - assignment_bytes({"t": [0]}) == 4  # one more int32


def test_labels() -> None:
    assert parse_labels("[a-b-1,a-b-0,c-2]") == {"a-b": [1, 0], "c": [2]}
    assert parse_labels("[]") == {}


def test_rebalance_rows_of_the_eager_story() -> None:
    run, rows = analyze(eager_story().events, Context(run_id="r", source="s", group_id="g", measure_from_ms=50))
    first, second = rows
    keys = {"run_id": "r", "source": "s", "group_id": "g", "strategy": "range", "protocol": "eager", "members": None}
    assert first == {
        **keys,
        "index": 0,
        "phase": "formation",
        "trigger": "join a; join b",
        "generation": 1,
        "start_ms": 10,
        "end_ms": 30,  # b applied its assignment last
        "group_size": 2,
        "partitions_assigned": 2,
        "duration_ms": 20,
        "rounds": 1,
        "unowned_partition_ms": 25 + 30,  # t-0 until a processes it at 25, t-1 until 30
        "moved": 0,
        "revoked": 0,
        "reassigned": 2,
        "fraction_kept": None,  # nothing was owned before
        "balance_spread": 0,
        "balance_score": 0,
        "join_bytes_leader": 2 * SUB1,
        "join_bytes_all": 2 * 2 * SUB1,
        "sync_bytes": 2 * (assignment_bytes({"t": [0]}) + assignment_bytes({"t": [1]})),
        "heartbeat_bytes": None,  # no ConsumerGroupHeartbeat in a classic group
    }
    assert second == {
        **keys,
        "index": 1,
        "phase": "churn",
        "trigger": "leave b",
        "generation": 2,
        "start_ms": 105,
        "end_ms": 120,
        "group_size": 1,
        "partitions_assigned": 2,
        "duration_ms": 15,
        "rounds": 1,
        "unowned_partition_ms": 20 + 15,  # t-1 from 100 (b revoked), t-0 from 105 (a revoked), both to 120
        "moved": 1,  # t-1: b -> a
        "revoked": 2,
        "reassigned": 2,
        "fraction_kept": 0.5,  # a keeps t-0, b's t-1 is gone
        "balance_spread": 0,
        "balance_score": 0,
        "join_bytes_leader": SUB2,
        "join_bytes_all": SUB2,
        "sync_bytes": 2 * assignment_bytes({"t": [0, 1]}),
        "heartbeat_bytes": None,
    }
    assert run == {
        "run_id": "r",
        "source": "s",
        "group_id": "g",
        "strategy": "range",
        "protocol": "eager",
        "members": 2,  # an event log: the largest generation
        "events": len(eager_story().events),
        "violations": 0,
        "end_ms": 200,
        "changes": 1,  # only b's leave is after 50 ms
        "churn": "leave",  # an event log: the pattern of its changes
        "churn_events": 1,
        "formation_rebalances": 1,
        "rebalances": 1,
        "settled": True,  # at the end every partition has its owner, nothing is in progress
        "cut_off_unowned_partition_ms": 0,
        "duration_ms": 15,
        "rounds": 1,
        "unowned_partition_ms": 35,
        "moved": 1,
        "revoked": 2,
        "reassigned": 2,
        "fraction_kept": 0.5,
        "balance_spread": 0,
        "balance_score": 0,
        "join_bytes_leader": SUB2,
        "join_bytes_all": SUB2,
        "sync_bytes": 2 * assignment_bytes({"t": [0, 1]}),
        "heartbeat_bytes": None,
    }
    assert len(tables.row(run, tables.RUN_COLUMNS)) == len(tables.RUN_COLUMNS)


def test_fixed_metadata_size_gives_the_payload_arithmetic() -> None:
    ctx = Context(run_id="r", source="s", metadata_bytes=100_000)
    _, (first, second) = analyze(eager_story().events, ctx)
    assert (first["join_bytes_leader"], first["join_bytes_all"]) == (200_000, 400_000)
    assert (second["join_bytes_leader"], second["join_bytes_all"]) == (100_000, 100_000)


def test_server_log_is_split_per_group_and_ownership_costs_are_null(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    path.write_text(server_log().text(), encoding="utf-8")
    groups = read_groups(str(path))
    assert [g for g, _ in groups] == ["g1", "g2"]
    g1 = dict(groups)["g1"]
    run, (formed, grown) = analyze(g1, Context(run_id="x#g1", source="x", group_id="g1"))
    assert (formed["start_ms"], formed["end_ms"], formed["group_size"], formed["partitions_assigned"]) == (
        1000,
        1005,
        1,
        3,
    )
    assert grown["trigger"] is None
    assert (grown["start_ms"], grown["end_ms"], grown["duration_ms"], grown["group_size"]) == (2000, 2020, 20, 2)
    assert grown["moved"] == 1
    assert grown["fraction_kept"] == pytest.approx(2 / 3)
    assert (grown["balance_spread"], grown["balance_score"]) == (1, 1)
    assert grown["sync_bytes"] == 2 * (assignment_bytes({"a": [0, 1]}) + assignment_bytes({"a": [2]}))
    for key in ("unowned_partition_ms", "revoked", "reassigned", "join_bytes_leader", "join_bytes_all"):
        assert grown[key] is None and run[key] is None
    assert grown["strategy"] == "range" and grown["protocol"] is None
    assert run["changes"] == 2 and run["rebalances"] == 2 and run["members"] == 2
    _g2_run, (only,) = analyze(dict(groups)["g2"], Context(run_id="x#g2", source="x", group_id="g2"))
    assert (only["start_ms"], only["end_ms"], only["partitions_assigned"]) == (1001, 1006, 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no events"),
        ("not json\n", "line 1: invalid JSON"),
        ("[1, 2]\n", "line 1: not a JSON object"),
        ('{"seq": 0}\n', "line 1: not an event of the log schema (missing keys"),
    ],
)
def test_bad_event_files_name_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LabInputError, match="bad.jsonl: " + message.replace("(", r"\(")):
        read_groups(str(path))


def test_bad_value_type_on_a_later_line(tmp_path: Path) -> None:
    lines = eager_story().text().splitlines()
    lines[3] = lines[3].replace('"t":0', '"t":"zero"')
    path = tmp_path / "typed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LabInputError, match=r"typed.jsonl: line 4: t must be an integer or null"):
        read_groups(str(path))


def test_booleans_are_not_integers(tmp_path: Path) -> None:
    lines = eager_story().text().splitlines()
    lines[1] = lines[1].replace('"value":2', '"value":true')
    path = tmp_path / "bool.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LabInputError, match=r"bool.jsonl: line 2: value must be an integer or null"):
        read_groups(str(path))


def test_a_kip848_log_from_the_simulator() -> None:
    from regroup.sim import load, simulate, summarize

    scenario = load("third-member-joins-consumer")
    events = simulate(scenario, 0).log.events
    run, rows = analyze(events, Context(run_id="c", source="c", measure_from_ms=scenario.measure_from_ms))
    direct = summarize(events, 0).rebalances
    assert [r["moved"] for r in rows] == [d.moved for d in direct]
    assert [r["unowned_partition_ms"] for r in rows] == [d.unowned_partition_ms for d in direct]
    assert run["strategy"] == "uniform" and run["protocol"] == "consumer"
    assert [r["group_size"] for r in rows] == [1, 2, 3]  # members answered in each epoch, even with nothing
    for r in rows:  # no JoinGroup or SyncGroup in KIP-848; heartbeats carry subscriptions and assignments
        assert r["join_bytes_leader"] is None and r["join_bytes_all"] is None and r["sync_bytes"] is None
        assert r["heartbeat_bytes"] is not None and r["heartbeat_bytes"] > 0
        assert r["partitions_assigned"] == 3


def test_kip848_heartbeat_payload_per_rebalance() -> None:
    run, rows = analyze(kip848_story().events, Context(run_id="k", source="k", measure_from_ms=50))
    assert [(r["phase"], r["generation"], r["start_ms"], r["end_ms"]) for r in rows] == [
        ("formation", 1, 2, 4),
        ("churn", 2, 102, 110),
    ]
    # the sizes the story's docstring works out, from the payload functions
    assert (heartbeat_topics_bytes(["t"]), heartbeat_owned_bytes({})) == (2, 0)
    assert heartbeat_assignment_bytes({"t": [0, 1]}) == 28 and heartbeat_owned_bytes({"t": [0, 1]}) == 26
    assert heartbeat_assignment_bytes({}) == 2
    assert heartbeat_assignment_bytes({"t": [0]}) == 24 and heartbeat_owned_bytes({"t": [0]}) == 22
    assert [r["heartbeat_bytes"] for r in rows] == [2 + 0 + 28 + 26, 2 + 0 + 2 + 24 + 22 + 24 + 22]
    assert run["heartbeat_bytes"] == 96  # the churn phase only
    for r in rows:  # no JoinGroup or SyncGroup in KIP-848
        assert r["join_bytes_leader"] is None and r["join_bytes_all"] is None and r["sync_bytes"] is None
