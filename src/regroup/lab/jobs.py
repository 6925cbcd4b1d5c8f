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

import contextlib
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regroup.lab import progress, runner, tables
from regroup.lab.errors import LabInputError
from regroup.lab.eventfiles import check
from regroup.lab.grid import RunSpec
from regroup.lab.progress import Progress

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

    from regroup.lab import frames

RUNS_PER_TASK = 25
#: ``analyze`` without ``--master`` reads event files adding up to at most this many bytes in the command's own
#: process, without Spark: a log's rows cost about 0.1 s of one core per MB, so this is about 6 s, less than the
#: JVM's start-up alone; bigger inputs go to Spark's executors, one task per file
IN_PROCESS_BYTES = 64 * 1024 * 1024

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
    #: how long the job that computed them took (the progress line's time)
    seconds: float | None = None


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


def _tables(combined: DataFrame, shown: Progress | None) -> Tables:
    """The two tables as projections of the cached rows (no Python)."""
    from pyspark.sql import functions as F

    runs = combined.select("run.*")
    rebalances = combined.select(F.explode("rebalances").alias("r")).select("r.*")
    return Tables(runs=runs, rebalances=rebalances, seconds=shown.seconds if shown is not None else None)


def sweep(spark: SparkSession, runs: list[RunSpec], show_progress: bool = True) -> Tables:
    """Simulate every run on the cluster; the rows are cached in the JVM, so writing both tables simulates
    once and runs no Python."""
    sc = spark.sparkContext
    parts = slices(len(runs), sc.defaultParallelism)
    docs = interleave([r.to_json() for r in runs], parts)
    combined = _cached(spark, sc.parallelize(docs, parts).map(runner.sweep_task), RUN_AND_REBALANCES)
    with _maybe_progress(sc, "sweep", len(runs), "runs", show_progress, "simulated") as shown:
        combined.count()
    return _tables(combined, shown)


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
    with _maybe_progress(sc, "analyze", len(paths), "files", show_progress, "analysed") as shown:
        combined.count()
    errors = combined.where("error IS NOT NULL").select("file", "error").collect()
    if errors:
        combined.unpersist()
        raise LabInputError(str(min(errors, key=lambda e: int(e["file"]))["error"]))
    return _tables(combined, shown)


def input_bytes(paths: list[str]) -> int:
    """What the event files add up to (a file that cannot be read counts 0: ``precheck`` reports it)."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += Path(path).stat().st_size
    return total


def analyze_here(paths: list[str], measure_from_ms: int = 0, show_progress: bool = True) -> frames.Frames:
    """``analyze`` in this process, no Spark: the same rows, file by file in path order (the first bad file is
    the ``LabInputError``)."""
    from regroup.lab import frames

    precheck(paths)
    started = time.monotonic()
    say = progress.say if show_progress else (lambda what, text: None)
    say("analyze", f"{len(paths)} files, in this process")
    runs: list[tuple[Any, ...]] = []
    rebalances: list[tuple[Any, ...]] = []
    for path in paths:
        outcome = runner.analyze_task(path, measure_from_ms)
        if isinstance(outcome, str):
            raise LabInputError(outcome)
        for run, rows in outcome:
            runs.append(run)
            rebalances.extend(rows)
    found = frames.from_rows(runs, rebalances)
    seconds = round(time.monotonic() - started, 1)
    say("analyze", f"{len(paths)}/{len(paths)} files analysed in {seconds:.1f} s")
    return dataclasses.replace(found, seconds=seconds)


def write(result: Tables, out: Path) -> None:
    """``out/runs`` and ``out/rebalances`` as Parquet (replaced if present)."""
    result.runs.coalesce(1).write.mode("overwrite").parquet(str(out / "runs"))
    result.rebalances.coalesce(2).write.mode("overwrite").parquet(str(out / "rebalances"))


class _Quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _maybe_progress(sc: Any, what: str, items: int, unit: str, show: bool, done: str) -> Progress | _Quiet:
    return Progress(sc, what, items, unit, done=done) if show else _Quiet()
