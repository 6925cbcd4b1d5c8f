"""A connection's session holds its later requests while any request holds it (``Session.hold``): a failed SASL
step waiting out its delay, a Produce appending over several turns. Holds nest; the connection is told once
the last one lets go, and only then."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.network.session import Session


def session() -> Session:
    return Session(listener="PLAINTEXT", monotonic_ms=lambda: 0.0, wall_ms=lambda: 0)


def test_a_new_session_holds_nothing() -> None:
    assert not session().busy


@given(st.lists(st.booleans(), max_size=40))
def test_held_until_the_last_hold_lets_go(steps: list[bool]) -> None:
    """Random holds and releases (a release only of a hold taken): busy exactly while some hold is taken,
    and the connection is told each time the count comes back to zero."""
    s = session()
    told: list[int] = []
    s.on_released = lambda: told.append(1)
    held = expected_told = 0
    for take in steps:
        if take or held == 0:
            s.hold()
            held += 1
        else:
            s.release()
            held -= 1
            expected_told += held == 0
        assert s.busy == (held > 0)
    assert len(told) == expected_told
