"""Assignment quality metrics against their definitions over (member, topic, partition) ownerships."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.assignors.metrics import fraction_kept, slots

ASSIGNMENTS = st.dictionaries(
    st.sampled_from(["m0", "m1", "m2", "m3"]),
    st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.lists(st.integers(0, 9), max_size=8), max_size=3),
    max_size=4,
)


@given(ASSIGNMENTS, ASSIGNMENTS)
def test_fraction_kept_is_the_share_of_previous_ownerships_still_held(
    previous: dict[str, dict[str, list[int]]], current: dict[str, dict[str, list[int]]]
) -> None:
    before = slots(previous)
    expected = len(before & slots(current)) / len(before) if before else 1.0
    assert fraction_kept(previous, current) == expected
