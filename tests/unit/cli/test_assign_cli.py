"""``regroup assign``, ``regroup strategies`` and ``regroup demo`` run as a user runs them: a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

STRATEGIES = [
    "range",
    "roundrobin",
    "sticky",
    "cooperative-sticky",
    "uniform",
    "server-range",
    "redundant",
    "copartitioned",
    "consistent-hash",
    "optimal",
]

SAMPLE = {
    "topics": {"t0": 3, "t1": 2},
    "members": {
        "c0": {"topics": ["t0", "t1"], "owned": {"t0": [0]}, "generation": 1, "rack": "r1", "instance_id": None},
        "c1": {"topics": ["t0", "t1"], "owned": {"t1": [0]}, "generation": 1, "rack": "r2", "instance_id": None},
        "c2": {"topics": ["t0", "t1"]},
    },
    "partition_racks": {"t0": [["r1", "r2"], ["r2"], ["r3"]], "t1": [["r1"], ["r2"]]},
    "options": {"replicas": 2, "copartitioned": [["t0", "t1"]]},
}


def regroup(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "regroup", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def assign(strategy: str, doc: Any) -> dict[str, Any]:
    proc = regroup("assign", "--strategy", strategy, stdin=json.dumps(doc))
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_answers_with_every_member(strategy: str) -> None:
    doc = SAMPLE
    if strategy == "copartitioned":
        doc = {**SAMPLE, "topics": {"t0": 2, "t1": 2}, "partition_racks": None}
    out = assign(strategy, doc)
    assert set(out["assignment"]) == {"c0", "c1", "c2"}
    assert isinstance(out["metrics"], dict)
    for per_topic in out["assignment"].values():
        for topic, partitions in per_topic.items():
            assert topic in ("t0", "t1")
            assert partitions == sorted(partitions)


def test_sticky_keeps_owned_partitions_from_the_neutral_fields(tmp_path: Path) -> None:
    doc = {
        "topics": {"t": 4},
        "members": {
            "a": {"topics": ["t"], "owned": {"t": [2, 3]}, "generation": 4},
            "b": {"topics": ["t"], "owned": {"t": [0, 1]}, "generation": 4},
        },
    }
    path = tmp_path / "group.json"
    path.write_text(json.dumps(doc))
    proc = regroup("assign", "--strategy", "sticky", "--input", str(path))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["assignment"] == {"a": {"t": [2, 3]}, "b": {"t": [0, 1]}}
    assert out["metrics"]["partitions_moved"] == 0
    assert out["metrics"]["fraction_kept"] == 1.0
    assert out["metrics"]["valid"] is True


def test_unknown_topics_are_tolerated_as_kafka_does() -> None:
    doc = {
        "topics": {"t": 2},
        "members": {
            "a": {"topics": ["t", "nope"], "owned": {"ghost": [0], "t": [1]}, "generation": 1},
            "b": {"topics": ["nope"]},
        },
    }
    out = assign("cooperative-sticky", doc)
    assert out["assignment"] == {"a": {"t": [0, 1]}, "b": {}}


@pytest.mark.parametrize(
    ("stdin", "args", "fragment"),
    [
        ("{not json", ["--strategy", "range"], "malformed JSON"),
        ("[]", ["--strategy", "range"], "JSON object"),
        ('{"topics": {"t": -1}, "members": {}}', ["--strategy", "range"], "topics.t"),
        ('{"topics": {"t": "3"}, "members": {}}', ["--strategy", "range"], "topics.t"),
        ('{"topics": {"t": 1}, "members": {"a": {"topics": "t"}}}', ["--strategy", "range"], "members.a.topics"),
        (
            '{"topics": {"t": 1}, "members": {"a": {"topics": ["t"], "owned": {"t": [-1]}}}}',
            ["--strategy", "sticky"],
            "members.a.owned.t",
        ),
        ('{"topics": {}, "members": {}}', ["--strategy", "no-such-strategy"], "unknown assignment strategy"),
        (
            '{"topics": {"t": 1}, "members": {"a": {"topics": ["t"]}}, "options": {"replicas": 0}}',
            ["--strategy", "redundant"],
            "redundant",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(stdin: str, args: list[str], fragment: str) -> None:
    proc = regroup("assign", *args, stdin=stdin)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert fragment in lines[0]
    assert "Traceback" not in proc.stderr


def test_missing_input_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = regroup("assign", "--strategy", "range", "--input", str(tmp_path / "absent.json"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "cannot read" in proc.stderr


def test_usage_errors_exit_2_without_traceback() -> None:
    proc = regroup("assign")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "--strategy" in proc.stderr


def test_strategies_lists_every_builtin() -> None:
    proc = regroup("strategies")
    assert proc.returncode == 0
    assert set(STRATEGIES) <= set(proc.stdout.split())


def test_demo_shows_kip54_stickiness() -> None:
    proc = regroup("demo")
    assert proc.returncode == 0, proc.stderr
    assert "roundrobin keeps 3; sticky keeps 5" in proc.stdout
    assert proc.stdout.count("sticky keeps 5") == 2


def test_redundant_metrics_judge_replicas() -> None:
    out = assign("redundant", SAMPLE)
    assert out["metrics"]["valid"] is True
    assert out["metrics"]["replicas"] == 2
    owners: dict[tuple[str, int], int] = {}
    for per_topic in out["assignment"].values():
        for t, ps in per_topic.items():
            for p in ps:
                owners[(t, p)] = owners.get((t, p), 0) + 1
    assert set(owners.values()) == {2}


def test_consistent_hash_reports_its_imbalance() -> None:
    out = assign("consistent-hash", SAMPLE)
    imbalance = out["metrics"]["imbalance"]
    assert imbalance["partitions"] == 5
    assert imbalance["max_mean_ratio"] >= 1.0


@pytest.mark.parametrize(
    ("owned", "expected"),
    [
        ([7], "members.a.owned.t: partition 7 does not exist (topic t has 3 partitions)"),
        ([1, 9, 3], "members.a.owned.t: partition 3 does not exist (topic t has 3 partitions)"),
    ],
)
def test_an_owned_partition_the_topic_does_not_have_is_refused(owned: list[int], expected: str) -> None:
    doc = {"topics": {"t": 3}, "members": {"a": {"topics": ["t"], "owned": {"t": owned}, "generation": 1}}}
    proc = regroup("assign", "--strategy", "sticky", stdin=json.dumps(doc))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"regroup: {expected}\n")
