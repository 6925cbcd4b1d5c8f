"""The lab's two readings of a simulated run agree: the metrics and summary computed from the event log's
rows (batch rows included, as the sweep reads them) equal those computed from its events as dicts (one per
partition, as ``lab analyze`` reads a file); the summary without details has the same figures."""

from __future__ import annotations

import pytest

from regroup.lab import grid, scenarios
from regroup.lab.metrics import Context, analyze, analyze_rows
from regroup.sim import simulate
from regroup.sim.eventlog import is_batch
from regroup.sim.summary import summarize, summarize_rows

GRID = """
name: rows
members: [4]
topics: [2]
partitions: [6]
subscriptions: [all, staggered]
churn: [{pattern: crash, events: 2}, {pattern: rolling, events: 2}, {pattern: join, events: 1}]
strategies: [range, sticky, cooperative-sticky]
protocols: [eager, cooperative, consumer]
seeds: [3]
settings: {warmup_ms: 8000, interval_ms: 9000, tail_ms: 12000, jitter_ms: 3}
"""

RUNS = grid.expand(grid.parse(GRID))


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.run_id.split("/")[1])
def test_rows_and_events_give_the_same_metrics(run: grid.RunSpec) -> None:
    scenario = scenarios.scenario(run)
    log = simulate(scenario, run.seed).log
    assert any(is_batch(row) for row in log.rows)  # the rows path really reads batch rows
    ctx = Context(run_id=run.run_id, source="sweep", group_id=scenario.group_id, measure_from_ms=8000)
    assert analyze_rows(log.rows, ctx) == analyze(log.events, ctx)
    full = summarize_rows(log.rows, 8000)
    assert full == summarize(log.events, 8000)
    brief = summarize_rows(log.rows, 8000, details=False)  # what the metrics read: the same figures
    assert [r.to_json() for r in brief.rebalances] == [r.to_json() for r in full.rebalances]
    assert all(not r.unowned_partitions for r in brief.rebalances) and brief.final_assignment == {}
    assert analyze_rows(log.rows, ctx)[0]["events"] == len(log.events)
