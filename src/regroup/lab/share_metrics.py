"""The lab's metrics of share-group runs (KIP-932): the ``share_*`` columns of the ``runs`` table, from the
simulator's share summary (``regroup.sim.share_summary``, computed from the event log) plus, when the run's
production schedule is known (a sweep run), how long records waited for their first delivery.

Also ``rate_per_partition_s`` for every sweep run: the production rate of the run's workload, so that a consumer
group's unowned partition-time can be read as records held up (``stalled_records``). Definitions in docs/lab.md
("Share groups beside consumer groups").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from regroup.sim.eventlog import GENERATION, PARTITION, TOPIC, TYPE, VALUE, Row, T
from regroup.sim.scenario import ShareSpec
from regroup.sim.share_summary import ShareSummary

#: a record first delivered more than this long after it was produced is late
LATE_MS: Final = 1_000

#: (name, Spark SQL type), appended to the runs table
SHARE_COLUMNS: Final = [
    ("rate_per_partition_s", "long"),
    ("share_records", "long"),
    ("share_delivered", "long"),
    ("share_redeliveries", "long"),
    ("share_undone", "long"),
    ("share_delayed_records", "long"),
    ("share_delay_mean_ms", "double"),
    ("share_delay_max_ms", "long"),
    ("share_records_per_member_s", "double"),
    ("share_late_records", "long"),
    ("share_max_wait_ms", "long"),
]


def produced_at(offset: int, spec: ShareSpec) -> int:
    """When the record at ``offset`` of a partition present from the start appeared (docs/simulator.md: the
    backlog is there at ``produce_from_ms``; the k-th produced record at ``from + ceil(k * 1000 / rate)``)."""
    k = offset - spec.backlog + 1
    if k <= 0 or spec.rate_per_s <= 0:
        return spec.produce_from_ms
    return spec.produce_from_ms + (k * 1000 + spec.rate_per_s - 1) // spec.rate_per_s


def first_delivery_waits(rows: Sequence[Row], spec: ShareSpec, measure_from_ms: int) -> tuple[int, int]:
    """(records first delivered more than ``LATE_MS`` after they appeared, the longest such wait in ms), over the
    records that appeared at or after ``measure_from_ms`` (the formation's first fetches are not counted)."""
    late = longest = 0
    for e in rows:
        if e[TYPE] != "share_acquired" or e[GENERATION] != 1:
            continue
        appeared = produced_at(e[VALUE], spec)
        if appeared < measure_from_ms or e[TOPIC] is None or e[PARTITION] is None:
            continue
        wait = e[T] - appeared
        longest = max(longest, wait)
        if wait > LATE_MS:
            late += 1
    return late, longest


def share_values(
    summary: ShareSummary | None, waits: tuple[int, int] | None, rate_per_partition_s: int | None
) -> dict[str, Any]:
    """The share columns of a run (null where the run has no share members, or the log cannot say)."""
    out: dict[str, Any] = dict.fromkeys(name for name, _ in SHARE_COLUMNS)
    out["rate_per_partition_s"] = rate_per_partition_s
    if summary is None:
        return out
    crash = summary.delayed_by_crash
    rates = [m.records_per_s for m in summary.members.values() if m.running_ms > 0]
    out.update(
        share_records=summary.records,
        share_delivered=summary.delivered,
        share_redeliveries=summary.redeliveries,
        share_undone=summary.undone,
        share_delayed_records=crash.records,
        share_delay_mean_ms=crash.mean_delay_ms if crash.records else None,
        share_delay_max_ms=crash.max_delay_ms if crash.records else None,
        share_records_per_member_s=round(sum(rates) / len(rates), 2) if rates else None,
    )
    if waits is not None:
        out["share_late_records"], out["share_max_wait_ms"] = waits
    return out


def stalled_records(unowned_partition_ms: int | None, rate_per_partition_s: int | None) -> float | None:
    """Records that arrive on partitions while they have no owner, at the workload's production rate."""
    if unowned_partition_ms is None or rate_per_partition_s is None:
        return None
    return unowned_partition_ms * rate_per_partition_s / 1000
