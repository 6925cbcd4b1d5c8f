"""``regroup lab validate`` on a share group: one short scenario end to end (the simulator, then ``regroup serve``
with real confluent-kafka ShareConsumers and the scenario's workload produced), and the share scenarios a real
run refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from regroup.lab.real_run import RealRunError, check
from regroup.lab.share_workload import ShareWorkload
from regroup.sim.scenario import load, parse
from tests.lab.test_validate import regroup

pytest.importorskip("confluent_kafka")

#: two share members on one partition that never runs dry (both fetch from it); c1's host vanishes at 4.5 s with a
#: batch in hand (killed, its connection left open: ``crash_disconnects`` false), so the batch comes back to c0
#: when its 2 s locks lapse
SHORT: dict[str, Any] = {
    "name": "short-share-crash",
    "duration_ms": 9_000,
    "coordinator": {
        "share_group_heartbeat_interval_ms": 1_000,
        "share_group_session_timeout_ms": 3_500,
        "share_group_record_lock_duration_ms": 2_000,
    },
    "network": {"latency_ms": 2},
    "topics": {"t0": 1},
    "share": {"backlog": 10_000, "crash_disconnects": False},
    "member_defaults": {"protocol": "share", "max_poll_records": 50, "processing_ms": 4},
    "members": [{"id": "c0"}, {"id": "c1"}],
    "events": [
        {"at_ms": 0, "action": "join", "member": "c0"},
        {"at_ms": 1_000, "action": "join", "member": "c1"},
        {"at_ms": 4_500, "action": "crash", "member": "c1"},
    ],
}


@pytest.mark.timeout(300)
def test_a_short_share_scenario_is_predicted_and_measured(tmp_path: Path) -> None:
    scenario = tmp_path / "short.json"
    scenario.write_text(json.dumps(SHORT))
    proc = regroup("lab", "validate", str(scenario), "--out", str(tmp_path / "out"), "--repeat", "1", "--seeds", "4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "validation.json").read_text())
    rows = {row["metric"]: row for row in doc["rows"]}
    assert {row["protocol"] for row in doc["rows"]} == {"share"}
    assert set(rows) == {"accepted", "records_per_member_s", "redeliveries", "delayed_records", "delay_mean_ms"}
    assert set(doc["targets"]) == set(rows)  # (no backlog drained: no drain time, on either side)
    # the killed member held one batch: both sides deliver exactly it again
    assert rows["redeliveries"]["predicted"] == rows["redeliveries"]["measured"] == 50
    assert rows["delayed_records"]["predicted"] == rows["delayed_records"]["measured"] == 50
    # ... once their locks lapsed, 2 s after they were acquired (at most one 200 ms batch before the crash), at
    # c0's next fetch
    for side in ("predicted", "measured"):
        assert 1_500 < rows["delay_mean_ms"][side] < 2_600, rows["delay_mean_ms"]
        assert rows["accepted"][side] > 1_000
    timeline = [json.loads(line) for line in (tmp_path / "out" / "real-1.jsonl").read_text().splitlines()]
    assert {e["member"] for e in timeline if e["type"] == "subscription"} == {"c0", "c1"}
    assert [e["t"] for e in timeline if e["type"] == "member_state" and e["state"] == "Crashed"] != []
    assert "accepted" in (tmp_path / "out" / "validation.html").read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"share": {"auto_offset_reset": "latest"}}, "earliest"),
        ({"members": [{"id": "c0", "release_fraction": 0.1}, {"id": "c1"}]}, "accept every record"),
        ({"coordinator": {"share_group_max_record_lock_duration_ms": 90_000}}, "no flag"),
    ],
)
def test_what_a_real_run_cannot_play_of_a_share_group_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RealRunError, match=message):
        check(parse(json.dumps({**SHORT, **change}), "x.json"))


def test_share_members_play_as_share_consumers() -> None:
    assert check(parse(json.dumps(SHORT), "x.json")) == "share"


def test_the_workload_s_log_ends_follow_the_simulated_schedule() -> None:
    """Each partition's end offset at a time, as ``sim.share_log`` has it: the backlog, then one record every
    ``1000 / rate`` ms until the production stops (here at 1.5 s, before the scenario's 2 s end)."""
    spec = parse(json.dumps({**SHORT, "share": {"backlog": 5, "rate_per_s": 20, "produce_until_ms": 1_500}}), "x")
    workload = ShareWorkload("127.0.0.1:1", spec.share, {"t0": 2}, until_ms=2_000)
    try:
        assert workload.ends(0) == {("t0", 0): 5, ("t0", 1): 5}
        assert workload.ends(500) == {("t0", 0): 15, ("t0", 1): 15}
        assert workload.ends(2_000) == {("t0", 0): 35, ("t0", 1): 35}
    finally:
        workload.stop()


def test_every_shipped_validation_scenario_can_be_played_for_real() -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "lab" / "validate"
    protocols = {path.stem: check(load(str(path))) for path in sorted(root.glob("*.json"))}
    assert {name: p for name, p in protocols.items() if name.startswith("share-")} == {
        "share-crash-busy": "share",
        "share-crash-lock": "share",
        "share-join-busy": "share",
    }
    assert len(protocols) >= 11
