"""``regroup simulate`` run as a user runs it: a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REBALANCE_KEYS = ["generation", "start_ms", "end_ms", "rounds", "moved", "revoked", "unowned_partition_ms"]


def regroup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "regroup", "simulate", *args], capture_output=True, text=True, timeout=120
    )


def test_summary_json_contract_for_the_cooperative_story() -> None:
    proc = regroup("third-member-joins-cooperative", "--summary-json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    doc = json.loads(proc.stdout)  # exactly one JSON document
    assert list(doc) == ["rebalances", "violations", "final_assignment"]
    assert len(doc["rebalances"]) == 2
    for rebalance in doc["rebalances"]:
        assert list(rebalance) == REBALANCE_KEYS
        assert all(isinstance(v, int) for v in rebalance.values())
    assert sum(r["moved"] for r in doc["rebalances"]) == 1
    assert doc["violations"] == []
    assert doc["final_assignment"] == {"c0": {"topic-foo": [0]}, "c1": {"topic-foo": [2]}, "c2": {"topic-foo": [1]}}


def test_eager_story_has_one_rebalance_that_revokes_everything() -> None:
    # by its earlier name, which command lines written before the rename still use
    doc = json.loads(regroup("seed-004-eager", "--summary-json", "--seed", "3").stdout)
    (rebalance,) = doc["rebalances"]
    assert rebalance["revoked"] == 3 and rebalance["unowned_partition_ms"] > 0


def test_readable_timeline_and_event_log(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    proc = regroup("third-member-joins-eager", "--events", str(events))
    assert proc.returncode == 0, proc.stderr
    assert "c2: join" in proc.stdout and "on_partitions_revoked" in proc.stdout
    assert "rebalances:" in proc.stdout and "violations: 0" in proc.stdout
    lines = events.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    assert first["type"] == "sim_start" and first["detail"] == "third-member-joins-eager"
    assert all(list(json.loads(line)) == list(first) for line in lines)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"duration_ms": 10', "invalid JSON"),
        ('{"duration_ms": 10, "topics": {"t": 1}, "members": [{"id": "a", "strategies": ["x"]}], "events": []}',
         "members[0].strategies: unknown strategy 'x'"),
    ],
)  # fmt: skip
def test_bad_scenario_is_one_line_and_exit_2(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    proc = regroup(str(path), "--summary-json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(path) in proc.stderr and expected in proc.stderr


def test_unknown_scenario_and_unwritable_events(tmp_path: Path) -> None:
    proc = regroup("no-such-scenario")
    assert proc.returncode == 2 and proc.stderr.startswith("regroup: no-such-scenario: no such file")
    proc = regroup("third-member-joins-eager", "--events", str(tmp_path / "missing-dir" / "e.jsonl"))
    assert proc.returncode == 2 and "cannot write" in proc.stderr and proc.stderr.count("\n") == 1
