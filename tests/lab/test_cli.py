"""``regroup lab`` run as a user runs it: a subprocess. Bad input is one line on stderr and exit 2 (checked
before Spark starts); the shipped quick grid runs end to end and writes readable Parquet and the report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import tables
from tests.lab.logs import eager_story

ROOT = Path(__file__).resolve().parents[2]
REGROUP = Path(sys.executable).parent / "regroup"


def lab(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REGROUP), "lab", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def fails_with(proc: subprocess.CompletedProcess[str], message: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"regroup: {message}"), lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (
            "members: [3]\ntopics: [1]\npartitions: [2]\nstrategies: [stiky]\nprotocols: [eager]\n",
            "bad.yaml: strategies[0]",
        ),
        ("members: [3\n", "bad.yaml: invalid YAML at line 2"),
        (
            "members: [3]\ntopics: [1]\npartitions: [2]\nstrategies: [range]\nprotocols: [eager, kip-999]\n",
            "bad.yaml: protocols[1]: protocol 'kip-999' is not supported",
        ),
        ("- just\n- a list\n", "bad.yaml: grid: must be a mapping"),
    ],
)
def test_invalid_grid_exits_2(tmp_path: Path, grid: str, message: str) -> None:
    (tmp_path / "bad.yaml").write_text(grid, encoding="utf-8")
    fails_with(lab("sweep", "bad.yaml", "--out", "d", cwd=tmp_path), message)
    assert not (tmp_path / "d").exists()


def test_missing_grid_exits_2(tmp_path: Path) -> None:
    fails_with(lab("sweep", "nope.yaml", "--out", "d", cwd=tmp_path), "nope.yaml: cannot read")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "missing.jsonl: cannot read"),
        ("", "bad.jsonl: no events"),
        ("hello\n", "bad.jsonl: line 1: invalid JSON"),
        ('{"seq": 0, "t": 0}\n', "bad.jsonl: line 1: not an event of the log schema"),
    ],
)
def test_invalid_event_file_exits_2(tmp_path: Path, content: str | None, message: str) -> None:
    name = "missing.jsonl" if content is None else "bad.jsonl"
    if content is not None:
        (tmp_path / name).write_text(content, encoding="utf-8")
    (tmp_path / "good.jsonl").write_text(eager_story().text(), encoding="utf-8")
    fails_with(lab("analyze", "good.jsonl", name, "--out", "d", cwd=tmp_path), message)


def test_report_of_a_missing_directory_or_table_exits_2(tmp_path: Path) -> None:
    fails_with(lab("report", "nowhere", cwd=tmp_path), "nowhere: no such directory")
    (tmp_path / "empty").mkdir()
    fails_with(lab("report", "empty", cwd=tmp_path), "empty: no runs/ table")


def test_output_directory_that_is_a_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("x", encoding="utf-8")
    fails_with(
        lab("sweep", str(ROOT / "examples/lab/quick.yaml"), "--out", "taken", cwd=tmp_path), "taken: cannot create"
    )


def test_quick_grid_end_to_end(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "quick"
    proc = lab("sweep", "examples/lab/quick.yaml", "--out", str(out), "--master", "local[2]")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out / "report.html")
    assert "regroup lab: sweep: 108/108 runs simulated in " in proc.stderr
    # the lab's own lines only: the JVM's start-up lines are in the output directory's spark.log
    assert all(line.startswith("regroup lab: ") for line in proc.stderr.splitlines()), proc.stderr
    assert "Setting default log level" in (out / "spark.log").read_text(encoding="utf-8")
    runs = spark.read.parquet(str(out / "runs"))
    rebalances = spark.read.parquet(str(out / "rebalances"))
    assert runs.columns == [c for c, _ in tables.RUN_COLUMNS]
    assert rebalances.columns == [c for c, _ in tables.REBALANCE_COLUMNS]
    assert runs.count() == 108
    assert runs.where("protocol = 'consumer' AND strategy = 'server-range'").count() == 18  # KIP-848's range
    assert runs.where("violations > 0").count() == 0
    assert rebalances.where("phase = 'churn'").count() >= 108
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Stop-the-world cost per churn event" in html and "FAILED" not in html
    assert runs.where("settled = false").count() == 0


def test_analyze_end_to_end(spark: Any, tmp_path: Path) -> None:
    events = tmp_path / "seed4.jsonl"
    sim = subprocess.run(
        [sys.executable, "-m", "regroup", "simulate", "third-member-joins-cooperative", "--events", str(events)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sim.returncode == 0, sim.stderr
    proc = lab(
        "analyze", str(events), "--out", str(tmp_path / "out"), "--master", "local[1]", "--measure-from-ms", "25000"
    )
    assert proc.returncode == 0, proc.stderr
    rows = spark.read.parquet(str(tmp_path / "out" / "rebalances")).where("phase = 'churn'").orderBy("index").collect()
    assert [r["moved"] for r in rows] == [0, 1]  # third member joins, cooperative: p1 moves c0 -> c2, in the follow-up
    assert all(r["strategy"] == "cooperative-sticky" and r["protocol"] == "cooperative" for r in rows)
    assert (tmp_path / "out" / "report.html").is_file()
