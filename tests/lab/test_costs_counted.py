"""Every cost counted: a sweep run lasts until its group has settled after the last change (a KIP-848 crash is
detected only when its session times out), what a log's end cut off is reported, bounces count as membership
changes, a group emptied by its members leaving is not a rebalance, and a metric a protocol does not have is
null, not 0."""

from __future__ import annotations

import json
from typing import Any

import pytest

from regroup.lab import grid, runner, scenarios
from regroup.lab.errors import LabInputError
from regroup.lab.metrics import Context, analyze, analyze_rows, churn_of
from regroup.sim import load, parse, simulate
from regroup.sim.eventlog import EventLog


def one_run(**doc: Any) -> grid.RunSpec:
    (run,) = grid.expand(grid.parse(json.dumps({"members": 4, "topics": 1, "partitions": 16, **doc}), "g.json"))
    return run


def test_a_kip848_crash_is_played_out_until_its_session_times_out() -> None:
    run = one_run(churn="crash", strategies="uniform", protocols="consumer")
    row, rows = runner.simulate_run(run)
    settings = run.settings
    assert row["settled"] is True and row["cut_off_unowned_partition_ms"] == 0
    assert row["end_ms"] > scenarios.duration_ms(run)  # the scenario's 30 s end would have cut it off
    (crash,) = [r for r in rows if r["phase"] == "churn"]
    assert row["rebalances"] == 1 and row["changes"] == 1
    # c0's 4 partitions have no owner from the crash until its session expires and they are handed out again:
    # at least the session timeout after its last heartbeat, which came at most a heartbeat interval earlier
    least = 4 * (settings.consumer_session_timeout_ms - settings.consumer_heartbeat_interval_ms)
    assert crash["unowned_partition_ms"] >= least and crash["revoked"] == 0
    assert crash["start_ms"] >= settings.warmup_ms + least // 4
    assert row["unowned_partition_ms"] == crash["unowned_partition_ms"]


def test_a_classic_crash_is_played_out_the_same_way() -> None:
    run = one_run(churn="crash", strategies="range", protocols="eager")
    row, _ = runner.simulate_run(run)
    assert (
        row["settled"] is True
        and row["rebalances"] == 1
        and row["unowned_partition_ms"] >= 4 * (run.settings.session_timeout_ms - run.settings.heartbeat_interval_ms)
    )


CRASH_SCENARIO = {
    "duration_ms": 30_000,
    "measure_from_ms": 10_000,
    "coordinator": {"consumer_group_session_timeout_ms": 45_000},
    "topics": {"t": 16},
    "member_defaults": {"protocol": "consumer", "assignor": "uniform", "auto_commit": False},
    "members": [{"id": f"c{i}"} for i in range(4)],
    "events": [
        *({"at_ms": 0, "action": "join", "member": f"c{i}"} for i in range(4)),
        {"at_ms": 10_000, "action": "crash", "member": "c0"},
    ],
}


def test_what_a_log_cut_off_is_reported() -> None:
    sim = simulate(parse(json.dumps(CRASH_SCENARIO)))
    events = sim.log.events
    (stopped,) = {e["t"] for e in events if e["type"] == "stopped"}
    lost = sum(1 for e in events if e["type"] == "stopped")
    row, rows = analyze(events, Context(run_id="r", source="s", measure_from_ms=10_000))
    assert row["settled"] is False and row["rebalances"] == 0 and row["changes"] == 1
    assert lost == 4 and row["cut_off_unowned_partition_ms"] == lost * (events[-1]["t"] - stopped)
    assert row["unowned_partition_ms"] == row["cut_off_unowned_partition_ms"]  # the run's total includes it
    assert all(r["phase"] == "formation" for r in rows)


def test_bounces_are_membership_changes() -> None:
    scenario = load("rolling-upgrade")
    events = simulate(scenario, 0).log.events
    row, _ = analyze(events, Context(run_id="r", source="s", measure_from_ms=25_000))
    bounces = sum(1 for e in events if e["type"] == "action" and e["detail"] == "bounce" and e["t"] >= 25_000)
    assert bounces == 5 and row["changes"] == 2 * bounces  # each: the old process leaves, a new one joins
    assert (row["churn"], row["churn_events"]) == ("rolling", bounces)
    assert row["rebalances"] >= bounces


def test_churn_patterns_of_logs() -> None:
    def steps(*items: tuple[int, str, str]) -> list[tuple[int, str, str]]:
        return list(items)

    assert churn_of(steps(), 0) == ("none", 0)
    assert churn_of(steps((5, "join", "a"), (9, "join", "b")), 0) == ("join", 2)
    assert churn_of(steps((5, "join", "a"), (9, "join", "b")), 6) == ("join", 1)
    assert churn_of(steps((5, "crash", "a")), 0) == ("crash", 1)
    assert churn_of(steps((5, "leave", "a"), (7, "restart", "a"), (9, "leave", "b"), (11, "restart", "b")), 0) == (
        "rolling",
        2,
    )
    assert churn_of(steps((5, "bounce", "a"), (9, "bounce", "b")), 0) == ("rolling", 2)
    assert churn_of(steps((5, "leave", "a"), (7, "join", "a")), 0) == ("rolling", 1)  # a server log's restart
    assert churn_of(steps((5, "leave", "a"), (7, "join", "b")), 0) == ("mixed", 2)
    assert churn_of(steps((5, "leave", "a"), (7, "crash", "b")), 0) == ("mixed", 2)


def test_a_group_emptied_by_its_members_leaving_is_not_a_rebalance() -> None:
    doc = {
        "duration_ms": 30_000,
        "measure_from_ms": 5_000,
        "topics": {"t": 4},
        "member_defaults": {"strategies": ["range"], "auto_commit": False},
        "members": [{"id": "a"}, {"id": "b"}],
        "events": [
            {"at_ms": 0, "action": "join", "member": "a"},
            {"at_ms": 0, "action": "join", "member": "b"},
            {"at_ms": 10_000, "action": "leave", "member": "b"},
            {"at_ms": 20_000, "action": "leave", "member": "a"},
        ],
    }
    log = simulate(parse(json.dumps(doc))).log
    row, rows = analyze_rows(log.rows, Context(run_id="r", source="s", measure_from_ms=5_000))
    phases = [r["phase"] for r in rows]
    # the group forms in one or more rebalances (the members' first requests are a few ms apart), then b's leave
    assert phases[0] == "formation" and [p for p in phases if p != "formation"] == ["churn", "emptied"]
    assert row["rebalances"] == 1 and row["changes"] == 1  # b's leave; a's leave emptied the group
    assert rows[-1]["fraction_kept"] is None and rows[-1]["group_size"] == 0


@pytest.mark.parametrize(
    ("protocol", "strategy", "nulls", "zeros"),
    [
        ("consumer", "uniform", ("join_bytes_leader", "join_bytes_all", "sync_bytes"), ("heartbeat_bytes",)),
        ("eager", "range", ("heartbeat_bytes",), ("join_bytes_leader", "join_bytes_all", "sync_bytes")),
    ],
)
def test_a_run_without_rebalances_has_nulls_where_its_protocol_has_no_such_cost(
    protocol: str, strategy: str, nulls: tuple[str, ...], zeros: tuple[str, ...]
) -> None:
    row, _ = runner.simulate_run(one_run(churn="none", strategies=strategy, protocols=protocol))
    assert row["rebalances"] == 0
    assert all(row[k] is None for k in nulls), {k: row[k] for k in nulls}
    assert all(row[k] == 0 for k in (*zeros, "unowned_partition_ms", "moved")), {k: row[k] for k in zeros}


def test_a_log_without_members_has_no_settled_verdict_beyond_its_group_states() -> None:
    log = EventLog()
    log.emit(0, "member_state", member="k", member_id="k-1", generation=0, state="Joined", detail="group=g")
    log.emit(1, "group_state", state="PreparingRebalance", generation=0, detail="group=g type=classic protocol=None")
    row, rows = analyze_rows(log.rows, Context(run_id="r", source="s", group_id="g"))
    assert rows == [] and row["settled"] is False  # a rebalance in progress at the log's end
    assert row["cut_off_unowned_partition_ms"] is None and row["unowned_partition_ms"] is None


def test_an_assignment_interval_in_the_grid_settings_reaches_the_coordinator() -> None:
    """``settings.consumer_assignment_interval_ms`` (KIP-1263) is the scenario's coordinator setting (none when
    0, the scenario as before). With an interval longer than the warm-up, the members forming the group after the
    first and the member joining at the warm-up's end are all assigned by one target when the interval ends: no
    rebalance of its own for the join, where without it the join has one."""
    plain = one_run(churn="join", strategies="uniform", protocols="consumer")
    assert "consumer_group_assignment_interval_ms" not in scenarios.document(plain)["coordinator"]
    batched = one_run(
        churn="join", strategies="uniform", protocols="consumer", settings={"consumer_assignment_interval_ms": 12_000}
    )
    assert batched.settings.warmup_ms < 12_000
    assert scenarios.document(batched)["coordinator"]["consumer_group_assignment_interval_ms"] == 12_000
    rows = [runner.simulate_run(run)[0] for run in (plain, batched)]
    assert all(row["settled"] is True for row in rows)
    assert [row["rebalances"] for row in rows] == [1, 0]
    with pytest.raises(LabInputError, match="consumer_assignment_interval_ms"):
        one_run(strategies="uniform", protocols="consumer", settings={"consumer_assignment_interval_ms": -1})
