"""A real run's server log replayed under its own strategy, for ``regroup lab validate --replay``: does a replay of
what ``regroup serve --events`` recorded (``lab.replay``) reproduce what the real clients measured?

The real run's server log (``DIR/real-<n>/server-events.jsonl``) is planned over the scenario's window: from the
real run's time 0 (found by matching the first ``group_state`` row of the group in the server's log and in the
real run's timeline) for the scenario's duration. The replayed scenario is the validated scenario with the
plan's topics, subscriptions and changes in place of its own (members keep their settings, strategies and
application model: a server log records none of them), each change moved back by its lead
(``replay_scenario.leads``); it is simulated as the prediction is (librdkafka-modelled members, the same
seeds), and its metrics are the mean over the seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from regroup.lab.errors import LabInputError
from regroup.lab.replay import ReplayPlan, plan_replay, read_rows
from regroup.lab.replay_scenario import leads, timed_events
from regroup.sim.scenario import Scenario, ScenarioEvent

Metrics = dict[str, float | None]


def time_zero(server_rows: Sequence[dict[str, Any]], timeline: Sequence[dict[str, Any]], group_id: str) -> int | None:
    """The server log's time (ms) of the real run's time 0: its first ``group_state`` row of the group is the
    timeline's first ``group_state`` row (the timeline's times are the server's minus time 0)."""
    first_server = next(
        (
            r["t"]
            for r in server_rows
            if r["type"] == "group_state" and f"group={group_id}" in (r["detail"] or "").split()
        ),
        None,
    )
    first_timeline = next((r["t"] for r in timeline if r["type"] == "group_state"), None)
    if first_server is None or first_timeline is None:
        return None
    return int(first_server - first_timeline)


def replayed_scenario(scenario: Scenario, plan: ReplayPlan) -> tuple[Scenario, list[str]]:
    """The scenario with the plan's topics, subscriptions and timed changes; notes on what differs."""
    notes: list[str] = []
    known = {m.name for m in scenario.members}
    unknown = [name for name, _ in plan.members if name not in known]
    if unknown:
        raise LabInputError(f"members {', '.join(unknown)} are not the scenario's")
    first = scenario.members[0]
    config = scenario.coordinator_config()
    consumer = first.protocol == "consumer"
    session = config.consumer_group_session_timeout_ms if consumer else first.session_timeout_ms
    heartbeat = config.consumer_group_heartbeat_interval_ms if consumer else first.heartbeat_interval_ms
    app = first.app
    lead = leads(scenario.network.latency_ms, app.commit_on_revoke, app.revoke_ms, session, heartbeat, plan.protocol)
    topics = dict(plan.topics)
    if topics != scenario.topics:
        notes.append(f"the log shows topics {topics}, the scenario has {scenario.topics}")
    subscriptions = dict(plan.members)
    members = tuple(
        dataclasses.replace(m, topics=subscriptions.get(m.name, tuple(t for t in m.topics if t in topics)))
        for m in scenario.members
    )
    events = tuple(
        ScenarioEvent(at_ms=e["at_ms"], action=e["action"], member=e["member"]) for e in timed_events(plan, 0, lead)
    )
    expected = _strategy(scenario)
    if plan.strategy is not None and expected is not None and plan.strategy != expected:
        notes.append(f"the log's strategy is {plan.strategy}, the scenario's {expected}")
    return dataclasses.replace(scenario, topics=topics, members=members, events=events), notes


def _strategy(scenario: Scenario) -> str | None:
    """The strategy the scenario's real members use (the real run's choice for librdkafka)."""
    from regroup.assignors.registry import server_side_name
    from regroup.lab.real_run import strategy, style

    member = scenario.members[0]
    if style(member) == "consumer":
        assignor = member.assignor or scenario.coordinator_config().consumer_group_assignors[0]
        return server_side_name(assignor) or assignor
    return strategy(member)


def replay_real_run(
    scenario: Scenario, workdir: Path, timeline: Sequence[dict[str, Any]], seeds: int
) -> tuple[Metrics, list[str]]:
    """The metrics of the replays of one real run's server log (mean over ``seeds``), and notes; every metric
    None (with a note saying why) when the log cannot be replayed."""
    from regroup.lab.validate import mean, metrics_of, predict

    empty: Metrics = dict.fromkeys(metrics_of("consumer"))
    if scenario.has_share_members:
        return empty, ["share groups are not replayed (a share group has no rebalances)"]
    try:
        rows = read_rows(str(workdir / "server-events.jsonl"))
        zero = time_zero(rows, timeline, scenario.group_id)
        if zero is None:
            return empty, ["the server log has no state of the group"]
        plan = plan_replay(rows, scenario.group_id, zero, zero + scenario.duration_ms, source="server-events.jsonl")
        replayed, notes = replayed_scenario(scenario, plan)
    except LabInputError as exc:
        return empty, [f"cannot replay: {exc}"]
    found = predict(replayed, seeds)
    return {metric: mean([f[metric] for f in found]) for metric in empty}, notes


def compare(
    protocol: str, replays: Sequence[Metrics], runs: Sequence[Metrics], scenario: Scenario
) -> list[dict[str, Any]]:
    """One row per metric: the mean over the real runs of their replays against the measured mean, judged by
    validation's targets."""
    from regroup.lab.validate import mean, metrics_of, side_values, within

    rows: list[dict[str, Any]] = []
    for metric in metrics_of(protocol):
        replayed_values = [r.get(metric) for r in replays]
        replayed, measured = mean(replayed_values), mean(side_values(metric, runs, scenario))
        if replayed is None or measured is None:
            continue
        rows.append(
            {
                "protocol": protocol,
                "metric": metric,
                "replayed": round(replayed, 3),
                "measured": round(measured, 3),
                "runs_replayed": [None if v is None else round(v, 3) for v in replayed_values],
                "runs": side_values(metric, runs, scenario),
                "within_target": within(metric, replayed, measured),
            }
        )
    return rows
