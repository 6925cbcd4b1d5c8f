"""A share group (KIP-932) and its members as the coordinator holds them: group epoch, target assignment and
its epoch, per-member epoch and assignment, and the group's share partitions (``partition.py``: which
offsets are delivered, to whom, how often). Unlike a consumer group, a partition may be assigned to many
members at once, so a member takes its target as soon as it heartbeats: nothing is revoked first. The hard
state changes only through ``replay`` (records); the locks of acquired records are soft state."""

from __future__ import annotations

import enum
import operator
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from regroup.coordinator.share.partition import SharePartition

#: topic id -> partitions
Partitions = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Partitions = {}
#: (topic id, partition)
TopicPartition = tuple[uuid.UUID, int]


def partition_order(tp: TopicPartition) -> tuple[int, int]:
    """A share partition's sort key: the order of the ``(topic id, partition)`` tuples themselves, compared in C
    (``uuid.UUID`` compares, and checks equality, in Python methods: sorting a share group's 10,000 partitions
    called them about 140,000 times)."""
    return (tp[0].int, tp[1])


#: a topic id's sort key, ``uuid.UUID``'s own order read in C
TOPIC_ORDER: Final[operator.attrgetter[int]] = operator.attrgetter("int")
#: (name, id, partition count) of the topics a group's members subscribe to, sorted by name
SubscribedTopics = tuple[tuple[str, uuid.UUID, int], ...]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True, kw_only=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Partitions = field(default_factory=dict)

    def copy(self) -> ShareGroupMember:
        return ShareGroupMember(
            member_id=self.member_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            assigned=self.assigned,
        )

    def metadata(self) -> tuple[str | None, str, str, tuple[str, ...]]:
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names)


@dataclass(slots=True, kw_only=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    #: when the target was computed (0: not known): the next waits for the assignment interval from it
    assignment_timestamp_ms: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)
    #: the share partitions the group has state for (initialized), by (topic id, partition)
    partitions: dict[TopicPartition, SharePartition] = field(default_factory=dict)
    # --- soft state (not in records) ---
    #: the topics of the cluster image the target was computed against: (name, id, partition count)
    target_topics: SubscribedTopics | None = field(default=None, compare=False, repr=False)
    #: (state, group epoch, assignment epoch) as last reported in a ``GroupStateChanged`` event
    reported: tuple[ShareGroupState, int, int] | None = field(default=None, compare=False, repr=False)
    #: partition states deleted so far (each tombstone applied; never taken back): whether a partition that had
    #: state may have lost it since
    states_removed: int = field(default=0, compare=False, repr=False)
    #: member id -> (its assignment, ``states_removed``) when every partition of that assignment was found to have
    #: state (``membership._uninitialized``)
    settled: dict[str, tuple[Partitions, int]] = field(default_factory=dict, compare=False, repr=False)

    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def target_of(self, member_id: str) -> Partitions:
        return self.targets.get(member_id, EMPTY)

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset(name for m in self.members.values() for name in m.subscribed_topic_names)


def to_set(parts: tuple[tuple[uuid.UUID, tuple[int, ...]], ...]) -> dict[uuid.UUID, frozenset[int]]:
    return {topic_id: frozenset(ps) for topic_id, ps in parts if ps}


def to_tuple(parts: Partitions) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(parts[t]))) for t in sorted(parts, key=TOPIC_ORDER) if parts[t])
