"""A minimal in-memory ``TopicStore`` used only while the embedded partition log (``server/topics.py``) is
not installed: topics live as long as the process, and there is no data. It lets the group coordinator run
on its own."""

from __future__ import annotations

import uuid
from pathlib import Path

from regroup.server.api import TopicInfo


class MemoryTopicStore:
    def __init__(self) -> None:
        self._topics: dict[str, TopicInfo] = {}

    @classmethod
    def open(cls, directory: Path) -> MemoryTopicStore:
        """Same shape as the partition log's constructor; ``directory`` is not used."""
        return cls()

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def create_topic(self, name: str, partitions: int) -> TopicInfo:
        if partitions < 1:
            raise ValueError("a topic needs at least one partition")
        if name in self._topics:
            raise ValueError(f"topic {name!r} already exists")
        info = TopicInfo(name=name, topic_id=uuid.uuid4(), partitions=partitions)
        self._topics[name] = info
        return info

    def delete_topic(self, name: str) -> bool:
        return self._topics.pop(name, None) is not None

    def close(self) -> None:
        self._topics.clear()
