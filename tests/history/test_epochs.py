"""A consumer (KIP-848) or share group's timeline from hand-written rows: rebalances by group epoch, ownership
exactly as the assigned / revoked rows say."""

from __future__ import annotations

from regroup.history import Timelines
from tests.history.rows import Row, epoch_state, held, interval, joined, left, rebalance

T0, T1 = ("t", 0), ("t", 1)


def consumer_rows() -> list[Row]:
    return [
        # a joins an empty group and takes both partitions at once: epoch 1, Stable
        joined(0, "k", "a"),
        *held(0, "assigned", "k", "a", 1, T0, T1),
        epoch_state(0, "k", "Stable", 1, 1, cause="join"),
        # b joins at 50: a revokes t-1 at 60, b takes it at 70
        joined(50, "k", "b", 1),
        epoch_state(50, "k", "Reconciling", 2, 2, cause="join"),
        *held(60, "revoked", "k", "a", 2, T1),
        *held(70, "assigned", "k", "b", 2, T1),
        epoch_state(70, "k", "Stable", 2, 2),
        # b leaves at 100 (its partition released as it leaves); a takes t-1 at 130
        *held(100, "revoked", "k", "b", 2, T1),
        left(100, "k", "b", "leave", 2),
        epoch_state(100, "k", "Reconciling", 3, 3, cause="leave"),
        *held(130, "assigned", "k", "a", 3, T1),
        epoch_state(130, "k", "Stable", 3, 3),
    ]


def test_consumer_group_rebalances_and_ownership() -> None:
    timelines = Timelines(60_000)
    timelines.observe_many(consumer_rows())
    assert timelines.timeline("k") == {
        "rebalances": [
            rebalance(0, 0, 1, "join", "a", 0, 0, key="epoch"),
            rebalance(50, 70, 2, "join", "b", 1, 10, key="epoch"),
            rebalance(100, 130, 3, "leave", "b", 1, 30, key="epoch"),
        ],
        "ownership": [
            interval("a", "t", 0, 0, None),
            interval("a", "t", 1, 0, 60),
            interval("b", "t", 1, 70, 100),
            interval("a", "t", 1, 130, None),
        ],
    }


def test_partitions_taken_just_before_the_epoch_row_count_in_its_rebalance() -> None:
    """a's session times out and the group is empty; c joins later and takes a's partitions in the call that
    raises the epoch, whose assigned rows come before its group_state row."""
    rows = [
        *consumer_rows(),
        *held(200, "revoked", "k", "a", 3, T0, T1),
        left(200, "k", "a", "session-timeout", 3),
        epoch_state(200, "k", "Empty", 4, 3, cause="session-timeout"),
        joined(300, "k", "c", 4),
        *held(300, "assigned", "k", "c", 5, T0, T1),
        epoch_state(300, "k", "Stable", 5, 5, cause="join"),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("k")
    assert result is not None
    assert result["rebalances"][-2:] == [
        rebalance(200, 200, 4, "session-timeout", "a", 0, 0, key="epoch"),
        rebalance(300, 300, 5, "join", "c", 2, 0, key="epoch"),
    ]


def test_a_higher_epoch_ends_the_open_rebalance_and_starts_the_next() -> None:
    rows = [
        joined(0, "k", "a"),
        *held(0, "assigned", "k", "a", 1, T0, T1),
        epoch_state(0, "k", "Stable", 1, 1, cause="join"),
        joined(10, "k", "b", 1),
        epoch_state(10, "k", "Reconciling", 2, 2, cause="join"),
        epoch_state(15, "k", "Reconciling", 3, 3, cause="subscription"),
        *held(20, "revoked", "k", "a", 3, T1),
        *held(25, "assigned", "k", "b", 3, T1),
        epoch_state(25, "k", "Stable", 3, 3),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("k")
    assert result is not None
    assert result["rebalances"] == [
        rebalance(0, 0, 1, "join", "a", 0, 0, key="epoch"),
        rebalance(10, 15, 2, "join", "b", 0, 0, key="epoch"),
        rebalance(15, 25, 3, "subscription", None, 1, 5, key="epoch"),
    ]


def test_stable_at_an_older_assignment_epoch_does_not_end_the_rebalance() -> None:
    rows = [
        joined(0, "k", "a"),
        epoch_state(0, "k", "Assigning", 1, 0, cause="join"),
        epoch_state(5, "k", "Stable", 1, 0),  # (not a state the core reports; the epochs decide)
        epoch_state(9, "k", "Stable", 1, 1),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("k")
    assert result is not None
    assert result["rebalances"] == [rebalance(0, 9, 1, "join", "a", 0, 0, key="epoch")]


def test_a_group_first_seen_stable_has_no_rebalance_until_its_epoch_rises() -> None:
    """The rows of a group loaded at start carry no ``cause``: no rebalance."""
    timelines = Timelines(60_000)
    timelines.observe_many([joined(0, "k", "a", 7), epoch_state(0, "k", "Stable", 7, 7)])
    assert timelines.timeline("k") == {"rebalances": [], "ownership": []}
    timelines.observe(epoch_state(10, "k", "Reconciling", 8, 8))
    result = timelines.timeline("k")
    assert result is not None
    assert result["rebalances"] == [rebalance(10, None, 8, "unknown", None, 0, 0, key="epoch")]


def test_a_dead_group_ends_its_rebalance_and_its_ownership() -> None:
    rows = [
        joined(0, "k", "a"),
        *held(0, "assigned", "k", "a", 1, T0),
        epoch_state(0, "k", "Stable", 1, 1, cause="join"),
        joined(5, "k", "b", 1),
        epoch_state(5, "k", "Reconciling", 2, 2, cause="join"),
        epoch_state(8, "k", "Dead", 2, 2),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    result = timelines.timeline("k")
    assert result is not None
    assert result["rebalances"][-1] == rebalance(5, 8, 2, "join", "b", 0, 0, key="epoch")
    assert result["ownership"] == [interval("a", "t", 0, 0, 8)]


def test_share_group_a_partition_shared_by_two_members_is_never_unowned() -> None:
    rows = [
        joined(0, "s", "a"),
        *held(0, "assigned", "s", "a", 1, T0, T1),
        epoch_state(0, "s", "Stable", 1, 1, kind="share", cause="join"),
        joined(10, "s", "b", 1),
        *held(10, "assigned", "s", "b", 1, T0, T1),
        epoch_state(10, "s", "Stable", 2, 2, kind="share", cause="join"),
        *held(40, "revoked", "s", "a", 2, T0, T1),
        left(40, "s", "a", "leave", 2),
        epoch_state(40, "s", "Stable", 3, 3, kind="share", cause="leave"),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    assert timelines.timeline("s") == {
        "rebalances": [
            rebalance(0, 0, 1, "join", "a", 0, 0, key="epoch"),
            rebalance(10, 10, 2, "join", "b", 0, 0, key="epoch"),
            rebalance(40, 40, 3, "leave", "a", 0, 0, key="epoch"),
        ],
        "ownership": [
            interval("a", "t", 0, 0, 40),
            interval("a", "t", 1, 0, 40),
            interval("b", "t", 0, 10, None),
            interval("b", "t", 1, 10, None),
        ],
    }


def test_a_group_converted_between_classic_and_consumer_keeps_its_past() -> None:
    from tests.history.rows import assignment, classic_state

    rows = [
        classic_state(0, "g", "Empty", 0),
        joined(1, "g", "a"),
        classic_state(1, "g", "PreparingRebalance", 0, cause="join"),
        classic_state(2, "g", "CompletingRebalance", 1),
        classic_state(3, "g", "Stable", 1),
        *assignment(3, "g", 1, "a", T0),
        classic_state(50, "g", "Dead", 1),
        joined(50, "g", "a2"),
        *held(50, "assigned", "g", "a2", 2, T0),
        epoch_state(50, "g", "Stable", 2, 2, cause="join"),
    ]
    timelines = Timelines(60_000)
    timelines.observe_many(rows)
    assert timelines.timeline("g") == {
        "rebalances": [
            rebalance(1, 3, 1, "join", "a", 0, 0),
            rebalance(50, 50, 2, "join", "a2", 1, 0, key="epoch"),
        ],
        "ownership": [interval("a", "t", 0, 3, 50), interval("a2", "t", 0, 50, None)],
    }
