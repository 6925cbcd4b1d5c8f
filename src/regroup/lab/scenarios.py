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
import math
from dataclasses import replace
from typing import Any, Final

from regroup.lab import protocols
from regroup.lab.grid import RunSpec, Settings
from regroup.sim.scenario import Scenario, parse

#: share runs: the share of the members' processing capacity the producers fill when the grid gives no rate
SHARE_LOAD: Final = 0.5
#: the application model's default per-record processing time, and the least a share rate is derived from
DEFAULT_PROCESSING_MS: Final = 1.0
MIN_PROCESSING_MS: Final = 0.1
#: how long a share run goes on after production stopped (and a crashed member's session expired)
SHARE_DRAIN_MS: Final = 5_000
#: the application-model fields a share member uses (it has no callbacks or commits)
SHARE_APP_FIELDS: Final = frozenset({"max_poll_records", "processing_ms", "heartbeat_phase", "startup_ms"})


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


def share_limit_ms(run: RunSpec) -> int:
    """Where a share run stops: production stops at ``duration_ms``; records a crashed member was the only one
    assigned wait until its share session times out (the KIP-848 session setting), then ``SHARE_DRAIN_MS`` to
    deliver what is left."""
    s = run.settings
    crashed = s.consumer_session_timeout_ms if run.churn == "crash" else 0
    return duration_ms(run) + crashed + SHARE_DRAIN_MS


def document(run: RunSpec) -> dict[str, Any]:
    """The scenario as the simulator's JSON document."""
    s = run.settings
    settings = protocols.member_settings(run.protocol, run.strategy)
    if settings is None:
        raise ValueError(f"{run.strategy} cannot run under {run.protocol}")
    total = run.members + (run.churn_events if run.churn == "join" else 0)
    members = [{"id": f"c{i}", "topics": subscription(run, i)} for i in range(total)]
    joins = [{"at_ms": 0, "action": "join", "member": f"c{i}"} for i in range(run.members)]
    if run.protocol == protocols.SHARE:
        return share_document(run, members, joins + churn_events(run))
    return {
        "name": run.run_id,
        "duration_ms": duration_ms(run),
        "measure_from_ms": s.warmup_ms,
        "network": {"latency_ms": s.latency_ms, "jitter_ms": s.jitter_ms},
        "coordinator": {
            "consumer_group_session_timeout_ms": s.consumer_session_timeout_ms,
            "consumer_group_heartbeat_interval_ms": s.consumer_heartbeat_interval_ms,
            **interval_setting(s),
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


def mean_processing_ms(run: RunSpec) -> float:
    """The mean per-record processing time of the grid's application model (its ``processing_ms``)."""
    value = run.settings.app_fields().get("processing_ms", DEFAULT_PROCESSING_MS)
    if not isinstance(value, dict):
        return float(value)
    kind = value["distribution"]
    if kind == "fixed":
        return float(value["value"])
    if kind == "uniform":
        return (float(value["min"]) + float(value["max"])) / 2
    if kind == "exponential":
        return float(value["mean"])
    return float(value["median"]) * math.exp(float(value["sigma"]) ** 2 / 2)  # lognormal


def share_rate_per_s(run: RunSpec) -> int:
    """Records produced per second per partition in a share run: ``settings.share_rate_per_s``, or half of what
    the group's members can process (``members`` x 1000 / mean processing ms per record) spread over every
    partition, rounded up (at least 1)."""
    if run.settings.share_rate_per_s is not None:
        return run.settings.share_rate_per_s
    per_member = 1000 / max(mean_processing_ms(run), MIN_PROCESSING_MS)
    return max(1, math.ceil(SHARE_LOAD * run.members * per_member / (run.topics * run.partitions)))


def share_document(run: RunSpec, members: list[dict[str, Any]], events: list[dict[str, Any]]) -> dict[str, Any]:
    """A share run's scenario: the same members, topics and churn as a KIP-848 run of the same workload, the
    members KIP-932 share consumers with the grid's application model, the share group's heartbeat and session
    at the KIP-848 settings (both are the broker's), and a log of ``share_backlog`` records per partition plus
    ``share_rate_per_s`` per second until the scenario's end (production stops there, so the run can drain)."""
    s = run.settings
    app = {k: v for k, v in s.app_fields().items() if k in SHARE_APP_FIELDS}
    return {
        "name": run.run_id,
        "duration_ms": duration_ms(run),
        "measure_from_ms": s.warmup_ms,
        "network": {"latency_ms": s.latency_ms, "jitter_ms": s.jitter_ms},
        "coordinator": {
            "share_group_session_timeout_ms": s.consumer_session_timeout_ms,
            "share_group_heartbeat_interval_ms": s.consumer_heartbeat_interval_ms,
        },
        "topics": {t: run.partitions for t in topic_names(run)},
        "share": {
            "backlog": s.share_backlog,
            "rate_per_s": share_rate_per_s(run),
            "produce_until_ms": duration_ms(run),
        },
        "member_defaults": {"protocol": protocols.SHARE, **app},
        "members": members,
        "events": events,
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


def interval_setting(s: Settings) -> dict[str, int]:
    """The coordinator's assignment interval when the grid sets one (none: the scenario is as before)."""
    interval = s.consumer_assignment_interval_ms
    return {"consumer_group_assignment_interval_ms": interval} if interval else {}
