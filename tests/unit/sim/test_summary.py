"""The summary is a function of the event log: rebalance episodes, moves, revocations and unowned time."""

from __future__ import annotations

from regroup.sim.eventlog import EventLog
from regroup.sim.summary import summarize


def story() -> EventLog:
    log = EventLog()
    log.emit(0, "topic", topic="t", value=2)
    log.emit(0, "subscription", member="a", detail="t")
    log.emit(0, "member_state", member="a", state="PreparingRebalance")
    log.emit(5, "group_state", state="Empty", generation=0)
    log.emit(10, "group_state", state="PreparingRebalance", generation=0)
    log.emit(10, "group_state", state="CompletingRebalance", generation=1)
    log.emit(20, "group_state", state="Stable", generation=1)
    for p in (0, 1):
        log.emit(20, "group_assignment", member="a", generation=1, topic="t", partition=p)
    log.emit(25, "callback", member="a", generation=1, state="assigned", value=2)
    for p in (0, 1):
        log.emit(25, "assigned", member="a", generation=1, topic="t", partition=p)
    log.emit(100, "subscription", member="b", detail="t")
    log.emit(100, "member_state", member="b", state="PreparingRebalance")
    log.emit(110, "group_state", state="PreparingRebalance", generation=1)
    log.emit(115, "callback", member="a", generation=1, state="revoked", value=1)
    log.emit(115, "revoked", member="a", generation=1, topic="t", partition=1)
    log.emit(120, "group_state", state="CompletingRebalance", generation=2)
    log.emit(125, "group_state", state="PreparingRebalance", generation=2)  # interrupted: a second round
    log.emit(128, "group_state", state="CompletingRebalance", generation=3)
    log.emit(130, "group_state", state="Stable", generation=3)
    log.emit(130, "group_assignment", member="a", generation=3, topic="t", partition=0)
    log.emit(130, "group_assignment", member="b", generation=3, topic="t", partition=1)
    log.emit(135, "callback", member="a", generation=3, state="assigned", value=0)
    log.emit(140, "callback", member="b", generation=3, state="assigned", value=1)
    log.emit(140, "assigned", member="b", generation=3, topic="t", partition=1)
    log.emit(150, "violation", detail="something")
    log.emit(160, "member_state", member="a", state="Left")
    return log


def test_episodes_moves_revocations_and_unowned_time() -> None:
    summary = summarize(story().events)
    first, second = summary.rebalances
    assert first.to_json() == {
        "generation": 1,
        "start_ms": 10,
        "end_ms": 25,
        "rounds": 1,
        "moved": 0,
        "revoked": 0,
        "unowned_partition_ms": 2 * 25,  # both partitions from t=0 until a starts processing at 25
    }
    assert second.to_json() == {
        "generation": 3,
        "start_ms": 110,
        "end_ms": 140,  # the last member applied its assignment
        "rounds": 2,
        "moved": 1,
        "revoked": 1,
        "unowned_partition_ms": 25,  # t-1 from 115 to 140
    }
    assert second.unowned_partitions == ["t-1"]
    assert summary.violations == ["150 ms: something"]
    assert summary.final_assignment == {"b": {"t": [1]}}  # a left


def test_measure_from_skips_the_warm_up() -> None:
    summary = summarize(story().events, measure_from_ms=100)
    assert [r.generation for r in summary.rebalances] == [3]
    assert set(summary.to_json()) == {"rebalances", "violations", "final_assignment"}
