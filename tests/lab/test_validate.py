"""``regroup lab validate``: one short scenario end to end (the simulator, then ``regroup serve`` with real
confluent-kafka members), the contract of ``validation.json``, and the scenarios a real run refuses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from regroup.cli.lab import validate_line
from regroup.lab.real_run import RealRunError, check, strategy
from regroup.lab.validate import as_librdkafka, measure, page, within
from regroup.sim import simulate
from regroup.sim.scenario import parse

ROOT = Path(__file__).resolve().parents[2]

#: two eager members, a third joins at 5 s: one rebalance in the measured window (from 3 s), every partition
#: revoked, range moves a fixed number of them
SHORT: dict[str, Any] = {
    "name": "short-eager-join",
    "duration_ms": 12_000,
    "measure_from_ms": 3_000,
    "network": {"latency_ms": 1},
    "topics": {"t0": 6},
    "member_defaults": {"strategies": ["range"], "session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000,
                        "processing_ms": 0},
    "members": [{"id": "c0"}, {"id": "c1"}, {"id": "c2"}],
    "events": [
        {"at_ms": 0, "action": "join", "member": "c0"},
        {"at_ms": 0, "action": "join", "member": "c1"},
        {"at_ms": 5_000, "action": "join", "member": "c2"},
    ],
}  # fmt: skip


def regroup(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "regroup", *args], capture_output=True, text=True, env=env, timeout=240, cwd=ROOT
    )


@pytest.mark.timeout(300)
def test_a_short_scenario_is_predicted_and_measured(tmp_path: Path) -> None:
    scenario = tmp_path / "short.json"
    scenario.write_text(json.dumps(SHORT))
    proc = regroup("lab", "validate", str(scenario), "--out", str(tmp_path / "out"), "--repeat", "1", "--seeds", "4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(tmp_path / "out" / "validation.html")
    doc = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert doc["scenario"] == "short-eager-join"
    rows = {row["metric"]: row for row in doc["rows"]}
    assert {"unowned_partition_ms", "rebalances", "moved"} <= rows.keys()
    for row in doc["rows"]:
        assert row["protocol"] == "eager"
        assert isinstance(row["predicted"], float | int) and isinstance(row["measured"], float | int)
    # the protocol's counts are exact on both sides: one rebalance, every partition revoked, range's moves
    assert rows["rebalances"]["predicted"] == rows["rebalances"]["measured"] == 1
    assert rows["moved"]["predicted"] == rows["moved"]["measured"] > 0
    assert rows["revoked"]["predicted"] == rows["revoked"]["measured"] == 6
    assert rows["unowned_partition_ms"]["predicted"] > 0 and rows["unowned_partition_ms"]["measured"] > 0
    shown = (tmp_path / "out" / "validation.html").read_text()
    assert "short-eager-join" in shown and "unowned_partition_ms" in shown
    # the command's output is its own lines: librdkafka's log lines go to the run's files (clients.log, ...)
    lines = proc.stderr.splitlines()
    assert all(line.startswith("regroup lab: ") for line in lines), proc.stderr
    revoked = rows["revoked"]
    assert "regroup lab: eager revoked: predicted 6, measured 6: no target" in lines
    assert any(
        line.startswith("regroup lab: eager unowned_partition_ms: predicted ")
        and line.endswith("its target (within 35 % of the measured mean)")
        for line in lines
    ), lines
    assert revoked["within_target"] is None and "no target" in shown
    timeline = [json.loads(line) for line in (tmp_path / "out" / "real-1.jsonl").read_text().splitlines()]
    assert {e["member"] for e in timeline if e["type"] == "subscription"} == {"c0", "c1", "c2"}


def test_the_real_timeline_is_measured_as_the_simulator_measures_its_own() -> None:
    """``measure`` on a simulator log gives the summary's rebalances in the window, whatever produced the log."""
    scenario = parse(json.dumps(SHORT), "short.json")
    sim = simulate(as_librdkafka(scenario), 3)
    metrics = measure(sim.log.rows, scenario)
    assert metrics["rebalances"] == 1 and metrics["revoked"] == 6
    assert all(m.app.client == "librdkafka" for m in as_librdkafka(scenario).members)


def test_the_page_and_the_command_say_what_a_target_is_relative_to() -> None:
    scenario = parse(json.dumps(SHORT), "short.json")
    rows = [
        {"protocol": "eager", "metric": "unowned_partition_ms", "predicted": 1380.0, "measured": 1916.0,
         "runs": [1311.0, 1568.0, 2870.0], "within_target": True},
        {"protocol": "eager", "metric": "rebalances", "predicted": 2.0, "measured": 4.0, "runs": [4.0],
         "within_target": False},
        {"protocol": "eager", "metric": "revoked", "predicted": 24.0, "measured": 24.0, "runs": [24.0],
         "within_target": None},
    ]  # fmt: skip
    assert [validate_line(row) for row in rows] == [
        "eager unowned_partition_ms: predicted 1380, measured 1916: "
        "meets its target (within 35 % of the measured mean)",
        "eager rebalances: predicted 2, measured 4: misses its target (within 1 of the measured mean)",
        "eager revoked: predicted 24, measured 24: no target",
    ]
    document = {
        "scenario": "short-eager-join", "rows": rows, "seeds": 20, "repeat": 3, "measure_from_ms": 3000,
        "duration_ms": 12000, "notes": [], "seconds": {"simulator": 1.0, "real_runs": [12.0], "total": 14.0},
        "targets": {"unowned_partition_ms": {"kind": "relative", "bound": 0.35},
                    "rebalances": {"kind": "absolute", "bound": 1.0}},
    }  # fmt: skip
    text = page(document, scenario)
    cells = re.findall(r"<td>([^<]*)</td><td class='(\w+)'>([^<]*)</td></tr>", text)
    assert cells == [
        ("±35 % of the measured mean", "ok", "meets the target"),
        ("±1", "bad", "misses the target"),
        ("none (reported, not judged)", "plain", "no target"),
    ]
    assert "Notes" not in text and "none</li>" not in text
    noted = page({**document, "notes": ["real run 1: a note"]}, scenario)
    assert "<h2>Notes</h2><ul><li>real run 1: a note</li></ul>" in noted


def test_targets() -> None:
    assert within("unowned_partition_ms", 130, 100) and not within("unowned_partition_ms", 136, 100)
    assert within("rebalances", 3, 2) and not within("rebalances", 4, 2)
    assert within("moved", 0, 0) and not within("moved", 1, 0) and within("moved", 5, 4.1)
    assert within("revoked", 1, 100) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"events": [*SHORT["events"], {"at_ms": 6_000, "action": "isolate", "member": "c0"}]}, "plays only"),
        ({"members": [{"id": "c0"}, {"id": "c1"}, {"id": "c2", "protocol": "consumer"}]}, "one protocol"),
        ({"member_defaults": {**SHORT["member_defaults"], "strategies": ["sticky"]}}, "librdkafka has none"),
        ({"coordinator": {"group_max_size": 5}}, "no flag"),
    ],
)
def test_what_a_real_run_cannot_play_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RealRunError, match=message):
        check(parse(json.dumps({**SHORT, **change}), "x.json"))


def test_librdkafka_gets_the_first_strategy_it_has() -> None:
    doc = {**SHORT, "member_defaults": {"strategies": ["sticky", "roundrobin"]}}
    assert strategy(parse(json.dumps(doc), "x.json").members[0]) == "roundrobin"


def test_a_refused_scenario_is_one_line_and_exit_2(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.json"
    scenario.write_text(json.dumps({**SHORT, "events": [{"at_ms": 0, "action": "heal", "member": "c0"}]}))
    proc = regroup("lab", "validate", str(scenario), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "plays only" in proc.stderr and "Traceback" not in proc.stderr


def test_every_coordinator_setting_a_real_run_passes_on_is_a_serve_flag() -> None:
    """``real_run.SERVE_FLAGS``: each names a ``regroup serve`` flag that exists (the assignment intervals
    included), so a scenario's coordinator settings reach the real server as they reach the simulated one."""
    from regroup.cli.main import _build_parser
    from regroup.lab import real_run

    (serve,) = [
        action.choices["serve"]
        for action in _build_parser()._actions
        if isinstance(getattr(action, "choices", None), dict) and "serve" in action.choices
    ]
    flags = {flag for action in serve._actions for flag in action.option_strings}
    assert set(real_run.SERVE_FLAGS.values()) <= flags
    assert {"consumer_group_assignment_interval_ms", "share_group_assignment_interval_ms"} <= set(real_run.SERVE_FLAGS)
