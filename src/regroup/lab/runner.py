"""What one Spark task does, as plain functions: simulate one grid run and compute its rows, or compute the
rows of one event file. No Spark here, so the tests can call exactly what the executors call."""

from __future__ import annotations

import gc
from typing import Any, Final

from regroup.lab import scenarios, tables
from regroup.lab.eventfiles import read_groups
from regroup.lab.grid import RunSpec
from regroup.lab.metrics import Context, analyze, analyze_rows
from regroup.lab.protocols import SHARE
from regroup.sim.engine import Simulator

Rows = tuple[tuple[Any, ...], list[tuple[Any, ...]]]

#: how far a run goes on at a time while its group settles after the scenario's end
SETTLE_STEP_MS: Final = 1_000
#: the cyclic collector's thresholds in a task's process (CPython's defaults: 700, 10, 10)
TASK_GC_THRESHOLDS: Final = (100_000, 50, 1_000)
_gc_tuned = False


def tune_gc() -> None:
    """Once per process: move what is alive now (imported modules and classes, never garbage) out of the
    cyclic collector's sight, and collect the young generation every 100,000 allocations instead of 700.
    A run allocates hundreds of thousands of containers (event rows, messages) and almost no cycles; with
    the defaults the collector kept rescanning them (docs/benchmarks.md, "Lab"). Garbage in cycles is
    still collected, later."""
    global _gc_tuned
    if not _gc_tuned:
        gc.freeze()
        gc.set_threshold(*TASK_GC_THRESHOLDS)
        _gc_tuned = True


def axes(run: RunSpec) -> dict[str, Any]:
    return {
        "grid": run.grid,
        "members": run.members,
        "topics": run.topics,
        "partitions": run.partitions,
        "subscription": run.subscription,
        "churn": run.churn,
        "churn_events": run.churn_events,
        "strategy": run.strategy,
        "protocol": run.protocol,
        "seed": run.seed,
    }


def play_out(sim: Simulator, limit_ms: int) -> bool:
    """Run ``sim`` to its scenario's end, then on until the group has settled (quiescent: every running member
    in the group's current generation, every subscribed partition owned by exactly one), at most to
    ``limit_ms``; whether it settled. The log then ends (``sim_end``)."""
    sim.run()
    settled = sim.quiescent()
    while not settled and sim.now < limit_ms:
        sim.run(min(limit_ms, sim.now + SETTLE_STEP_MS))
        settled = sim.quiescent()
    sim.finish()
    return settled


def play_out_share(sim: Simulator, limit_ms: int) -> None:
    """Run a share run to ``limit_ms`` (a share group never rebalances, so there is no settling to wait for:
    the limit leaves time to drain what was produced, ``scenarios.share_limit_ms``). The log then ends."""
    sim.run(limit_ms)
    sim.finish()


def simulate_run(run: RunSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Simulate one run, played out until its group settles (a share run: until it has had time to drain), and
    compute its rows (as dicts)."""
    scenario = scenarios.scenario(run)
    sim = Simulator(scenario, run.seed)
    share = run.protocol == SHARE
    settled: bool | None = None
    if share:
        play_out_share(sim, scenarios.share_limit_ms(run))
    else:
        settled = play_out(sim, scenarios.settle_limit_ms(run))
    ctx = Context(
        run_id=run.run_id,
        source="sweep",
        group_id=scenario.share_group_id if share else scenario.group_id,
        measure_from_ms=scenario.measure_from_ms,
        metadata_bytes=run.settings.metadata_bytes,
        axes=axes(run),
        share_spec=scenario.share if share else None,
        rate_per_partition_s=scenarios.share_rate_per_s(run),
    )
    return analyze_rows(sim.log.rows, ctx, settled=settled)


def as_tuples(run_row: dict[str, Any], rebalance_rows: list[dict[str, Any]]) -> Rows:
    return (
        tables.row(run_row, tables.RUN_COLUMNS),
        [tables.row(r, tables.REBALANCE_COLUMNS) for r in rebalance_rows],
    )


def sweep_task(doc: dict[str, Any]) -> Rows:
    """The executor side of ``lab sweep``: one run, given as ``RunSpec.to_json()``."""
    tune_gc()
    return as_tuples(*simulate_run(RunSpec.from_json(doc)))


def analyze_task(path: str, measure_from_ms: int = 0) -> list[Rows] | str:
    """The executor side of ``lab analyze``: every group of one event file, or the file's error message."""
    from regroup.lab.errors import LabInputError

    tune_gc()
    try:
        groups = read_groups(path)
    except LabInputError as exc:
        return str(exc)
    out: list[Rows] = []
    for group_id, events in groups:
        run_id = path if group_id is None else f"{path}#{group_id}"
        ctx = Context(run_id=run_id, source=path, group_id=group_id, measure_from_ms=measure_from_ms)
        out.append(as_tuples(*analyze(events, ctx)))
    return out
