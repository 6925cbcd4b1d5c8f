"""Assignment quality metrics against their definitions over (member, topic, partition) ownerships."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.assignors.metrics import fraction_kept, slots, sorted_fraction_kept

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


@given(ASSIGNMENTS, ASSIGNMENTS)
def test_fraction_kept_of_sorted_lists_merges_to_the_same_share(
    previous: dict[str, dict[str, list[int]]], current: dict[str, dict[str, list[int]]]
) -> None:
    def ascending(a: dict[str, dict[str, list[int]]]) -> dict[str, dict[str, list[int]]]:
        return {m: {t: sorted(ps) for t, ps in per_topic.items()} for m, per_topic in a.items()}

    assert sorted_fraction_kept(ascending(previous), ascending(current)) == fraction_kept(previous, current)
