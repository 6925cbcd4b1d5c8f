"""The self-contained HTML report: what was run, how to read it, the model and assumptions (every grid setting
with its value, read from the sweep's own settings, so new model fields appear without a change here), the
results per churn pattern (joining, leaving, crashing, rolling restart, ...) per strategy and protocol, the same
over all patterns per membership change, payload bytes, balance, what did not settle, and sanity checks
against KIP-54's worked examples and the JoinGroup payload arithmetic.

Spark aggregates the tables; only the small aggregates reach the driver. Plots come from ``plots``; a plot
without data is left out with a sentence saying so. Tables keep to about eight columns so that the report
reads on a 1,000-pixel-wide screen.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from regroup.lab import checks, frames, plots, share_section
from regroup.lab.jobs import Tables

META_FILE = "lab.json"
PROTOCOL_NAMES: Final = {
    "eager": "classic eager",
    "cooperative": "classic cooperative",
    "consumer": "KIP-848",
    "share": "share group (KIP-932)",
}
#: protocols without JoinGroup: their "JoinGroup rounds" are "–" (not applicable)
NO_JOIN_GROUP: Final = frozenset({"consumer", "share"})
#: under a table with share-group rows: why their rebalance columns are "–"
SHARE_NOTE: Final = (
    "A share group (KIP-932) has no rebalances and no partition owners: its columns here are “–”; what a "
    "change costs it is under “Moving a workload to a share group”."
)
#: churn patterns in report order: (name, heading, what one event is)
PATTERNS: Final = (
    ("join", "Members joining (scale-out)", "member joining"),
    ("leave", "Members leaving cleanly (scale-in)", "member leaving"),
    ("crash", "Members crashing (noticed when their session times out)", "member crashing"),
    ("rolling", "Rolling restart (each member stopped and started again)", "member restarted"),
    ("mixed", "Mixed membership changes", "change"),
    ("none", "No churn (the baseline)", "run"),
)
#: what each grid setting means, for the model section (a setting not listed here is shown by its name)
SETTING_WORDS: Final = {
    "warmup_ms": "time for the group to form before the first churn event (the formation phase: not measured)",
    "interval_ms": "time between churn events; a rolling restart starts the stopped member half of it later",
    "tail_ms": "time after the last churn event before a run may end; it then goes on until the group settles",
    "session_timeout_ms": "classic members' session.timeout.ms: how long a crashed member goes unnoticed",
    "heartbeat_interval_ms": "classic members' heartbeat.interval.ms: how soon they learn of a rebalance",
    "rebalance_timeout_ms": "max.poll.interval.ms (the rebalance timeout)",
    "consumer_session_timeout_ms": "KIP-848: the broker's group.consumer.session.timeout.ms",
    "consumer_heartbeat_interval_ms": "KIP-848: group.consumer.heartbeat.interval.ms: a partition released by "
    "one member waits for the next member's heartbeat",
    "consumer_assignment_interval_ms": "KIP-1263: group.consumer.assignment.interval.ms: the least time between two "
    "target computations of a group (0: one per epoch bump)",
    "auto_commit": "members commit offsets automatically",
    "latency_ms": "one-way network latency between a member and the coordinator",
    "jitter_ms": "random extra latency, 0 to this (what makes seeds differ)",
    "metadata_bytes": "if set, every member's JoinGroup metadata counts as this many bytes",
    "commit_on_revoke": "members commit in their revocation callback (the application model: docs/simulator.md; "
    "its other fields, unless listed here, have their defaults)",
}


# ------------------------------------------------------------------------------------------------ loading
def load(out: Path) -> tuple[frames.Frames, dict[str, Any]]:
    """The tables and metadata a sweep or analyze left in ``out``, read without Spark (tables written by an
    older version get the columns they lack as nulls)."""
    found = frames.read(out)
    try:
        meta = json.loads((out / META_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        meta = {}
    return found, meta


def _frames(t: frames.Frames | Tables) -> frames.Frames:
    return t if isinstance(t, frames.Frames) else frames.from_spark(t)


# -------------------------------------------------------------------------------------------- aggregates
def label(row: Mapping[str, Any]) -> str:
    protocol = row["protocol"]
    return f"{row['strategy'] or 'strategy unknown'} / {PROTOCOL_NAMES.get(protocol, protocol or 'protocol unknown')}"


def aggregates(t: frames.Frames | Tables) -> dict[str, list[dict[str, Any]]]:
    """The report's small aggregates (``frames.aggregates``), of tables read from Parquet or of Spark's."""
    return frames.aggregates(_frames(t))


# ------------------------------------------------------------------------------------------- formatting
def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        size = abs(value)
        digits = 0 if size >= 100 else 1 if size >= 10 else 2
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else html.escape(str(value))


def _ratio(n: Any, d: Any, scale: float = 1.0) -> float | None:
    """n / d / scale, or None when n is unknown or d is zero or unknown."""
    return n / d / scale if n is not None and d else None


#: a table column: (header, direction: -1 lower is better, 1 higher is better, 0 neither)
Column = tuple[str, int]


def _table(columns: Sequence[Column], rows: Sequence[Sequence[Any]], note: str = "") -> str:
    """An HTML table; in each column with a direction the best value is bold."""
    best: dict[int, Any] = {}
    for i, (_, direction) in enumerate(columns):
        values = [r[i] for r in rows if isinstance(r[i], int | float) and not isinstance(r[i], bool)]
        if direction and len(values) > 1 and len(set(values)) > 1:
            best[i] = min(values) if direction < 0 else max(values)
    arrows = {-1: " ↓", 1: " ↑", 0: ""}
    heads = "".join(f"<th>{html.escape(h)}{arrows[d]}</th>" for h, d in columns)
    head = f"<thead><tr>{heads}</tr></thead>" if any(h for h, _ in columns) else ""  # no row of empty headers
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            text = _fmt(value)
            cells.append(f"<td><b>{text}</b></td>" if i in best and value == best[i] else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"<caption>{note}</caption>" if note else ""
    rows_html = "".join(body)
    return f"<div class='scroll'><table>{caption}{head}<tbody>{rows_html}</tbody></table></div>"


def _figure(plot: plots.Plot | None, caption: str, missing: str) -> str:
    """The figure, or (no data) a sentence saying which figure is left out and why."""
    if plot is None:
        return f"<p class='note'>No figure: {html.escape(missing)}.</p>"
    return (
        f'<figure><img alt="{html.escape(plot.title)}" src="data:image/png;base64,{plot.png}">'
        f"<figcaption>{caption}</figcaption></figure>"
    )


# ---------------------------------------------------------------------------------------------- sections
def _facts(meta: Mapping[str, Any]) -> str:
    skip = {"title", "settings", "axes", "measure_from_ms"}
    rows = []
    for key, value in meta.items():
        if key in skip:
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        rows.append((key.replace("_", " "), shown if shown != "" else "none"))
    return _table([("", 0), ("", 0)], rows)


_READING = """<ul>
<li><b>Unowned partition-seconds</b> (the stop-the-world cost): for how long partitions had no consumer processing
them, added up over partitions. Ten partitions paused for 2 s count 20. Lower is better.</li>
<li><b>Per churn event</b>: a pattern's costs are divided by its events — one member joining, leaving, crashing,
or one member stopped and started again in a rolling restart. Over all patterns together they are divided by
membership changes instead (a restart is two: a leave and a join).</li>
<li><b>Rebalances</b>: how often the group reassigned its partitions; cooperative rebalancing takes two rounds
where eager takes one. <b>Moved</b>: partitions that ended with another owner. <b>Kept</b>: of the partitions
each member owned before, the share it still owns after.</li>
<li><b>Protocols</b>: <i>classic eager</i> and <i>classic cooperative</i> are Kafka's JoinGroup/SyncGroup
protocol, where every member gives up all its partitions at a rebalance (eager) or only those that move
(cooperative, KIP-429); <i>KIP-848</i> is the consumer group protocol (<code>group.protocol=consumer</code>),
where the broker assigns and members hand partitions over one by one at their heartbeats.</li>
<li>↓ lower is better, ↑ higher is better; the best value of each such column is in bold. "–": the metric does
not apply (e.g. JoinGroup bytes in a KIP-848 group) or the data cannot give it (e.g. who processed what, in a
server's log).</li>
</ul>"""


def _model(meta: Mapping[str, Any]) -> str:
    parts = ["<h2>Model and assumptions</h2>"]
    settings = meta.get("settings")
    axes = meta.get("axes")
    if isinstance(axes, Mapping):
        described = "; ".join(f"{k.replace('_', ' ')}: {_plain(v)}" for k, v in axes.items())
        parts.append(f"<p>The grid: {html.escape(described)}. Every combination is one simulated run.</p>")
    if isinstance(settings, Mapping):
        parts.append(
            "<p>Every run of the grid shares these settings (the simulator's members are regroup's own Kafka "
            "clients, driven on a virtual clock against regroup's coordinator; docs/simulator.md says what they "
            "do):</p>"
        )
        rows = [(name, _plain(value), SETTING_WORDS.get(name, "")) for name, value in _settings_shown(settings).items()]
        parts.append(_table([("setting", 0), ("value", 0), ("meaning", 0)], rows))
        warmup = settings.get("warmup_ms")
        interval = settings.get("interval_ms")
        if warmup is not None and interval is not None:
            parts.append(
                f"<p>Churn event k happens at {_plain(warmup)} + k × {_plain(interval)} ms. A run goes on after "
                "its last event until the group has settled (every member in the current generation, every "
                "partition owned once), at most a session timeout and a rebalance timeout longer; a run cut off "
                "before that is listed below.</p>"
            )
    else:
        measured = meta.get("measure_from_ms")
        parts.append(
            "<p>Event logs: the timings and behaviour are those of whatever wrote them (the simulator's scenario, "
            "or real clients against <code>regroup serve</code>). "
            + (f"Rebalances starting before {measured} ms are the formation phase, not measured. " if measured else "")
            + "A server's log does not show which consumer processed what, so the ownership costs are – there.</p>"
        )
    return "\n".join(parts)


def _settings_shown(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings as the model section lists them: the members' application model (``app_json``, canonical JSON
    of what the grid set) as one row per field, over the lab's default of no commit in the revocation callback."""
    shown = {name: value for name, value in settings.items() if name != "app_json"}
    if "app_json" in settings:
        app = json.loads(settings["app_json"]) if settings["app_json"] else {}
        shown |= {"commit_on_revoke": False, **app}
    return shown


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items())
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "not set"
    return str(value)


_PATTERN_COLUMNS: Final[list[Column]] = [
    ("strategy / protocol", 0),
    ("runs", 0),
    ("rebalances per event", -1),
    ("unowned partition-s per event", -1),
    ("time in rebalances per event (s)", -1),
    ("partitions moved per event", -1),
    ("kept (%)", 1),
    ("protocol bytes per event", -1),
]


def _protocol_bytes(p: Mapping[str, Any]) -> Any:
    """What the membership protocol carried: JoinGroup (leader-only, as Kafka) + SyncGroup, or KIP-848's
    heartbeat fields."""
    if p["heartbeat_bytes"] is not None:
        return p["heartbeat_bytes"]
    if p["join_bytes_leader"] is None or p["sync_bytes"] is None:
        return None
    return p["join_bytes_leader"] + p["sync_bytes"]


def _pattern_rows(rows: Sequence[Mapping[str, Any]], per: Callable[[Mapping[str, Any]], Any]) -> list[list[Any]]:
    out = []
    for p in rows:
        d = per(p)
        kept = p["fraction_kept"]
        out.append(
            [
                label(p),
                p["runs"],
                _ratio(p["rebalances"], d),
                _ratio(p["unowned_partition_ms"], d, scale=1000),
                _ratio(p["duration_ms"], d, scale=1000),
                _ratio(p["moved"], d),
                kept * 100 if kept is not None else None,
                _ratio(_protocol_bytes(p), d),
            ]
        )
    return out


def _headline(rows: Sequence[Sequence[Any]], word: str, paused: Mapping[str, float | None]) -> str:
    """Which pair did best and worst on the stop-the-world cost, in words, and why: how many partitions each
    paused per event (revoked) and for how long each on average (``paused``: label -> revoked per event)."""
    known = [(r[3], r[0]) for r in rows if r[3] is not None]
    if len(known) < 2:
        return ""
    low, high = min(known), max(known)
    if low[0] == high[0]:
        return f"<p>Every strategy and protocol paused the same: {_fmt(low[0])} partition-s per {word}.</p>"
    tied = [name for value, name in known if value == low[0]]
    best = " = ".join(tied)
    text = (
        f"<p>Least stop-the-world per {word}: <b>{html.escape(best)}</b> ({_fmt(low[0])} partition-s); most: "
        f"{html.escape(high[1])} ({_fmt(high[0])} partition-s)."
    )
    why = []
    for value, name in (low, high):
        count = paused.get(name)
        if count:
            why.append(f"{html.escape(name)} paused {_fmt(count)} partitions per {word}, {_fmt(value / count)} s each")
    if len(why) == 2:
        text += f" Why: {why[0]}; {why[1]} (on average)."
    return text + "</p>"


def _per_pattern(agg: Mapping[str, list[dict[str, Any]]]) -> str:
    parts = ["<h2>Results per churn pattern</h2>"]
    by_churn: dict[str, list[dict[str, Any]]] = {}
    for p in agg["patterns"]:
        by_churn.setdefault(p["churn"], []).append(p)
    known = {name for name, _, _ in PATTERNS}
    order = [*PATTERNS, *((c, f"Churn pattern {c}", "event") for c in sorted(by_churn) if c not in known)]
    for churn, heading, word in order:
        rows = by_churn.get(churn)
        if not rows:
            continue
        parts.append(f"<h3>{html.escape(heading)}</h3>")
        if churn == "none":
            parts.append("<p>Costs after the warm-up, per run: without membership changes there should be none.</p>")
            table = _pattern_rows(rows, lambda p: p["runs"])
            columns = [(h.replace("per event", "per run"), d) for h, d in _PATTERN_COLUMNS]
        else:
            table = _pattern_rows(rows, lambda p: p["events"])
            columns = [(h.replace("per event", f"per {word}"), d) for h, d in _PATTERN_COLUMNS]
            paused = {label(p): _ratio(p["revoked"], p["events"]) for p in rows}
            parts.append(_headline(table, word, paused))
        table.sort(key=lambda r: (r[3] is None, r[3] if r[3] is not None else 0, r[0]))
        note = SHARE_NOTE if any(p["protocol"] == "share" for p in rows) else ""
        parts.append(_table(columns, table, note))
    parts.append(_pattern_figures(agg))
    return "\n".join(parts)


def _panels(agg: Mapping[str, list[dict[str, Any]]], key: str, scale: float = 1.0) -> dict[str, plots.Series]:
    """Per churn pattern: per pair, the metric per event against group size."""
    words = {name: (heading, word) for name, heading, word in PATTERNS}
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in agg["sizes"]:
        if r["members"] is None or not r["events"] or r[key] is None:
            continue
        heading, _ = words.get(r["churn"], (f"Churn pattern {r['churn']}", "event"))
        out.setdefault(heading, {}).setdefault(label(r), []).append((float(r["members"]), r[key] / r["events"] / scale))
    return {name: out[name] for name in sorted(out, key=_pattern_order)}


def _pattern_order(heading: str) -> int:
    for i, (_, title, _) in enumerate(PATTERNS):
        if title == heading:
            return i
    return len(PATTERNS)


def _pattern_figures(agg: Mapping[str, list[dict[str, Any]]]) -> str:
    x = "group size (members when the group formed)"
    no_runs = "no run had churn events and a known group size"
    figures = [
        (
            plots.panels(
                "Stop-the-world cost per churn event",
                _panels(agg, "unowned_partition_ms", 1000),
                x,
                "unowned partition-s per event",
            ),
            "Partition-seconds without an owner per churn event, by group size; lower is better. Series with "
            "identical values are drawn once, their names joined by “=”.",
            "the stop-the-world cost per churn event: no run with churn events shows which consumer processed "
            "what (a server's log does not)"
            if agg["sizes"]
            else f"the stop-the-world cost per churn event: {no_runs}",
        ),
        (
            plots.panels("Partitions moved per churn event", _panels(agg, "moved"), x, "partitions moved per event"),
            "Partitions that ended with another owner, per churn event; lower is better (fewer caches and states "
            "to rebuild).",
            f"partitions moved per churn event: {no_runs}",
        ),
        (
            plots.panels(
                "Time in rebalances per churn event", _panels(agg, "duration_ms", 1000), x, "seconds per event"
            ),
            "Seconds from the start of each rebalance to the moment every member had applied its assignment, per "
            "churn event; lower is better.",
            f"time in rebalances per churn event: {no_runs}",
        ),
    ]
    return "\n".join(_figure(plot, caption, missing) for plot, caption, missing in figures)


_PAIR_COLUMNS: Final[list[Column]] = [
    ("strategy / protocol", 0),
    ("runs", 0),
    ("changes", 0),
    ("rebalances per change", -1),
    ("JoinGroup rounds per change", -1),
    ("unowned partition-s per change", -1),
    ("partitions revoked per change", -1),
    ("violations", -1),
]
_QUALITY_COLUMNS: Final[list[Column]] = [
    ("strategy / protocol", 0),
    ("kept (%)", 1),
    ("final max−min partitions", -1),
    ("final KIP-54 score", -1),
    ("JoinGroup bytes per change (Kafka: leader only)", -1),
    ("JoinGroup bytes per change (if everyone got all)", -1),
    ("SyncGroup bytes per change", -1),
    ("KIP-848 heartbeat bytes per change", -1),
]


def _over_all(agg: Mapping[str, list[dict[str, Any]]]) -> str:
    parts = [
        "<h2>All patterns together, per membership change</h2>",
        "<p>Totals over the measured part of every run with membership changes, divided by those changes (joins, "
        "leaves, crashes, restarts). Kept, balance and the KIP-54 score are means over runs (the score: the sum, "
        "over pairs of members, of the difference in their partition counts; 0 is perfectly even).</p>",
    ]
    costs, quality = [], []
    for p in agg["pairs"]:
        ch = p["changes"]
        costs.append(
            [
                label(p),
                p["runs"],
                ch,
                _ratio(p["rebalances"], ch),
                None if p["protocol"] in NO_JOIN_GROUP else _ratio(p["rounds"], ch),
                _ratio(p["unowned_partition_ms"], ch, scale=1000),
                _ratio(p["revoked"], ch),
                p["violations"],
            ]
        )
        kept = p["fraction_kept"]
        quality.append(
            [
                label(p),
                kept * 100 if kept is not None else None,
                p["balance_spread"],
                p["balance_score"],
                _ratio(p["join_bytes_leader"], ch),
                _ratio(p["join_bytes_all"], ch),
                _ratio(p["sync_bytes"], ch),
                _ratio(p["heartbeat_bytes"], ch),
            ]
        )
    parts.append(_table(_PAIR_COLUMNS, costs))
    parts.append(_table(_QUALITY_COLUMNS, quality))
    payload = agg["payload"]
    bytes_series = {
        "classic: JoinGroup (leader alone gets the metadata, as in Kafka) + SyncGroup": "leader_sync",
        "classic, if every member got everyone's metadata: JoinGroup + SyncGroup": "everyone_sync",
        "KIP-848: heartbeat subscriptions, acknowledgements, assignments": "kip848",
    }
    series = {
        name: [(float(r["group_size"]), float(r[key])) for r in payload if r[key] is not None]
        for name, key in bytes_series.items()
    }
    parts.append(
        _figure(
            plots.panels(
                "Membership-protocol bytes per rebalance",
                {"by group size (log scale)": series},
                "group size (members in the generation)",
                "bytes per rebalance",
                log_y=True,
                columns=1,
            ),
            "What the group membership protocol carried per rebalance, by group size; lower is better. In the "
            "classic protocol only the leader receives every member's metadata; the second line shows what it "
            "would cost if every member received it.",
            "membership-protocol bytes per rebalance: no rebalance had payload figures (a server's log carries no "
            "subscriptions)",
        )
    )
    scores = {label(p): float(p["balance_score"]) for p in agg["pairs"] if p["balance_score"] is not None}
    parts.append(
        _figure(
            plots.bars(
                "Final balance: KIP-54 score (mean over runs)", "score (0 = perfectly even; lower is better)", scores
            ),
            "How evenly the last assignment of each run spread partitions over members; lower is better.",
            "final balance: no run had a final assignment",
        )
    )
    return "\n".join(parts)


def _caveats(agg: Mapping[str, list[dict[str, Any]]]) -> str:
    parts: list[str] = []
    count = agg["unsettled_count"][0]["n"] if agg["unsettled_count"] else 0
    if count:
        listed = ", ".join(
            f"{html.escape(r['run_id'])} ({_fmt((r['cut_off_unowned_partition_ms'] or 0) / 1000)} partition-s after "
            "its last rebalance)"
            for r in agg["unsettled"]
        )
        more = f" and {count - len(agg['unsettled'])} more" if count > len(agg["unsettled"]) else ""
        parts.append(
            f"<p class='note'><b>{count} run(s) ended before the group settled</b> (a rebalance still in progress or "
            "partitions without an owner at the end): the unowned time after their last rebalance is in their "
            f"totals, but what came after the end is not: {listed}{more}.</p>"
        )
    if agg["quiet"]:
        listed = ", ".join(f"{html.escape(r['run_id'])} ({r['rebalances']})" for r in agg["quiet"])
        parts.append(
            "<p class='note'>Runs with rebalances but no membership change in the measured part (their rebalances "
            f"are not divided by anything above): {listed}.</p>"
        )
    return "<h2>What did not fit</h2>\n" + "\n".join(parts) if parts else ""


def _sanity() -> str:
    parts = [
        "<h2>Sanity checks</h2>",
        "<p>The lab's code reproduces published figures: KIP-54's worked examples (partitions that keep their "
        "owner through each example's change, round-robin against sticky) and the arithmetic of JoinGroup "
        "payloads (100 members with 100 KB of metadata each).</p>",
        _table(
            [("check", 0), ("expected", 0), ("measured", 0), ("result", 0)],
            [(c.name, c.expected, c.measured, "ok" if c.ok else "FAILED") for c in checks.run_all()],
        ),
        _table(
            [("KIP-54 example", 0), ("change", 0), ("round-robin keeps", 1), ("sticky keeps", 1)],
            [(r.example, r.change, r.roundrobin, r.sticky) for r in checks.kip54_rows()],
        ),
    ]
    return "\n".join(parts)


def render(t: frames.Frames | Tables, meta: Mapping[str, Any]) -> str:
    agg = aggregates(t)
    parts: list[str] = [f"<h1>Rebalance lab: {html.escape(str(meta.get('title', 'report')))}</h1>"]
    parts.append(_facts(meta))
    parts.append("<h2>How to read this report</h2>" + _READING)
    parts.append(_model(meta))
    parts.append(_per_pattern(agg))
    parts.append(_over_all(agg))
    parts.append(share_section.render(agg.get("share", []), _table, label))
    parts.append(_caveats(agg))
    parts.append(_sanity())
    body = "\n".join(p for p in parts if p)
    head = f"<meta charset='utf-8'><title>regroup rebalance lab</title><style>{_CSS}</style>"
    return f"<!DOCTYPE html>\n<html><head>{head}</head><body>\n{body}\n</body></html>\n"


_CSS = (
    "body{font-family:sans-serif;margin:1.5em auto;max-width:980px;padding:0 1em;line-height:1.4}"
    ".scroll{overflow-x:auto}table{border-collapse:collapse;margin:0.8em 0;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}"
    "th{background:#eef;font-weight:normal;max-width:9em}td:first-child,th:first-child{text-align:left}"
    "caption{text-align:left;font-size:13px;color:#555}.note{color:#633}"
    "img{display:block;margin:1em 0;max-width:100%;height:auto}figcaption{font-size:13px;color:#444}"
)


def write(t: frames.Frames | Tables, meta: Mapping[str, Any], out: Path) -> Path:
    (out / META_FILE).write_text(json.dumps(dict(meta), indent=2) + "\n", encoding="utf-8")
    target = out / "report.html"
    target.write_text(render(t, meta), encoding="utf-8")
    return target
