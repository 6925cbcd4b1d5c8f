"""The Spark jobs on the shared local[1] session: a grid's results equal running the simulator directly
(no Spark), event files give exactly the hand-computed rows, bad files are reported, the report renders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import grid, jobs, report, runner, scenarios, tables
from regroup.lab.errors import LabInputError
from regroup.lab.metrics import Context, analyze
from regroup.sim import simulate, summarize
from tests.lab.logs import eager_story, server_log

GRID = """
name: tiny
members: [2, 3]
topics: [1]
partitions: [4]
churn: [{pattern: leave, events: 1}, {pattern: join, events: 1}]
strategies: [range, cooperative-sticky]
protocols: [eager, cooperative]
seeds: [0, 1]
settings: {tail_ms: 12000}
"""


def by_key(rows: list[Any], *key: str) -> dict[Any, dict[str, Any]]:
    """Rows as dicts by the value of ``key`` (a tuple of values for several keys)."""
    out: dict[Any, dict[str, Any]] = {}
    for r in rows:
        d = r.asDict()
        out[d[key[0]] if len(key) == 1 else tuple(d[k] for k in key)] = d
    return out


@pytest.fixture(scope="module")
def swept(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[grid.RunSpec], Path]:
    runs = grid.expand(grid.parse(GRID, "tiny.yaml"))
    out = tmp_path_factory.mktemp("sweep")
    result = jobs.sweep(spark, runs, show_progress=False)
    jobs.write(result, out)
    return runs, out


def test_sweep_equals_the_simulator_run_directly(spark: Any, swept: tuple[list[grid.RunSpec], Path]) -> None:
    runs, out = swept
    assert len(runs) == 2 * 2 * 3 * 2  # sizes x churn x runnable pairs x seeds
    rebalances = by_key(spark.read.parquet(str(out / "rebalances")).collect(), "run_id", "index")
    spark_runs = by_key(spark.read.parquet(str(out / "runs")).collect(), "run_id")
    assert set(spark_runs) == {r.run_id for r in runs}
    total = 0
    for run in runs:
        scenario = scenarios.scenario(run)
        sim = simulate(scenario, run.seed)
        direct = summarize(sim.log.events, 0).rebalances
        assert direct, run.run_id
        for index, expected in enumerate(direct):
            got = rebalances[(run.run_id, index)]
            for key, value in expected.to_json().items():
                assert got[key] == value, (run.run_id, index, key)
            total += 1
        run_row, _rows = runner.simulate_run(run)
        assert spark_runs[run.run_id] == dict(
            zip([c for c, _ in tables.RUN_COLUMNS], tables.row(run_row, tables.RUN_COLUMNS), strict=True)
        )
        assert spark_runs[run.run_id]["violations"] == 0
    assert total == len(rebalances)


def test_analyze_event_files_gives_the_hand_computed_rows(spark: Any, tmp_path: Path) -> None:
    sim_log, server = tmp_path / "story.jsonl", tmp_path / "server.jsonl"
    sim_log.write_text(eager_story().text(), encoding="utf-8")
    server.write_text(server_log().text(), encoding="utf-8")
    result = jobs.analyze(spark, [str(sim_log), str(server)], show_progress=False)
    runs = by_key(result.runs.collect(), "run_id")
    assert set(runs) == {str(sim_log), f"{server}#g1", f"{server}#g2"}
    expected_run, _expected_rows = analyze(eager_story().events, Context(run_id=str(sim_log), source=str(sim_log)))
    assert runs[str(sim_log)] == dict(
        zip([c for c, _ in tables.RUN_COLUMNS], tables.row(expected_run, tables.RUN_COLUMNS), strict=True)
    )
    rebalances = by_key(result.rebalances.collect(), "run_id", "index")
    assert len(rebalances) == 2 + 2 + 1
    assert rebalances[(str(sim_log), 1)]["unowned_partition_ms"] == 35
    assert rebalances[(f"{server}#g1", 1)]["moved"] == 1
    assert rebalances[(f"{server}#g1", 1)]["unowned_partition_ms"] is None


def test_a_bad_line_deep_in_a_file_is_reported_by_the_executors(spark: Any, tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(eager_story().text(), encoding="utf-8")
    lines = eager_story().text().splitlines()
    lines[7] = "{oops"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LabInputError, match=r"bad.jsonl: line 8: invalid JSON"):
        jobs.analyze(spark, [str(good), str(bad)], show_progress=False)


def test_report_from_the_written_tables(spark: Any, swept: tuple[list[grid.RunSpec], Path]) -> None:
    _, out = swept
    tables_, _meta = report.load(spark, out)
    target = report.write(tables_, {"title": "grid tiny", "runs": 24}, out)
    text = target.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert len(re.findall(r"src=.data:image/png;base64,", text)) == 6  # the six plots of docs/lab.md
    assert "FAILED" not in text and text.count(">ok<") == 4
    assert "cooperative-sticky/cooperative" in text and "range/eager" in text
    assert "http" not in text  # self-contained: nothing to fetch
    assert report.load(spark, out)[1]["title"] == "grid tiny"


def test_report_needs_the_tables(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(LabInputError, match="no runs/ table"):
        report.load(spark, tmp_path)
