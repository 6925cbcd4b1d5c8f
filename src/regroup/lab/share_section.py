"""The report's "Moving a workload to a share group" section: per churn pattern, the consumer-group runs' stop-the-
world cost (unowned partition-seconds, and the records that arrive meanwhile at the workload's production rate)
beside the share-group runs' delayed records, redeliveries, late records and throughput per member, with
sentences generated from those numbers. Plain functions of the aggregates (``report._share_aggregate``), so the
tests call them without Spark.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from regroup.lab.share_metrics import LATE_MS

Row = Mapping[str, Any]
TableFn = Callable[..., str]
LabelFn = Callable[[Row], str]

#: churn patterns in report order, with what one event is
WORDS: Final = {
    "join": "member joining",
    "leave": "member leaving",
    "crash": "member crashing",
    "rolling": "member restarted",
    "mixed": "change",
}
COLUMNS: Final = [
    ("strategy / protocol", 0),
    ("unowned partition-s per event", -1),
    ("records held up per event (at the production rate)", -1),
    ("redeliveries per event", -1),
    ("records delayed by a crash per event", -1),
    ("mean delay of those (s)", -1),
    (f"records first delivered > {LATE_MS // 1000} s late per event", -1),
    ("records/s per member", 0),
]


def _per(value: Any, events: Any, scale: float = 1.0) -> float | None:
    return value / events / scale if value is not None and events else None


def table_rows(rows: Sequence[Row], label: LabelFn) -> list[list[Any]]:
    """One table row per pair of a pattern (the share group's run figures; the others' ownership figures)."""
    out: list[list[Any]] = []
    for r in rows:
        events = r["events"]
        share = r["protocol"] == "share"
        delayed = r["delayed"]
        out.append(
            [
                label(r),
                _per(r["unowned_partition_ms"], events, 1000),
                _per(r["stalled_records"], events),
                _per(r["redeliveries"], events) if share else None,
                _per(delayed, events) if share else None,
                r["delay_ms_total"] / delayed / 1000 if share and delayed else None,
                _per(r["late"], events) if share else None,
                r["per_member_s"] if share else None,
            ]
        )
    return out


def sentences(rows: Sequence[Row], word: str, label: LabelFn) -> str:
    """What moving this pattern's workload to a share group changes, in words, from the numbers."""
    shares = [r for r in rows if r["protocol"] == "share"]
    others = [r for r in rows if r["protocol"] != "share" and r["unowned_partition_ms"] is not None and r["events"]]
    if not shares:
        return ""
    s = shares[0]
    events = s["events"]
    parts: list[str] = []
    if others:
        low = min(others, key=lambda r: r["unowned_partition_ms"] / r["events"])
        high = max(others, key=lambda r: r["unowned_partition_ms"] / r["events"])
        held = _per(low["stalled_records"], low["events"])
        text = (
            f"As a consumer group, each {word} left partitions without an owner for "
            f"{_num(low['unowned_partition_ms'] / low['events'] / 1000)} partition-s ({html.escape(label(low))})"
        )
        if high is not low:
            text += f" to {_num(high['unowned_partition_ms'] / high['events'] / 1000)} ({html.escape(label(high))})"
        if held is not None:
            text += f": at the workload's production rate about {_num(held)} records arrive meanwhile and wait"
        parts.append(text + ".")
    delayed = _per(s["delayed"], events) or 0
    text = f"As a share group ({s['runs']} run(s)), nothing is revoked and no rebalance stops the group: "
    if delayed:
        mean = s["delay_ms_total"] / s["delayed"] / 1000
        text += (
            f"{_num(delayed)} records per {word} were in the hands of a crashed member and were delivered again "
            f"{_num(mean)} s later on average (at most {_num((s['delay_max_ms'] or 0) / 1000)} s)"
        )
    else:
        text += f"no record was held by a crashed member per {word}"
    text += f"; {_num(_per(s['redeliveries'], events) or 0)} redeliveries per {word}."
    parts.append(text)
    late = _per(s["late"], events)
    if late is not None:
        if late:
            parts.append(
                f"{_num(late)} records per {word} waited more than {LATE_MS // 1000} s for their first delivery (at "
                f"most {_num((s['max_wait_ms'] or 0) / 1000)} s): in a share group the partitions assigned only to "
                "a crashed member wait until its share session times out, like a consumer group's until its "
                "session does."
            )
        else:
            parts.append(f"No record waited more than {LATE_MS // 1000} s for its first delivery.")
    if s["per_member_s"] is not None:
        parts.append(f"Each share member accepted {_num(s['per_member_s'])} records/s on average while it ran.")
    return "<p>" + " ".join(parts) + "</p>"


def render(rows: Sequence[Row], table: TableFn, label: LabelFn) -> str:
    """The section, or "" when no run was a share group's."""
    if not rows:
        return ""
    parts = [
        "<h2>Moving a workload to a share group</h2>",
        "<p>The same members, topics and churn as a share group (KIP-932), its members reading records produced "
        "at the workload's rate. A consumer group stops a partition while it has no owner; a share group has no "
        "owners: a crash sends back what the member held (<i>records delayed by a crash</i>, delivered again: "
        f"<i>redeliveries</i>), and records first delivered more than {LATE_MS // 1000} s after they were produced "
        "are <i>late</i>. <i>Records held up</i> is the consumer group's unowned partition-time times the "
        "production rate per partition, if production never stopped. "
        "“–”: the figure does not apply to that protocol.</p>",
    ]
    by_churn: dict[str, list[Row]] = {}
    for r in rows:
        by_churn.setdefault(r["churn"], []).append(r)
    for churn, word in WORDS.items():
        pattern = by_churn.get(churn)
        if not pattern or not any(r["protocol"] == "share" for r in pattern):
            continue
        parts.append(f"<h3>Per {html.escape(word)}</h3>")
        parts.append(sentences(pattern, word, label))
        columns = [(h.replace("per event", f"per {word}"), d) for h, d in COLUMNS]
        parts.append(table(columns, table_rows(pattern, label)))
    return "\n".join(parts)


def _num(value: float) -> str:
    if value == int(value) and abs(value) >= 10:
        return f"{int(value):,}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"
