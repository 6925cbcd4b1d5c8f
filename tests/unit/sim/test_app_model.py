"""The application model in the simulator: rebalance work waits for the application's poll, a member that
outlasts ``max.poll.interval.ms`` leaves the group and comes back, heartbeat phases drift unless aligned,
and scenarios and grids carry every field."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from regroup.lab import grid, scenarios
from regroup.lab.errors import LabInputError
from regroup.sim import simulate
from regroup.sim.scenario import ScenarioError, parse

#: 2 s batches: 500 records x 4 ms
BUSY = {"max_poll_records": 500, "processing_ms": 4}


def scenario(protocol: str, app: dict[str, Any], *, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    defaults: dict[str, Any] = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 3_000, **app}
    if protocol == "consumer":
        defaults["protocol"] = "consumer"
    else:
        defaults["strategies"] = ["cooperative-sticky"] if protocol == "cooperative" else ["range"]
    return {
        "name": f"app-{protocol}",
        "duration_ms": 45_000,
        "coordinator": {"consumer_group_heartbeat_interval_ms": 3_000},
        "network": {"latency_ms": 2},
        "topics": {"t": 4},
        "member_defaults": defaults,
        "members": [{"id": "c0"}, {"id": "c1"}],
        "events": events
        or [{"at_ms": 0, "action": "join", "member": "c0"}, {"at_ms": 20_000, "action": "join", "member": "c1"}],
    }


def run(doc: dict[str, Any], seed: int = 0) -> list[dict[str, Any]]:
    sim = simulate(parse(json.dumps(doc), doc["name"]), seed)
    assert sim.checker.violations == []
    return sim.log.events


def callbacks(events: list[dict[str, Any]], member: str) -> list[tuple[int, str]]:
    return [(e["t"], e["state"]) for e in events if e["type"] == "callback" and e["member"] == member]


@pytest.mark.parametrize("protocol", ["eager", "cooperative", "consumer"])
def test_callbacks_of_a_busy_member_run_at_its_polls(protocol: str) -> None:
    """c0 owns every partition and processes 2 s batches back to back from its first assignment: each of its
    later callbacks runs at a poll, a whole number of batches after that one (its callbacks take no time)."""
    events = run(scenario(protocol, {**BUSY, "commit_on_revoke": False}))
    calls = callbacks(events, "c0")
    first = next(t for t, kind in calls if kind == "assigned")
    later = [(t, kind) for t, kind in calls if t >= 20_000]
    assert any(kind == "revoked" for _, kind in later)
    for t, _ in later[:1]:
        assert (t - first) % 2_000 == 0, (t, first)


@pytest.mark.parametrize("protocol", ["eager", "consumer"])
def test_busy_members_hold_up_the_rebalance(protocol: str) -> None:
    """The same join with an application that polls continuously revokes sooner."""
    idle = run(scenario(protocol, {"processing_ms": 0, "heartbeat_phase": "aligned"}))
    busy = run(scenario(protocol, {**BUSY, "heartbeat_phase": "aligned"}))

    def first_revoke(events: list[dict[str, Any]]) -> int:
        return next(t for t, kind in callbacks(events, "c0") if kind == "revoked" and t >= 20_000)

    assert first_revoke(idle) < first_revoke(busy) <= first_revoke(idle) + 2_000 + 10


def test_a_revocation_that_commits_waits_for_the_commit() -> None:
    """With commit_on_revoke the eager JoinGroup goes out after the OffsetCommit's answer (one round trip)."""
    events = run(scenario("eager", {"processing_ms": 0, "commit_on_revoke": True}))
    revoked = next(t for t, kind in callbacks(events, "c0") if kind == "revoked" and t >= 20_000)
    sent = [(e["t"], e["api"]) for e in events if e["type"] == "request_sent" and e["member"] == "c0"]
    after = [(t, api) for t, api in sent if t >= revoked and api in ("OffsetCommit", "JoinGroup")]
    assert after[0] == (revoked, "OffsetCommit")
    assert after[1][1] == "JoinGroup" and after[1][0] >= revoked + 4  # 2 x 2 ms latency


def _requests(events: list[dict[str, Any]], member: str, since: int) -> list[tuple[int, str, str]]:
    """(time, sent/answered, api) of a member's requests from ``since`` on."""
    out = []
    for e in events:
        if e["member"] == member and e["t"] >= since and e["type"] in ("request_sent", "response_received"):
            out.append((e["t"], "sent" if e["type"] == "request_sent" else "answered", e["api"]))
    return out


@pytest.mark.parametrize("protocol", ["eager", "cooperative", "consumer"])
def test_a_close_leaves_after_its_commit_and_callback_work(protocol: str) -> None:
    """Closing with commit_on_revoke and 30 ms of revocation work: the revocation callback's commit is
    answered, the work is done, and only then the leave goes out (LeaveGroup; KIP-848: epoch -1)."""
    doc = scenario(
        protocol,
        {"processing_ms": 0, "commit_on_revoke": True, "revoke_ms": 30},
        events=[{"at_ms": 0, "action": "join", "member": "c0"}, {"at_ms": 10_000, "action": "leave", "member": "c0"}],
    )
    events = run(doc)
    closed = next(t for t, kind in callbacks(events, "c0") if kind == "revoked" and t >= 10_000)
    trail = _requests(events, "c0", closed)
    leave_api = "ConsumerGroupHeartbeat" if protocol == "consumer" else "LeaveGroup"
    assert trail[0] == (closed, "sent", "OffsetCommit")
    answered = next(t for t, what, api in trail if what == "answered" and api == "OffsetCommit")
    leave = next(t for t, what, api in trail if what == "sent" and api == leave_api)
    assert answered >= closed + 4  # one round trip at 2 ms each way
    assert leave == answered + 30


@pytest.mark.parametrize("protocol", ["eager", "consumer"])
def test_a_bounce_starts_the_new_process_once_the_old_one_has_closed(protocol: str) -> None:
    """A rolling restart's new process sends its first request after the old one's leave was answered."""
    doc = scenario(
        protocol,
        {"processing_ms": 0, "commit_on_revoke": True},
        events=[
            {"at_ms": 0, "action": "join", "member": "c0"},
            {"at_ms": 0, "action": "join", "member": "c1"},
            {"at_ms": 10_000, "action": "bounce", "member": "c0"},
        ],
    )
    events = run(doc)
    leave_api = "ConsumerGroupHeartbeat" if protocol == "consumer" else "LeaveGroup"
    trail = _requests(events, "c0", 10_000)
    leave_sent = next(i for i, (_, what, api) in enumerate(trail) if what == "sent" and api == leave_api)
    leave_answered = next(i for i, (_, what, api) in enumerate(trail) if i > leave_sent and what == "answered")
    new_apis = ("ConsumerGroupHeartbeat",) if protocol == "consumer" else ("JoinGroup", "FindCoordinator")
    first_new = next(
        i for i, (_, what, api) in enumerate(trail) if i > leave_sent and what == "sent" and api in new_apis
    )
    assert leave_answered < first_new
    assert trail[first_new][0] >= trail[leave_answered][0]


@pytest.mark.parametrize("protocol", ["eager", "consumer"])
def test_a_member_past_the_poll_interval_leaves_and_rejoins(protocol: str) -> None:
    """40 s batches with a 30 s max.poll.interval.ms: the member leaves 30 s after its poll, loses its
    partitions, and rejoins at its next poll."""
    app = {"max_poll_records": 10, "processing_ms": 4_000}
    doc = scenario(protocol, app, events=[{"at_ms": 0, "action": "join", "member": "c0"}])
    doc["member_defaults"]["rebalance_timeout_ms"] = 30_000
    doc["duration_ms"] = 60_000
    events = run(doc)
    resets = [e for e in events if e["type"] == "member_reset" and "poll timeout" in e["detail"]]
    assert resets, "no poll timeout"
    t = resets[0]["t"]
    first = next(t for t, kind in callbacks(events, "c0") if kind == "assigned")
    assert t == first + 30_000
    assert any(e["type"] == "lost" and e["t"] == t for e in events)
    api = "LeaveGroup" if protocol == "eager" else "ConsumerGroupHeartbeat"
    assert any(e["type"] == "request_sent" and e["t"] == t and e["api"] == api for e in events)
    assert any(kind == "assigned" and at >= first + 40_000 for at, kind in callbacks(events, "c0"))


def heartbeat_gaps(events: list[dict[str, Any]], member: str) -> list[int]:
    sent = [e["t"] for e in events if e["type"] == "request_sent" and e["api"] == "Heartbeat" and e["member"] == member]
    return [b - a for a, b in itertools.pairwise(sent)]


@pytest.mark.parametrize(("client", "late"), [("java", 100), ("librdkafka", 4)])
def test_heartbeats_drift_by_the_clients_lateness(client: str, late: int) -> None:
    doc = scenario(
        "eager", {"processing_ms": 0, "client": client}, events=[{"at_ms": 0, "action": "join", "member": "c0"}]
    )
    gaps = heartbeat_gaps(run(doc), "c0")
    assert len(gaps) > 8
    assert all(3_000 <= g < 3_000 + late for g in gaps)
    assert len(set(gaps)) > 1  # drifting, not a fixed period


def test_aligned_heartbeats_keep_their_period() -> None:
    doc = scenario("eager", {"processing_ms": 0, "heartbeat_phase": "aligned"})
    doc["events"] = [{"at_ms": 0, "action": "join", "member": "c0"}]
    assert set(heartbeat_gaps(run(doc), "c0")) == {3_000}


def test_drifting_runs_depend_on_the_seed_and_repeat_with_it() -> None:
    doc = scenario("eager", {})
    logs = [json.dumps(run(doc, seed)) for seed in (1, 1, 2)]
    assert logs[0] == logs[1] != logs[2]


def test_librdkafka_members_send_the_cooperative_joingroup_without_waiting_for_a_poll() -> None:
    """Java sends JoinGroup from poll(); librdkafka from its own thread as soon as a heartbeat says the group
    is rebalancing."""
    waits = {}
    for client in ("java", "librdkafka"):
        events = run(scenario("cooperative", {**BUSY, "client": client, "commit_on_revoke": False}))
        answer = next(
            e["t"]
            for e in events
            if e["type"] == "response_received"
            and e["member"] == "c0"
            and e["api"] == "Heartbeat"
            and e["error"] == "REBALANCE_IN_PROGRESS"
        )
        join = next(
            e["t"]
            for e in events
            if e["type"] == "request_sent" and e["member"] == "c0" and e["api"] == "JoinGroup" and e["t"] >= answer
        )
        waits[client] = join - answer
    assert waits["librdkafka"] == 0 < waits["java"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_poll_records": 0}, "members[0].max_poll_records: must be >= 1"),
        ({"processing_ms": -1}, "members[0].processing_ms: must not be negative"),
        ({"processing_ms": {"distribution": "zipf"}}, "members[0].processing_ms.distribution: must be one of"),
        ({"processing_ms": {"distribution": "uniform", "min": 1}}, "members[0].processing_ms.max: missing"),
        ({"processing_ms": {"distribution": "uniform", "min": 3, "max": 1}}, "min must not exceed max"),
        ({"client": "go"}, "members[0].client: must be one of java, librdkafka"),
        ({"heartbeat_phase": "x"}, "members[0].heartbeat_phase: must be one of drift, aligned"),
        ({"commit_on_revoke": 1}, "members[0].commit_on_revoke: must be true or false"),
        ({"assign_ms": -5}, "members[0].assign_ms: must be >= 0"),
    ],
)
def test_bad_application_fields_name_the_field(fields: dict[str, Any], message: str) -> None:
    doc = scenario("eager", {})
    doc["members"][0].update(fields)
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse(json.dumps(doc), "x.json")


def test_grid_settings_reach_every_member() -> None:
    text = """
members: [2]
topics: [1]
partitions: [4]
strategies: [range]
protocols: [eager]
settings: {max_poll_records: 50, processing_ms: {distribution: exponential, mean: 3}, revoke_ms: 7,
           client: librdkafka}
"""
    (run_spec,) = grid.expand(grid.parse(text, "g.yaml"))
    member = scenarios.scenario(run_spec).members[0]
    assert member.app.max_poll_records == 50 and member.app.processing == ("exponential", 3.0)
    assert member.app.revoke_ms == 7 and member.app.client == "librdkafka"
    assert not member.app.commit_on_revoke  # the lab's default, as auto_commit's
    committing = grid.expand(grid.parse(text.replace("revoke_ms: 7", "revoke_ms: 7, commit_on_revoke: true"), "g.yaml"))
    assert scenarios.scenario(committing[0]).members[0].app.commit_on_revoke
    with pytest.raises(LabInputError, match=r"settings\.processing_ms: must not be negative"):
        grid.parse(text.replace("{distribution: exponential, mean: 3}", "-2"), "g.yaml")
