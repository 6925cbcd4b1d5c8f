"""The timeline over rows the real core makes: the simulator's bundled scenarios run the coordinator with real
members, every result goes to the server's ``GroupEvents`` (no events file: rows only to its sink, as the
server feeds the timeline), and the timeline those rows build must hold its invariants: one partition's
ownership intervals never overlap, and each rebalance's ``moved`` and ``unowned_partition_ms`` are what the
intervals say (the gaps between one partition's intervals, within the rebalance)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from regroup.coordinator.result import Result
from regroup.history import Timelines
from regroup.server.events import GroupEvents
from regroup.sim import scenario as scenarios
from regroup.sim.engine import Simulator


def run(name: str) -> tuple[Timelines, list[dict[str, Any]]]:
    sim = Simulator(scenarios.load(name), seed=1)
    observer = GroupEvents()
    rows: list[dict[str, Any]] = []
    timelines = Timelines(10**9)
    observer.add_sink(rows.append)
    observer.add_sink(timelines.observe)
    route = sim.endpoint.route

    def observed_route(result: Result, now: int) -> Any:
        observer(sim.coordinator, result, now)
        return route(result, now)

    sim.endpoint.route = observed_route  # type: ignore[method-assign]
    sim.run()
    return timelines, rows


def by_partition(ownership: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for i in ownership:
        out.setdefault((i["topic"], i["partition"]), []).append(i)
    return out


def check_invariants(timeline: dict[str, Any], now: int) -> None:
    partitions = by_partition(timeline["ownership"])
    gaps: list[tuple[int, int, str, str | None, tuple[str, int]]] = []  # (from, to, last owner, next owner, key)
    for key, intervals in partitions.items():
        for before, after in itertools.pairwise(intervals):
            assert before["to_ms"] is not None and before["to_ms"] <= after["from_ms"], (key, before, after)
        following: list[dict[str, Any] | None] = [*intervals[1:], None]
        for before, successor in zip(intervals, following, strict=True):
            if before["to_ms"] is not None:
                until = now if successor is None else successor["from_ms"]
                new_owner = None if successor is None else successor["member_id"]
                gaps.append((before["to_ms"], until, before["member_id"], new_owner, key))
    moves = {(to, key) for since, to, last, new, key in gaps if new is not None and new != last}
    counted: set[tuple[int, tuple[str, int]]] = set()
    for r in timeline["rebalances"]:
        start, end = r["start_ms"], r["end_ms"] if r["end_ms"] is not None else now
        unowned = sum(max(0, min(to, end) - max(since, start)) for since, to, *_ in gaps)
        assert r["unowned_partition_ms"] == unowned, r
        within = {(to, key) for to, key in moves if start <= to <= end}
        assert r["moved"] <= len({key for _, key in within}), r
        counted |= within
    # (a move at the very time one rebalance ends and the next starts counts in one of them)
    assert sum(r["moved"] for r in timeline["rebalances"]) == len(counted)


@pytest.mark.parametrize(
    "name",
    ["third-member-joins-eager", "third-member-joins-cooperative", "third-member-joins-consumer", "rolling-upgrade"],
)
def test_the_timeline_of_a_simulated_group_holds_its_invariants(name: str) -> None:
    timelines, rows = run(name)
    assert timelines.group_ids() == ["g"]
    timeline = timelines.timeline("g")
    assert timeline is not None and timeline["rebalances"] and timeline["ownership"]
    check_invariants(timeline, max(row["t"] for row in rows))


def test_eager_a_third_member_s_join_stops_every_partition() -> None:
    timelines, rows = run("third-member-joins-eager")
    timeline = timelines.timeline("g")
    assert timeline is not None
    last = timeline["rebalances"][-1]
    joined = [r["member_id"] for r in rows if r["type"] == "member_state" and r["state"] == "Joined"]
    assert (last["reason"], last["member"], last["generation"]) == ("join", joined[-1], 3)
    assert last["start_ms"] >= 30_000 and last["end_ms"] is not None
    # range over three partitions: c0 [p0, p1], c1 [p2] -> one each: p1 and p2 change owner; all three stop
    assert last["moved"] == 2
    assert last["unowned_partition_ms"] == 3 * (last["end_ms"] - last["start_ms"])


def test_cooperative_only_the_moving_partition_stops() -> None:
    timelines, _ = run("third-member-joins-cooperative")
    timeline = timelines.timeline("g")
    assert timeline is not None
    late = [r for r in timeline["rebalances"] if r["start_ms"] >= 30_000]
    assert [r["reason"] for r in late] == ["join", "metadata"]  # (the second: the revoking member rejoins)
    assert sum(r["moved"] for r in late) == 1
    assert late[0]["moved"] == 0 and late[1]["moved"] == 1
    assert late[0]["unowned_partition_ms"] == late[0]["end_ms"] - late[0]["start_ms"]
    closed_late = [i for i in timeline["ownership"] if i["to_ms"] is not None and i["to_ms"] >= 30_000]
    assert len(closed_late) == 1  # only the moving partition's interval ends


def test_consumer_one_epoch_per_join_and_only_the_moving_partition_stops() -> None:
    timelines, _ = run("third-member-joins-consumer")
    timeline = timelines.timeline("g")
    assert timeline is not None
    assert [(r["epoch"], r["reason"]) for r in timeline["rebalances"]] == [(1, "join"), (2, "join"), (3, "join")]
    assert all(r["end_ms"] is not None for r in timeline["rebalances"])
    assert [r["moved"] for r in timeline["rebalances"]] == [0, 1, 1]
    last = timeline["rebalances"][-1]
    moving = [i for i in timeline["ownership"] if i["to_ms"] is not None and i["to_ms"] >= last["start_ms"]]
    assert len(moving) == 1
    [taken] = [
        i
        for i in timeline["ownership"]
        if i["from_ms"] >= last["start_ms"]
        and (i["topic"], i["partition"]) == (moving[0]["topic"], moving[0]["partition"])
    ]
    assert last["unowned_partition_ms"] == taken["from_ms"] - moving[0]["to_ms"] > 0


def test_share_group_rebalances_by_epoch() -> None:
    timelines, _ = run("share-member-crashes")
    assert timelines.group_ids() == ["orders-workers"]
    timeline = timelines.timeline("orders-workers")
    assert timeline is not None
    assert [(r["epoch"], r["reason"]) for r in timeline["rebalances"]] == [
        (1, "join"),
        (2, "join"),
        (3, "join"),
        (4, "session-timeout"),
    ]
    assert all(r["end_ms"] is not None for r in timeline["rebalances"])
