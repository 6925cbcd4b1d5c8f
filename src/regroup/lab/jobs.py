"""The two Spark jobs. ``sweep`` distributes simulator runs over the executors (one task per slice of runs,
slices interleaved so expensive runs spread out); ``analyze`` distributes event files (one task per file).
Both produce the same two DataFrames, ``runs`` and ``rebalances`` (schemas in ``tables``), which ``write``
stores as Parquet under ``DIR/runs`` and ``DIR/rebalances``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regroup.lab import runner, tables
from regroup.lab.errors import LabInputError
from regroup.lab.eventfiles import check
from regroup.lab.grid import RunSpec
from regroup.lab.progress import Progress

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

RUNS_PER_TASK = 25


@dataclass(frozen=True, slots=True)
class Tables:
    runs: DataFrame
    rebalances: DataFrame


def slices(count: int, parallelism: int) -> int:
    """Tasks for ``count`` runs: at least two per core (balance), about ``RUNS_PER_TASK`` runs each."""
    return max(1, min(count, max(2 * parallelism, math.ceil(count / RUNS_PER_TASK))))


def interleave(items: list[Any], parts: int) -> list[Any]:
    """Reorder so that each of ``parts`` contiguous chunks takes every ``parts``-th item."""
    return [items[j] for s in range(parts) for j in range(s, len(items), parts)]


def _tables(spark: SparkSession, results: RDD[runner.Rows]) -> Tables:
    runs = spark.createDataFrame(results.map(lambda r: r[0]), tables.ddl(tables.RUN_COLUMNS))
    rebalances = spark.createDataFrame(results.flatMap(lambda r: r[1]), tables.ddl(tables.REBALANCE_COLUMNS))
    return Tables(runs=runs, rebalances=rebalances)


def sweep(spark: SparkSession, runs: list[RunSpec], show_progress: bool = True) -> Tables:
    """Simulate every run on the cluster; the result is cached, so writing both tables simulates once."""
    sc = spark.sparkContext
    parts = slices(len(runs), sc.defaultParallelism)
    docs = interleave([r.to_json() for r in runs], parts)
    results = sc.parallelize(docs, parts).map(runner.sweep_task).persist()
    with _maybe_progress(sc, "sweep", len(runs), "runs", show_progress):
        results.count()
    return _tables(spark, results)


def precheck(paths: list[str]) -> None:
    """Cheap checks on the driver before Spark reads anything: each file is readable and starts with an
    event of the log schema (the executors check every line)."""
    if not paths:
        raise LabInputError("analyze: no event files given")
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                first = fh.readline()
        except OSError as exc:
            raise LabInputError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise LabInputError(f"{path}: cannot read: not UTF-8 text") from None
        if not first.strip():
            raise LabInputError(f"{path}: no events")
        try:
            doc = json.loads(first)
        except json.JSONDecodeError as exc:
            raise LabInputError(f"{path}: line 1: invalid JSON: {exc.msg}") from None
        check(doc, f"{path}: line 1")


def analyze(spark: SparkSession, paths: list[str], show_progress: bool = True, measure_from_ms: int = 0) -> Tables:
    """Every group of every event file; raises ``LabInputError`` for the first bad file (in path order)."""
    precheck(paths)
    sc = spark.sparkContext
    outcome = sc.parallelize(paths, len(paths)).map(lambda p: (p, runner.analyze_task(p, measure_from_ms))).persist()
    with _maybe_progress(sc, "analyze", len(paths), "files", show_progress):
        errors = outcome.filter(lambda po: isinstance(po[1], str)).collect()
    if errors:
        outcome.unpersist()
        first = min(errors, key=lambda po: paths.index(po[0]))[1]
        raise LabInputError(str(first))
    results: RDD[runner.Rows] = outcome.flatMap(lambda po: po[1] if isinstance(po[1], list) else [])
    return _tables(spark, results)


def write(result: Tables, out: Path) -> None:
    """``out/runs`` and ``out/rebalances`` as Parquet (replaced if present)."""
    result.runs.coalesce(1).write.mode("overwrite").parquet(str(out / "runs"))
    result.rebalances.coalesce(2).write.mode("overwrite").parquet(str(out / "rebalances"))


class _Quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _maybe_progress(sc: Any, what: str, items: int, unit: str, show: bool) -> Progress | _Quiet:
    return Progress(sc, what, items, unit) if show else _Quiet()
