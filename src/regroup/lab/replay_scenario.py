"""A replay plan (``lab.replay``) under one strategy and protocol, as the simulator's scenario document.

The plan's members, their subscriptions and its topics are the scenario's; the members already in the group at
the window's start join at 0 ms and the group forms during ``settings.warmup_ms`` (rebalances that start earlier
are the formation phase, as in a sweep); every change of the window happens ``warmup_ms`` plus its time from
the window's start (no warm-up when nobody was in the group at the start: the window shows the group forming).
The members' settings (timeouts, the application model, the network) are a grid's ``settings``
(``lab.grid.Settings``): a log does not record them.

A server log's times are when the coordinator saw each change. Its member started or stopped a little earlier,
so the scenario moves each change back by what the member did in between, under the settings (``leads``): a
join by the one-way latency of its first request (a classic member: and KIP-394's member-id round trip), a
leave by the one-way latency plus the revocation callback (its commit's round trip when ``commit_on_revoke``,
and ``revoke_ms``), a crash (a session that expired) by the recorded protocol's session timeout less half a
heartbeat interval (it crashed between its last heartbeat and the next). Changes keep their order (a change is
never moved before the one logged ahead of it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from regroup.lab import protocols
from regroup.lab.grid import Settings
from regroup.lab.replay import ReplayPlan
from regroup.lab.scenarios import interval_setting

#: the ``grid`` column of a replayed run
REPLAY_GRID: Final = "replay"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayRun:
    """One alternative to simulate: a strategy and protocol over the plan, with the settings and a seed."""

    strategy: str  # regroup's name under the protocol (``protocols.strategy_name``)
    protocol: str
    seed: int = 0
    settings: Settings = field(default_factory=Settings)

    def run_id(self, plan: ReplayPlan) -> str:
        return f"{REPLAY_GRID}/{plan.group_id or 'g'}-{self.strategy}-{self.protocol}-s{self.seed}"


def offset_ms(plan: ReplayPlan, settings: Settings) -> int:
    """Where the window starts in the scenario: after the warm-up when members were already in the group."""
    return settings.warmup_ms if plan.initial else 0


@dataclass(frozen=True, slots=True)
class Leads:
    """How much earlier than a server log says a member made each kind of change (``leads``)."""

    join_ms: int
    leave_ms: int
    crash_ms: int

    def of(self, action: str) -> int:
        return self.leave_ms if action == "leave" else self.crash_ms if action == "crash" else self.join_ms


def leads(
    latency_ms: int, commit_on_revoke: bool, revoke_ms: int, session_ms: int, heartbeat_ms: int, protocol: str | None
) -> Leads:
    """A join: its first request's one-way latency, and for a classic member one more round trip (KIP-394: a new
    member's first JoinGroup is answered MEMBER_ID_REQUIRED, and it is a member only at the second). A leave: the
    one-way latency of its LeaveGroup (KIP-848: its leave heartbeat) and the revocation callback before it (the
    commit's round trip when ``commit_on_revoke``, then ``revoke_ms``). A crash: the coordinator removed the
    member a session timeout (``session_ms``) after its last heartbeat, and it crashed between that heartbeat and
    the next one it would have sent (``heartbeat_ms`` later): half a heartbeat interval after it, the middle."""
    join = latency_ms * (3 if protocol in ("eager", "cooperative") else 1)
    commit = 2 * latency_ms if commit_on_revoke else 0
    return Leads(join, latency_ms + commit + revoke_ms, session_ms - heartbeat_ms // 2)


def timed_events(plan: ReplayPlan, start_ms: int, lead: Leads) -> list[dict[str, Any]]:
    """The plan's initial joins at 0 and its changes from ``start_ms`` on, each moved back by its lead when the
    plan's times are the coordinator's; in order (a change never before the one ahead of it)."""
    out: list[dict[str, Any]] = [{"at_ms": 0, "action": "join", "member": m} for m in plan.initial]
    floor = 0
    for event in plan.events:
        back = lead.of(event.action) if plan.at_coordinator else 0
        at = max(floor, start_ms + event.at_ms - back)
        floor = at
        out.append({"at_ms": at, "action": event.action, "member": event.member})
    return out


def settings_leads(plan: ReplayPlan, settings: Settings) -> Leads:
    """``leads`` under a grid's settings (the session timeout of the recorded protocol)."""
    app = settings.app_fields()
    consumer = plan.protocol == "consumer"
    session = settings.consumer_session_timeout_ms if consumer else settings.session_timeout_ms
    heartbeat = settings.consumer_heartbeat_interval_ms if consumer else settings.heartbeat_interval_ms
    commit = bool(app.get("commit_on_revoke"))
    return leads(settings.latency_ms, commit, int(app.get("revoke_ms", 0)), session, heartbeat, plan.protocol)


def scenario_events(plan: ReplayPlan, settings: Settings) -> list[dict[str, Any]]:
    """The initial joins and the window's changes, at their scenario times under ``settings``."""
    return timed_events(plan, offset_ms(plan, settings), settings_leads(plan, settings))


def duration_ms(plan: ReplayPlan, settings: Settings) -> int:
    return offset_ms(plan, settings) + plan.duration_ms


def settle_limit_ms(plan: ReplayPlan, settings: Settings) -> int:
    """How long the replay may go on for its group to settle (as ``scenarios.settle_limit_ms``)."""
    longest = max(settings.session_timeout_ms, settings.consumer_session_timeout_ms)
    return duration_ms(plan, settings) + longest + settings.rebalance_timeout_ms


def document(plan: ReplayPlan, run: ReplayRun) -> dict[str, Any] | None:
    """The scenario document, or None when the strategy cannot run under the protocol."""
    s = run.settings
    member_fields = protocols.member_settings(run.protocol, run.strategy)
    if member_fields is None or run.protocol == protocols.SHARE:
        return None
    return {
        "name": run.run_id(plan),
        "description": f"replay of group {plan.group_id or 'g'} ({plan.kind} log) under {run.strategy}/{run.protocol}",
        "group_id": plan.group_id or "g",
        "duration_ms": duration_ms(plan, s),
        "measure_from_ms": offset_ms(plan, s),
        "network": {"latency_ms": s.latency_ms, "jitter_ms": s.jitter_ms},
        "coordinator": {
            "consumer_group_session_timeout_ms": s.consumer_session_timeout_ms,
            "consumer_group_heartbeat_interval_ms": s.consumer_heartbeat_interval_ms,
            **interval_setting(s),
        },
        "topics": dict(plan.topics),
        "member_defaults": {
            **member_fields,
            "session_timeout_ms": s.session_timeout_ms,
            "heartbeat_interval_ms": s.heartbeat_interval_ms,
            "rebalance_timeout_ms": s.rebalance_timeout_ms,
            "auto_commit": s.auto_commit,
            **s.app_fields(),
        },
        "members": [{"id": name, "topics": list(topics)} for name, topics in plan.members],
        "events": scenario_events(plan, s),
    }
