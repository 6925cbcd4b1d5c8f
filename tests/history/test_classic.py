"""A classic group's timeline from hand-written rows: eager and cooperative rebalancing, the reason and the
member that started a rebalance, and the rebalances that end in an empty group."""

from __future__ import annotations

from regroup.history import Timelines
from tests.history.rows import Row, assignment, classic_state, interval, joined, left, rebalance

T0, T1, T2, T3 = ("t", 0), ("t", 1), ("t", 2), ("t", 3)


def formed(style: str) -> list[Row]:
    """a and b form the group: generation 1, a holds t-0 and t-1, b t-2 and t-3 from 25."""
    return [
        classic_state(0, "g", "Empty", 0),
        joined(10, "g", "a"),
        classic_state(10, "g", "PreparingRebalance", 0, rebalance=style, cause="join"),
        joined(12, "g", "b"),
        classic_state(20, "g", "CompletingRebalance", 1, rebalance=style),
        classic_state(25, "g", "Stable", 1, rebalance=style),
        *assignment(25, "g", 1, "a", T0, T1),
        *assignment(25, "g", 1, "b", T2, T3),
    ]


def b_times_out(style: str) -> list[Row]:
    """b's session times out at 100; a holds every partition from 120 (generation 2)."""
    return [
        left(100, "g", "b", "session-timeout", 1),
        classic_state(100, "g", "PreparingRebalance", 1, rebalance=style, cause="session-timeout"),
        classic_state(110, "g", "CompletingRebalance", 2, rebalance=style),
        classic_state(120, "g", "Stable", 2, rebalance=style),
        *assignment(120, "g", 2, "a", T0, T1, T2, T3),
    ]


def test_eager_every_partition_is_unowned_until_the_new_assignment() -> None:
    timelines = Timelines(60_000)
    timelines.observe_many(formed("eager") + b_times_out("eager"))
    assert timelines.timeline("g") == {
        "rebalances": [
            rebalance(10, 25, 1, "join", "a", 0, 0),
            # t-2 and t-3 moved from b to a; four partitions unowned for 20 ms each
            rebalance(100, 120, 2, "session-timeout", "b", 2, 80),
        ],
        "ownership": [
            interval("a", "t", 0, 25, 100),
            interval("a", "t", 1, 25, 100),
            interval("b", "t", 2, 25, 100),
            interval("b", "t", 3, 25, 100),
            interval("a", "t", 0, 120, None),
            interval("a", "t", 1, 120, None),
            interval("a", "t", 2, 120, None),
            interval("a", "t", 3, 120, None),
        ],
    }
    assert timelines.group_ids() == ["g"]
    assert timelines.latest_ms("g") == 120


def test_an_unknown_style_is_eager() -> None:
    timelines = Timelines(60_000)
    timelines.observe_many(formed("") + b_times_out(""))
    result = timelines.timeline("g")
    assert result is not None
    assert [r["unowned_partition_ms"] for r in result["rebalances"]] == [0, 80]


def test_cooperative_kept_partitions_stay_owned() -> None:
    timelines = Timelines(60_000)
    timelines.observe_many(formed("cooperative") + b_times_out("cooperative"))
    assert timelines.timeline("g") == {
        "rebalances": [
            rebalance(10, 25, 1, "join", "a", 0, 0),
            rebalance(100, 120, 2, "session-timeout", "b", 2, 40),  # only t-2 and t-3, 20 ms each
        ],
        "ownership": [
            interval("a", "t", 0, 25, None),
            interval("a", "t", 1, 25, None),
            interval("b", "t", 2, 25, 100),
            interval("b", "t", 3, 25, 100),
            interval("a", "t", 2, 120, None),
            interval("a", "t", 3, 120, None),
        ],
    }


def test_a_cooperative_move_in_two_rebalances_counts_once_where_it_completes() -> None:
    """KIP-429: c joins; a gives up t-2 and t-3 in the first rebalance, c takes them in the second."""
    rows = [
        classic_state(0, "g", "Empty", 0),
        joined(10, "g", "a"),
        classic_state(10, "g", "PreparingRebalance", 0, rebalance="cooperative", cause="join"),
        classic_state(15, "g", "CompletingRebalance", 1, rebalance="cooperative"),
        classic_state(20, "g", "Stable", 1, rebalance="cooperative"),
        *assignment(20, "g", 1, "a", T0, T1, T2, T3),
        joined(200, "g", "c", 1),
        classic_state(200, "g", "PreparingRebalance", 1, rebalance="cooperative", cause="join"),
        classic_state(205, "g", "CompletingRebalance", 2, rebalance="cooperative"),
        classic_state(210, "g", "Stable", 2, rebalance="cooperative"),
        *assignment(210, "g", 2, "a", T0, T1),
        classic_state(220, "g", "PreparingRebalance", 2, rebalance="cooperative", cause="metadata"),
        classic_state(225, "g", "CompletingRebalance", 3, rebalance="cooperative"),
        classic_state(230, "g", "Stable", 3, rebalance="cooperative"),
        *assignment(230, "g", 3, "a", T0, T1),
        *assignment(230, "g", 3, "c", T2, T3),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("g")
    assert result is not None
    assert result["rebalances"] == [
        rebalance(10, 20, 1, "join", "a", 0, 0),
        rebalance(200, 210, 2, "join", "c", 0, 20),  # t-2, t-3 given up at 200, nobody holds them at 210
        rebalance(220, 230, 3, "metadata", None, 2, 20),  # held by c from 230: 10 ms each in this rebalance
    ]
    assert [i for i in result["ownership"] if i["partition"] == 2] == [
        interval("a", "t", 2, 20, 200),
        interval("c", "t", 2, 230, None),
    ]


def test_a_rebalance_that_empties_the_group_ends_there() -> None:
    rows = [
        *formed("eager"),
        left(300, "g", "a", "leave", 1),
        classic_state(300, "g", "PreparingRebalance", 1, rebalance="eager", cause="leave"),
        left(301, "g", "b", "leave", 1),
        classic_state(301, "g", "Empty", 2),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("g")
    assert result is not None
    assert result["rebalances"][-1] == rebalance(300, 301, 2, "leave", "a", 0, 4)
    assert all(i["to_ms"] == 300 for i in result["ownership"])


def test_an_open_rebalance_has_no_end_and_counts_its_unowned_time_so_far() -> None:
    rows = [
        *formed("eager"),
        joined(400, "g", "c", 1),
        classic_state(400, "g", "PreparingRebalance", 1, rebalance="eager", cause="join"),
        classic_state(407, "g", "CompletingRebalance", 2, rebalance="eager"),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("g")
    assert result is not None
    assert result["rebalances"][-1] == rebalance(400, None, 2, "join", "c", 0, 28)  # 4 partitions, 7 ms so far


def test_a_rebalance_without_a_cause_takes_the_member_row_before_it() -> None:
    """Rows of a server that wrote no ``cause``: the member_state row since the last group_state row."""
    rows = [
        classic_state(0, "g", "Empty", 0),
        joined(10, "g", "a"),
        classic_state(10, "g", "PreparingRebalance", 0),
        classic_state(11, "g", "CompletingRebalance", 1),
        classic_state(12, "g", "Stable", 1),
        left(20, "g", "a", "sync-timeout", 1),
        classic_state(20, "g", "PreparingRebalance", 1),
        classic_state(21, "g", "Empty", 2),
        classic_state(30, "g", "PreparingRebalance", 2),
        classic_state(31, "g", "Empty", 3),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("g")
    assert result is not None
    assert [(r["reason"], r["member"]) for r in result["rebalances"]] == [
        ("join", "a"),
        ("sync-timeout", "a"),
        ("unknown", None),
    ]


def test_assignment_rows_without_a_group_follow_the_group_state_row() -> None:
    """An older server wrote a classic assignment's rows without ``group=``."""
    rows = [
        classic_state(0, "g", "Empty", 0),
        joined(10, "g", "a"),
        classic_state(10, "g", "PreparingRebalance", 0, cause="join"),
        classic_state(11, "g", "CompletingRebalance", 1),
        classic_state(12, "g", "Stable", 1),
        *assignment(12, None, 1, "a", T0),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("g")
    assert result is not None
    assert result["ownership"] == [interval("a", "t", 0, 12, None)]


def test_a_restart_s_rows_of_the_loaded_group_change_nothing() -> None:
    """At start the server writes the loaded groups as they are (no ``cause``): the same generation's
    assignment again is no change of owner."""
    timelines = Timelines(60_000)
    timelines.observe_many(formed("eager"))
    before = timelines.timeline("g")
    timelines.observe_many([classic_state(5_000, "g", "Stable", 1), *assignment(5_000, "g", 1, "a", T0, T1)])
    timelines.observe_many(assignment(5_000, "g", 1, "b", T2, T3))
    assert timelines.timeline("g") == before


def test_a_group_id_with_spaces_has_its_timeline() -> None:
    rows = formed("eager") + b_times_out("eager")
    renamed = [{**r, "detail": r["detail"].replace("group=g", "group=my  group/1", 1)} for r in rows]
    expected, spaced = Timelines(60_000), Timelines(60_000)
    expected.observe_many(rows)
    spaced.observe_many(renamed)
    assert spaced.group_ids() == ["my  group/1"]
    assert spaced.timeline("my  group/1") == expected.timeline("g")
