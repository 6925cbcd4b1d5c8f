"""One grid run as a simulator scenario: member and topic names, subscription patterns, churn patterns and
their timing. The mapping is documented in docs/lab.md ("From a run to a scenario").

Members ``c0 .. c{n-1}`` all join at 0 ms; topics ``t0 .. t{T-1}`` have ``partitions`` partitions each.
The group forms during ``warmup_ms``; churn event k happens at ``warmup_ms + k * interval_ms``; the run
lasts at least ``tail_ms`` after the last one, and then until the group has settled (``settle_limit_ms``:
the consequences of the last change, e.g. a crash detected only when its session times out, are played out),
at most until that limit. Rebalances starting before ``warmup_ms`` are the *formation* phase.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Final

from regroup.lab import protocols
from regroup.lab.grid import RunSpec
from regroup.sim.scenario import Scenario, parse


def topic_names(run: RunSpec) -> list[str]:
    return [f"t{i}" for i in range(run.topics)]


def subscription(run: RunSpec, index: int) -> list[str]:
    """Topics member ``c{index}`` subscribes to under the run's pattern."""
    names = topic_names(run)
    if run.subscription == "one":
        return [names[index % run.topics]]
    if run.subscription == "staggered":
        return names[: index % run.topics + 1]
    return names


def churn_events(run: RunSpec) -> list[dict[str, Any]]:
    s = run.settings
    out: list[dict[str, Any]] = []
    for k in range(run.churn_events):
        at = s.warmup_ms + k * s.interval_ms
        if run.churn == "join":
            out.append({"at_ms": at, "action": "join", "member": f"c{run.members + k}"})
        elif run.churn in ("leave", "crash"):
            out.append({"at_ms": at, "action": run.churn, "member": f"c{k}"})
        elif run.churn == "rolling":
            member = f"c{k % run.members}"
            out.append({"at_ms": at, "action": "leave", "member": member})
            out.append({"at_ms": at + s.interval_ms // 2, "action": "restart", "member": member})
    return out


def duration_ms(run: RunSpec) -> int:
    s = run.settings
    return s.warmup_ms + max(run.churn_events - 1, 0) * s.interval_ms + s.tail_ms


def settle_limit_ms(run: RunSpec) -> int:
    """How long a run may go on past ``duration_ms`` for its group to settle: the last change may need a session
    timeout to be detected (a crash) and then a rebalance, which may take the rebalance timeout."""
    s = run.settings
    longest_session = max(s.session_timeout_ms, s.consumer_session_timeout_ms)
    return duration_ms(run) + longest_session + s.rebalance_timeout_ms


def document(run: RunSpec) -> dict[str, Any]:
    """The scenario as the simulator's JSON document."""
    s = run.settings
    settings = protocols.member_settings(run.protocol, run.strategy)
    if settings is None:
        raise ValueError(f"{run.strategy} cannot run under {run.protocol}")
    total = run.members + (run.churn_events if run.churn == "join" else 0)
    members = [{"id": f"c{i}", "topics": subscription(run, i)} for i in range(total)]
    joins = [{"at_ms": 0, "action": "join", "member": f"c{i}"} for i in range(run.members)]
    return {
        "name": run.run_id,
        "duration_ms": duration_ms(run),
        "measure_from_ms": s.warmup_ms,
        "network": {"latency_ms": s.latency_ms, "jitter_ms": s.jitter_ms},
        "coordinator": {
            "consumer_group_session_timeout_ms": s.consumer_session_timeout_ms,
            "consumer_group_heartbeat_interval_ms": s.consumer_heartbeat_interval_ms,
        },
        "topics": {t: run.partitions for t in topic_names(run)},
        "member_defaults": {
            **settings,
            "session_timeout_ms": s.session_timeout_ms,
            "heartbeat_interval_ms": s.heartbeat_interval_ms,
            "rebalance_timeout_ms": s.rebalance_timeout_ms,
            "auto_commit": s.auto_commit,
            **s.app_fields(),
        },
        "members": members,
        "events": joins + churn_events(run),
    }


#: scenarios parsed so far, by their run with seed 0: a run's scenario does not depend on its seed (only its
#: name does), and a sweep runs many seeds of each combination (the simulator copies what it changes)
_PARSED: Final[dict[RunSpec, Scenario]] = {}


def scenario(run: RunSpec) -> Scenario:
    key = replace(run, seed=0)
    parsed = _PARSED.get(key)
    if parsed is None:
        if len(_PARSED) >= 256:
            _PARSED.clear()
        parsed = _PARSED[key] = parse(json.dumps(document(key)), key.run_id)
    return replace(parsed, name=run.run_id)
