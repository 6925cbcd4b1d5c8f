"""A member's partitions (topic id -> partitions) as a describe answer lists them: topics ordered by their ids'
text, each named from the cluster image the rows were taken with (empty when the topic is gone). Shared by the
group types' describes (``consumer/describe.py``, ``share/describe.py``): one object per answer, so each topic
is looked up and its id turned to text once, not once per member."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from regroup.model.cluster import ClusterImage, TopicImage

#: one topic's entry in a described member (the group type's protocol class)
Entry = TypeVar("Entry")


class DescribedPartitions(Generic[Entry]):
    """Partitions by topic id -> ``make(topic_id=, topic_name=, partitions=)`` per topic, in the answer's order."""

    __slots__ = ("_index", "_keys", "_make")

    def __init__(self, image: ClusterImage, make: Callable[..., Entry]) -> None:
        self._index: dict[uuid.UUID, TopicImage] = image.id_index()
        self._keys: dict[uuid.UUID, str] = {}
        self._make = make

    def __call__(self, parts: Mapping[uuid.UUID, frozenset[int]]) -> tuple[Entry, ...]:
        if not parts:
            return ()
        keys = self._keys
        for topic_id in parts:
            if topic_id not in keys:
                keys[topic_id] = str(topic_id)
        index, make = self._index, self._make
        out = []
        for topic_id in sorted(parts, key=keys.__getitem__):
            topic = index.get(topic_id)
            out.append(
                make(
                    topic_id=topic_id, topic_name=topic.name if topic else "", partitions=tuple(sorted(parts[topic_id]))
                )
            )
        return tuple(out)
