"""The lab's payload sizes are computed field by field; they must equal the real consumer-protocol encodings."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.assignors.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from regroup.lab import payload

topic = st.text(min_size=1, max_size=12)
partitions = st.lists(st.integers(min_value=0, max_value=2**31 - 1), max_size=20, unique=True)
per_topic = st.dictionaries(topic, partitions, max_size=6)


@given(topics=st.lists(topic, max_size=8, unique=True), owned=per_topic, generation=st.integers(-1, 2**31 - 1))
def test_subscription_size_is_the_encoded_size(topics: list[str], owned: dict[str, list[int]], generation: int) -> None:
    sub = Subscription(
        topics=tuple(sorted(topics)),
        owned={t: tuple(sorted(ps)) for t, ps in sorted(owned.items())},
        generation=generation,
    )
    assert payload.subscription_bytes(topics, owned, generation) == len(encode_subscription(sub))


@given(parts=per_topic)
def test_assignment_size_is_the_encoded_size(parts: dict[str, list[int]]) -> None:
    encoded = encode_assignment(Assignment(partitions={t: tuple(ps) for t, ps in sorted(parts.items())}))
    assert payload.assignment_bytes(parts) == len(encoded)


def test_seed_000_arithmetic() -> None:
    # 100 members x 100 KB of metadata: the leader receives 10 MB, everyone-receives-everything 1 GB
    assert payload.join_bytes([100_000] * 100) == (10_000_000, 1_000_000_000)
    assert payload.sync_bytes([10, 20]) == 60
