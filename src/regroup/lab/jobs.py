"""The two Spark jobs. ``sweep`` distributes simulator runs over the executors (one task per slice of runs,
slices interleaved so expensive runs spread out); ``analyze`` distributes event files (one task per file).
Both produce the same two DataFrames, ``runs`` and ``rebalances`` (schemas in ``tables``), which ``write``
stores as Parquet under ``DIR/runs`` and ``DIR/rebalances``.

The executors' Python output reaches the JVM once: a job turns it into one cached DataFrame with a row per
run (the run's row as the struct ``run``, its rebalance rows as the array ``rebalances``), which the count
that the progress display wraps materialises; the two tables are projections of that cache, so writing
them, or the report's aggregates, needs no Python worker.
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

#: one run's rows as one row of the cached DataFrame: ``runner.Rows`` as it is
RUN_AND_REBALANCES = (
    f"run struct<{tables.ddl(tables.RUN_COLUMNS)}>, rebalances array<struct<{tables.ddl(tables.REBALANCE_COLUMNS)}>>"
)
#: a file's outcome in ``analyze``: its index in the paths and its error, or one row per group (error null)
FILE_OUTCOME = f"file long, error string, {RUN_AND_REBALANCES}"


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


def _cached(spark: SparkSession, rows: RDD[Any], ddl: str) -> DataFrame:
    """``rows`` as a DataFrame of schema ``ddl``, persisted (materialised by the caller's count). The rows
    are built by ``tables.row`` in ``runner``, so Python's per-value type check is skipped; a value of the
    wrong type would arrive as null, which tests/lab/test_spark.py would see."""
    return spark.createDataFrame(rows, ddl, verifySchema=False).persist()


def _tables(combined: DataFrame) -> Tables:
    """The two tables as projections of the cached rows (no Python)."""
    from pyspark.sql import functions as F

    runs = combined.select("run.*")
    rebalances = combined.select(F.explode("rebalances").alias("r")).select("r.*")
    return Tables(runs=runs, rebalances=rebalances)


def sweep(spark: SparkSession, runs: list[RunSpec], show_progress: bool = True) -> Tables:
    """Simulate every run on the cluster; the rows are cached in the JVM, so writing both tables simulates
    once and runs no Python."""
    sc = spark.sparkContext
    parts = slices(len(runs), sc.defaultParallelism)
    docs = interleave([r.to_json() for r in runs], parts)
    combined = _cached(spark, sc.parallelize(docs, parts).map(runner.sweep_task), RUN_AND_REBALANCES)
    with _maybe_progress(sc, "sweep", len(runs), "runs", show_progress):
        combined.count()
    return _tables(combined)


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


def file_outcome(index: int, path: str, measure_from_ms: int = 0) -> list[tuple[Any, ...]]:
    """The executor side of ``analyze`` as rows of ``FILE_OUTCOME``: one per group of the file, or one
    carrying the file's error message."""
    outcome = runner.analyze_task(path, measure_from_ms)
    if isinstance(outcome, str):
        return [(index, outcome, None, None)]
    return [(index, None, run, rebalances) for run, rebalances in outcome]


def analyze(spark: SparkSession, paths: list[str], show_progress: bool = True, measure_from_ms: int = 0) -> Tables:
    """Every group of every event file; raises ``LabInputError`` for the first bad file (in path order)."""
    precheck(paths)
    sc = spark.sparkContext
    files = sc.parallelize(list(enumerate(paths)), len(paths))
    combined = _cached(spark, files.flatMap(lambda f: file_outcome(f[0], f[1], measure_from_ms)), FILE_OUTCOME)
    with _maybe_progress(sc, "analyze", len(paths), "files", show_progress):
        combined.count()
    errors = combined.where("error IS NOT NULL").select("file", "error").collect()
    if errors:
        combined.unpersist()
        raise LabInputError(str(min(errors, key=lambda e: int(e["file"]))["error"]))
    return _tables(combined)


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
