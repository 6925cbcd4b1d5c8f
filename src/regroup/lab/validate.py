"""``regroup lab validate``: a scenario's predictions checked against real clients.

The scenario runs in the simulator (the mean over ``seeds`` seeds, its members modelled as librdkafka
clients, since the real ones are) and for real (``lab.real_run``: ``regroup serve`` and one confluent-kafka
process per member, ``repeat`` times). Both timelines go through the simulator's summary
(``sim.summary``), so each metric means the same on both sides; over the measured window (rebalances that
start at or after ``measure_from_ms`` and end by the scenario's duration) it sums:

* ``unowned_partition_ms``: partition-milliseconds a subscribed partition had no processing owner;
* ``rebalances``: how many rebalances there were;
* ``moved``: partitions whose owner changed;
* ``revoked``: partitions revoked or lost.

A scenario of KIP-932 share members (``protocol`` ``share``) has no rebalances: its metrics are the queue's
(``lab.share_validate``: records accepted, accepted records per second per member, redeliveries, records a
crashed member held and their mean delay until delivered again, the time the initial backlog took to drain),
its real run produces the scenario's workload (``lab.share_workload``) and its real members are confluent-kafka
``ShareConsumer`` processes (``lab.real_share_member``). A metric that does not apply to a run (no crash: no
delay) is left out of its mean; a metric that applies on neither side is not reported.

With ``replay`` (``regroup lab validate --replay``), each real run's own server log
(``DIR/real-<n>/server-events.jsonl``) is also replayed (``lab.replay_validate``: the joins and leaves the server
logged, when it logged them, the topics its assignments name) in the simulator under the scenario's members, so
the same strategy and settings, modelled as the prediction is, over the same seeds; ``replay_rows`` compares the
mean of those replays with the measured mean under the same targets: what ``regroup lab replay`` computes for a
recorded log's own strategy, checked against what the real clients did.

``DIR/validation.json`` is ``{"scenario": NAME, "rows": [{"protocol", "metric", "predicted", "measured",
...}], ...}`` (``measured`` the mean over the real runs, each run's value in ``runs``), with the targets and
whether each row meets its target; ``DIR/validation.html`` shows the same; the real runs' timelines are kept
in ``DIR/real-<n>.jsonl`` (``regroup lab analyze`` reads them).
"""

from __future__ import annotations

import dataclasses
import html
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from regroup.client.app import AppModel
from regroup.lab.real_run import RealRun, check, play
from regroup.lab.replay_validate import compare as compare_replays
from regroup.lab.replay_validate import replay_real_run
from regroup.lab.share_validate import CENSORED, SHARE_METRICS, share_measure
from regroup.sim import simulate
from regroup.sim.eventlog import as_rows
from regroup.sim.scenario import MemberSpec, Scenario
from regroup.sim.summary import summarize_rows

METRICS: Final = ("unowned_partition_ms", "rebalances", "moved", "revoked")
#: how close a prediction must be: (kind, bound) — relative to the measured mean, or absolute
TARGETS: Final = {
    "unowned_partition_ms": ("relative", 0.35),
    "rebalances": ("absolute", 1.0),
    "moved": ("relative", 0.25),
    "accepted": ("relative", 0.10),
    "records_per_member_s": ("relative", 0.10),
    "redeliveries": ("relative", 0.10),
    "delayed_records": ("relative", 0.10),
    "delay_mean_ms": ("relative", 0.10),
    "drained_ms": ("relative", 0.10),
}
DEFAULT_SEEDS: Final = 20
#: how soon after its join a real run's member sends its first request: its process and its consumer (the
#: coordinator already found) were started ahead of time, so only the release and the subscribe remain
#: (3-6 ms measured against ``regroup serve``, from the member's subscribe to its request at the server)
REAL_STARTUP_MS: Final = 5
DEFAULT_REPEAT: Final = 3


def as_librdkafka(scenario: Scenario) -> Scenario:
    """The scenario as the real run plays it: every member's application modelled as a librdkafka client
    (the real clients are), without auto-commit (the real members read no records, so they have nothing to
    auto-commit; they commit in their revocation callbacks when the model says so), each process ready
    ahead of its join as the real run starts it (``REAL_STARTUP_MS``)."""
    members = tuple(_librdkafka(m) for m in scenario.members)
    return dataclasses.replace(scenario, members=members)


def _librdkafka(member: MemberSpec) -> MemberSpec:
    app = member.app
    model = AppModel(
        max_poll_records=app.max_poll_records,
        processing=app.processing,
        commit_on_revoke=app.commit_on_revoke,
        revoke_ms=app.revoke_ms,
        assign_ms=app.assign_ms,
        client="librdkafka",
        heartbeat_phase=app.heartbeat_phase,
        startup_ms=REAL_STARTUP_MS,
    )
    return dataclasses.replace(member, app=model, auto_commit=False)


def metrics_of(protocol: str) -> tuple[str, ...]:
    """The metrics validated for a scenario of ``protocol``."""
    return SHARE_METRICS if protocol == "share" else METRICS


def measure(rows: Sequence[Any], scenario: Scenario) -> dict[str, float | None]:
    """The metrics of one timeline (rows): a share group's over the whole scenario, a consumer group's over its
    measured window."""
    if scenario.has_share_members:
        return share_measure(rows, scenario)
    summary = summarize_rows(list(rows), scenario.measure_from_ms, details=False)
    window = [r for r in summary.rebalances if r.end_ms <= scenario.duration_ms]
    return {
        "unowned_partition_ms": float(sum(r.unowned_partition_ms for r in window)),
        "rebalances": float(len(window)),
        "moved": float(sum(r.moved for r in window)),
        "revoked": float(sum(r.revoked for r in window)),
    }


def predict(scenario: Scenario, seeds: int) -> list[dict[str, float | None]]:
    """The metrics of ``seeds`` simulator runs (seeds 0 .. seeds-1) of the librdkafka-modelled scenario."""
    modelled = as_librdkafka(scenario)
    out = []
    for seed in range(seeds):
        sim = simulate(modelled, seed)
        out.append(measure(sim.log.rows, scenario))
    return out


def mean(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are not None (None: there are none)."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def target_words(metric: str) -> str:
    """The metric's target in words: ``within 35 % of the measured mean``, ``within 1 of the measured mean``, or
    ``no target``."""
    target = TARGETS.get(metric)
    if target is None:
        return "no target"
    kind, bound = target
    amount = f"{bound * 100:.0f} %" if kind == "relative" else f"{bound:g}"
    return f"within {amount} of the measured mean"


def verdict_words(metric: str, verdict: bool | None) -> str:
    """A row's verdict as the command prints it: ``meets its target (within 35 % of the measured mean)``, ``misses
    its target (...)``, or ``no target`` (the metric is reported, not judged)."""
    if verdict is None:
        return "no target"
    return f"{'meets' if verdict else 'misses'} its target ({target_words(metric)})"


def within(metric: str, predicted: float | None, measured: float | None) -> bool | None:
    """Whether a prediction meets its metric's target (None: no target; False when one side has no value)."""
    target = TARGETS.get(metric)
    if target is None:
        return None
    if predicted is None or measured is None:
        return False
    kind, bound = target
    if kind == "absolute":
        return abs(predicted - measured) <= bound
    if measured == 0:
        return predicted == 0
    return abs(predicted - measured) / abs(measured) <= bound


def validate(
    scenario: Scenario,
    out: Path,
    *,
    repeat: int = DEFAULT_REPEAT,
    seeds: int = DEFAULT_SEEDS,
    say: Callable[[str], None] = lambda _: None,
    replay: bool = False,
) -> dict[str, Any]:
    """Predict, measure, compare; write ``out/validation.json`` and ``out/validation.html``; return the
    document. With ``replay``, also replay each real run's server log and compare (``replay_rows``)."""
    protocol = check(scenario)
    started = time.monotonic()
    say(f"simulating {scenario.name}: {seeds} seeds")
    predictions = predict(scenario, seeds)
    simulated_s = time.monotonic() - started
    runs: list[dict[str, float | None]] = []
    notes: list[str] = []
    real_seconds: list[float] = []
    replays: list[dict[str, float | None]] = []
    for n in range(repeat):
        say(f"real run {n + 1}/{repeat}: {scenario.duration_ms / 1000:.0f} s of scenario time")
        real: RealRun = play(scenario, seed=n, workdir=out / f"real-{n + 1}")
        (out / f"real-{n + 1}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in real.events), encoding="utf-8")
        runs.append(measure(as_rows(real.events), scenario))
        notes += [f"real run {n + 1}: {note}" for note in real.notes]
        if replay:
            say(f"replaying real run {n + 1}'s server log: {seeds} seeds")
            replayed, why = replay_real_run(scenario, out / f"real-{n + 1}", real.events, seeds)
            replays.append(replayed)
            notes += [f"real run {n + 1} replayed: {note}" for note in why]
        real_seconds.append(round(real.seconds, 1))
    rows = []
    for metric in metrics_of(protocol):
        sides = side_values(metric, predictions, scenario), side_values(metric, runs, scenario)
        predicted, measured = mean(sides[0]), mean(sides[1])
        if predicted is None or measured is None:
            if predicted is not None or measured is not None:
                only = "the simulator" if measured is None else "the real runs"
                notes.append(
                    f"{metric}: only {only} gave a value ({_fmt(predicted if measured is None else measured)})"
                )
            continue
        rows.append(
            {
                "protocol": protocol,
                "metric": metric,
                "predicted": round(predicted, 3),
                "measured": round(measured, 3),
                "runs": sides[1],
                "within_target": within(metric, predicted, measured),
            }
        )
    replay_rows = compare_replays(protocol, replays, runs, scenario) if replay else []
    reported = {row["metric"] for row in rows} | {row["metric"] for row in replay_rows}
    document = {
        "scenario": scenario.name,
        "rows": rows,
        "targets": {m: {"kind": k, "bound": b} for m, (k, b) in TARGETS.items() if m in reported},
        "seeds": seeds,
        "repeat": repeat,
        "measure_from_ms": scenario.measure_from_ms,
        "duration_ms": scenario.duration_ms,
        "model": "simulator members modelled as librdkafka clients (client: librdkafka)"
        + (", the real members confluent-kafka ShareConsumers" if protocol == "share" else ""),
        "seconds": {"simulator": round(simulated_s, 1), "real_runs": real_seconds,
                    "total": round(time.monotonic() - started, 1)},
        "notes": notes,
    }  # fmt: skip
    if replay:
        document["replay_rows"] = replay_rows
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    (out / "validation.html").write_text(page(document, scenario), encoding="utf-8")
    return document


def side_values(metric: str, found: Sequence[dict[str, float | None]], scenario: Scenario) -> list[float | None]:
    """One side's values of ``metric``; a metric censored at the scenario's end that some run reached has the
    scenario's duration where it was not reached by then."""
    values = [f[metric] for f in found]
    if metric in CENSORED and any(v is not None for v in values):
        values = [float(scenario.duration_ms) if v is None else v for v in values]
    return values


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}".rstrip("0").rstrip(".")


def _measured_what(document: dict[str, Any]) -> str:
    """What the metrics are, in a sentence or two."""
    if any(row["protocol"] == "share" for row in document["rows"]):
        return (
            f"A share group's queue from 0 to {document['duration_ms']} ms: records accepted, accepted records per "
            "second of each member's running time (mean over the members), redeliveries, records a crashed member "
            "held that were delivered again and their mean delay from the crash, and when the initial backlog was "
            "all accepted (drained_ms)."
        )
    return (
        f"Sums over the rebalances that start at or after {document['measure_from_ms']} ms and end by "
        f"{document['duration_ms']} ms. Unowned partition-time: partition-milliseconds a subscribed partition had "
        "nobody processing it (lower is better)."
    )


def _replay_table(document: dict[str, Any]) -> str:
    """With ``--replay``: each real run's server log replayed under the same strategy, against what was measured."""
    if "replay_rows" not in document:
        return ""
    lines = []
    for row in document["replay_rows"]:
        verdict = row["within_target"]
        mark = "no target" if verdict is None else ("meets the target" if verdict else "misses the target")
        style = "plain" if verdict is None else "ok" if verdict else "bad"
        each = ", ".join(f"{_fmt(r)} / {_fmt(m)}" for r, m in zip(row["runs_replayed"], row["runs"], strict=True))
        lines.append(
            f"<tr><td>{html.escape(row['protocol'])}</td><td>{html.escape(row['metric'])}</td>"
            f"<td class=n>{_fmt(row['replayed'])}</td><td class=n>{_fmt(row['measured'])}</td>"
            f"<td class=n>{each}</td><td>{html.escape(target_words(row['metric']))}</td>"
            f"<td class='{style}'>{mark}</td></tr>"
        )
    return f"""<h2>Replays of the recorded server logs</h2>
<p>Each real run's own <code>regroup serve --events</code> log replayed in the simulator under the same strategy
(<code>regroup lab replay</code>'s plan: the joins and leaves the server logged, the topics its assignments name;
the members' settings from the scenario, modelled as the prediction is, mean over {document["seeds"]} seeds),
against what that run measured.</p>
<table><tr><th>protocol</th><th>metric</th><th>replayed (mean)</th><th>measured (mean)</th>
<th>each run: replayed / measured</th><th>target</th><th>verdict</th></tr>
{"".join(lines)}</table>
"""


def page(document: dict[str, Any], scenario: Scenario) -> str:
    """A small self-contained HTML page with the comparison."""
    lines = []
    for row in document["rows"]:
        verdict = row["within_target"]
        mark = "no target" if verdict is None else ("meets the target" if verdict else "misses the target")
        target = document["targets"].get(row["metric"])
        bound = "none (reported, not judged)"
        if target is not None:
            bound = (
                f"±{target['bound'] * 100:.0f} % of the measured mean"
                if target["kind"] == "relative"
                else f"±{target['bound']:g}"
            )
        runs = ", ".join(_fmt(v) for v in row["runs"])
        style = "plain" if verdict is None else "ok" if verdict else "bad"
        lines.append(
            f"<tr><td>{html.escape(row['protocol'])}</td><td>{html.escape(row['metric'])}</td>"
            f"<td class=n>{_fmt(row['predicted'])}</td><td class=n>{_fmt(row['measured'])}</td>"
            f"<td class=n>{runs}</td><td>{bound}</td><td class='{style}'>{mark}</td></tr>"
        )
    replayed = _replay_table(document)
    real_runs = ", ".join(str(s) for s in document["seconds"]["real_runs"])
    items = "".join(f"<li>{html.escape(n)}</li>" for n in document["notes"])
    notes = f"<h2>Notes</h2><ul>{items}</ul>\n" if items else ""
    seconds = document["seconds"]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>regroup lab validate: {html.escape(document["scenario"])}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .6em}}.n{{text-align:right}}
.ok{{color:#070}}.bad{{color:#b00}}.plain{{color:#555}}</style></head><body>
<h1>Predictions checked against real clients: {html.escape(document["scenario"])}</h1>
<p>{html.escape(scenario.description)}</p>
<p>Predicted: the simulator, mean over {document["seeds"]} seeds, its members modelled as librdkafka clients.
Measured: <code>regroup serve</code> with one confluent-kafka process per member, mean over
{document["repeat"]} run(s). {_measured_what(document)}</p>
<p>A prediction meets its target when it is that close to the measured mean: a relative target (a percentage)
is a share of the measured mean, an absolute one a difference from it. A metric without a target is reported,
not judged.</p>
<table><tr><th>protocol</th><th>metric</th><th>predicted</th><th>measured (mean)</th><th>each real run</th>
<th>target</th><th>verdict</th></tr>
{"".join(lines)}</table>
{replayed}{notes}<p>Wall time: simulator {seconds["simulator"]} s, real runs {real_runs} s,
total {seconds["total"]} s.</p>
</body></html>
"""
