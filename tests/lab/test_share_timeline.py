"""A real run's share timeline rebuilt from what the real share members wrote (lab/share_timeline.py), and the
share metrics of ``lab validate`` computed from it and from the simulator's log (lab/share_validate.py), with
exact expectations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from regroup.lab.real_share import process_log, timeline_rows
from regroup.lab.share_timeline import ShareProcessLog, fill_unseen, final_rows, process_rows, row, share_rows
from regroup.lab.share_validate import SHARE_METRICS, drained_ms, share_measure, share_partitions
from regroup.lab.validate import as_librdkafka, mean, metrics_of, side_values, within
from regroup.sim import simulate
from regroup.sim.eventlog import as_rows
from regroup.sim.scenario import parse

#: two share members on one partition of three records
DOC: dict[str, Any] = {
    "name": "tiny-share",
    "duration_ms": 2_000,
    "topics": {"t0": 1},
    "share": {"backlog": 3},
    "member_defaults": {"protocol": "share"},
    "members": [{"id": "c0"}, {"id": "c1"}],
    "events": [{"at_ms": 0, "action": "join", "member": "c0"}, {"at_ms": 0, "action": "join", "member": "c1"}],
}


def _brief(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    keys = ("t", "type", "member", "generation", "state", "error", "topic", "partition", "value")
    return [tuple(r[k] for k in keys) for r in rows]


def _log(member: str, lines: list[dict[str, Any]], crashed_ms: int | None = None) -> ShareProcessLog:
    return ShareProcessLog(member, 1, ("t0",), tuple(lines), crashed_ms)


def test_a_process_s_polls_become_acquisitions_and_acknowledgements() -> None:
    lines = [
        {"t": 0, "kind": "subscribed"},
        {"t": 0, "kind": "poll"},
        {"t": 20, "kind": "records", "records": [["t0", 0, 0, 1], ["t0", 0, 1, 1]]},
        {"t": 120, "kind": "poll"},
        {"t": 131, "kind": "records", "records": [["t0", 1, 0, 1]]},
        {"t": 131, "kind": "acked", "records": [["t0", 0, 0], ["t0", 0, 1]], "error": None},
        {"t": 200, "kind": "poll"},
    ]
    rows, waiting = process_rows(_log("c0", lines, crashed_ms=205), one_way_ms=5)
    assert waiting  # its last poll had no answer when it was killed
    assert _brief(rows) == [
        (0, "subscription", "c0", None, "share", None, None, None, 1),
        # acquired one link latency before the poll returned
        (15, "share_acquired", "c0", 1, None, None, "t0", 0, 0),
        (15, "share_acquired", "c0", 1, None, None, "t0", 0, 1),
        # acknowledged one link latency after the next poll started
        (125, "share_acknowledged", "c0", None, "accept", "NONE", "t0", 0, 0),
        (125, "share_acknowledged", "c0", None, "accept", "NONE", "t0", 0, 1),
        # never before the poll's request reached the broker
        (126, "share_acquired", "c0", 1, None, None, "t0", 1, 0),
        (205, "share_acknowledged", "c0", None, "accept", "NONE", "t0", 1, 0),
        (205, "member_state", "c0", None, "Crashed", None, None, None, None),
    ]
    assert rows[0]["detail"] == "t0"


def test_a_refused_acknowledgement_keeps_the_callback_s_error_and_a_close_acknowledges_the_last_batch() -> None:
    lines = [
        {"t": 0, "kind": "subscribed"},
        {"t": 0, "kind": "poll"},
        {"t": 30, "kind": "records", "records": [["t0", 0, 7, 2]]},
        {"t": 90, "kind": "poll"},
        {"t": 99, "kind": "acked", "records": [["t0", 0, 7]], "error": "INVALID_RECORD_STATE"},
        {"t": 99, "kind": "records", "records": [["t0", 0, 8, 1]]},
        {"t": 150, "kind": "commit"},
        {"t": 170, "kind": "closed"},
    ]
    rows, waiting = process_rows(_log("c1", lines), one_way_ms=2)
    assert not waiting
    assert _brief(rows)[1:] == [
        (28, "share_acquired", "c1", 2, None, None, "t0", 0, 7),
        (92, "share_acknowledged", "c1", None, "accept", "INVALID_RECORD_STATE", "t0", 0, 7),
        (97, "share_acquired", "c1", 1, None, None, "t0", 0, 8),
        (152, "share_acknowledged", "c1", None, "accept", "NONE", "t0", 0, 8),
        (170, "member_state", "c1", None, "Left", None, None, None, None),
    ]


def test_deliveries_nobody_saw_go_to_the_last_process_killed_waiting_before_them() -> None:
    seen = [
        row(3_000, "share_acquired", member="c0", generation=2, topic="t0", partition=0, value=5),
        row(3_000, "share_acquired", member="c0", generation=1, topic="t0", partition=0, value=6),
        row(500, "share_acquired", member="c2", generation=1, topic="t0", partition=0, value=7),
        row(4_000, "share_acquired", member="c0", generation=3, topic="t0", partition=0, value=7),
        row(800, "share_acquired", member="c0", generation=2, topic="t0", partition=0, value=9),
    ]
    added = fill_unseen(seen, [(900, "c1"), (1_000, "c2")])
    assert _brief(added) == [
        (1_000, "share_acquired", "c2", 1, None, None, "t0", 0, 5),  # its first delivery, to the last killed
        (1_000, "share_acquired", "c2", 2, None, None, "t0", 0, 7),  # seen at 1 and 3: the 2nd went unseen
    ]  # offset 9 at count 2 came before any crash: nothing is made up for it


def _timeline() -> list[dict[str, Any]]:
    """c0 takes offsets 0 and 1 and is killed processing them at 100 ms; c1 takes 2, then 0 and 1 again."""
    c0 = [
        {"t": 0, "kind": "subscribed"},
        {"t": 0, "kind": "poll"},
        {"t": 20, "kind": "records", "records": [["t0", 0, 0, 1], ["t0", 0, 1, 1]]},
    ]
    c1 = [
        {"t": 0, "kind": "subscribed"},
        {"t": 0, "kind": "poll"},
        {"t": 20, "kind": "records", "records": [["t0", 0, 2, 1]]},
        {"t": 60, "kind": "poll"},
        {"t": 1_100, "kind": "records", "records": [["t0", 0, 0, 2], ["t0", 0, 1, 2]]},
        {"t": 1_200, "kind": "poll"},
    ]
    rows = share_rows([_log("c0", c0, crashed_ms=100), _log("c1", c1)], one_way_ms=5)
    rows += final_rows({("t0", 0): 3}, 2_000)
    rows.append(row(2_000, "sim_end", value=0))
    rows.sort(key=lambda r: r["t"])
    for seq, r in enumerate(rows):
        r["seq"] = seq
    return rows


def test_the_share_metrics_of_a_real_timeline() -> None:
    scenario = parse(json.dumps(DOC), "tiny.json")
    metrics = share_measure(as_rows(_timeline()), scenario)
    assert metrics == {
        "accepted": 3.0,
        "records_per_member_s": 0.75,  # c0: 0 in 100 ms; c1: 3 in 2,000 ms, 1.5/s
        "redeliveries": 2.0,
        "delayed_records": 2.0,  # what c0 held when it was killed
        "delay_mean_ms": 995.0,  # taken again at 1,095 ms (one latency before c1's poll returned)
        "drained_ms": 1_205.0,  # the last of the backlog accepted with c1's poll at 1,200 ms
    }


def test_the_backlog_drains_only_when_every_record_of_it_was_accepted() -> None:
    rows = as_rows(_timeline())
    assert drained_ms(rows, 3, [("t0", 0)]) == 1_205
    assert drained_ms(rows, 2, [("t0", 0)]) == 1_205  # offsets 0 and 1
    assert drained_ms(rows, 4, [("t0", 0)]) is None  # offset 3 never came
    assert drained_ms(rows, 3, [("t0", 0), ("t0", 1)]) is None  # nothing of t0-1
    assert drained_ms(rows, 0, [("t0", 0)]) is None


def test_the_simulator_s_log_is_measured_the_same_way() -> None:
    """Two members drain 3 records each of two partitions; the summary's figures, exactly."""
    doc = {**DOC, "topics": {"t0": 2}, "member_defaults": {"protocol": "share", "processing_ms": 10}}
    scenario = parse(json.dumps(doc), "tiny.json")
    assert share_partitions(scenario) == [("t0", 0), ("t0", 1)]
    metrics = share_measure(simulate(as_librdkafka(scenario), 0).log.rows, scenario)
    assert metrics["accepted"] == 6 and metrics["redeliveries"] == 0 and metrics["delayed_records"] == 0
    assert metrics["delay_mean_ms"] is None
    assert metrics["drained_ms"] is not None and 0 < metrics["drained_ms"] < 200
    assert metrics["records_per_member_s"] == 1.5  # 3 records each in 2 s


def test_share_scenarios_are_validated_on_the_queue_s_metrics() -> None:
    assert metrics_of("share") == SHARE_METRICS
    assert "unowned_partition_ms" in metrics_of("eager")
    assert mean([None, 2.0, 4.0]) == 3.0 and mean([None]) is None
    assert within("delay_mean_ms", 9_000, 10_000) and not within("delay_mean_ms", 8_900, 10_000)
    assert within("accepted", 110, 100) and not within("accepted", 111, 100)
    assert within("redeliveries", 0, 0) and not within("redeliveries", 100, 0)
    assert within("drained_ms", None, 27_000) is False


def test_a_backlog_some_runs_did_not_drain_counts_the_scenario_s_end() -> None:
    scenario = parse(json.dumps(DOC), "tiny.json")
    found: list[dict[str, float | None]] = [{"drained_ms": 1_500.0}, {"drained_ms": None}]
    assert side_values("drained_ms", found, scenario) == [1_500.0, 2_000.0]
    assert side_values("drained_ms", [{"drained_ms": None}], scenario) == [None]  # no run drained: no value
    assert side_values("delay_mean_ms", [{"delay_mean_ms": None}], scenario) == [None]


def test_a_process_s_output_is_read_in_scenario_time(tmp_path: Path) -> None:
    out = tmp_path / "member-c0-2.jsonl"
    out.write_text(
        "".join(
            json.dumps(line) + "\n"
            for line in [
                {"t": 1_000_012.4, "kind": "subscribed"},
                {"t": 1_000_020.0, "kind": "error", "detail": "fatal: something"},
            ]
        )
    )
    member = parse(json.dumps(DOC), "tiny.json").member("c0")
    log = process_log(member, 2, out, 40, lambda wall_ms: round(wall_ms - 1_000_000))
    lines = ({"t": 12, "kind": "subscribed"}, {"t": 20, "kind": "error", "detail": "fatal: something"})
    assert log == ShareProcessLog("c0", 2, ("t0",), lines, 40)
    assert process_log(member, 3, tmp_path / "missing.jsonl", None, round).lines == ()


def test_a_real_run_s_share_rows_stop_at_the_scenario_s_end_with_each_partition_s_log_end() -> None:
    scenario = parse(json.dumps({**DOC, "network": {"latency_ms": 4, "jitter_ms": 2}}), "tiny.json")
    lines = [
        {"t": 0, "kind": "subscribed"},
        {"t": 0, "kind": "poll"},
        {"t": 10, "kind": "records", "records": [["t0", 0, 0, 1]]},
        {"t": 1_998, "kind": "poll"},  # its acknowledgement reaches the broker after the end
        {"t": 1_999, "kind": "error", "detail": "poll: timed out"},
    ]
    notes: list[str] = []
    rows = timeline_rows([_log("c0", lines)], scenario, {("t0", 0): 3}, notes)
    assert _brief(rows) == [
        (0, "subscription", "c0", None, "share", None, None, None, 1),
        (5, "share_acquired", "c0", 1, None, None, "t0", 0, 0),  # one way: latency + half the jitter
        (2_000, "share_partition", None, None, "final", None, "t0", 0, 3),
    ]
    assert notes == ["c0: poll: timed out"]
