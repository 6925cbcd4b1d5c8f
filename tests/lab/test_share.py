"""Share groups (KIP-932) in the lab: grids that list ``share``, the share scenario built from the same workload,
the share metrics of a run (exact numbers on a tiny crash), and the report's share section."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import grid, jobs, report, runner, scenarios, share_section
from regroup.lab.errors import LabInputError
from regroup.lab.share_metrics import first_delivery_waits, produced_at, stalled_records
from regroup.sim.eventlog import T, as_rows
from regroup.sim.scenario import ShareSpec
from regroup.sim.share_summary import summarize_share

GRID = """
name: sharecrash
members: [3]
topics: [1]
partitions: [6]
churn: [crash]
strategies: [uniform, range]
protocols: [consumer, share]
settings: {share_rate_per_s: 20}
"""


def _run(protocol: str, strategy: str, **settings: Any) -> grid.RunSpec:
    return grid.RunSpec(
        grid="t",
        members=3,
        topics=1,
        partitions=6,
        subscription="all",
        churn="crash",
        churn_events=1,
        strategy=strategy,
        protocol=protocol,
        seed=0,
        settings=grid.Settings(**settings),
    )


def test_a_grid_runs_share_once_per_workload_under_the_simple_assignor() -> None:
    g = grid.parse(GRID, "g.yaml")
    runs = grid.expand(g)
    assert [(r.strategy, r.protocol) for r in runs] == [
        ("uniform", "consumer"),
        ("simple", "share"),
        ("server-range", "consumer"),
    ]
    assert dict(g.skipped())[("range", "share")] == "same as uniform/share"
    assert runs[1].run_id == "sharecrash/m3-t1-p6-all-crashx1-simple-share-s0"


def test_share_settings_are_checked() -> None:
    with pytest.raises(LabInputError, match=r"settings\.share_rate_per_s: must be >= 1"):
        grid.parse(GRID.replace("share_rate_per_s: 20", "share_rate_per_s: 0"), "g.yaml")
    assert (
        grid.parse(GRID.replace("share_rate_per_s: 20", "share_backlog: 0"), "g.yaml").settings.share_rate_per_s is None
    )


def test_the_share_scenario_is_the_same_workload() -> None:
    doc = scenarios.document(_run("share", "simple"))
    assert doc["members"] == [{"id": f"c{i}", "topics": ["t0"]} for i in range(3)]
    assert doc["events"][-1] == {"at_ms": 10_000, "action": "crash", "member": "c0"}
    assert doc["member_defaults"] == {
        "protocol": "share"
    }  # no callbacks or commits: the lab's commit_on_revoke is not passed
    # half of 3 members x 1,000 records/s (1 ms each) over 6 partitions
    assert doc["share"] == {"backlog": 0, "rate_per_s": 250, "produce_until_ms": 30_000}
    assert doc["coordinator"] == {"share_group_session_timeout_ms": 45_000, "share_group_heartbeat_interval_ms": 5_000}
    slow = _run("share", "simple", app_json='{"processing_ms": {"distribution": "uniform", "min": 2, "max": 4}}')
    assert scenarios.share_rate_per_s(slow) == 84  # ceil(0.5 * 3 * 1000 / 3 / 6)
    assert scenarios.share_limit_ms(slow) == 30_000 + 45_000 + 5_000
    scenarios.scenario(slow)  # the simulator accepts it


def test_a_share_crash_run_exactly() -> None:
    row, rebalances = runner.simulate_run(_run("share", "simple", share_rate_per_s=20))
    assert rebalances == []
    assert {k: row[k] for k in row if k.startswith("share_") or k in ("rate_per_partition_s", "settled")} == {
        "rate_per_partition_s": 20,
        "settled": True,
        "share_records": 3600,  # 6 partitions x 20/s x 30 s
        "share_delivered": 3600,
        "share_redeliveries": 2,
        "share_undone": 0,
        "share_delayed_records": 2,  # what c0 held when it crashed at 10 s
        "share_delay_mean_ms": 42962.0,
        "share_delay_max_ms": 45512,
        "share_records_per_member_s": 25.12,
        # c0's two partitions from its crash to the end of production (10 s to 30 s): they wait for its session
        "share_late_records": 800,
        "share_max_wait_ms": 45462,
    }
    # no rebalance costs in a share group: null, not zero
    for key in ("unowned_partition_ms", "moved", "duration_ms", "heartbeat_bytes", "cut_off_unowned_partition_ms"):
        assert row[key] is None
    assert row["rebalances"] == 0 and row["changes"] == 1


def test_share_columns_are_the_simulators_share_summary() -> None:
    from regroup.sim.engine import Simulator

    run = _run("share", "simple", share_rate_per_s=20)
    sim = Simulator(scenarios.scenario(run), 0)
    runner.play_out_share(sim, scenarios.share_limit_ms(run))
    summary = summarize_share(sim.log.rows, sim.log.rows[-1][T])
    row, _ = runner.simulate_run(run)
    assert row["share_redeliveries"] == summary.redeliveries
    assert row["share_delayed_records"] == summary.delayed_by_crash.records


def test_a_consumer_run_carries_its_workloads_rate() -> None:
    row, _ = runner.simulate_run(_run("consumer", "uniform", share_rate_per_s=20))
    assert row["rate_per_partition_s"] == 20 and row["share_records"] is None
    assert row["unowned_partition_ms"] == 82054
    assert stalled_records(row["unowned_partition_ms"], 20) == pytest.approx(1641.08)


def test_waits_follow_the_production_schedule() -> None:
    spec = ShareSpec(backlog=2, rate_per_s=3)
    assert [produced_at(o, spec) for o in range(5)] == [0, 0, 334, 667, 1000]
    rows = as_rows(
        [
            _acquired(t=100, offset=2, count=1),  # produced at 334: before measuring
            _acquired(t=2_000, offset=3, count=1),  # 1,333 ms after 667: late
            _acquired(t=1_500, offset=4, count=1),  # 500 ms
            _acquired(t=5_000, offset=3, count=2),  # a redelivery: not a first delivery
        ]
    )
    assert first_delivery_waits(rows, spec, measure_from_ms=500) == (1, 1_333)


def _acquired(*, t: int, offset: int, count: int) -> dict[str, Any]:
    return {
        "seq": 0,
        "t": t,
        "type": "share_acquired",
        "member": "c1",
        "member_id": "c1-1",
        "generation": count,
        "state": None,
        "api": None,
        "request_id": None,
        "error": None,
        "topic": "t0",
        "partition": 0,
        "value": offset,
        "detail": None,
    }


AGG = [
    {
        "churn": "crash",
        "strategy": "uniform",
        "protocol": "consumer",
        "runs": 1,
        "events": 1,
        "unowned_partition_ms": 82054,
        "stalled_records": 1641.08,
        "delayed": None,
        "delay_ms_total": None,
        "delay_max_ms": None,
        "redeliveries": None,
        "late": None,
        "max_wait_ms": None,
        "per_member_s": None,
    },
    {
        "churn": "crash",
        "strategy": "simple",
        "protocol": "share",
        "runs": 1,
        "events": 1,
        "unowned_partition_ms": None,
        "stalled_records": None,
        "delayed": 2,
        "delay_ms_total": 85924.0,
        "delay_max_ms": 45512,
        "redeliveries": 2,
        "late": 800,
        "max_wait_ms": 45462,
        "per_member_s": 25.12,
    },
]


def test_the_share_section_in_words() -> None:
    text = share_section.render(AGG, report._table, report.label)
    assert "<h2>Moving a workload to a share group</h2>" in text
    assert (
        "As a consumer group, each member crashing left partitions without an owner for 82.1 partition-s "
        "(uniform / KIP-848): at the workload's production rate about 1,641 records arrive meanwhile and wait."
    ) in text
    assert (
        "2.0 records per member crashing were in the hands of a crashed member and were delivered again "
        "43.0 s later on average (at most 45.5 s); 2.0 redeliveries"
    ) in text
    assert "800 records per member crashing waited more than 1 s for their first delivery (at most 45.5 s)" in text
    assert "<td>simple / share group (KIP-932)</td><td>–</td><td>–</td><td>2.00</td>" in text
    assert share_section.render([], report._table, report.label) == ""


def test_a_swept_report_compares_share_with_the_consumer_group(spark: Any, tmp_path: Path) -> None:
    g = grid.parse(GRID, "g.yaml")
    result = jobs.sweep(spark, grid.expand(g), show_progress=False)
    meta = {"title": "share", "axes": g.describe_axes(), "settings": g.settings.to_json()}
    text = report.write(result, meta, tmp_path).read_text(encoding="utf-8")
    section = text.split("<h2>Moving a workload to a share group</h2>")[1].split("<h2>")[0]
    assert "uniform / KIP-848" in section and "server-range / KIP-848" in section
    assert "800 records per member crashing waited more than 1 s" in section
    assert report.SHARE_NOTE in text
    assert re.search(r"<td>simple / share group \(KIP-932\)</td>", text)
