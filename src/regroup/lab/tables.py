"""The lab's two tables, ``rebalances`` and ``runs``: column names, types and order, shared by the metrics
(which fill plain dicts), the Spark jobs (which build DataFrames with exactly this schema) and the report.
Definitions of every column are in docs/lab.md. Every column is nullable: a metric an event log cannot
support (e.g. ownership costs in a server log) is null, never a made-up zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from regroup.lab.share_metrics import SHARE_COLUMNS

#: (name, Spark SQL type)
RUN_KEYS = [
    ("run_id", "string"),
    ("source", "string"),
    ("group_id", "string"),
    ("strategy", "string"),
    ("protocol", "string"),
]
AXIS_COLUMNS = [
    ("grid", "string"),
    ("members", "long"),
    ("topics", "long"),
    ("partitions", "long"),
    ("subscription", "string"),
    ("churn", "string"),
    ("churn_events", "long"),
    ("seed", "long"),
]
COST_COLUMNS = [
    ("duration_ms", "long"),
    ("rounds", "long"),
    ("unowned_partition_ms", "long"),
    ("moved", "long"),
    ("revoked", "long"),
    ("reassigned", "long"),
    ("fraction_kept", "double"),
    ("balance_spread", "long"),
    ("balance_score", "long"),
    ("join_bytes_leader", "long"),
    ("join_bytes_all", "long"),
    ("sync_bytes", "long"),
    ("heartbeat_bytes", "long"),
]
REBALANCE_COLUMNS = [
    *RUN_KEYS,
    ("members", "long"),
    ("index", "long"),
    ("phase", "string"),
    ("trigger", "string"),
    ("generation", "long"),
    ("start_ms", "long"),
    ("end_ms", "long"),
    ("group_size", "long"),
    ("partitions_assigned", "long"),
    *COST_COLUMNS,
]
RUN_COLUMNS = [
    *RUN_KEYS,
    *AXIS_COLUMNS,
    ("events", "long"),
    ("violations", "long"),
    ("end_ms", "long"),
    ("changes", "long"),
    ("formation_rebalances", "long"),
    ("rebalances", "long"),
    ("settled", "boolean"),
    ("cut_off_unowned_partition_ms", "long"),
    *COST_COLUMNS,
    *SHARE_COLUMNS,
]


def row(values: Mapping[str, Any], columns: list[tuple[str, str]]) -> tuple[Any, ...]:
    """The values in column order (missing → None); unknown keys are a bug."""
    unknown = set(values) - {name for name, _ in columns}
    if unknown:
        raise KeyError(f"values for unknown columns {sorted(unknown)}")
    return tuple(values.get(name) for name, _ in columns)


def ddl(columns: list[tuple[str, str]]) -> str:
    """The schema as a Spark DDL string (``run_id string, ...``)."""
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)
