"""The report without Spark: the tables read and written with pyarrow, the aggregates worked out by hand (nulls as
Spark SQL treats them), and what the report shows of them (no empty header row, the application model one field a
row, "–" for JoinGroup rounds where there is no JoinGroup). No JVM starts here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from regroup.lab import frames, jobs, report, tables
from regroup.lab.errors import LabInputError
from tests.lab.logs import eager_story


def run(run_id: str, **values: Any) -> tuple[Any, ...]:
    base = {"run_id": run_id, "strategy": "range", "protocol": "eager", "churn": "join", "churn_events": 1}
    return tables.row({**base, **values}, tables.RUN_COLUMNS)


def rebalance(run_id: str, **values: Any) -> tuple[Any, ...]:
    return tables.row({"run_id": run_id, **values}, tables.REBALANCE_COLUMNS)


RUNS = [
    run("a", members=3, changes=1, rebalances=1, unowned_partition_ms=100, rounds=1, fraction_kept=0.5, violations=0),
    run("b", members=3, changes=1, rebalances=2, unowned_partition_ms=None, rounds=2, fraction_kept=None, violations=0),
    run("c", members=6, changes=1, rebalances=1, unowned_partition_ms=40, rounds=1, settled=False, violations=1),
    # no churn event: counted in the runs, not in the pattern's sums
    run("d", members=3, churn_events=0, changes=0, rebalances=3, unowned_partition_ms=7, violations=0),
    run("e", protocol="consumer", strategy="uniform", members=3, changes=2, rebalances=2, rounds=2, violations=0),
    run("f", churn=None, churn_events=None, changes=None, rebalances=1, violations=None),
]
REBALANCES = [
    rebalance("a", phase="churn", group_size=3, join_bytes_leader=100, join_bytes_all=300, sync_bytes=10),
    rebalance("b", phase="churn", group_size=3, join_bytes_leader=200, join_bytes_all=600, sync_bytes=None),
    rebalance("c", phase="emptied", group_size=3, join_bytes_leader=999, join_bytes_all=999, sync_bytes=999),
    rebalance("e", phase="churn", group_size=3, heartbeat_bytes=50),
    rebalance("e", phase=None, group_size=3, heartbeat_bytes=70),  # phase unknown: compared with null, left out
]


def test_aggregates_follow_spark_sqls_nulls() -> None:
    agg = frames.aggregates(frames.from_rows(RUNS, REBALANCES))
    patterns = {(p["churn"], p["strategy"], p["protocol"]): p for p in agg["patterns"]}
    assert list(patterns) == [
        ("join", "range", "eager"),
        ("join", "uniform", "consumer"),
        ("unknown", "range", "eager"),
    ]
    join = patterns["join", "range", "eager"]
    assert (join["runs"], join["events"], join["evented_runs"]) == (4, 3, 3)
    assert join["rebalances"] == 4  # a, b, c (d has no churn event)
    assert join["unowned_partition_ms"] == 140  # b's null is left out of the sum
    assert join["fraction_kept"] == 0.5  # the mean of the known values
    assert (join["violations"], join["unsettled"]) == (1, 1)
    unknown = patterns["unknown", "range", "eager"]
    assert (unknown["runs"], unknown["events"], unknown["rebalances"], unknown["violations"]) == (1, None, None, None)
    sizes = [(s["members"], s["events"], s["unowned_partition_ms"]) for s in agg["sizes"] if s["strategy"] == "range"]
    assert sizes == [(3, 2, 100), (6, 1, 40)]
    pairs = {(p["strategy"], p["protocol"]): p for p in agg["pairs"]}
    assert (pairs["range", "eager"]["changes"], pairs["range", "eager"]["rebalances"]) == (3, 4)  # d, f: no change
    assert pairs["uniform", "consumer"]["rounds"] == 2
    (payload,) = agg["payload"]
    assert payload["group_size"] == 3
    assert (payload["leader"], payload["everyone"]) == (150.0, 450.0)
    assert (payload["leader_sync"], payload["kip848"]) == (110.0, 50.0)  # b's sync is unknown: so is its sum
    assert agg["unsettled"] == [{"run_id": "c", "end_ms": None, "cut_off_unowned_partition_ms": None}]
    assert agg["unsettled_count"] == [{"n": 1}]
    assert agg["quiet"] == [{"run_id": "d", "rebalances": 3}]
    assert agg["share"] == []


def test_tables_written_here_read_back_and_older_tables_get_the_columns_they_lack(tmp_path: Path) -> None:
    written = frames.from_rows(RUNS, REBALANCES)
    frames.write(written, tmp_path)
    back = frames.read(tmp_path)
    assert back.runs.equals(written.runs) and back.rebalances.equals(written.rebalances)
    older = tmp_path / "older"
    for name in ("runs", "rebalances"):
        (older / name).mkdir(parents=True)
        (older / name / "_SUCCESS").write_bytes(b"")  # what Spark leaves beside its part files
        pq.write_table(pa.table({"run_id": ["x"], "members": [3]}), older / name / "part-0.parquet")
    old = frames.read(older)
    assert old.runs.column_names == [name for name, _ in tables.RUN_COLUMNS]
    assert old.runs.to_pylist()[0]["members"] == 3 and old.runs.to_pylist()[0]["share_records"] is None
    with pytest.raises(LabInputError, match="no runs/ table"):
        frames.read(tmp_path / "nowhere")


def test_a_small_analysis_runs_in_this_process(tmp_path: Path) -> None:
    path = tmp_path / "story.jsonl"
    path.write_text(eager_story().text(), encoding="utf-8")
    found = jobs.analyze_here([str(path)], measure_from_ms=50, show_progress=False)
    (row,) = found.runs.to_pylist()
    assert (row["run_id"], row["changes"], row["rebalances"], row["formation_rebalances"]) == (str(path), 1, 1, 1)
    assert [r["phase"] for r in found.rebalances.to_pylist()] == ["formation", "churn"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(eager_story().text().replace('"sim_end"', '"sim_end" oops'), encoding="utf-8")
    with pytest.raises(LabInputError, match=r"bad.jsonl: line \d+: invalid JSON"):
        jobs.analyze_here([str(path), str(bad)], show_progress=False)


def test_the_report_says_what_does_not_apply_and_leaves_out_empty_rows() -> None:
    settings = {"warmup_ms": 10000, "app_json": ""}
    meta = {"title": "grid t", "source": "t.yaml", "simulated in": "1.0 s", "settings": settings}
    text = report.render(frames.from_rows(RUNS, REBALANCES), meta)
    first = re.search(r"<table>.*?</table>", text)
    assert first is not None and "<thead>" not in first.group(0)  # facts: no row of empty headers
    assert "<td>simulated in</td><td>1.0 s</td>" in first.group(0)
    assert "app_json" not in text and "<td>commit_on_revoke</td><td>no</td>" in text
    rounds = {row[0]: row[4] for row in _rows(text, "JoinGroup rounds per change")}
    assert rounds == {"range / classic eager": "1.33", "uniform / KIP-848": "–"}  # no JoinGroup in KIP-848
    set_app = {**settings, "app_json": json.dumps({"processing_ms": 2})}
    text = report.render(frames.from_rows(RUNS, REBALANCES), {**meta, "settings": set_app})
    assert "<td>processing_ms</td><td>2</td>" in text and "<td>commit_on_revoke</td><td>no</td>" in text


def _rows(text: str, header: str) -> list[list[str]]:
    """The cells of the table with that column header."""
    table = next(t for t in re.findall(r"<table>.*?</table>", text) if f"<th>{header}" in t)
    return [re.findall(r"<td>(?:<b>)?([^<]*)", row) for row in re.findall(r"<tr><td>.*?</tr>", table)]
