"""The event log's lines: every key, in the documented order, absent values null; unknown keys refused."""

from __future__ import annotations

import json

import pytest

from regroup.model.eventlog import FIELDS
from regroup.sim.eventlog import MEMBER, EventLog, event_count, expand, is_batch, partitions_of


def test_every_line_has_every_key_in_order() -> None:
    log = EventLog()
    log.emit(3, "assigned", member="a", topic="t", partition=1)
    log.emit(4, "topic", topic="t", value=2)
    lines = [json.loads(line) for line in log.lines()]
    assert [list(line) for line in lines] == [list(FIELDS), list(FIELDS)]
    assert lines[0] == dict.fromkeys(FIELDS) | {
        "seq": 0,
        "t": 3,
        "type": "assigned",
        "member": "a",
        "topic": "t",
        "partition": 1,
    }
    assert lines[1]["seq"] == 1 and lines[1]["member"] is None and lines[1]["value"] == 2


def test_events_do_not_share_state() -> None:
    log = EventLog()
    log.emit(1, "a", member="x")
    first = log.events[0]
    log.emit(2, "b")
    assert first["member"] == "x" and log.events[1]["member"] is None
    assert log.events[0] is first  # the dicts already built are kept; new rows get new dicts
    first["member"] = "changed"
    assert log.rows[0][MEMBER] == "x" and log.events[1]["member"] is None


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(TypeError, match="colour"):
        EventLog().emit(0, "x", member="a", colour="red")  # type: ignore[call-arg]


def test_a_batch_row_stands_for_one_event_per_partition() -> None:
    one_by_one, batched = EventLog(), EventLog()
    for log in (one_by_one, batched):
        log.emit(1, "callback", member="a", state="assigned", value=3)
    for topic, partition in (("t", 2), ("t", 0), ("u-x", 1)):
        one_by_one.emit(1, "assigned", member="a", generation=4, topic=topic, partition=partition, detail="why")
    batched.emit_partitions(1, "assigned", [("t", 2), ("t", 0), ("u-x", 1)], member="a", generation=4, detail="why")
    batched.emit_partitions(2, "revoked", [], member="a")  # nothing at all
    for log in (one_by_one, batched):
        log.emit(3, "topic", topic="t", value=3)
    assert list(batched.lines()) == list(one_by_one.lines())
    assert batched.events == one_by_one.events
    assert [e["seq"] for e in batched.events] == [0, 1, 2, 3, 4]
    assert len(batched.rows) == 3 and batched.count == 5 == event_count(batched.rows)
    assert partitions_of(batched.rows[1]) == (("t", 2), ("t", 0), ("u-x", 1)) and is_batch(batched.rows[1])
    assert list(expand(batched.rows)) == one_by_one.rows


def test_partitions_of_a_plain_row() -> None:
    log = EventLog()
    log.emit(0, "assigned", member="a", topic="t", partition=7)
    log.emit(0, "member_state", member="a", state="Stable")
    assert partitions_of(log.rows[0]) == (("t", 7),) and partitions_of(log.rows[1]) == ()
    assert not is_batch(log.rows[0]) and event_count(log.rows) == 2


def test_events_grow_across_batch_rows() -> None:
    log = EventLog()
    log.emit_partitions(0, "group_assignment", [("t", 0), ("t", 1)], member="a")
    assert [e["partition"] for e in log.events] == [0, 1]
    log.emit_partitions(5, "group_assignment", [("t", 2)], member="b")
    assert [(e["seq"], e["member"], e["partition"]) for e in log.events] == [(0, "a", 0), (1, "a", 1), (2, "b", 2)]
