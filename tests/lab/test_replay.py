"""``regroup.lab.replay``: the scenario a recorded log shows (exact plans of small hand-written logs), that scenario
under a strategy and protocol, and the whole replay in this process and on Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import frames, scenarios
from regroup.lab.errors import LabInputError
from regroup.lab.grid import RunSpec, Settings
from regroup.lab.replay import ReplayEvent, groups_of, plan_replay
from regroup.lab.replay_run import alternatives, here, prepare, run_replay, running_at_end
from regroup.lab.replay_scenario import ReplayRun, document, leads
from regroup.lab.runner import play_out
from regroup.model.eventlog import FIELDS
from regroup.sim.engine import Simulator
from regroup.sim.scenario import parse
from tests.lab.logs import eager_story


def row(t: int, kind: str, **values: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    out.update(t=t, type=kind, **values)
    return out


def member(t: int, group: str, client: str, member_id: str, state: str, reason: str | None = None) -> dict[str, Any]:
    detail = f"group={group}" + (f" reason={reason}" if reason else "")
    return row(t, "member_state", member=client, member_id=member_id, generation=0, state=state, detail=detail)


def state(t: int, group: str, name: str, generation: int, protocol: str = "range") -> dict[str, Any]:
    detail = f"group={group} type=classic protocol={protocol} rebalance=eager leader=x"
    return row(t, "group_state", state=name, generation=generation, detail=detail)


def assignment(t: int, client: str, topic: str, partition: int, generation: int) -> dict[str, Any]:
    # (a classic group's assignment rows follow their group_state row and name no group)
    return row(t, "group_assignment", member=client, member_id=f"{client}-id", generation=generation, topic=topic,
               partition=partition)  # fmt: skip


def server_rows() -> list[dict[str, Any]]:
    """Group ``ga`` (classic eager, range): a and b join at 1000; c joins at 5000; b leaves at 9000; c's session
    expires at 20000 (reason=session-timeout); a second process with client id ``a`` joins at 22000 while the
    first still runs; b comes back at 30000. Group ``gb``, interleaved, has one member. Topic t has 4 partitions
    (the highest assigned is 3), topic u 1."""
    return [
        member(1000, "ga", "a", "a-1", "Joined"),
        member(1000, "ga", "b", "b-1", "Joined"),
        state(1000, "ga", "PreparingRebalance", 0),
        member(1500, "gb", "z", "z-1", "Joined"),
        state(1500, "gb", "Stable", 1),
        assignment(1500, "z", "other", 0, 1),
        state(1100, "ga", "Stable", 1),
        assignment(1100, "a", "t", 0, 1),
        assignment(1100, "a", "t", 1, 1),
        assignment(1100, "b", "t", 2, 1),
        assignment(1100, "b", "t", 3, 1),
        assignment(1100, "b", "u", 0, 1),
        member(5000, "ga", "c", "c-1", "Joined"),
        member(9000, "ga", "b", "b-1", "Left", "leave"),
        member(20000, "ga", "c", "c-1", "Left", "session-timeout"),
        member(22000, "ga", "a", "a-2", "Joined"),
        member(30000, "ga", "b", "b-2", "Joined"),
        state(30100, "ga", "Stable", 7),
    ]


# ------------------------------------------------------------------------------------------ server logs
def test_a_server_log_with_several_groups_needs_a_group() -> None:
    rows = server_rows()
    assert groups_of(rows) == ["ga", "gb"]
    with pytest.raises(LabInputError, match=r"^x.jsonl: 2 groups in the log, choose one with --group: ga, gb$"):
        plan_replay(rows, None, source="x.jsonl")
    with pytest.raises(LabInputError, match=r"^x.jsonl: no group 'gc' in the log \(groups: ga, gb\)$"):
        plan_replay(rows, "gc", source="x.jsonl")


def test_a_server_log_is_planned_from_its_joined_and_left_rows() -> None:
    plan = plan_replay(server_rows(), "ga")
    assert plan.kind == "server" and plan.at_coordinator
    assert (plan.since_ms, plan.until_ms) == (1000, 30100)
    assert plan.topics == (("t", 4), ("u", 1))
    assert plan.members == (("a", ("t", "u")), ("b", ("t", "u")), ("c", ("t", "u")), ("a#2", ("t", "u")))
    assert plan.initial == ()
    assert plan.events == (
        ReplayEvent(0, "join", "a"),
        ReplayEvent(0, "join", "b"),
        ReplayEvent(4000, "join", "c"),
        ReplayEvent(8000, "leave", "b"),
        ReplayEvent(19000, "crash", "c"),  # the session expired: the process was gone
        ReplayEvent(21000, "join", "a#2"),  # a second member with client id a, while the first runs
        ReplayEvent(29000, "restart", "b"),  # b's client id comes back
    )
    assert (plan.strategy, plan.protocol) == ("range", "eager")
    assert any("#<n>" in note for note in plan.notes)
    assert not any("do not say why" in note for note in plan.notes)  # these Left rows give reasons


def test_a_window_starts_with_the_members_already_in_the_group() -> None:
    plan = plan_replay(server_rows(), "ga", since_ms=6000, until_ms=25000)
    assert plan.initial == ("a", "b", "c")
    assert plan.events == (
        ReplayEvent(3000, "leave", "b"),
        ReplayEvent(14000, "crash", "c"),
        ReplayEvent(16000, "join", "a#2"),
    )  # b's restart at 30000 is after the window
    assert [name for name, _ in plan.members] == ["a", "b", "c", "a#2"]


def test_left_rows_without_a_reason_are_clean_leaves() -> None:
    rows = [{**r, "detail": r["detail"].split(" reason=")[0]} if r["type"] == "member_state" else r
            for r in server_rows()]  # fmt: skip
    plan = plan_replay(rows, "ga")
    assert ReplayEvent(19000, "leave", "c") in plan.events
    assert any("do not say why" in note for note in plan.notes)


def test_empty_windows_and_logs_without_topics_are_errors() -> None:
    with pytest.raises(LabInputError, match=r"^x: group ga: empty window: --until-ms 10 is not after --since-ms 10$"):
        plan_replay(server_rows(), "ga", since_ms=10, until_ms=10, source="x")
    with pytest.raises(LabInputError, match=r"^x: group ga: empty window: no member in the group from 0 to 500 ms$"):
        plan_replay(server_rows(), "ga", since_ms=0, until_ms=500, source="x")
    no_topics = [r for r in server_rows() if r["type"] != "group_assignment"]
    with pytest.raises(LabInputError, match=r"^x: group ga: the log names no topic of the group"):
        plan_replay(no_topics, "ga", source="x")


# --------------------------------------------------------------------------------------- simulator logs
def test_a_simulator_log_is_planned_from_its_actions() -> None:
    rows = eager_story().events
    assert groups_of(rows) == [None]
    plan = plan_replay(rows)
    assert plan.kind == "simulator" and not plan.at_coordinator
    assert (plan.since_ms, plan.until_ms) == (0, 200)
    assert plan.topics == (("t", 2),)
    assert plan.members == (("a", ("t",)), ("b", ("t",)))
    assert plan.events == (ReplayEvent(0, "join", "a"), ReplayEvent(0, "join", "b"), ReplayEvent(100, "leave", "b"))
    assert (plan.strategy, plan.protocol) == ("range", "eager")
    later = plan_replay(rows, since_ms=50)
    assert later.initial == ("a", "b") and later.events == (ReplayEvent(50, "leave", "b"),)
    with pytest.raises(LabInputError, match="a simulator log holds one group"):
        plan_replay(rows, "g")


# ------------------------------------------------------------------------------------------- scenarios
def test_a_server_plan_moves_each_change_back_by_what_the_member_did_first() -> None:
    plan = plan_replay(server_rows(), "ga", since_ms=6000, until_ms=25000)
    settings = Settings(latency_ms=5, session_timeout_ms=10_000, warmup_ms=2_000, app_json='{"commit_on_revoke": true}')
    doc = document(plan, ReplayRun(strategy="cooperative-sticky", protocol="cooperative", settings=settings))
    assert doc is not None
    assert doc["events"] == [
        {"at_ms": 0, "action": "join", "member": "a"},
        {"at_ms": 0, "action": "join", "member": "b"},
        {"at_ms": 0, "action": "join", "member": "c"},
        # warm-up 2000 + 3000, less one latency and the revocation callback's commit round trip
        {"at_ms": 5000 - 15, "action": "leave", "member": "b"},
        # the session timeout the coordinator waited, less half a heartbeat interval (the grid's default 3000)
        {"at_ms": 16000 - 10_000 + 1_500, "action": "crash", "member": "c"},
        # one latency and KIP-394's member-id round trip (the log is of a classic group)
        {"at_ms": 18000 - 15, "action": "join", "member": "a#2"},
    ]
    assert (doc["duration_ms"], doc["measure_from_ms"]) == (2000 + 19000, 2000)
    assert doc["topics"] == {"t": 4, "u": 1}
    assert doc["member_defaults"]["strategies"] == ["cooperative-sticky"] and doc["member_defaults"]["commit_on_revoke"]
    parse(json.dumps(doc), "replay")  # the simulator takes it
    assert document(plan, ReplayRun(strategy="range", protocol="cooperative")) is None  # range is never cooperative


def test_changes_keep_their_order_when_moved_back() -> None:
    plan = plan_replay(server_rows(), "ga", since_ms=6000, until_ms=25000)
    lead = leads(5, False, 0, 20_000, 3_000, "eager")
    assert (lead.join_ms, lead.leave_ms, lead.crash_ms) == (15, 5, 18_500)
    assert leads(5, True, 7, 20_000, 3_000, "consumer").join_ms == 5  # no member-id round in KIP-848
    settings = Settings(session_timeout_ms=21_500)  # a crash 20,000 ms earlier than its Left row
    doc = document(plan, ReplayRun(strategy="range", protocol="eager", settings=settings))
    assert doc is not None
    times = [e["at_ms"] for e in doc["events"]]
    # the crash would go back to before the leave logged ahead of it: it stays at the leave's time
    assert times == [0, 0, 0, 10_000 + 3000 - 5, 10_000 + 3000 - 5, 10_000 + 16000 - 15]


def test_alternatives_skip_pairs_that_cannot_run() -> None:
    runs, skipped = alternatives(["range", "uniform"], ["eager", "cooperative", "consumer"], Settings())
    assert [(r.strategy, r.protocol) for r in runs] == [("range", "eager"), ("server-range", "consumer"),
                                                        ("uniform", "consumer")]  # fmt: skip
    assert skipped == ["range/cooperative (cannot run)", "uniform/eager (cannot run)",
                       "uniform/cooperative (cannot run)"]  # fmt: skip
    with pytest.raises(LabInputError, match="unknown strategy 'stiky'"):
        alternatives(["stiky"], ["eager"], Settings())
    with pytest.raises(LabInputError, match="'share' cannot be replayed"):
        alternatives(["range"], ["share"], Settings())


# ----------------------------------------------------------------------------------------- the replays
def recorded_log(tmp_path: Path, strategy: str, protocol: str, churn: str = "leave") -> tuple[Path, RunSpec]:
    """A grid run's log (3 members, 2 topics of 3 partitions, one churn event) under the grid's defaults, played
    out until its group settled, as a sweep plays it."""
    run = RunSpec(grid="r", members=3, topics=2, partitions=3, subscription="all", churn=churn, churn_events=1,
                  strategy=strategy, protocol=protocol, seed=0)  # fmt: skip
    sim = Simulator(scenarios.scenario(run), 0)
    assert play_out(sim, scenarios.settle_limit_ms(run))
    path = tmp_path / f"{strategy}-{protocol}.jsonl"
    path.write_text("".join(line + "\n" for line in sim.log.lines()), encoding="utf-8")
    return path, run


@pytest.mark.parametrize(("strategy", "protocol", "churn"),
                         [("range", "eager", "leave"), ("cooperative-sticky", "cooperative", "crash"),
                          ("uniform", "consumer", "join")])  # fmt: skip
def test_a_replay_under_the_recorded_strategy_and_settings_is_what_was_recorded(
    tmp_path: Path, strategy: str, protocol: str, churn: str
) -> None:
    """A simulator log replayed with the settings that produced it, under its own strategy, is the same run."""
    path, _ = recorded_log(tmp_path, strategy, protocol, churn)
    outcome = run_replay(str(path), tmp_path / "out", strategies=[strategy], protocol_names=[protocol])
    doc = outcome.document
    recorded, (replayed,) = doc["recorded"], doc["alternatives"]
    assert recorded["strategy"] == f"{strategy} (recorded)" and recorded["protocol"] == protocol
    assert recorded["rebalances"] >= 2  # the formation and the churn
    for key in ("rebalances", "rounds", "moved", "revoked", "duration_ms", "unowned_partition_ms", "stable_at_ms"):
        assert replayed[key] == recorded[key], key
        assert replayed["versus_recorded"][key] == 0
    assert (tmp_path / "out" / "replay.json").exists()
    page = outcome.report.read_text(encoding="utf-8")
    assert "What each alternative would have cost, against what happened" in page
    assert f"{strategy} (recorded)" in page


def test_a_server_logs_unknowns_are_null_against_the_alternatives(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in server_rows()), encoding="utf-8")
    prepared = prepare(str(path), group="ga", strategies=["range"], protocol_names=["eager"],
                       settings=Settings(session_timeout_ms=10_000, rebalance_timeout_ms=5_000))  # fmt: skip
    found = here(prepared)
    runs = {r["run_id"]: r for r in found.runs.to_pylist()}
    recorded = runs[f"{path}#ga (recorded)"]
    assert recorded["unowned_partition_ms"] is None and recorded["revoked"] is None  # no processing owners
    (replayed,) = [r for r in runs.values() if r is not recorded]
    assert replayed["strategy"] == "range" and replayed["unowned_partition_ms"] is not None
    assert replayed["churn"] == recorded["churn"]  # the report puts them side by side


def test_a_replay_whose_members_all_leave_settles_when_its_group_is_empty(tmp_path: Path) -> None:
    """The clients closing at the end of a recorded run: the replay ends once its group is empty (an empty group
    is never quiescent), its last rebalance is the ``emptied`` phase, as the recorded one."""
    closing = [
        member(40_000, "ga", "a", "a-1", "Left", "leave"),
        member(40_000, "ga", "b", "b-2", "Left", "leave"),
        member(40_001, "ga", "a", "a-2", "Left", "leave"),
    ]
    path = tmp_path / "server.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in server_rows() + closing), encoding="utf-8")
    settings = Settings(session_timeout_ms=10_000, rebalance_timeout_ms=5_000)
    prepared = prepare(str(path), group="ga", strategies=["range"], protocol_names=["eager"], settings=settings)
    assert running_at_end(prepared.plan) == set()
    (task,) = prepared.tasks
    assert task["emptied"]
    found = here(prepared)
    (replayed,) = [r for r in found.runs.to_pylist() if not r["run_id"].endswith("(recorded)")]
    assert replayed["settled"] is True
    assert replayed["end_ms"] < task["scenario"]["duration_ms"] + 1_000  # not played on to the settle limit
    phases = [r["phase"] for r in found.rebalances.to_pylist() if r["run_id"] == replayed["run_id"]]
    assert phases[-1] == "emptied"


def test_the_replay_on_spark_gives_what_the_replay_here_gives(spark: Any, tmp_path: Path) -> None:
    """One Spark job (two alternatives and the recorded run's rows, on the tests' ``local[1]`` session): the same
    tables and the same ``replay.json`` as the replay in this process."""
    path, _ = recorded_log(tmp_path, "range", "eager")
    options: dict[str, Any] = {"strategies": ["range", "roundrobin"], "protocol_names": ["eager"]}
    on_spark_outcome = run_replay(str(path), tmp_path / "spark", spark=spark, **options)
    here_outcome = run_replay(str(path), tmp_path / "here", **options)
    assert on_spark_outcome.document == here_outcome.document
    assert len(here_outcome.document["alternatives"]) == 2

    def rows(out: Path, table: str) -> list[dict[str, Any]]:
        found = frames.read(out)
        return sorted(getattr(found, table).to_pylist(), key=lambda r: (r["run_id"], r.get("index") or 0))

    for table in ("runs", "rebalances"):
        assert rows(tmp_path / "spark", table) == rows(tmp_path / "here", table)
    assert len(rows(tmp_path / "spark", "runs")) == 3  # the recorded run and the two alternatives
    assert json.loads((tmp_path / "spark" / "lab.json").read_text())["master"] == "local[1]"


# ------------------------------------------------------------------------------ replays of real runs' logs
VALIDATED: dict[str, Any] = {
    "name": "two-eager",
    "duration_ms": 12_000,
    "measure_from_ms": 3_000,
    "network": {"latency_ms": 5},
    "topics": {"t0": 2},
    "member_defaults": {"strategies": ["range"], "processing_ms": 0},
    "members": [{"id": "c0"}, {"id": "c1"}, {"id": "c2"}],
    "events": [
        {"at_ms": 0, "action": "join", "member": "c0"},
        {"at_ms": 2_000, "action": "join", "member": "c1"},
        {"at_ms": 8_980, "action": "leave", "member": "c1"},
    ],
}


def test_a_real_runs_server_log_is_replayed_in_its_scenario() -> None:
    """The server's clock is the real run's plus its time 0; the replayed scenario is the validated one with the
    log's changes, moved back by their leads (a classic join: 3 one-way latencies; a leave: one, and the commit's
    round trip of the revocation callback, ``commit_on_revoke`` being the scenario default)."""
    from regroup.lab.replay_validate import replayed_scenario, time_zero

    zero = 1_700_000_000_000
    rows = [
        member(zero + 25, "g", "c0", "c0-1", "Joined"),
        state(zero + 26, "g", "PreparingRebalance", 0),
        state(zero + 40, "g", "Stable", 1),
        assignment(zero + 40, "c0", "t0", 0, 1),
        assignment(zero + 40, "c0", "t0", 1, 1),
        member(zero + 2_030, "g", "c1", "c1-1", "Joined"),
        member(zero + 9_000, "g", "c1", "c1-1", "Left", "leave"),
        member(zero + 13_000, "g", "c0", "c0-1", "Left", "leave"),  # after the scenario's end
    ]
    timeline = [row(0, "sim_start"), row(26, "group_state", state="PreparingRebalance")]
    assert time_zero(rows, timeline, "g") == zero
    assert time_zero(rows, timeline, "other") is None
    plan = plan_replay(rows, "g", zero, zero + 12_000)
    scenario = parse(json.dumps(VALIDATED), "v.json")
    replayed, notes = replayed_scenario(scenario, plan)
    assert [(e.at_ms, e.action, e.member) for e in replayed.events] == [
        (10, "join", "c0"),
        (2_015, "join", "c1"),
        (8_985, "leave", "c1"),
    ]
    assert replayed.topics == {"t0": 2} and notes == []
    assert replayed.members == scenario.members  # the same strategy and settings
    assert (replayed.duration_ms, replayed.measure_from_ms) == (12_000, 3_000)


@pytest.mark.timeout(300)
def test_validate_replays_each_real_runs_server_log(tmp_path: Path) -> None:
    """``lab validate --replay`` with real clients: the replay of what the server logged counts what the clients
    did (a third eager member joins: one rebalance, every partition revoked, range's moves)."""
    from tests.lab.test_validate import SHORT, regroup

    scenario = tmp_path / "short.json"
    scenario.write_text(json.dumps(SHORT))
    out = tmp_path / "out"
    proc = regroup("lab", "validate", str(scenario), "--out", str(out), "--repeat", "1", "--seeds", "2", "--replay")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "validation.json").read_text())
    rows = {row["metric"]: row for row in doc["replay_rows"]}
    assert set(rows) == {"unowned_partition_ms", "rebalances", "moved", "revoked"}
    assert rows["rebalances"]["replayed"] == rows["rebalances"]["measured"] == 1
    assert rows["moved"]["replayed"] == rows["moved"]["measured"] > 0
    assert rows["revoked"]["replayed"] == rows["revoked"]["measured"] == 6
    assert rows["rebalances"]["within_target"] and rows["moved"]["within_target"]
    assert "regroup lab: eager moved: replayed " in proc.stderr
    assert "Replays of the recorded server logs" in (out / "validation.html").read_text()
