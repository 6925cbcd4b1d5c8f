"""What the server's ``GroupEvents`` (``server/events.py``) writes for the timeline: rows handed to its sinks
with or without an events file (the same rows the file gets), a classic assignment's rows naming their group,
a leave's reason, and the cause of each rebalance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from regroup.coordinator.result import Result
from regroup.history import Timelines
from regroup.model.eventlog import FIELDS
from regroup.records.builders import (
    new_consumer_group_member_metadata_record,
    new_consumer_group_subscription_metadata_record,
)
from regroup.records.consumer import ConsumerGroupMemberMetadataValue
from regroup.records.model import Record
from regroup.server.events import GroupEvents, _metadata_cause
from regroup.sim import scenario as scenarios
from regroup.sim.engine import Simulator
from tests.coordinator.consumer_harness import ConsumerHarness


def simulate(name: str, observer: GroupEvents) -> None:
    sim = Simulator(scenarios.load(name), seed=1)
    route = sim.endpoint.route

    def observed_route(result: Result, now: int) -> Any:
        observer(sim.coordinator, result, now)
        return route(result, now)

    sim.endpoint.route = observed_route  # type: ignore[method-assign]
    sim.run()


def test_sinks_get_the_rows_the_file_gets(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    observer = GroupEvents(path)
    rows: list[dict[str, Any]] = []
    observer.add_sink(rows.append)
    simulate("third-member-joins-eager", observer)
    observer.close()
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows == written and rows
    assert all(tuple(r) == FIELDS for r in rows)


def test_without_a_file_the_rows_go_to_the_sinks_alone() -> None:
    observer = GroupEvents()
    rows: list[dict[str, Any]] = []
    observer.add_sink(rows.append)
    simulate("third-member-joins-eager", observer)
    assert [r["seq"] for r in rows] == list(range(len(rows)))
    assignments = [r for r in rows if r["type"] == "group_assignment"]
    assert assignments and all(r["detail"] == "group=g" for r in assignments)
    starts = [r["detail"].split()[-1] for r in rows if r["state"] == "PreparingRebalance"]
    assert starts == ["cause=join", "cause=join", "cause=join"]


def test_a_leave_s_reason_and_a_consumer_group_s_causes() -> None:
    observer = GroupEvents()
    rows: list[dict[str, Any]] = []
    observer.add_sink(rows.append)
    simulate("rolling-upgrade", observer)
    reasons = [r["detail"] for r in rows if r["type"] == "member_state" and r["state"] == "Left"]
    assert "group=g reason=leave" in reasons and "group=g reason=converted" in reasons
    causes = [
        (r["detail"].split()[1], r["detail"].split()[-1])
        for r in rows
        if r["type"] == "group_state" and "cause=" in r["detail"]
    ]
    # classic: three joins, the rejoin that completes the cooperative moves; the bounces: a leave, then on the
    # consumer side one join per new process and one leave per old one; back to classic with the last leave
    assert ("type=classic", "cause=metadata") in causes
    assert ("type=consumer", "cause=join") in causes and ("type=consumer", "cause=leave") in causes
    assert causes[-1] == ("type=classic", "cause=leave")
    assert all(not c.endswith("converted") for _, c in causes)


class ObservedConsumerHarness(ConsumerHarness):
    """Every result goes to ``GroupEvents`` (rows to a list), as the runtime feeds it."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.observer = GroupEvents()
        self.observer.add_sink(self.rows.append)
        super().__init__()

    def _collect(self, result: Result) -> Result:
        if hasattr(self, "coordinator"):
            self.observer(self.coordinator, result, self.now_ms)
        return super()._collect(result)

    def causes(self) -> list[str]:
        return [
            r["detail"].split("cause=")[1] for r in self.rows if r["type"] == "group_state" and "cause=" in r["detail"]
        ]


def test_a_consumer_group_s_epoch_rises_say_why() -> None:
    h = ObservedConsumerHarness()
    h.topics(foo=4, bar=2)
    a = h.join_cg(("foo",)).member_id
    assert a is not None
    h.settle([a])
    h.hb(a, h.cmember(a).member_epoch, topics=["foo", "bar"])  # its subscription
    h.settle([a])
    h.hb(a, h.cmember(a).member_epoch, rack_id="rack-1")  # (no partition has replica racks: no new epoch)
    h.settle([a])
    h.topics(foo=6)  # partitions added: the next heartbeat refreshes the subscription metadata
    h.hb(a, h.cmember(a).member_epoch)
    h.settle([a])
    assert h.causes() == ["join", "subscription", "metadata"]
    timelines = Timelines(10**9)
    timelines.observe_many(h.rows)
    timeline = timelines.timeline("group")
    assert timeline is not None
    assert [(r["epoch"], r["reason"], r["member"]) for r in timeline["rebalances"]] == [
        (1, "join", a),
        (2, "subscription", None),
        (3, "metadata", None),
    ]
    assert all(r["end_ms"] is not None for r in timeline["rebalances"])


def metadata(topics: tuple[str, ...], rack: str | None = None, assignor: str | None = None) -> Record:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=None,
        rack_id=rack,
        client_id="c",
        client_host="/h",
        subscribed_topic_names=topics,
        subscribed_topic_regex=None,
        server_assignor=assignor,
        rebalance_timeout_ms=1,
    )
    return new_consumer_group_member_metadata_record("k", "m", value)


def test_what_a_member_s_metadata_record_changed_names_the_cause() -> None:
    """(The records of a call whose epoch rose with no member joining or leaving.)"""
    marks: dict[str, Any] = {}
    assert _metadata_cause([metadata(("a",))], "k", marks, {"m"}) is None  # (a join: remembered only)
    assert _metadata_cause([metadata(("a",), rack="r1")], "k", marks, set()) == "rack"
    assert _metadata_cause([metadata(("a",), rack="r1", assignor="range")], "k", marks, set()) == "assignor"
    subscribed = [new_consumer_group_subscription_metadata_record("k", ()), metadata(("a", "b"), "r1", "range")]
    assert _metadata_cause(subscribed, "k", marks, set()) == "subscription"
    assert _metadata_cause(subscribed[:1], "k", marks, set()) == "metadata"
    assert _metadata_cause([metadata(("z",))], "other", marks, set()) is None  # (another group's records)
    assert _metadata_cause([metadata(("z",))], "k", {}, set()) == "subscription"  # (earlier metadata not known)
