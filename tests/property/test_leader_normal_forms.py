"""The leader's normal forms (``client.embedded``) equal the sorting expressions they stand for, whether or
not their input is already in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.client.embedded import sorted_owned, sorted_topics, sorted_tuple, wire_partitions

names = st.sampled_from(["a", "b", "c", "t0", "t1", "t10", "t2"])
partitions = st.lists(st.integers(0, 9), max_size=6)


@given(st.lists(names, max_size=6))
def test_sorted_topics(topics: list[str]) -> None:
    assert sorted_topics(tuple(topics)) == tuple(sorted(set(topics)))
    ordered = tuple(sorted(set(topics)))
    assert sorted_topics(ordered) is ordered


@given(st.dictionaries(names, partitions.map(tuple)))
def test_sorted_owned(owned: dict[str, tuple[int, ...]]) -> None:
    expected = {t: tuple(sorted(ps)) for t, ps in sorted(owned.items()) if ps}
    assert list(sorted_owned(owned).items()) == list(expected.items())


@given(st.dictionaries(names, partitions))
def test_wire_partitions(per_topic: dict[str, list[int]]) -> None:
    expected = {t: tuple(sorted(ps)) for t, ps in sorted(per_topic.items())}
    assert list(wire_partitions(per_topic).items()) == list(expected.items())


@given(st.lists(st.integers(-3, 40), max_size=24))
def test_sorted_tuple(values: list[int]) -> None:
    assert sorted_tuple(list(values)) == tuple(sorted(values))
