"""The cluster image the coordinator reads: which topics exist, their ids, partition counts and the racks of
each partition's replicas. The shell (server, simulator) owns the topics and hands the coordinator a new
image when they change; the core never looks topics up anywhere else."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

# The images are not frozen (a frozen dataclass costs about 10k instructions per object in the compiled build;
# docs/architecture.md). ``Final`` fields keep them immutable for mypy; ``unsafe_hash`` keeps the field-based
# hash a frozen dataclass has.


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class TopicImage:
    topic_id: Final[uuid.UUID]
    name: Final[str]
    partitions: Final[int]
    #: partition -> racks of its replicas; empty when racks are unknown
    racks: Final[tuple[frozenset[str], ...]] = ()


@dataclass(slots=True, unsafe_hash=True)
class ClusterImage:
    by_name: Final[Mapping[str, TopicImage]] = field(default_factory=dict)

    @staticmethod
    def of(topics: Iterable[TopicImage]) -> ClusterImage:
        return ClusterImage({t.name: t for t in topics})

    def topic(self, name: str) -> TopicImage | None:
        return self.by_name.get(name)

    def id_index(self) -> dict[uuid.UUID, TopicImage]:
        return {t.topic_id: t for t in self.by_name.values()}


@functools.lru_cache(maxsize=4096)
def topic_id_for(name: str) -> uuid.UUID:
    """A stable id derived from a topic name, for simulations and tests that do not create topics (cached:
    the simulator asks for the same few names at every step)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"regroup-topic:{name}")
