"""The self-contained HTML report: what the run was, the seeds' checks, a table per strategy and protocol,
and plots (stop-the-world cost, partitions moved and rebalance time per membership change versus group
size; join payload bytes, Kafka's leader-only versus everyone-receives-everything, versus group size;
balance). Spark aggregates the tables; only the small aggregates reach the driver.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regroup.lab import checks, plots
from regroup.lab.errors import LabInputError
from regroup.lab.jobs import Tables
from regroup.lab.metrics import SUMMED

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

META_FILE = "lab.json"
#: per-run columns summed over runs: counts, and the per-run sums of the churn phase (``metrics.SUMMED``)
SUMS = ("rebalances", "changes", *SUMMED, "violations")
MEANS = ("fraction_kept", "balance_spread", "balance_score")


def load(spark: SparkSession, out: Path) -> tuple[Tables, dict[str, Any]]:
    """The tables and metadata a sweep or analyze left in ``out``."""
    for name in ("runs", "rebalances"):
        if not (out / name).is_dir():
            raise LabInputError(f"{out}: no {name}/ table (run `regroup lab sweep` or `regroup lab analyze` first)")
    try:
        meta = json.loads((out / META_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        meta = {}
    tables = Tables(runs=spark.read.parquet(str(out / "runs")), rebalances=spark.read.parquet(str(out / "rebalances")))
    return tables, meta


def label(row: Mapping[str, Any]) -> str:
    return f"{row['strategy'] or '?'}/{row['protocol'] or '?'}"


def aggregates(t: Tables) -> dict[str, list[dict[str, Any]]]:
    """Small aggregates, computed by Spark: per strategy/protocol, per group size, per payload size."""
    from pyspark.sql import functions as F

    sums = [F.sum(c).alias(c) for c in SUMS]
    means = [F.avg(c).alias(c) for c in MEANS]
    by_pair = t.runs.groupBy("strategy", "protocol").agg(F.count("*").alias("runs"), *sums, *means)
    by_size = t.runs.groupBy("strategy", "protocol", "members").agg(
        *[F.sum(c).alias(c) for c in ("changes", "unowned_partition_ms", "moved", "duration_ms")]
    )
    payload = (
        t.rebalances.where(
            F.col("group_size").isNotNull()
            & (F.col("join_bytes_leader").isNotNull() | F.col("heartbeat_bytes").isNotNull())
        )
        .groupBy("group_size")
        .agg(
            F.avg("join_bytes_leader").alias("leader"),
            F.avg("join_bytes_all").alias("everyone"),
            F.avg(F.col("join_bytes_leader") + F.col("sync_bytes")).alias("leader_sync"),
            F.avg(F.col("join_bytes_all") + F.col("sync_bytes")).alias("everyone_sync"),
            F.avg("heartbeat_bytes").alias("kip848"),
        )
    )
    return {
        "pairs": [r.asDict() for r in by_pair.orderBy("strategy", "protocol").collect()],
        "sizes": [r.asDict() for r in by_size.collect()],
        "payload": [r.asDict() for r in payload.orderBy("group_size").collect()],
    }


def _per_change(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["members"] is not None and r["changes"] and r[key] is not None:
            out.setdefault(label(r), []).append((float(r["members"]), r[key] / r["changes"]))
    return out


def _bytes_plot(title: str, rows: Sequence[Mapping[str, Any]], lines: Mapping[str, str]) -> plots.Plot:
    """Bytes per rebalance against group size, one line per label (``lines``: label -> aggregate column)."""
    series = {
        name: [(float(r["group_size"]), float(r[key])) for r in rows if r[key] is not None]
        for name, key in lines.items()
    }
    return plots.lines(title, "group size (members in the generation)", "bytes", series, log_y=True)


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else html.escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ratio(n: Any, d: Any, scale: float = 1.0) -> float | None:
    """n / d / scale, or None when n is unknown or d is zero."""
    return n / d / scale if n is not None and d else None


def render(t: Tables, meta: Mapping[str, Any]) -> str:
    agg = aggregates(t)
    parts: list[str] = [f"<h1>Rebalance lab: {html.escape(str(meta.get('title', 'report')))}</h1>"]
    facts = [(k, v) for k, v in meta.items() if k != "title"]
    parts.append(
        _table(
            ["", ""],
            [(k.replace("_", " "), v if not isinstance(v, list) else ", ".join(map(str, v))) for k, v in facts],
        )
    )

    parts.append("<h2>Lab checks: the seeds' tables</h2>")
    parts.append(
        _table(
            ["check", "expected", "measured", ""],
            [(c.name, c.expected, c.measured, "ok" if c.ok else "FAILED") for c in checks.run_all()],
        )
    )
    parts.append("<p>KIP-54's worked examples, partitions that keep their owner through the change:</p>")
    parts.append(
        _table(
            ["example", "change", "round-robin keeps", "sticky keeps"],
            [(r.example, r.change, r.roundrobin, r.sticky) for r in checks.kip54_rows()],
        )
    )

    parts.append("<h2>Per strategy and protocol</h2>")
    parts.append(f"<p>{_PAIRS_NOTE}</p>")
    rows = []
    for p in agg["pairs"]:
        ch = p["changes"]
        rows.append(
            (
                label(p),
                p["runs"],
                ch,
                _ratio(p["rebalances"], ch),
                _ratio(p["rounds"], ch),
                _ratio(p["duration_ms"], ch),
                _ratio(p["unowned_partition_ms"], ch, scale=1000),
                _ratio(p["moved"], ch),
                _ratio(p["revoked"], ch),
                _ratio(p["reassigned"], ch),
                p["fraction_kept"],
                p["balance_spread"],
                p["balance_score"],
                _ratio(p["join_bytes_leader"], ch),
                _ratio(p["join_bytes_all"], ch),
                _ratio(p["sync_bytes"], ch),
                _ratio(p["heartbeat_bytes"], ch),
                p["violations"],
            )
        )
    parts.append(
        _table(
            [
                "strategy/protocol",
                "runs",
                "changes",
                "rebalances /change",
                "rounds /change",
                "rebalance ms /change",
                "unowned partition-s /change",
                "moved /change",
                "revoked /change",
                "re-assigned /change",
                "fraction kept",
                "final max−min",
                "final KIP-54 score",
                "join bytes leader-only /change",
                "join bytes everyone /change",
                "sync bytes /change",
                "KIP-848 heartbeat bytes /change",
                "violations",
            ],
            rows,
        )
    )

    parts.append("<h2>Plots</h2>")
    figures = [
        plots.lines(
            "Stop-the-world cost per membership change",
            "group size (members)",
            "unowned partition-seconds",
            {k: [(x, y / 1000) for x, y in v] for k, v in _per_change(agg["sizes"], "unowned_partition_ms").items()},
        ),
        plots.lines(
            "Partitions moved per membership change",
            "group size (members)",
            "partitions moved",
            _per_change(agg["sizes"], "moved"),
        ),
        plots.lines(
            "Rebalance time per membership change",
            "group size (members)",
            "ms in rebalances",
            _per_change(agg["sizes"], "duration_ms"),
        ),
        _bytes_plot(
            "JoinGroup metadata bytes per rebalance",
            agg["payload"],
            {"Kafka: leader alone receives all": "leader", "seed 000: everyone receives everything": "everyone"},
        ),
        _bytes_plot(
            "Membership-protocol bytes per rebalance: metadata and assignments",
            agg["payload"],
            {
                "classic: JoinGroup (leader alone) + SyncGroup": "leader_sync",
                "seed 000: JoinGroup (everyone) + SyncGroup": "everyone_sync",
                "KIP-848: heartbeat subscriptions, acknowledgements, assignments": "kip848",
            },
        ),
        plots.bars(
            "Final KIP-54 balance score (mean over runs; 0 = perfectly even)",
            "score",
            {label(p): float(p["balance_score"] or 0) for p in agg["pairs"]},
        ),
    ]
    for png in figures:
        parts.append(f'<figure><img alt="{html.escape(png.title)}" src="data:image/png;base64,{png.png}">')
        parts.append(f"<figcaption>{html.escape(png.title)}</figcaption></figure>")
    body = "\n".join(parts)
    head = f"<meta charset='utf-8'><title>regroup rebalance lab</title><style>{_CSS}</style>"
    return f"<!DOCTYPE html>\n<html><head>{head}</head><body>\n{body}\n</body></html>\n"


_PAIRS_NOTE = (
    "Totals over the churn phase of every run, divided by the membership changes (joins, leaves, crashes,"
    " restarts) that caused them. Means of fraction kept and of the final balance are over runs."
)
_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:1200px}"
    "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}"
    "th{background:#eef}img{display:block;margin:1em 0}"
)


def write(t: Tables, meta: Mapping[str, Any], out: Path) -> Path:
    (out / META_FILE).write_text(json.dumps(dict(meta), indent=2) + "\n", encoding="utf-8")
    target = out / "report.html"
    target.write_text(render(t, meta), encoding="utf-8")
    return target
