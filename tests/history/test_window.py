"""A group's timeline read over [since, until], the window that ``prune`` keeps, and the caps that bound it."""

from __future__ import annotations

from regroup.history import Timelines
from tests.history.rows import Row, assignment, classic_state, interval, joined, left, rebalance

T0 = ("t", 0)


def rebalances(n: int, group: str = "g") -> list[Row]:
    """``n`` eager rebalances of one member, the i-th (from 1) from 100 i to 100 i + 10, its generation's
    assignment t-0."""
    rows = [classic_state(0, group, "Empty", 0)]
    for i in range(1, n + 1):
        rows += [
            joined(100 * i, group, "a", i - 1),
            classic_state(100 * i, group, "PreparingRebalance", i - 1, rebalance="eager", cause="join"),
            classic_state(100 * i + 5, group, "CompletingRebalance", i, rebalance="eager"),
            classic_state(100 * i + 10, group, "Stable", i, rebalance="eager"),
            *assignment(100 * i + 10, group, i, "a", T0),
        ]
    return rows


def test_since_and_until_keep_what_overlaps() -> None:
    timelines = Timelines(60_000)
    timelines.observe_many(rebalances(3))
    result = timelines.timeline("g", since_ms=205, until_ms=300)
    assert result == {
        "rebalances": [rebalance(200, 210, 2, "join", "a", 0, 10), rebalance(300, 310, 3, "join", "a", 0, 10)],
        "ownership": [interval("a", "t", 0, 210, 300)],
    }
    assert timelines.timeline("g", since_ms=311) == {"rebalances": [], "ownership": [interval("a", "t", 0, 310, None)]}
    assert timelines.timeline("g", until_ms=99) == {"rebalances": [], "ownership": []}
    assert timelines.timeline("g", until_ms=100)["rebalances"] == [rebalance(100, 110, 1, "join", "a", 0, 0)]  # type: ignore[index]
    assert timelines.timeline("g", since_ms=200, until_ms=200)["ownership"] == [interval("a", "t", 0, 110, 200)]  # type: ignore[index]
    assert timelines.timeline("nobody") is None


def test_prune_forgets_what_ended_before_the_window() -> None:
    timelines = Timelines(1_000)
    timelines.observe_many(rebalances(3))
    timelines.prune(1_209)  # cutoff 209: the first rebalance (ended 110) and the interval closed at 200 go
    result = timelines.timeline("g")
    assert result is not None
    assert [r["start_ms"] for r in result["rebalances"]] == [200, 300]
    assert result["ownership"] == [interval("a", "t", 0, 210, 300), interval("a", "t", 0, 310, None)]
    timelines.prune(10_000)  # the open interval stays, and so does its group
    assert timelines.timeline("g") == {"rebalances": [], "ownership": [interval("a", "t", 0, 310, None)]}


def test_prune_forgets_a_group_with_nothing_left() -> None:
    timelines = Timelines(1_000)
    timelines.observe_many(
        [
            *rebalances(1),
            left(500, "g", "a", "leave", 1),
            classic_state(500, "g", "PreparingRebalance", 1, cause="leave"),
            classic_state(501, "g", "Empty", 2),
        ]
    )
    timelines.observe_many(rebalances(1, group="h"))
    timelines.prune(1_400)
    assert timelines.group_ids() == ["g", "h"]
    timelines.prune(1_502)
    assert timelines.group_ids() == ["h"]
    assert timelines.timeline("g") is None


def test_caps_drop_the_oldest_first() -> None:
    timelines = Timelines(60_000, max_rebalances_per_group=2, max_intervals_per_group=3)
    timelines.observe_many(rebalances(5))
    result = timelines.timeline("g")
    assert result is not None
    assert [r["start_ms"] for r in result["rebalances"]] == [400, 500]
    assert result["ownership"] == [
        interval("a", "t", 0, 310, 400),
        interval("a", "t", 0, 410, 500),
        interval("a", "t", 0, 510, None),
    ]


def test_open_intervals_beyond_the_cap_are_bounded_too() -> None:
    timelines = Timelines(60_000, max_intervals_per_group=10)
    rows = [classic_state(0, "g", "Empty", 0), classic_state(1, "g", "Stable", 1)]
    rows += assignment(1, "g", 1, "a", *[("t", p) for p in range(100)])
    timelines.observe_many(rows)
    result = timelines.timeline("g")
    assert result is not None
    assert len(result["ownership"]) == 10


def test_groups_beyond_the_cap_drop_the_least_recent() -> None:
    timelines = Timelines(60_000, max_groups=2)
    for group in ("a", "b", "c"):
        timelines.observe(classic_state(0, group, "Empty", 0))
    timelines.observe(classic_state(1, "b", "Empty", 0))
    timelines.observe(classic_state(2, "d", "Empty", 0))
    assert timelines.group_ids() == ["b", "d"]
