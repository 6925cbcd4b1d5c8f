"""The Spark jobs on the shared local[1] session: a grid's results equal running the simulator directly
(no Spark), both tables hold exactly the rows the tasks return, event files give exactly the hand-computed
rows, a group without rebalances keeps its run row, bad files are reported, the report renders."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import grid, jobs, report, runner, scenarios, tables
from regroup.lab.errors import LabInputError
from regroup.lab.metrics import Context, analyze
from regroup.sim import simulate, summarize
from tests.lab.logs import eager_story, quiet_story, server_log

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


Swept = tuple[list[grid.RunSpec], Path, jobs.Tables]


@pytest.fixture(scope="module")
def swept(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Swept:
    runs = grid.expand(grid.parse(GRID, "tiny.yaml"))
    out = tmp_path_factory.mktemp("sweep")
    result = jobs.sweep(spark, runs, show_progress=False)
    jobs.write(result, out)
    return runs, out, result


def test_sweep_equals_the_simulator_run_directly(spark: Any, swept: Swept) -> None:
    runs, out, _ = swept
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


def test_both_tables_hold_exactly_the_task_rows(spark: Any, swept: Swept) -> None:
    """Every column of every row, in memory and in Parquet, is what ``runner.sweep_task`` returns (a value of
    the wrong type would arrive as null), with the schema of ``tables``: column order, types, all nullable."""
    runs, out, result = swept
    expected_runs: list[tuple[Any, ...]] = []
    expected_rebalances: list[tuple[Any, ...]] = []
    for run in runs:
        run_row, rebalance_rows = runner.sweep_task(run.to_json())
        expected_runs.append(run_row)
        expected_rebalances += rebalance_rows
    for name, columns, expected in (
        ("runs", tables.RUN_COLUMNS, expected_runs),
        ("rebalances", tables.REBALANCE_COLUMNS, expected_rebalances),
    ):
        for frame in (getattr(result, name), spark.read.parquet(str(out / name))):
            schema = [(f.name, f.dataType.typeName(), f.nullable) for f in frame.schema.fields]
            assert schema == [(column, kind, True) for column, kind in columns], name
            assert Counter(tuple(r) for r in frame.collect()) == Counter(expected), name


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


def test_a_group_without_rebalances_keeps_its_run_row(spark: Any, tmp_path: Path) -> None:
    quiet, story = tmp_path / "quiet.jsonl", tmp_path / "story.jsonl"
    quiet.write_text(quiet_story().text(), encoding="utf-8")
    story.write_text(eager_story().text(), encoding="utf-8")
    result = jobs.analyze(spark, [str(quiet), str(story)], show_progress=False)
    runs = by_key(result.runs.collect(), "run_id")
    assert set(runs) == {str(quiet), str(story)}
    assert runs[str(quiet)]["rebalances"] == 0 and runs[str(quiet)]["events"] == 6
    assert {r["run_id"] for r in result.rebalances.collect()} == {str(story)}


def test_a_bad_line_deep_in_a_file_is_reported_by_the_executors(spark: Any, tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(eager_story().text(), encoding="utf-8")
    lines = eager_story().text().splitlines()
    lines[7] = "{oops"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LabInputError, match=r"bad.jsonl: line 8: invalid JSON"):
        jobs.analyze(spark, [str(good), str(bad)], show_progress=False)


def test_the_first_bad_file_in_path_order_is_reported(spark: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for path, line in ((first, 9), (second, 4)):
        lines = eager_story().text().splitlines()
        lines[line - 1] = "{oops"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LabInputError, match=r"second.jsonl: line 4: invalid JSON"):
        jobs.analyze(spark, [str(second), str(first)], show_progress=False)
    with pytest.raises(LabInputError, match=r"first.jsonl: line 9: invalid JSON"):
        jobs.analyze(spark, [str(first), str(second)], show_progress=False)


def test_report_needs_the_tables(tmp_path: Path) -> None:
    with pytest.raises(LabInputError, match="no runs/ table"):
        report.load(tmp_path)
