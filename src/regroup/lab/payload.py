"""Join and sync payload bytes, three ways.

* **Kafka** (the "single client assignor" design that became JoinGroup + SyncGroup): only the leader's
  JoinGroup response carries every member's metadata (Σ m bytes per round); the leader's SyncGroup request
  carries every member's assignment and each member's SyncGroup response its own (2 Σ a bytes).
* **Everyone receives everything** (the alternative to a single assigning leader): every member's JoinGroup
  response carries every member's metadata, n · Σ m bytes per round: quadratic in the group size.
* **KIP-848** (the consumer protocol): no JoinGroup or SyncGroup. A member's ConsumerGroupHeartbeat carries
  its subscribed topic names and owned partitions only when they changed, and the coordinator's answer
  carries the member's own assignment only when it changed: what a rebalance costs is the bytes those
  three fields add to heartbeats a member sends anyway (``heartbeat_*_bytes``, version 1, flexible layout).

Sizes are those of the consumer protocol's real encodings (``regroup.assignors.consumer_protocol``, latest
version, classic non-flexible layout), computed field by field rather than by encoding: a sweep asks for
tens of thousands of them, and encoding each one cost most of the analysis. tests/lab/test_payload.py
checks the arithmetic against the real encoder. What the lab leaves out is documented in docs/lab.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

VERSION: Final = 2  # int16 version prefix
ARRAY: Final = 4  # int32 element count
STRING: Final = 2  # int16 length, then UTF-8 bytes
INT32: Final = 4
NULL_BYTES: Final = 4  # user data: int32 length -1
NULL_STRING: Final = 2  # rack: int16 length -1
UUID: Final = 16  # a topic id
TAGGED: Final = 1  # an empty tagged-field section (flexible versions)
NULL_COMPACT: Final = 1  # a null compact array: uvarint 0
NULL_STRUCT: Final = 1  # a null nullable struct: int8 -1 (a present one: int8 1, then its fields)

#: partitions by topic, as plain dicts and lists: the compiled build reads them directly (a ``Mapping``
#: parameter would take generic calls, tens of thousands of times in a sweep)
PerTopic = dict[str, list[int]]


def join_bytes(metadata_sizes: Sequence[int]) -> tuple[int, int]:
    """One JoinGroup round: (bytes the leader alone receives, bytes when every member receives everything)."""
    total = sum(metadata_sizes)
    return total, len(metadata_sizes) * total


def sync_bytes(assignment_sizes: Iterable[int]) -> int:
    """One SyncGroup round as Kafka does it: the leader sends every assignment, each member gets its own."""
    return 2 * sum(assignment_sizes)


def _string(text: str) -> int:
    return STRING + len(text.encode("utf-8"))


def _topic_partitions(parts: PerTopic) -> int:
    """An array of (topic, [partition])."""
    return ARRAY + sum(_string(t) + ARRAY + INT32 * len(ps) for t, ps in parts.items())


def subscription_bytes(topics: Sequence[str], owned: PerTopic, generation: int) -> int:
    """Encoded Subscription (latest version) with the topics and owned partitions, no assignor user data
    and no rack: version, topics, user data, owned partitions, generation, rack."""
    del generation  # a fixed-size int32 whatever its value
    topic_array = ARRAY + sum(_string(t) for t in topics)
    return VERSION + topic_array + NULL_BYTES + _topic_partitions(owned) + INT32 + NULL_STRING


def assignment_bytes(partitions: PerTopic) -> int:
    """Encoded Assignment (latest version) of one member, no user data: version, partitions, user data."""
    return VERSION + _topic_partitions(partitions) + NULL_BYTES


def _uvarint(value: int) -> int:
    """Bytes of an unsigned varint."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def _compact_topic_partitions(parts: PerTopic) -> int:
    """A compact array of (topic id, compact [partition], tagged fields)."""
    entries = sum(UUID + _uvarint(len(ps) + 1) + INT32 * len(ps) + TAGGED for ps in parts.values())
    return _uvarint(len(parts) + 1) + entries


def heartbeat_topics_bytes(topics: Sequence[str]) -> int:
    """What ``SubscribedTopicNames`` adds to a ConsumerGroupHeartbeat request over null."""
    names = sum(_uvarint(len(t.encode("utf-8")) + 1) + len(t.encode("utf-8")) for t in topics)
    return _uvarint(len(topics) + 1) + names - NULL_COMPACT


def heartbeat_owned_bytes(owned: PerTopic) -> int:
    """What ``TopicPartitions`` (the owned partitions) adds to a ConsumerGroupHeartbeat request over null."""
    return _compact_topic_partitions(owned) - NULL_COMPACT


def heartbeat_assignment_bytes(assigned: PerTopic) -> int:
    """What ``Assignment`` adds to a ConsumerGroupHeartbeat response over null."""
    return NULL_STRUCT + _compact_topic_partitions(assigned) + TAGGED - NULL_STRUCT
