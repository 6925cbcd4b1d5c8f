"""The cluster image the coordinator reads: which topics exist, their ids, partition counts and the racks of
each partition's replicas. The shell (server, simulator) owns the topics and hands the coordinator a new
image when they change; the core never looks topics up anywhere else."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

# The images are not frozen and write their own ``__init__``, which the compiled build compiles (a generated one
# stays interpreted, and a frozen one costs about 10k instructions per object there). ``Final`` fields keep them
# immutable for mypy; ``unsafe_hash`` keeps the field-based hash a frozen dataclass has.


@dataclass(slots=True, kw_only=True, init=False, unsafe_hash=True)
class TopicImage:
    topic_id: Final[uuid.UUID]
    name: Final[str]
    partitions: Final[int]
    #: partition -> racks of its replicas; empty when racks are unknown
    racks: Final[tuple[frozenset[str], ...]]

    def __init__(
        self, *, topic_id: uuid.UUID, name: str, partitions: int, racks: tuple[frozenset[str], ...] = ()
    ) -> None:
        self.topic_id = topic_id
        self.name = name
        self.partitions = partitions
        self.racks = racks


@dataclass(slots=True, init=False, unsafe_hash=True)
class ClusterImage:
    by_name: Final[Mapping[str, TopicImage]]

    def __init__(self, by_name: Mapping[str, TopicImage] | None = None) -> None:
        self.by_name = {} if by_name is None else by_name

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
