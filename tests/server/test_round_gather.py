"""The wait of a group commit round for the clients the round before it answered (``server/round_gather.py``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.server.round_gather import GATHER_MAX_S, QUIET_ROUNDS, RoundGather


def test_no_wait_unless_a_round_answered_someone_and_others_wait() -> None:
    gather = RoundGather()
    assert gather.after_round(0, 0.004, waiting=True) == 0
    assert gather.after_round(5, 0.004, waiting=False) == 0
    assert gather.after_round(5, 0.0, waiting=True) == 0
    assert not gather.gathering
    assert not gather.arrive()  # (no gather under way: an arrival completes nothing)


def test_the_wait_is_the_round_s_time_bounded_and_ends_once_all_are_back() -> None:
    gather = RoundGather()
    assert gather.after_round(3, 0.004, waiting=True) == 0.004
    assert gather.gathering
    assert [gather.arrive() for _ in range(3)] == [False, False, True]
    gather.ended()
    assert not gather.gathering and gather.gathered == 1 and gather.timed_out == 0
    assert gather.after_round(3, 1.0, waiting=True) == GATHER_MAX_S


def test_a_gather_with_fewer_than_half_back_turns_gathering_off_for_a_while() -> None:
    gather = RoundGather()
    assert gather.after_round(10, 0.004, waiting=True) > 0
    for _ in range(4):
        gather.arrive()
    gather.ended()
    assert gather.timed_out == 1
    assert [gather.after_round(10, 0.004, waiting=True) for _ in range(QUIET_ROUNDS)] == [0.0] * QUIET_ROUNDS
    assert gather.after_round(10, 0.004, waiting=True) > 0  # (and then on again)


def test_a_gather_with_half_back_by_its_time_keeps_gathering() -> None:
    gather = RoundGather()
    gather.after_round(10, 0.004, waiting=True)
    for _ in range(5):
        gather.arrive()
    gather.ended()
    assert gather.timed_out == 1
    assert gather.after_round(10, 0.004, waiting=True) > 0


steps = st.lists(
    st.tuples(st.integers(0, 60), st.floats(0, 0.05), st.booleans(), st.integers(0, 80)), min_size=1, max_size=60
)


@given(steps)
def test_waits_are_bounded_and_gathers_counted(rounds: list[tuple[int, float, bool, int]]) -> None:
    """Over any run of rounds: a wait is never longer than the round nor ``GATHER_MAX_S``, only follows a round
    that answered someone with others waiting, and every gather ends counted once, complete exactly when as many
    arrived as the round answered."""
    gather = RoundGather()
    began = 0
    for answered, round_s, waiting, arrivals in rounds:
        wait = gather.after_round(answered, round_s, waiting=waiting)
        assert 0 <= wait <= min(round_s, GATHER_MAX_S)
        if wait == 0:
            assert not gather.gathering
            continue
        assert answered >= 1 and waiting and gather.gathering
        began += 1
        completes = [gather.arrive() for _ in range(arrivals)]
        assert any(completes) == (arrivals >= answered)
        gather.ended()
        assert not gather.gathering
    assert gather.gathered + gather.timed_out == began
