"""A regular-expression subscription's topics (``subscriptions.matching_topics``), with what each name gave kept
per pattern across resolutions, are always what matching every name of the image afresh gives: over random
sequences of cluster images (topics created and deleted, internal names, names reused) and patterns, with the
keeping's bounds made small so that its resets and evictions run too."""

from __future__ import annotations

import uuid

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.consumer import subscriptions
from regroup.model.cluster import ClusterImage, TopicImage

NAMES = st.sampled_from(["orders", "orders-eu", "orders.v2", "payments", "__consumer_offsets", "__x", "o", "ord"])
PATTERNS = st.sampled_from(["orders.*", "o.*", ".*", "ord(ers)?", "payments|orders-eu", "__.*", "x", "[a-z]+"])


def fresh(pattern: str, image: ClusterImage) -> tuple[str, ...]:
    regex = re2.compile(pattern)
    return tuple(sorted(n for n in image.by_name if not n.startswith("__") and regex.fullmatch(n) is not None))


def image_of(names: set[str]) -> ClusterImage:
    return ClusterImage.of(
        TopicImage(topic_id=uuid.UUID(int=i + 1), name=name, partitions=1) for i, name in enumerate(sorted(names))
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sets(NAMES), PATTERNS), min_size=1, max_size=12))
def test_kept_matches_equal_fresh_matching(steps: list[tuple[set[str], str]]) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(subscriptions, "_MATCHED", {})
        m.setattr(subscriptions, "_MATCHED_PATTERNS", 3)
        m.setattr(subscriptions, "_MATCHED_SLACK", 2)
        for names, pattern in steps:
            image = image_of(names)
            assert subscriptions.matching_topics(pattern, image) == fresh(pattern, image)
            assert len(subscriptions._MATCHED) <= 3


def test_a_name_is_matched_once_per_pattern() -> None:
    """A later resolution against a larger cluster matches only the new names."""
    calls: list[str] = []
    regex = subscriptions.compile_regex("t-.*")

    class Counting:
        def fullmatch(self, name: str) -> object:
            calls.append(name)
            return regex.fullmatch(name)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(subscriptions, "_MATCHED", {})
        m.setattr(subscriptions, "compile_regex", lambda pattern: Counting())
        first = image_of({f"t-{i}" for i in range(50)} | {"other"})
        assert len(subscriptions.matching_topics("t-.*", first)) == 50
        assert len(calls) == 51
        grown = image_of({f"t-{i}" for i in range(60)} | {"other"})
        assert len(subscriptions.matching_topics("t-.*", grown)) == 60
        assert len(calls) == 61
