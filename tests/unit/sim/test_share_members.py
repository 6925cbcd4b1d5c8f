"""Share members (KIP-932) in the simulator: the bundled crash story, records acknowledged exactly once, a
crashed member's records delivered again (at once when its connection drops, after the lock otherwise), the
summary's numbers worked out by hand on a tiny run, the share checks, poison records, a share group beside a
consumer group, and scenario validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from regroup.coordinator.share.partition import ACQUIRED, SharePartition
from regroup.sim import Simulator, load, parse, simulate
from regroup.sim.checks import SafetyChecker
from regroup.sim.eventlog import EventLog
from regroup.sim.scenario import ScenarioError
from regroup.sim.share_ledger import ShareLedger
from regroup.sim.summary import summarize_rows


def tiny(**share: Any) -> dict[str, Any]:
    """One partition with 6 records; c0 and c1 (both assigned it: more members than partitions) fetch 2 records
    at a time and take 10 ms per record; c1 crashes at 30 ms holding offsets 2 and 3. Links: 5 ms, no jitter."""
    return {
        "name": "tiny-share",
        "duration_ms": 2000,
        "network": {"latency_ms": 5},
        "topics": {"t": 1},
        "share": {"backlog": 6, "expect_drained": True, **share},
        "member_defaults": {
            "protocol": "share",
            "max_poll_records": 2,
            "processing_ms": 10,
            "heartbeat_phase": "aligned",
        },
        "members": [{"id": "c0"}, {"id": "c1"}],
        "events": [
            {"at_ms": 0, "action": "join", "member": "c0"},
            {"at_ms": 0, "action": "join", "member": "c1"},
            {"at_ms": 30, "action": "crash", "member": "c1"},
        ],
    }


def run(doc: dict[str, Any], seed: int = 0) -> Simulator:
    return simulate(parse(json.dumps(doc)), seed)


@cache
def crashes(seed: int = 0) -> Simulator:
    return simulate(load("share-member-crashes"), seed)


def rows_of(sim: Simulator, kind: str) -> list[dict[str, Any]]:
    return [e for e in sim.log.events if e["type"] == kind]


# ------------------------------------------------------------------------------------- the bundled story
def test_the_event_log_is_the_same_for_a_seed_and_the_seed_matters() -> None:
    assert simulate(load("share-member-crashes"), 0).log.text() == crashes(0).log.text()
    assert crashes(1).log.text() != crashes(0).log.text()  # jitter and processing times are drawn


def test_the_log_does_not_depend_on_hash_order(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny()))
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"events-{hash_seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run(
            [sys.executable, "-m", "regroup", "simulate", str(path), "--events", str(out), "--summary-json"],
            check=True, capture_output=True, env=env, timeout=120,
        )  # fmt: skip
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] == run(tiny()).log.text()


def test_every_record_is_acknowledged_exactly_once_in_a_quiet_run() -> None:
    sim = crashes()
    assert sim.checker.violations == []
    ends = {(e["topic"], e["partition"]): e["value"] for e in rows_of(sim, "share_partition") if e["state"] == "final"}
    assert ends == {("orders", p): 3000 + 20 * 40 for p in range(3)}  # the backlog and 40 s of production
    accepted = Counter(
        (e["topic"], e["partition"], e["value"])
        for e in rows_of(sim, "share_acknowledged")
        if e["error"] == "NONE" and e["state"] == "accept"
    )
    assert set(accepted.values()) == {1}
    assert set(accepted) == {(t, p, offset) for (t, p), end in ends.items() for offset in range(end)}
    share = summarize_rows(sim.log.rows).share
    assert share is not None
    assert (share.records, share.accepted, share.undone, share.archived) == (11400, 11400, 0, 0)


def test_the_crashed_members_records_go_back_at_once_and_survivors_take_them_at_delivery_count_2() -> None:
    sim = crashes()
    (crash,) = [e["t"] for e in rows_of(sim, "action") if e["detail"] == "crash"]
    released = [e for e in rows_of(sim, "share_released") if e["member"] == "c1"]
    assert released and {e["state"] for e in released} == {"disconnect"}
    assert all(crash < e["t"] <= crash + 8 for e in released)  # one link latency (5 + up to 3 ms jitter)
    (fenced,) = [e["t"] for e in rows_of(sim, "share_member") if e["member"] == "c1" and e["state"] == "left"]
    again = {(e["topic"], e["partition"], e["value"]): e for e in rows_of(sim, "share_acquired") if e["t"] > crash}
    for e in released:
        redelivery = again[(e["topic"], e["partition"], e["value"])]
        assert redelivery["member"] in ("c0", "c2") and redelivery["generation"] == 2
        assert redelivery["t"] > fenced  # nobody else fetched from c1's partition until it was fenced
    share = summarize_rows(sim.log.rows).share
    assert share is not None
    assert share.redeliveries == share.delayed_by_crash.records == len(released)
    assert share.delayed_by_crash.min_delay_ms >= 9000  # the last heartbeat before the crash + 10 s, at least


# --------------------------------------------------------------------------------------- by hand
def test_the_summary_of_a_tiny_run_worked_out_by_hand() -> None:
    # 5: c0 joins (epoch 1) and t-0 starts at 0; c1 joins (epoch 2); both are assigned t-0. 15: c0 acquires 0-1,
    # c1 acquires 2-3. 30: c1 crashes; 35: its connection's close releases 2-3. 40: c0 done (2 x 10 ms),
    # acknowledges 0-1 and, at 45, acquires 2-3 again (delivery count 2): 15 ms after the crash. 75: 4-5.
    sim = run(tiny())
    assert sim.checker.violations == []
    assert [(e["t"], e["member"], e["value"], e["generation"]) for e in rows_of(sim, "share_acquired")] == [
        (15, "c0", 0, 1), (15, "c0", 1, 1), (15, "c1", 2, 1), (15, "c1", 3, 1),
        (45, "c0", 2, 2), (45, "c0", 3, 2), (75, "c0", 4, 1), (75, "c0", 5, 1),
    ]  # fmt: skip
    assert summarize_rows(sim.log.rows).to_json()["share"] == {
        "records": 6,
        "delivered": 6,
        "deliveries": 8,
        "redeliveries": 2,
        "accepted": 6,
        "released": 0,
        "rejected": 0,
        "archived": 0,
        "undone": 0,
        "delayed_by_crash": {"records": 2, "min_delay_ms": 15, "max_delay_ms": 15, "mean_delay_ms": 15.0},
        "members": {
            "c0": {"acquired": 6, "accepted": 6, "running_ms": 2000, "records_per_s": 3.0},
            "c1": {"acquired": 2, "accepted": 0, "running_ms": 30, "records_per_s": 0.0},
        },
    }


def test_without_the_disconnect_the_records_wait_for_their_lock() -> None:
    # c1's locks (taken at 15 for 1000 ms) lapse at 1015, when c0's fetch is waiting: it gets 2-3 at once.
    doc = tiny(crash_disconnects=False)
    doc["coordinator"] = {"share_group_record_lock_duration_ms": 1000}
    sim = run(doc)
    assert sim.checker.violations == []
    assert [(e["t"], e["state"], e["value"]) for e in rows_of(sim, "share_released")] == [
        (1015, "lock", 2),
        (1015, "lock", 3),
    ]
    again = [(e["t"], e["member"], e["value"], e["generation"]) for e in rows_of(sim, "share_acquired")][-2:]
    assert again == [(1015, "c0", 2, 2), (1015, "c0", 3, 2)]
    share = summarize_rows(sim.log.rows).share
    assert share is not None
    assert (share.delayed_by_crash.records, share.delayed_by_crash.max_delay_ms) == (2, 1015 - 30)
    assert (share.accepted, share.undone) == (6, 0)


# ------------------------------------------------------------------------------------------ checks
def ledger() -> tuple[ShareLedger, SafetyChecker]:
    log = EventLog()
    checker = SafetyChecker(log)
    share = ShareLedger(log, checker, delivery_limit=5, name_of=lambda member_id: member_id.split("-")[0])
    share.started(0, ("t", 0), 0, "earliest")
    return share, checker


def test_the_checks_catch_a_record_held_twice_and_acknowledgements_that_cannot_be() -> None:
    share, checker = ledger()
    share.acquired(10, "a-1", ("t", 0), ((0, 1, 1),), deadline=1010, log_end=5)
    share.acquired(20, "b-1", ("t", 0), ((1, 1, 2),), deadline=1020, log_end=5)  # 1 is a's until 1010
    share.acknowledged(30, "b-1", ("t", 0), ((0, 0, 1),), "NONE")  # b does not hold 0
    share.acknowledged(40, "a-1", ("t", 0), ((0, 0, 1),), "NONE")
    share.acknowledged(50, "a-1", ("t", 0), ((0, 0, 1),), "NONE")  # twice
    share.acquired(60, "a-1", ("t", 0), ((7, 7, 1),), deadline=1060, log_end=5)  # past the log end
    assert [v.split(": ", 1)[1] for v in checker.violations] == [
        "t-0 offset 1 acquired by b while a holds it",
        "t-0 offset 0 acknowledged by b while not holding it",
        "t-0 offset 0 acknowledged by a after it was final",
        "t-0 offset 7 acquired by a outside [0, 5)",
    ]


def test_a_lapsed_lock_frees_the_record_and_a_late_acknowledgement_is_not_accepted() -> None:
    share, checker = ledger()
    share.acquired(10, "a-1", ("t", 0), ((0, 0, 1),), deadline=110, log_end=5)
    share.expire(110)
    share.acquired(120, "b-1", ("t", 0), ((0, 0, 2),), deadline=220, log_end=5)
    assert checker.violations == []
    share.acknowledged(130, "a-1", ("t", 0), ((0, 0, 1),), "NONE")  # the coordinator took a's late ack
    assert checker.violations == ["130 ms: t-0 offset 0 acknowledged by a while not holding it"]


def test_the_checks_catch_a_coordinator_that_takes_acknowledgements_after_the_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Locks of 15 ms, processing of 20 ms: every acknowledgement comes after the lock lapsed. The coordinator
    # refuses them and the records are delivered again until the delivery limit archives them...
    doc = tiny()
    doc["coordinator"] = {"share_group_record_lock_duration_ms": 15}
    doc["members"] = [{"id": "c0"}]
    doc["events"] = [{"at_ms": 0, "action": "join", "member": "c0"}]
    sim = run(doc)
    share = summarize_rows(sim.log.rows).share
    assert sim.checker.violations == [] and share is not None
    assert (share.accepted, share.archived, share.undone) == (0, 6, 0)
    # ... and one that takes them anyway (it hands the records back to the member first) is caught at once.
    original = SharePartition.acknowledge

    def lenient(self: SharePartition, member_id: str, batches: Any, now_ms: int, lock_ms: int) -> Any:
        for batch in batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                i = offset - self.start_offset
                if 0 <= i < len(self._states):
                    self._states[i], self._holders[i] = ACQUIRED, member_id
        return original(self, member_id, batches, now_ms, lock_ms)

    monkeypatch.setattr(SharePartition, "acknowledge", lenient)
    sim = run(doc)
    assert sim.checker.violations[0] == "45 ms: t-0 offset 0 acknowledged by c0 while not holding it"


def test_records_left_undone_in_a_run_that_should_end_quietly_are_a_violation() -> None:
    doc = tiny()
    doc["members"] = [{"id": "c0"}]
    doc["events"] = [{"at_ms": 0, "action": "join", "member": "c0"}, {"at_ms": 30, "action": "crash", "member": "c0"}]
    sim = run(doc)
    assert [v.split(": ", 1)[1] for v in sim.checker.violations] == [
        "6 records of t-0 neither acknowledged nor archived at the end (the first: offset 0)"
    ]


# ---------------------------------------------------------------------------------- failed records
def test_poison_records_rejected_are_archived_at_once() -> None:
    doc = tiny()
    doc["member_defaults"]["reject_fraction"] = 1.0
    sim = run(doc)
    share = summarize_rows(sim.log.rows).share
    assert sim.checker.violations == [] and share is not None
    assert (share.rejected, share.accepted, share.archived, share.undone) == (6, 0, 0, 0)


def test_released_records_come_back_until_the_delivery_limit_archives_them() -> None:
    doc = tiny()
    doc["coordinator"] = {"share_group_delivery_count_limit": 2}
    doc["member_defaults"]["release_fraction"] = 1.0
    sim = run(doc)
    share = summarize_rows(sim.log.rows).share
    assert sim.checker.violations == [] and share is not None
    # every record delivered twice; c1's first two were released by its crash, every other delivery by a RELEASE
    assert (share.delivered, share.deliveries, share.released, share.archived, share.undone) == (6, 12, 10, 6, 0)
    assert {e["generation"] for e in rows_of(sim, "share_archived")} == {2}


def test_a_member_that_leaves_acknowledges_its_batch_and_closes_its_session() -> None:
    doc = tiny()
    doc["events"][2] = {"at_ms": 30, "action": "leave", "member": "c1"}
    sim = run(doc)
    assert sim.checker.violations == []
    # c1 finishes its batch (2 records from 20 ms: until 40), acknowledges it closing its session, and leaves
    sent = [(e["t"], e["api"], e["detail"]) for e in rows_of(sim, "request_sent") if e["member"] == "c1"][-2:]
    assert sent == [(40, "ShareAcknowledge", "acks=2 close"), (40, "ShareGroupHeartbeat", "epoch=-1")]
    assert [e["detail"] for e in rows_of(sim, "share_member") if e["state"] == "left"] == ["leave"]
    share = summarize_rows(sim.log.rows).share
    assert share is not None and share.members["c1"].accepted == 2 and share.redeliveries == 0


# ------------------------------------------------------------------------- beside a consumer group
def test_a_share_group_beside_a_consumer_group_stays_out_of_its_checks_and_summary() -> None:
    doc = {
        "duration_ms": 20000,
        "group_id": "g",
        "network": {"latency_ms": 5, "jitter_ms": 2},
        "topics": {"t": 2},
        "share": {"group_id": "s", "backlog": 200, "expect_drained": True},
        "member_defaults": {"max_poll_records": 20},
        "members": [
            {"id": "k0", "protocol": "consumer"},
            {"id": "k1", "protocol": "consumer"},
            {"id": "s0", "protocol": "share"},
            {"id": "s1", "protocol": "share"},
        ],
        "events": [{"at_ms": 0, "action": "join", "member": m} for m in ("k0", "k1", "s0", "s1")],
    }
    sim = run(doc, seed=3)
    assert sim.checker.violations == []
    assert sim.quiescent()  # the consumer group's quiescence counts its own members only
    summary = summarize_rows(sim.log.rows)
    assert sorted(summary.final_assignment) == ["k0", "k1"]
    assert summary.share is not None and sorted(summary.share.members) == ["s0", "s1"]
    assert summary.share.accepted == 400
    assert {e["detail"] for e in rows_of(sim, "share_group_state")} >= {"group=s assignment_epoch=2"}


# ------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"members": [{"id": "a", "protocol": "share", "group_instance_id": "x"}]}, "members[0].group_instance_id"),
        ({"members": [{"id": "a" * 31, "protocol": "share"}]}, "members[0].id"),
        (
            {"members": [{"id": "a", "protocol": "share", "release_fraction": 0.6, "reject_fraction": 0.6}]},
            "members[0].reject_fraction",
        ),
        ({"members": [{"id": "a", "protocol": "share"}, {"id": "b"}]}, "share.group_id"),
        ({"share": {"auto_offset_reset": "by_duration:PT1M"}}, "share.auto_offset_reset"),
        ({"share": {"backlog": -1}}, "share.backlog"),
        ({"share": {"lag": 1}}, "share.lag"),
        (
            {
                "members": [{"id": "a", "protocol": "share"}],
                "events": [{"at_ms": 0, "action": "join", "member": "a", "protocol": "consumer"}],
            },
            "events[0].protocol",
        ),
    ],
)
def test_invalid_share_settings_name_the_field(change: dict[str, Any], message: str) -> None:
    doc: dict[str, Any] = {
        "duration_ms": 1000,
        "topics": {"t": 1},
        "members": [{"id": "a", "protocol": "share"}],
        "events": [{"at_ms": 0, "action": "join", "member": "a"}],
    }
    doc.update(change)
    with pytest.raises(ScenarioError) as raised:
        parse(json.dumps(doc), "s.json")
    assert str(raised.value).startswith(f"s.json: {message}: ")
