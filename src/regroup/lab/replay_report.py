"""What each alternative of a replay would have cost against what happened: ``DIR/replay.json`` and the section
the report of ``regroup lab replay`` opens with (the rest of the page is the lab's report over the same tables).

Per run (the recorded one and each alternative), from the lab's tables: the churn phase's ``rebalances``,
``rounds``, ``moved``, ``revoked``, ``duration_ms`` (time in rebalances), ``unowned_partition_ms``,
``fraction_kept``, the final ``balance_spread``, whether the group ``settled``, and ``stable_at_ms``: when the
last rebalance of the churn phase ended, from the window's start (null without one). ``versus_recorded`` is each
alternative's value minus the recorded one, where both have one: a server log has no processing owners, so its
``unowned_partition_ms`` and ``revoked`` are null and so are their differences.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from regroup.lab import report
from regroup.lab.replay_scenario import offset_ms

if TYPE_CHECKING:
    from regroup.lab import frames
    from regroup.lab.replay_run import Prepared

#: the metrics compared, with their direction (-1: lower is better, 1: higher is better, 0: neither)
COMPARED: Final = (
    ("rebalances", -1),
    ("rounds", -1),
    ("moved", -1),
    ("revoked", -1),
    ("duration_ms", -1),
    ("unowned_partition_ms", -1),
    ("stable_at_ms", -1),
    ("fraction_kept", 1),
    ("balance_spread", -1),
)
#: where the section goes in the lab's report: before its reading guide
ANCHOR: Final = "<h2>How to read this report</h2>"


def _stable_at(rebalances: Sequence[Mapping[str, Any]], start: int) -> int | None:
    ends = [r["end_ms"] for r in rebalances if r["phase"] == "churn" and r["end_ms"] is not None]
    return max(ends) - start if ends else None


def comparison(found: frames.Frames, prepared: Prepared) -> dict[str, Any]:
    """``replay.json``: the plan, the recorded run's metrics, each alternative's and its difference from them."""
    runs = found.runs.to_pylist()
    rebalances = found.rebalances.to_pylist()
    recorded_id = prepared.recorded[0][0]
    start = offset_ms(prepared.plan, prepared.settings)
    entries: list[dict[str, Any]] = []
    recorded: dict[str, Any] | None = None
    for run in runs:
        own = [r for r in rebalances if r["run_id"] == run["run_id"]]
        is_recorded = run["run_id"] == recorded_id
        values = {key: run.get(key) for key, _ in COMPARED if key != "stable_at_ms"}
        values["stable_at_ms"] = _stable_at(own, prepared.plan.since_ms if is_recorded else start)
        entry = {
            "run_id": run["run_id"],
            "strategy": run["strategy"],
            "protocol": run["protocol"],
            "settled": run["settled"],
            "changes": run["changes"],
            **values,
        }
        if is_recorded:
            recorded = entry
        else:
            entries.append(entry)
    assert recorded is not None, "the recorded run is in the tables"
    for entry in entries:
        entry["versus_recorded"] = {
            key: None if entry[key] is None or recorded[key] is None else round(entry[key] - recorded[key], 6)
            for key, _ in COMPARED
        }
    entries.sort(key=lambda e: (e["protocol"] or "", e["strategy"] or ""))
    return {
        "source": prepared.source,
        "plan": prepared.plan.to_json(),
        "settings": prepared.settings.to_json(),
        "recorded": recorded,
        "alternatives": entries,
        "skipped": list(prepared.skipped),
        "notes": list(prepared.plan.notes),
    }


def _label(entry: Mapping[str, Any]) -> str:
    return report.label(entry)


def _seconds(ms: Any) -> float | None:
    return ms / 1000 if ms is not None else None


def _row(entry: Mapping[str, Any]) -> list[Any]:
    return [
        _label(entry),
        entry["rebalances"],
        entry["rounds"],
        entry["moved"],
        _seconds(entry["unowned_partition_ms"]),
        _seconds(entry["duration_ms"]),
        _seconds(entry["stable_at_ms"]),
        entry["fraction_kept"],
    ]


COLUMNS: Final = [
    ("strategy / protocol", 0),
    ("rebalances", -1),
    ("rounds", -1),
    ("moved", -1),
    ("unowned partition-s", -1),
    ("in rebalances s", -1),
    ("stable again at s", -1),
    ("kept", 1),
]


def _headline(doc: Mapping[str, Any]) -> str:
    """Sentences from the numbers: the least and most stop-the-world alternative, and how the recorded run
    compares where the log can tell."""
    alternatives = doc["alternatives"]
    recorded = doc["recorded"]
    known = [e for e in alternatives if e["unowned_partition_ms"] is not None]
    parts: list[str] = []
    if known:
        best = min(known, key=lambda e: e["unowned_partition_ms"])
        worst = max(known, key=lambda e: e["unowned_partition_ms"])
        parts.append(
            f"Least stop-the-world: {_label(best)} ({best['unowned_partition_ms'] / 1000:,.1f} unowned partition-s); "
            f"most: {_label(worst)} ({worst['unowned_partition_ms'] / 1000:,.1f})."
        )
        if recorded["unowned_partition_ms"] is not None:
            parts.append(f"What happened: {recorded['unowned_partition_ms'] / 1000:,.1f} unowned partition-s.")
        else:
            parts.append(
                "The recorded log cannot say what was unowned (a server log shows no processing owners): compare "
                "with the replay under the recorded strategy and protocol."
            )
    fewest = min(alternatives, key=lambda e: (e["moved"] is None, e["moved"] or 0), default=None)
    if fewest is not None and fewest["moved"] is not None and recorded["moved"] is not None:
        parts.append(f"Fewest partitions moved: {_label(fewest)} ({fewest['moved']}; {recorded['moved']} recorded).")
    return " ".join(html.escape(p) for p in parts)


def section(doc: Mapping[str, Any]) -> str:
    """The HTML section: the plan in a sentence, the table, the differences, the notes."""
    plan = doc["plan"]
    recorded = doc["recorded"]
    rows = [[f"{_label(recorded)}: what happened", *_row(recorded)[1:]]]
    rows += [_row(e) for e in doc["alternatives"]]
    changes = ", ".join(f"{e['action']} {e['member']} at {e['at_ms'] / 1000:g} s" for e in plan["events"][:30])
    more = f" and {len(plan['events']) - 30} more" if len(plan["events"]) > 30 else ""
    start = ", ".join(plan["initial"]) or "nobody"
    topics = ", ".join(f"{t} ({n})" for t, n in plan["topics"].items())
    intro = (
        f"<p>The group {html.escape(str(plan['group_id'] or 'of the simulator log'))} from {plan['since_ms']} to "
        f"{plan['until_ms']} ms of the log ({plan['kind']} log): in the group at the start: {html.escape(start)}; "
        f"topics: {html.escape(topics)}; changes (from the window's start): {html.escape(changes or 'none')}{more}. "
        "Each alternative plays the same members, subscriptions and changes in the simulator with the settings "
        "below, until its group settles; the first row is the log's own metrics over the window.</p>"
    )
    deltas = [
        [_label(e)]
        + [e["versus_recorded"][k] for k in ("rebalances", "rounds", "moved", "duration_ms", "stable_at_ms")]
        for e in doc["alternatives"]
    ]
    delta_table = report._table(
        [("against what happened", 0), ("rebalances", -1), ("rounds", -1), ("moved", -1), ("in rebalances ms", -1),
         ("stable again ms", -1)],
        deltas,
        "each alternative minus the recorded run (negative: it would have cost less)",
    )  # fmt: skip
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in doc["notes"])
    return "\n".join(
        [
            "<h2>What each alternative would have cost, against what happened</h2>",
            intro,
            f"<p>{_headline(doc)}</p>",
            report._table(COLUMNS, rows),
            delta_table,
            f"<ul class='note'>{notes}</ul>" if notes else "",
        ]
    )


def write(found: frames.Frames, meta: Mapping[str, Any], out: Path, doc: Mapping[str, Any]) -> Path:
    """``lab.json`` and ``report.html``: the lab's report over the tables, the comparison first."""
    page = report.render(found, meta)
    page = page.replace(ANCHOR, section(doc) + "\n" + ANCHOR, 1)
    (out / report.META_FILE).write_text(json.dumps(dict(meta), indent=2) + "\n", encoding="utf-8")
    target = out / "report.html"
    target.write_text(page, encoding="utf-8")
    return target
