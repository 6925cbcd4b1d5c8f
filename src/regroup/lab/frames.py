"""The lab's two tables on the driver, as pyarrow tables: read from a directory's Parquet, built from rows computed
in this process (a small ``analyze``), or collected from Spark; and the report's aggregates over them.

The report needs only small aggregates (a row per churn pattern and strategy/protocol pair, per group size, ...),
which pyarrow computes from the Parquet files in well under a second for the largest sweeps the lab runs, so
rendering a report starts no Spark (``regroup lab report`` re-renders a directory in seconds, not the tens of
seconds a JVM takes to start). The aggregates follow Spark SQL's semantics for nulls: a sum or mean of nothing
but nulls is null, a comparison with null selects nothing, ``when`` without ``otherwise`` is null.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from regroup.lab import tables
from regroup.lab.errors import LabInputError
from regroup.lab.metrics import SUMMED

if TYPE_CHECKING:
    from regroup.lab.jobs import Tables

#: per-run columns summed over runs: counts, and the per-run sums of the churn phase (``metrics.SUMMED``)
SUMS: Final = ("rebalances", *SUMMED)
MEANS: Final = ("fraction_kept", "balance_spread", "balance_score")
ARROW_TYPES: Final = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_()}
#: listed runs (did not settle, rebalanced without a change): at most this many by name
LISTED: Final = 20


@dataclass(frozen=True, slots=True)
class Frames:
    runs: Any  # pyarrow.Table of tables.RUN_COLUMNS
    rebalances: Any  # pyarrow.Table of tables.REBALANCE_COLUMNS
    #: how long computing them took, when they were computed here
    seconds: float | None = None


def schema(columns: list[tuple[str, str]]) -> Any:
    return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in columns])


# ------------------------------------------------------------------------------------------- in and out
def read(out: Path) -> Frames:
    """``out/runs`` and ``out/rebalances`` as written by Spark or by ``write`` (tables written by an older version
    get the columns they lack as nulls)."""
    for name in ("runs", "rebalances"):
        if not (out / name).is_dir():
            raise LabInputError(f"{out}: no {name}/ table (run `regroup lab sweep` or `regroup lab analyze` first)")
    try:
        runs = pq.read_table(out / "runs")
        rebalances = pq.read_table(out / "rebalances")
    except (OSError, pa.ArrowException) as exc:
        raise LabInputError(f"{out}: cannot read its tables: {exc}") from None
    return Frames(runs=_complete(runs, tables.RUN_COLUMNS), rebalances=_complete(rebalances, tables.REBALANCE_COLUMNS))


def _complete(table: Any, columns: list[tuple[str, str]]) -> Any:
    arrays = []
    for name, kind in columns:
        wanted = ARROW_TYPES[kind]
        if name in table.column_names:
            column = table[name]
            arrays.append(column if column.type == wanted else column.cast(wanted))
        else:
            arrays.append(pa.nulls(table.num_rows, wanted))
    return pa.Table.from_arrays(arrays, schema=schema(columns))


def from_rows(runs: Sequence[Sequence[Any]], rebalances: Sequence[Sequence[Any]]) -> Frames:
    """Rows in ``tables``' column order (what ``runner`` builds) as the two tables."""
    return Frames(runs=_table(runs, tables.RUN_COLUMNS), rebalances=_table(rebalances, tables.REBALANCE_COLUMNS))


def _table(rows: Sequence[Sequence[Any]], columns: list[tuple[str, str]]) -> Any:
    s = schema(columns)
    values = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    return pa.Table.from_arrays([pa.array(list(v), type=f.type) for v, f in zip(values, s, strict=True)], schema=s)


def from_spark(t: Tables) -> Frames:
    """Spark's DataFrames collected to the driver (tests, and tables not written yet)."""
    return Frames(
        runs=_complete(t.runs.toArrow(), tables.RUN_COLUMNS),
        rebalances=_complete(t.rebalances.toArrow(), tables.REBALANCE_COLUMNS),
    )


def write(frames: Frames, out: Path) -> None:
    """``out/runs`` and ``out/rebalances`` as Parquet (replacing what is there), readable by Spark too."""
    for name, table in (("runs", frames.runs), ("rebalances", frames.rebalances)):
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        target.mkdir(parents=True)
        pq.write_table(table, target / "part-00000.parquet")


# -------------------------------------------------------------------------------------------- aggregates
def _when(mask: Any, values: Any) -> Any:
    """Spark's ``when(mask, values)``: the value where the mask is true, else null."""
    return pc.if_else(mask, values, pa.scalar(None, values.type))


def _flag(mask: Any) -> Any:
    """Spark's ``when(mask, 1).otherwise(0)``."""
    return pc.if_else(pc.fill_null(mask, False), 1, 0).cast(pa.int64())


#: an aggregate: (output name, values (None: count the rows), pyarrow function: sum, mean, max)
Agg = tuple[str, Any, str]


def _group(table: Any, keys: Sequence[str], aggs: Sequence[Agg]) -> list[dict[str, Any]]:
    """``table`` grouped by ``keys`` (null is a key of its own), one dict per group in key order (nulls first)."""
    columns: dict[str, Any] = {key: table[key] for key in keys}
    specs: list[tuple[str, str, Any]] = []
    names: dict[str, str] = {}
    for i, (name, values, how) in enumerate(aggs):
        column = f"_a{i}"
        if values is None:
            columns[column] = pa.nulls(table.num_rows, pa.int8())
            specs.append((column, "count", pc.CountOptions(mode="all")))
            names[f"{column}_count"] = name
        else:
            columns[column] = values
            specs.append((column, how, pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)))
            names[f"{column}_{how}"] = name
    grouped = pa.table(columns).group_by(list(keys), use_threads=False).aggregate(specs)
    rows = [{names.get(k, k): v for k, v in row.items()} for row in grouped.to_pylist()]
    return sorted(rows, key=lambda r: tuple((r[k] is not None, r[k] if r[k] is not None else "") for k in keys))


def aggregates(f: Frames) -> dict[str, list[dict[str, Any]]]:
    """Small aggregates: per churn pattern and pair (and group size), per pair over every pattern, payload per
    group size, and the runs that did not settle or had no membership change."""
    runs = f.runs.set_column(f.runs.schema.get_field_index("churn"), "churn", pc.fill_null(f.runs["churn"], "unknown"))
    evented = pc.greater(runs["churn_events"], 0)
    changed = pc.greater(runs["changes"], 0)

    def sums(mask: Any) -> list[Agg]:
        return [(c, _when(mask, runs[c]), "sum") for c in SUMS]

    unsettled_mask = pc.equal(runs["settled"], False)
    common: list[Agg] = [
        ("runs", None, "count"),
        *[(c, runs[c], "mean") for c in MEANS],
        ("violations", runs["violations"], "sum"),
        ("unsettled", _flag(unsettled_mask), "sum"),
    ]
    keys = ("churn", "strategy", "protocol")
    patterns = _group(
        runs,
        keys,
        [
            ("events", runs["churn_events"], "sum"),
            ("evented_runs", _flag(evented), "sum"),
            *sums(pc.or_kleene(evented, pc.equal(runs["churn"], "none"))),
            *common,
        ],
    )
    with_events = runs.filter(evented)
    sizes = _group(
        with_events,
        (*keys, "members"),
        [
            ("events", with_events["churn_events"], "sum"),
            *[(c, with_events[c], "sum") for c in ("unowned_partition_ms", "moved", "duration_ms", "rebalances")],
        ],
    )
    pairs = _group(runs, ("strategy", "protocol"), [("changes", runs["changes"], "sum"), *sums(changed), *common])
    r = f.rebalances
    measured = pc.and_kleene(
        pc.and_kleene(pc.not_equal(r["phase"], "emptied"), pc.is_valid(r["group_size"])),
        pc.or_(pc.is_valid(r["join_bytes_leader"]), pc.is_valid(r["heartbeat_bytes"])),
    )
    r = r.filter(measured)
    payload = _group(
        r,
        ("group_size",),
        [
            ("leader", r["join_bytes_leader"], "mean"),
            ("everyone", r["join_bytes_all"], "mean"),
            ("leader_sync", pc.add(r["join_bytes_leader"], r["sync_bytes"]), "mean"),
            ("everyone_sync", pc.add(r["join_bytes_all"], r["sync_bytes"]), "mean"),
            ("kip848", r["heartbeat_bytes"], "mean"),
        ],
    )
    unsettled = runs.filter(unsettled_mask)
    quiet = runs.filter(pc.and_kleene(pc.invert(changed), pc.greater(runs["rebalances"], 0)))
    return {
        "patterns": patterns,
        "sizes": sizes,
        "pairs": pairs,
        "payload": payload,
        "unsettled": _first(unsettled, ("run_id", "end_ms", "cut_off_unowned_partition_ms")),
        "unsettled_count": [{"n": unsettled.num_rows}],
        "quiet": _first(quiet, ("run_id", "rebalances")),
        "share": _share(runs, evented),
    }


def _first(table: Any, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The first ``LISTED`` rows by run id, those columns."""
    rows: list[dict[str, Any]] = table.select(list(columns)).to_pylist()
    rows.sort(key=lambda row: (row["run_id"] is not None, row["run_id"] or ""))
    return rows[:LISTED]


def _share(runs: Any, evented: Any) -> list[dict[str, Any]]:
    """Per churn pattern and pair, the figures the share comparison reads; empty without share runs."""
    if not pc.any(pc.equal(runs["protocol"], "share")).as_py():
        return []
    t = runs.filter(evented)
    stalled = pc.divide(pc.multiply(t["unowned_partition_ms"].cast(pa.float64()), t["rate_per_partition_s"]), 1000.0)
    return _group(
        t,
        ("churn", "strategy", "protocol"),
        [
            ("runs", None, "count"),
            ("events", t.column("churn_events"), "sum"),
            ("unowned_partition_ms", t.column("unowned_partition_ms"), "sum"),
            ("stalled_records", stalled, "sum"),
            ("delayed", t.column("share_delayed_records"), "sum"),
            (
                "delay_ms_total",
                pc.multiply(t.column("share_delayed_records").cast(pa.float64()), t.column("share_delay_mean_ms")),
                "sum",
            ),
            ("delay_max_ms", t.column("share_delay_max_ms"), "max"),
            ("redeliveries", t.column("share_redeliveries"), "sum"),
            ("late", t.column("share_late_records"), "sum"),
            ("max_wait_ms", t.column("share_max_wait_ms"), "max"),
            ("per_member_s", t.column("share_records_per_member_s"), "mean"),
        ],
    )
