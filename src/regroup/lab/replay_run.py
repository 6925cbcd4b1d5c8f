"""``regroup lab replay``: a recorded group's churn (``lab.replay``) simulated again under each alternative
strategy and protocol, beside the recorded run's own metrics.

``prepare`` reads the log, plans the replay, computes the recorded run's rows (``metrics``: the group's rows up to
the window's end, rebalances starting before its start are the formation phase) and lists the alternatives
(``grid``'s rules: a pair that cannot run, or runs another pair again, is skipped with the reason). The
alternatives are simulated on Spark (``on_spark``: one task per alternative, through the same cached DataFrame of
``jobs`` as a sweep, the recorded run's rows added as one more item) or in this process (``here``); each is played
out until its group settles, as a sweep run. ``finish`` writes the tables (``DIR/runs``, ``DIR/rebalances``),
``DIR/replay.json`` and ``DIR/report.html`` (the lab's report, with the comparison against what happened first:
``replay_report``). ``run_replay`` does it all, for callers other than the command line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from regroup.assignors import registry
from regroup.lab import protocols, runner, tables
from regroup.lab.errors import LabInputError
from regroup.lab.grid import Churn, Grid, Settings
from regroup.lab.metrics import EMPTY_STATES, Context, analyze
from regroup.lab.replay import ReplayPlan, plan_replay, read_rows, split_groups
from regroup.lab.replay_scenario import REPLAY_GRID, ReplayRun, document, settle_limit_ms
from regroup.sim.engine import Simulator
from regroup.sim.scenario import parse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from regroup.lab import frames
    from regroup.lab.jobs import Tables

DEFAULT_STRATEGIES: Final = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform")
DEFAULT_PROTOCOLS: Final = ("eager", "cooperative", "consumer")
#: the suffix of the recorded run's strategy in the tables and the report (it sits beside its own replay)
RECORDED: Final = "recorded"
REPLAY_FILE: Final = "replay.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """Everything a replay needs before anything is simulated."""

    source: str
    plan: ReplayPlan
    settings: Settings
    recorded: runner.Rows
    runs: tuple[ReplayRun, ...]
    skipped: tuple[str, ...]  # "strategy/protocol (why)"
    tasks: tuple[dict[str, Any], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    report: Path
    document: dict[str, Any]


def alternatives(
    strategies: Sequence[str], protocol_names: Sequence[str], settings: Settings, seed: int = 0
) -> tuple[list[ReplayRun], list[str]]:
    """The runs of every strategy/protocol pair that can run, and the pairs skipped with the reason (share groups
    have no rebalances to compare)."""
    for name in strategies:
        if name not in registry.available():
            raise LabInputError(f"--strategies: unknown strategy {name!r} (known: {', '.join(registry.available())})")
    for name in protocol_names:
        if name == protocols.SHARE or not protocols.is_supported(name):
            known = ", ".join(p for p in protocols.supported() if p != protocols.SHARE)
            raise LabInputError(f"--protocols: {name!r} cannot be replayed (known: {known})")
    grid = Grid(
        name=REPLAY_GRID, members=(1,), topics=(1,), partitions=(1,), subscriptions=("all",),
        churn=(Churn("none", 0),), strategies=tuple(strategies), protocols=tuple(protocol_names), seeds=(seed,),
        settings=settings,
    )  # fmt: skip
    runs: list[ReplayRun] = []
    skipped: list[str] = []
    for (strategy, protocol), why in grid.skipped():
        if why:
            skipped.append(f"{strategy}/{protocol} ({why})")
        else:
            name = protocols.strategy_name(protocol, strategy)
            runs.append(ReplayRun(strategy=name, protocol=protocol, seed=seed, settings=settings))
    if not runs:
        raise LabInputError(
            f"--strategies/--protocols: no strategy runs under any listed protocol ({'; '.join(skipped)})"
        )
    return runs, skipped


def read_settings(path: str) -> Settings:
    """A settings file: a YAML or JSON mapping of a grid's ``settings`` fields (``LabInputError`` naming the file
    and the field)."""
    from regroup.lab.grid import _Reader

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise LabInputError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LabInputError(f"{path}: cannot read: not UTF-8 text") from None
    try:
        doc = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError):
        raise LabInputError(f"{path}: not valid {'JSON' if path.endswith('.json') else 'YAML'}") from None
    return _Reader(path).settings({} if doc is None else doc)


def recorded_rows(rows: Sequence[dict[str, Any]], plan: ReplayPlan, source: str) -> runner.Rows:
    """The recorded run's rows: its group's rows up to the window's end, measured from the window's start; its
    strategy is marked ``(recorded)``."""
    own = [r for r in split_groups(rows).get(plan.group_id, []) if r["t"] <= plan.until_ms]
    run_id = f"{source}#{plan.group_id} ({RECORDED})" if plan.group_id else f"{source} ({RECORDED})"
    ctx = Context(run_id=run_id, source=source, group_id=plan.group_id, measure_from_ms=plan.since_ms)
    run, rebalances = analyze([dict(r) for r in own], ctx)
    label = f"{run['strategy']} ({RECORDED})" if run["strategy"] else RECORDED
    run["strategy"] = label
    for r in rebalances:
        r["strategy"] = label
    return runner.as_tuples(run, rebalances)


def task_of(plan: ReplayPlan, run: ReplayRun, recorded_run: dict[str, Any], source: str) -> dict[str, Any] | None:
    """What one executor is sent for an alternative: its scenario document, where to stop, and its table keys."""
    doc = document(plan, run)
    if doc is None:
        return None
    counts = {count for _, count in plan.topics}
    return {
        "scenario": doc,
        "emptied": not running_at_end(plan),
        "seed": run.seed,
        "limit_ms": settle_limit_ms(plan, run.settings),
        "source": f"replay of {source}",
        "metadata_bytes": run.settings.metadata_bytes,
        "axes": {
            "grid": REPLAY_GRID,
            "topics": len(plan.topics),
            "partitions": counts.pop() if len(counts) == 1 else None,
            "subscription": None,
            "churn": recorded_run["churn"],
            "churn_events": recorded_run["churn_events"],
            "strategy": run.strategy,
            "protocol": run.protocol,
            "seed": run.seed,
        },
    }


def running_at_end(plan: ReplayPlan) -> set[str]:
    """The members still running when the plan's window ends."""
    running = set(plan.initial)
    for event in plan.events:
        if event.action in ("leave", "crash"):
            running.discard(event.member)
        else:
            running.add(event.member)
    return running


def prepare(
    path: str,
    *,
    group: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    protocol_names: Sequence[str] = DEFAULT_PROTOCOLS,
    settings: Settings | None = None,
    seed: int = 0,
) -> Prepared:
    """Read, plan, measure the recorded run, list the alternatives (``LabInputError`` for bad input)."""
    chosen = settings or Settings()
    runs, skipped = alternatives(strategies, protocol_names, chosen, seed)
    rows = read_rows(path)
    plan = plan_replay(rows, group, since_ms, until_ms, source=path)
    recorded = recorded_rows(rows, plan, path)
    recorded_run = dict(zip((name for name, _ in tables.RUN_COLUMNS), recorded[0], strict=True))
    tasks: list[dict[str, Any]] = []
    for run in runs:
        task = task_of(plan, run, recorded_run, path)
        if task is None:
            skipped.append(f"{run.strategy}/{run.protocol} (cannot run)")
        else:
            tasks.append(task)
    return Prepared(
        source=path, plan=plan, settings=chosen, recorded=recorded, runs=tuple(runs), skipped=tuple(skipped),
        tasks=tuple(tasks),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- running
def replay_task(task: dict[str, Any]) -> runner.Rows:
    """The executor side: simulate one alternative until its group settles and compute its rows."""
    runner.tune_gc()
    doc = task["scenario"]
    scenario = parse(json.dumps(doc), doc["name"])
    sim = Simulator(scenario, task["seed"])
    settled = play_out(sim, task["limit_ms"], task["emptied"])
    ctx = Context(
        run_id=doc["name"],
        source=task["source"],
        group_id=scenario.group_id,
        measure_from_ms=scenario.measure_from_ms,
        metadata_bytes=task["metadata_bytes"],
        axes=task["axes"],
    )
    return runner.as_tuples(*_analyzed(sim, ctx, settled))


def play_out(sim: Simulator, limit_ms: int, emptied: bool) -> bool:
    """Play the replay to its scenario's end, then on until its group settles (``runner.play_out``); a replay whose
    changes leave nobody in the group (the recorded clients closed at the end) settles when the group is empty."""
    if not emptied:
        return runner.play_out(sim, limit_ms)
    sim.run()
    while sim.endpoint.group.state not in EMPTY_STATES and sim.now < limit_ms:
        sim.run(min(limit_ms, sim.now + runner.SETTLE_STEP_MS))
    sim.finish()
    return sim.endpoint.group.state in EMPTY_STATES


def _analyzed(sim: Simulator, ctx: Context, settled: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from regroup.lab.metrics import analyze_rows

    return analyze_rows(sim.log.rows, ctx, settled=settled)


def _item(item: Any) -> runner.Rows:
    """A task, or the recorded run's rows as they are (one job carries both)."""
    return replay_task(item) if isinstance(item, dict) else (item[0], list(item[1]))


def here(prepared: Prepared, say: Callable[[str], None] = lambda _: None) -> frames.Frames:
    """Every alternative simulated in this process (no Spark), with the recorded run's rows first."""
    import dataclasses

    from regroup.lab import frames

    started = time.monotonic()
    runs = [prepared.recorded[0]]
    rebalances = list(prepared.recorded[1])
    for n, task in enumerate(prepared.tasks, 1):
        run, rows = replay_task(task)
        runs.append(run)
        rebalances.extend(rows)
        say(f"replay: {n}/{len(prepared.tasks)} alternatives simulated")
    found = frames.from_rows(runs, rebalances)
    return dataclasses.replace(found, seconds=round(time.monotonic() - started, 1))


def on_spark(spark: SparkSession, prepared: Prepared, show_progress: bool = True) -> Tables:
    """Every alternative simulated on Spark (one task each) and the recorded run's rows, as the lab's two tables."""
    from regroup.lab import jobs
    from regroup.lab.progress import Progress

    sc = spark.sparkContext
    items: list[Any] = [prepared.recorded, *prepared.tasks]
    rdd = sc.parallelize(items, max(1, len(items))).map(_item)
    combined = jobs._cached(spark, rdd, jobs.RUN_AND_REBALANCES)
    if show_progress:
        with Progress(sc, "replay", len(items), "runs", done="simulated") as shown:
            combined.count()
        return jobs._tables(combined, shown)
    combined.count()
    return jobs._tables(combined, None)


# --------------------------------------------------------------------------------------------- writing
def meta_of(prepared: Prepared, master: str) -> dict[str, Any]:
    plan = prepared.plan
    return {
        "title": f"replay of {prepared.source}" + (f" (group {plan.group_id})" if plan.group_id else ""),
        "source": prepared.source,
        "window": f"{plan.since_ms} to {plan.until_ms} ms of the log ({plan.duration_ms} ms)",
        "runs": f"the recorded run and {len(prepared.tasks)} alternatives",
        "skipped (strategy/protocol cannot run)": list(prepared.skipped),
        "master": master,
        "settings": prepared.settings.to_json(),
    }


def finish(found: frames.Frames, prepared: Prepared, out: Path, meta: dict[str, Any]) -> ReplayOutcome:
    """Write the tables (when they are not written yet), ``replay.json`` and ``report.html``."""
    from regroup.lab import replay_report

    doc = replay_report.comparison(found, prepared)
    (out / REPLAY_FILE).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return ReplayOutcome(replay_report.write(found, meta, out, doc), doc)


def run_replay(
    path: str,
    out: Path,
    *,
    group: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    protocol_names: Sequence[str] = DEFAULT_PROTOCOLS,
    settings: Settings | None = None,
    spark: SparkSession | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> ReplayOutcome:
    """Replay ``path``'s group into ``out``: on ``spark`` when given (its master is the caller's), else in this
    process. Bad input is a ``LabInputError``."""
    from regroup.lab import frames, jobs

    prepared = prepare(
        path, group=group, since_ms=since_ms, until_ms=until_ms, strategies=strategies,
        protocol_names=protocol_names, settings=settings,
    )  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    meta = meta_of(prepared, "none (in this process)" if spark is None else str(spark.sparkContext.master))
    if spark is None:
        found = here(prepared, say)
        frames.write(found, out)
    else:
        computed = on_spark(spark, prepared, show_progress=False)
        jobs.write(computed, out)
        found = frames.read(out)
        meta["simulated in"] = f"{computed.seconds or 0:.1f} s"
    if spark is None:
        meta["simulated in"] = f"{found.seconds or 0:.1f} s"
    return finish(found, prepared, out, meta)
