"""KIP-848 members in the simulator: the bundled third-member-joins and rolling-upgrade stories, a flaky mixed group,
determinism across processes, scenario validation of the new fields, and the CLI's exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from regroup.sim import load, simulate, summarize
from regroup.sim.scenario import ScenarioError, parse
from tests.group_views import classic_groups, consumer_groups

FLAKY_MIXED = Path(__file__).with_name("flaky-mixed.json")


def test_third_member_joining_a_consumer_group_moves_one_partition_in_one_epoch_and_nobody_else_stops() -> None:
    sim = simulate(load("third-member-joins-consumer"))
    assert sim.checker.violations == []
    summary = summarize(sim.log.events, sim.scenario.measure_from_ms)
    (rebalance,) = summary.rebalances
    assert rebalance.rounds == 1 and rebalance.moved == 1 and rebalance.revoked == 1
    assert rebalance.unowned_partitions == ["topic-foo-1"]
    assert summary.final_assignment == {"c0": {"topic-foo": [0]}, "c1": {"topic-foo": [2]}, "c2": {"topic-foo": [1]}}
    ended = [e for e in sim.log.events if e["type"] in ("revoked", "lost") and e["t"] >= 25_000]
    assert [(e["member"], e["partition"]) for e in ended] == [("c0", 1)]
    # no classic API was used, only heartbeats and commits
    apis = {e["api"] for e in sim.log.events if e["type"] == "request_sent"}
    assert apis == {"ConsumerGroupHeartbeat", "OffsetCommit"}
    assert {e["state"] for e in sim.log.events if e["type"] == "subscription"} == {"consumer"}


def test_third_member_joins_pause_of_the_moving_partition_is_about_one_heartbeat_interval() -> None:
    sim = simulate(load("third-member-joins-consumer"))
    revoked = next(e["t"] for e in sim.log.events if e["type"] == "revoked" and e["t"] >= 25_000)
    assigned = next(e["t"] for e in sim.log.events if e["type"] == "assigned" and e["member"] == "c2")
    interval = sim.scenario.coordinator["consumer_group_heartbeat_interval_ms"]
    assert 0 < assigned - revoked <= interval + 6 * 8  # one interval plus a few one-way latencies (5 + 3 ms)


def test_rolling_upgrade_and_back_converts_the_group_both_ways_safely() -> None:
    sim = simulate(load("rolling-upgrade"))
    assert sim.checker.violations == []
    assert sim.quiescent()
    protocols = [(e["member"], e["state"]) for e in sim.log.events if e["type"] == "subscription"]
    assert protocols[3:] == [
        ("c0", "consumer"),
        ("c1", "consumer"),
        ("c2", "consumer"),
        ("c0", "cooperative"),
        ("c1", "cooperative"),
        ("c2", "cooperative"),
    ]
    kinds = []
    for e in sim.log.events:
        if e["type"] == "group_state":
            kind = "consumer" if (e["detail"] or "").startswith("type=consumer") else "classic"
            if not kinds or kinds[-1] != kind:
                kinds.append(kind)
    assert kinds == ["classic", "consumer", "classic"]
    generations = [e["generation"] for e in sim.log.events if e["type"] == "group_state"]
    assert generations == sorted(generations)  # the conversions keep counting up
    assert "g" in classic_groups(sim.coordinator) and "g" not in consumer_groups(sim.coordinator)
    # a bounce revokes cleanly (no lost partitions) and the new process gets the same partitions back
    assert not [e for e in sim.log.events if e["type"] == "lost"]
    summary = summarize(sim.log.events)
    assert sorted(p for per in summary.final_assignment.values() for p in per["topic-foo"]) == list(range(6))


@pytest.mark.parametrize("seed", [1, 2, 3, 11])
def test_flaky_mixed_group_exercises_faults_and_stays_safe(seed: int) -> None:
    sim = simulate(load(str(FLAKY_MIXED)), seed)
    types = {e["type"] for e in sim.log.events}
    assert {"message_dropped", "message_duplicated", "request_timeout"} <= types
    assert sim.checker.violations == []
    assert sim.quiescent()


def test_mixed_group_log_is_byte_identical_across_processes(tmp_path: Path) -> None:
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"events-{hash_seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run(
            [sys.executable, "-m", "regroup", "simulate", str(FLAKY_MIXED), "--seed", "5", "--events", str(out),
             "--summary-json"],
            check=True, capture_output=True, env=env, timeout=120,
        )  # fmt: skip
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert b"ConsumerGroupHeartbeat" in outputs[0]


MINIMAL = {
    "duration_ms": 1000,
    "topics": {"t": 2},
    "members": [{"id": "a"}],
    "events": [{"at_ms": 0, "action": "join", "member": "a"}],
}


def with_(**changes: object) -> str:
    doc = json.loads(json.dumps(MINIMAL))
    doc.update(changes)
    return json.dumps(doc)


def test_new_member_fields_and_start_actions_parse() -> None:
    scenario = parse(
        with_(
            members=[{"id": "a", "protocol": "consumer", "assignor": "range", "callback_delay_ms": 200}],
            events=[
                {"at_ms": 0, "action": "join", "member": "a"},
                {"at_ms": 500, "action": "bounce", "member": "a", "protocol": "classic"},
            ],
            coordinator={"consumer_group_migration_policy": "upgrade", "consumer_group_assignors": ["range"]},
        )
    )
    (member,) = scenario.members
    assert (member.protocol, member.assignor, member.callback_delay_ms) == ("consumer", "range", 200)
    assert scenario.events[1].protocol == "classic"
    config = scenario.coordinator_config()
    assert config.consumer_group_migration_policy == "upgrade" and config.consumer_group_assignors == ("range",)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (with_(members=[{"id": "a", "protocol": "kip848"}]), "x.json: members[0].protocol: must be one of"),
        (
            with_(members=[{"id": "a", "assignor": "sticky"}]),
            "x.json: members[0].assignor: unknown server-side assignor 'sticky'",
        ),
        (with_(members=[{"id": "a", "callback_delay_ms": -1}]), "x.json: members[0].callback_delay_ms: must be >="),
        (
            with_(members=[{"id": "a", "callback_delay_ms": 30000}]),
            "x.json: members[0].callback_delay_ms: must be lower than rebalance_timeout_ms",
        ),
        (
            with_(events=[{"at_ms": 0, "action": "leave", "member": "a", "protocol": "consumer"}]),
            "x.json: events[0].protocol: only bounce, join, restart switch protocols",
        ),
        (
            with_(events=[{"at_ms": 0, "action": "bounce", "member": "a", "protocol": "eager"}]),
            "x.json: events[0].protocol: must be one of classic, consumer",
        ),
        (
            with_(coordinator={"consumer_group_migration_policy": "sometimes"}),
            "x.json: coordinator.consumer_group_migration_policy: must be one of",
        ),
        (
            with_(coordinator={"consumer_group_assignors": ["fancy"]}),
            "x.json: coordinator.consumer_group_assignors: unknown server-side assignor 'fancy'",
        ),
    ],
)
def test_invalid_kip848_fields_name_the_field(doc: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse(doc, "x.json")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_cli_reports_a_bad_protocol_in_one_line_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(with_(members=[{"id": "a", "protocol": "nope"}]))
    proc = subprocess.run(
        [sys.executable, "-m", "regroup", "simulate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "members[0].protocol: must be one of" in proc.stderr


def test_downgrade_then_immediate_upgrade_keeps_ownership_exclusive() -> None:
    sim = simulate(load(str(Path(__file__).with_name("downgrade-then-upgrade.json"))))
    assert sim.checker.violations == []


def test_an_assignment_interval_holds_back_the_joiners_partitions_in_the_simulator() -> None:
    """A scenario's coordinator may set ``consumer_group_assignment_interval_ms`` (KIP-1263): with members
    heartbeating every 100 ms, two members joining 200 and 400 ms after the first get partitions within a few
    heartbeats without an interval, and only once the interval of a second has passed with one; the group
    settles the same, with no violation."""
    base = json.loads(
        (Path(__file__).parents[3] / "src/regroup/sim/scenarios/third-member-joins-consumer.json").read_text()
    )
    base["events"] = [
        {"at_ms": 0, "action": "join", "member": "c0"},
        {"at_ms": 200, "action": "join", "member": "c1"},
        {"at_ms": 400, "action": "join", "member": "c2"},
    ]
    first: dict[int, int] = {}
    for interval in (0, 1_000):
        coordinator = {**base["coordinator"], "consumer_group_heartbeat_interval_ms": 100}
        doc = dict(base, coordinator={**coordinator, "consumer_group_assignment_interval_ms": interval})
        sim = simulate(parse(json.dumps(doc)))
        assert sim.checker.violations == []
        final = summarize(sim.log.events).final_assignment
        assert sorted(p for owned in final.values() for p in owned.get("topic-foo", [])) == [0, 1, 2]
        first[interval] = max(
            min(e["t"] for e in sim.log.events if e["type"] == "assigned" and e["member"] == m) for m in ("c1", "c2")
        )
    assert first[0] < 1_000 <= first[1_000]
