"""The event log's lines: every key, in the documented order, absent values null; unknown keys refused."""

from __future__ import annotations

import json

import pytest

from regroup.sim.eventlog import FIELDS, MEMBER, EventLog


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
