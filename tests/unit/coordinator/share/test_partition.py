"""One share partition's state, scenario by scenario: acquiring within the in-flight limit, the four
acknowledgement outcomes and lock renewal, the delivery limit, the SPSO moving up, refused acknowledgements
changing nothing, members leaving, locks expiring, resets and the persisted form."""

from __future__ import annotations

import pytest

from regroup.coordinator.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    Acquired,
    InFlight,
    ShareError,
    SharePartition,
    StateBatch,
)

LOCK = 30_000


def states(p: SharePartition) -> dict[int, tuple[int, int]]:
    """offset -> (state, delivery count) over the window"""
    return {r.offset: (r.state, r.delivery_count) for r in p.in_flight()}


def ack(p: SharePartition, member: str, *batches: AckBatch, now_ms: int = 0) -> ShareError:
    return p.acknowledge(member, batches, now_ms, LOCK)


def one(first: int, last: int, ack_type: int) -> AckBatch:
    return AckBatch(first, last, (ack_type,))


# --- acquiring ---


def test_given_a_fresh_partition_when_a_member_acquires_then_it_gets_the_first_records_locked_at_count_one() -> None:
    p = SharePartition(10)
    assert p.acquire("a", 100, 5, 1_000, LOCK) == [Acquired(10, 14, 1)]
    assert (p.start_offset, p.end_offset) == (10, 15)
    assert p.in_flight()[0] == InFlight(10, ACQUIRED, 1, "a", 31_000)
    assert p.acquired_count() == 5
    assert p.held_by("a") == 5
    assert p.held_by("b") == 0
    assert p.next_deadline() == 31_000


def test_given_the_log_end_when_acquiring_then_nothing_at_or_past_it_is_acquired() -> None:
    p = SharePartition(0)
    assert p.acquire("a", 3, 10, 0, LOCK) == [Acquired(0, 2, 1)]
    assert p.acquire("b", 3, 10, 0, LOCK) == []
    assert p.acquire("b", 0, 10, 0, LOCK) == []
    assert p.end_offset == 3


def test_given_a_full_window_when_acquiring_then_no_offset_past_the_end_is_taken() -> None:
    p = SharePartition(0, max_in_flight=4)
    assert p.acquire("a", 100, 3, 0, LOCK) == [Acquired(0, 2, 1)]
    assert p.acquire("b", 100, 3, 0, LOCK) == [Acquired(3, 3, 1)]
    assert p.acquire("c", 100, 3, 0, LOCK) == []
    assert p.end_offset - p.start_offset == 4


def test_given_a_full_window_with_released_records_when_acquiring_then_those_inside_the_window_are_taken() -> None:
    p = SharePartition(0, max_in_flight=4)
    p.acquire("a", 100, 4, 0, LOCK)
    assert ack(p, "a", one(1, 2, RELEASE)) == ShareError.NONE
    assert p.acquire("b", 100, 10, 0, LOCK) == [Acquired(1, 2, 2)]
    assert p.end_offset == 4


def test_given_the_window_moves_up_when_acquiring_then_the_limit_counts_from_the_new_start() -> None:
    p = SharePartition(0, max_in_flight=4)
    p.acquire("a", 100, 4, 0, LOCK)
    assert ack(p, "a", one(0, 1, ACCEPT)) == ShareError.NONE
    assert p.start_offset == 2
    assert p.acquire("b", 100, 10, 0, LOCK) == [Acquired(4, 5, 1)]
    assert (p.start_offset, p.end_offset) == (2, 6)


def test_given_released_records_of_different_counts_when_acquiring_then_runs_split_by_delivery_count() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 4, 0, LOCK)  # 0..3 at count 1
    ack(p, "a", one(1, 2, RELEASE))
    p.acquire("a", 100, 2, 0, LOCK)  # 1..2 at count 2
    ack(p, "a", one(1, 1, RELEASE))
    ack(p, "a", one(0, 0, RELEASE), one(3, 3, RELEASE))
    # 0: count 1, 1: count 2, 2: held at count 2, 3: count 1, then new offsets
    assert p.acquire("b", 100, 6, 0, LOCK) == [
        Acquired(0, 0, 2),
        Acquired(1, 1, 3),
        Acquired(3, 3, 2),
        Acquired(4, 6, 1),
    ]


def test_given_max_records_when_acquiring_then_no_more_are_taken() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 6, 0, LOCK)
    ack(p, "a", one(0, 5, RELEASE))
    assert p.acquire("b", 100, 2, 0, LOCK) == [Acquired(0, 1, 2)]
    assert p.acquire("b", 100, 5, 0, LOCK) == [Acquired(2, 5, 2), Acquired(6, 6, 1)]


def test_given_bad_arguments_when_acquiring_then_it_is_refused() -> None:
    p = SharePartition(0)
    with pytest.raises(ValueError):
        p.acquire("a", 10, 0, 0, LOCK)
    with pytest.raises(ValueError):
        p.acquire("a", 10, 1, 0, -1)


def test_given_bad_settings_when_constructing_then_it_is_refused() -> None:
    for kwargs in ({"delivery_limit": 0}, {"max_in_flight": 0}):
        with pytest.raises(ValueError):
            SharePartition(0, **kwargs)
    with pytest.raises(ValueError):
        SharePartition(-1)


# --- acknowledging ---


def test_given_acquired_records_when_the_member_accepts_them_then_they_are_done_and_the_start_moves_past() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 5, 0, LOCK)
    assert ack(p, "a", one(0, 4, ACCEPT)) == ShareError.NONE
    assert (p.start_offset, p.end_offset) == (5, 5)
    assert p.in_flight() == ()
    assert p.acquired_count() == 0
    assert p.next_deadline() is None


def test_given_acquired_records_when_it_releases_them_then_they_are_available_with_their_delivery_count() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 3, 0, LOCK)
    assert ack(p, "a", one(0, 2, RELEASE)) == ShareError.NONE
    assert states(p) == {0: (AVAILABLE, 1), 1: (AVAILABLE, 1), 2: (AVAILABLE, 1)}
    assert p.in_flight()[0].member_id is None
    assert p.in_flight()[0].deadline_ms is None
    assert (p.start_offset, p.end_offset) == (0, 3)


def test_given_acquired_records_when_it_rejects_or_gaps_them_then_they_are_archived() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 4, 0, LOCK)
    assert ack(p, "a", one(1, 1, REJECT), one(2, 2, GAP)) == ShareError.NONE
    assert states(p) == {0: (ACQUIRED, 1), 1: (ARCHIVED, 1), 2: (ARCHIVED, 1), 3: (ACQUIRED, 1)}
    assert p.start_offset == 0
    assert ack(p, "a", one(0, 0, ACCEPT)) == ShareError.NONE
    assert (p.start_offset, p.end_offset) == (3, 4)


def test_given_one_type_per_offset_when_acknowledging_then_each_offset_gets_its_own_outcome() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 5, 0, LOCK)
    assert ack(p, "a", AckBatch(0, 4, (RELEASE, ACCEPT, GAP, REJECT, RENEW)), now_ms=5) == ShareError.NONE
    assert p.in_flight() == (
        InFlight(0, AVAILABLE, 1, None, None),
        InFlight(1, ACKNOWLEDGED, 1, None, None),
        InFlight(2, ARCHIVED, 1, None, None),
        InFlight(3, ARCHIVED, 1, None, None),
        InFlight(4, ACQUIRED, 1, "a", 5 + LOCK),
    )


def test_given_acquired_records_when_the_member_renews_them_then_their_lock_is_extended_and_kept() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 2, 0, LOCK)
    assert ack(p, "a", one(0, 0, RENEW), now_ms=20_000) == ShareError.NONE
    assert p.in_flight()[0] == InFlight(0, ACQUIRED, 1, "a", 20_000 + LOCK)
    assert p.in_flight()[1].deadline_ms == LOCK
    assert p.expire(LOCK) is True
    assert states(p) == {0: (ACQUIRED, 1), 1: (AVAILABLE, 1)}
    assert p.next_deadline() == 20_000 + LOCK


def test_given_accepted_records_behind_an_acquired_one_when_it_is_accepted_then_the_start_jumps_over_them() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 5, 0, LOCK)
    ack(p, "a", one(1, 3, ACCEPT))
    assert p.start_offset == 0
    ack(p, "a", one(0, 0, ACCEPT))
    assert (p.start_offset, p.end_offset) == (4, 5)


def test_given_the_lag_when_records_are_done_or_not_then_it_counts_those_still_to_be_done() -> None:
    p = SharePartition(0)
    assert p.lag(10) == 10
    p.acquire("a", 10, 5, 0, LOCK)
    ack(p, "a", one(0, 0, ACCEPT), one(2, 3, REJECT))
    assert p.start_offset == 1
    assert p.lag(10) == 9 - 2
    assert p.lag(3) == 1
    assert p.lag(1) == 0
    assert p.lag(0) == 0


# --- the delivery limit ---


def test_given_a_record_at_the_delivery_limit_when_it_is_released_then_it_is_archived() -> None:
    p = SharePartition(0, delivery_limit=2)
    p.acquire("a", 1, 1, 0, LOCK)
    ack(p, "a", one(0, 0, RELEASE))
    assert states(p) == {0: (AVAILABLE, 1)}
    assert p.acquire("a", 1, 1, 0, LOCK) == [Acquired(0, 0, 2)]
    ack(p, "a", one(0, 0, RELEASE))
    assert (p.start_offset, p.end_offset) == (1, 1)
    assert p.acquire("a", 1, 1, 0, LOCK) == []


def test_given_a_record_at_the_delivery_limit_when_its_lock_expires_then_it_is_archived() -> None:
    p = SharePartition(0, delivery_limit=2)
    p.acquire("a", 2, 2, 0, LOCK)
    p.expire(LOCK)
    assert p.acquire("b", 2, 1, LOCK, LOCK) == [Acquired(0, 0, 2)]
    assert p.expire(2 * LOCK) is True
    assert (p.start_offset, p.end_offset) == (1, 2)
    assert states(p) == {1: (AVAILABLE, 1)}


def test_given_a_delivery_limit_of_one_when_a_lock_is_released_then_the_record_is_archived_at_once() -> None:
    p = SharePartition(0, delivery_limit=1)
    p.acquire("a", 3, 3, 0, LOCK)
    ack(p, "a", one(1, 1, RELEASE))
    assert states(p) == {0: (ACQUIRED, 1), 1: (ARCHIVED, 1), 2: (ACQUIRED, 1)}


# --- refused acknowledgements ---


def refused(p: SharePartition, member: str, expected: ShareError, *batches: AckBatch) -> None:
    before = p.snapshot()
    assert p.acknowledge(member, batches, 0, LOCK) == expected
    assert p.snapshot() == before


def acquired_by_two() -> SharePartition:
    p = SharePartition(0)
    p.acquire("a", 100, 3, 0, LOCK)  # 0..2
    p.acquire("b", 100, 3, 0, LOCK)  # 3..5
    return p


def test_given_records_of_another_member_when_a_member_acknowledges_them_then_nothing_changes() -> None:
    p = acquired_by_two()
    refused(p, "a", ShareError.INVALID_RECORD_STATE, one(0, 0, ACCEPT), one(3, 3, ACCEPT))
    refused(p, "a", ShareError.INVALID_RECORD_STATE, one(2, 3, ACCEPT))
    refused(p, "c", ShareError.INVALID_RECORD_STATE, one(0, 0, RENEW))


def test_given_records_not_acquired_when_acknowledged_then_nothing_changes() -> None:
    p = acquired_by_two()
    ack(p, "a", one(1, 1, RELEASE), one(2, 2, REJECT))
    refused(p, "a", ShareError.INVALID_RECORD_STATE, one(0, 0, ACCEPT), one(1, 1, ACCEPT))
    refused(p, "a", ShareError.INVALID_RECORD_STATE, one(0, 0, ACCEPT), one(2, 2, ACCEPT))
    refused(p, "b", ShareError.INVALID_RECORD_STATE, one(3, 6, ACCEPT))  # 6 was never acquired
    refused(p, "b", ShareError.INVALID_RECORD_STATE, one(50, 60, ACCEPT))


def test_given_records_already_accepted_when_accepted_again_then_it_is_refused() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 3, 0, LOCK)
    ack(p, "a", one(1, 1, ACCEPT))
    refused(p, "a", ShareError.INVALID_RECORD_STATE, one(1, 1, ACCEPT))
    ack(p, "a", one(0, 0, ACCEPT))
    refused(p, "a", ShareError.INVALID_RECORD_STATE, one(1, 1, ACCEPT))  # now below the start


def test_given_malformed_batches_when_acknowledged_then_the_request_is_invalid_and_nothing_changes() -> None:
    p = acquired_by_two()
    invalid = ShareError.INVALID_REQUEST
    refused(p, "a", invalid, one(0, 1, ACCEPT), one(1, 2, ACCEPT))  # overlapping
    refused(p, "a", invalid, one(2, 2, ACCEPT), one(0, 1, ACCEPT))  # out of order
    refused(p, "a", invalid, one(2, 1, ACCEPT))  # first > last
    refused(p, "a", invalid, AckBatch(0, 2, (ACCEPT, ACCEPT)))  # wrong number of types
    refused(p, "a", invalid, AckBatch(0, 0, ()))
    refused(p, "a", invalid, one(0, 0, 5))
    refused(p, "a", invalid, one(0, 0, -1))
    refused(p, "a", invalid, one(-1, 0, ACCEPT))


def test_given_no_batches_when_acknowledging_then_nothing_changes() -> None:
    p = acquired_by_two()
    before = p.snapshot()
    assert p.acknowledge("a", (), 0, LOCK) == ShareError.NONE
    assert p.snapshot() == before


# --- members leaving and locks expiring ---


def test_given_a_member_holding_records_when_it_leaves_then_its_records_are_released_and_others_kept() -> None:
    p = acquired_by_two()
    assert p.release_member("a") is True
    assert states(p) == {0: (AVAILABLE, 1), 1: (AVAILABLE, 1), 2: (AVAILABLE, 1)} | {
        o: (ACQUIRED, 1) for o in (3, 4, 5)
    }
    assert p.held_by("b") == 3
    assert p.release_member("a") is False
    assert p.release_member("nobody") is False


def test_given_a_member_at_the_delivery_limit_when_it_leaves_then_its_records_are_archived() -> None:
    p = SharePartition(0, delivery_limit=1)
    p.acquire("a", 100, 3, 0, LOCK)
    assert p.release_member("a") is True
    assert (p.start_offset, p.end_offset) == (3, 3)


def test_given_locks_when_time_reaches_the_deadline_then_they_expire_exactly_then() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 2, 0, 100)
    p.acquire("b", 100, 2, 50, 100)
    assert p.next_deadline() == 100
    assert p.expire(99) is False
    assert p.expire(100) is True
    assert states(p) == {0: (AVAILABLE, 1), 1: (AVAILABLE, 1), 2: (ACQUIRED, 1), 3: (ACQUIRED, 1)}
    assert p.next_deadline() == 150
    assert p.expire(150) is True
    assert p.next_deadline() is None
    assert p.expire(10**9) is False


# --- resetting ---


def test_given_records_in_flight_when_reset_then_the_window_is_empty_at_the_new_start() -> None:
    p = acquired_by_two()
    p.reset(42)
    assert (p.start_offset, p.end_offset) == (42, 42)
    assert p.in_flight() == ()
    assert p.acquire("a", 44, 5, 0, LOCK) == [Acquired(42, 43, 1)]
    p.reset(0)
    assert (p.start_offset, p.end_offset) == (0, 0)
    with pytest.raises(ValueError):
        p.reset(-1)


# --- persisted form ---


def test_given_a_mixed_window_when_persisted_then_runs_of_state_and_count_with_locks_as_available() -> None:
    p = SharePartition(0)
    p.acquire("a", 100, 6, 0, LOCK)
    ack(p, "a", AckBatch(1, 5, (ACCEPT, ACCEPT, RELEASE, REJECT, RENEW)))
    p.acquire("b", 100, 1, 0, LOCK)  # offset 3 again, count 2
    assert p.state_batches() == (
        StateBatch(0, 0, AVAILABLE, 1),
        StateBatch(1, 2, ACKNOWLEDGED, 1),
        StateBatch(3, 3, AVAILABLE, 2),
        StateBatch(4, 4, ARCHIVED, 1),
        StateBatch(5, 5, AVAILABLE, 1),
    )


def test_given_a_partition_when_rebuilt_from_its_state_then_it_equals_it_with_locks_released() -> None:
    p = SharePartition(7, delivery_limit=2)
    p.acquire("a", 100, 6, 0, LOCK)
    ack(p, "a", AckBatch(8, 10, (ACCEPT, RELEASE, REJECT)))
    p.acquire("b", 100, 2, 0, LOCK)  # 9 at count 2 (the limit), then 13
    rebuilt = SharePartition.from_state(p.start_offset, p.state_batches(), delivery_limit=2)
    assert rebuilt.snapshot() == p.without_locks().snapshot()
    assert states(rebuilt) == {
        7: (AVAILABLE, 1),
        8: (ACKNOWLEDGED, 1),
        9: (ARCHIVED, 2),
        10: (ARCHIVED, 1),
        11: (AVAILABLE, 1),
        12: (AVAILABLE, 1),
        13: (AVAILABLE, 1),
    }
    assert p.acquired_count() == 5  # the live partition kept its locks: 7, 9, 11, 12, 13


def test_given_an_empty_state_when_rebuilt_then_the_window_is_empty_at_the_start() -> None:
    p = SharePartition.from_state(5, ())
    assert (p.start_offset, p.end_offset) == (5, 5)


def test_given_state_with_gaps_and_done_prefix_when_rebuilt_then_gaps_are_undelivered_and_start_moves() -> None:
    p = SharePartition.from_state(
        0,
        (StateBatch(0, 1, ACKNOWLEDGED, 1), StateBatch(2, 2, ARCHIVED, 3), StateBatch(5, 5, AVAILABLE, 2)),
    )
    assert (p.start_offset, p.end_offset) == (3, 6)
    assert states(p) == {3: (AVAILABLE, 0), 4: (AVAILABLE, 0), 5: (AVAILABLE, 2)}
    assert p.acquire("a", 10, 10, 0, LOCK) == [Acquired(3, 4, 1), Acquired(5, 5, 3), Acquired(6, 9, 1)]


def test_given_state_ending_in_undelivered_records_when_rebuilt_then_the_end_stops_at_the_last_delivered() -> None:
    p = SharePartition.from_state(0, (StateBatch(0, 0, AVAILABLE, 1), StateBatch(1, 3, AVAILABLE, 0)))
    assert (p.start_offset, p.end_offset) == (0, 1)
    assert p.state_batches() == (StateBatch(0, 0, AVAILABLE, 1),)


def test_given_available_state_at_the_delivery_limit_when_rebuilt_then_it_is_archived() -> None:
    p = SharePartition.from_state(0, (StateBatch(0, 1, AVAILABLE, 3), StateBatch(2, 2, AVAILABLE, 2)), delivery_limit=3)
    assert (p.start_offset, p.end_offset) == (2, 3)
    assert states(p) == {2: (AVAILABLE, 2)}


def test_given_bad_state_batches_when_rebuilt_then_it_is_refused() -> None:
    bad = [
        (StateBatch(4, 4, AVAILABLE, 1),),  # below the start
        (StateBatch(6, 5, AVAILABLE, 1),),  # first > last
        (StateBatch(5, 6, AVAILABLE, 1), StateBatch(6, 7, AVAILABLE, 1)),  # overlapping
        (StateBatch(8, 9, AVAILABLE, 1), StateBatch(5, 6, AVAILABLE, 1)),  # unsorted
        (StateBatch(5, 5, ACQUIRED, 1),),  # locks are not persisted
        (StateBatch(5, 5, 3, 1),),
        (StateBatch(5, 5, AVAILABLE, -1),),
    ]
    for batches in bad:
        with pytest.raises(ValueError):
            SharePartition.from_state(5, batches)
    with pytest.raises(ValueError):
        SharePartition.from_state(-1, ())


def test_given_a_window_with_gaps_when_asked_what_comes_next_then_it_names_the_first_offset_acquire_takes() -> None:
    p = SharePartition(10, max_in_flight=5)
    assert p.next_available(10) is None  # nothing in the log above the start
    assert p.next_available(12) == 10
    p.acquire("a", 12, 2, now_ms=0, lock_ms=100)
    assert p.next_available(12) is None  # all taken, and the log ends there
    assert p.next_available(20) == 12  # the window may grow
    p.acknowledge("a", [AckBatch(10, 10, (RELEASE,))], now_ms=0, lock_ms=100)
    assert p.next_available(20) == 10
    p.acquire("b", 20, 10, now_ms=0, lock_ms=100)
    assert p.end_offset == 15 and p.next_available(20) is None  # the window is full


def test_given_a_lower_bound_when_acquiring_then_no_offset_below_it_is_taken() -> None:
    p = SharePartition(0)
    p.acquire("a", 4, 4, now_ms=0, lock_ms=100)
    p.acknowledge("a", [AckBatch(1, 1, (RELEASE,))], now_ms=0, lock_ms=100)
    taken = p.acquire("b", 6, 10, now_ms=0, lock_ms=100, min_offset=4)
    assert taken == [Acquired(4, 5, 1)]
    assert p.snapshot().in_flight[1].state == AVAILABLE  # offset 1 waits for a fetch that reads it
    assert p.acquire("b", 8, 10, now_ms=0, lock_ms=100, min_offset=7) == []  # never a hole in the window
