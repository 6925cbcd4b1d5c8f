"""What the kafka-python and aiokafka adapters share, free of either library: the strategies they offer and their
JoinGroup protocol names, the state a member's adapter keeps between rebalances, the sticky user data both libraries'
own sticky assignors write, and the conversion of a group (partition counts, replica racks, the members'
subscriptions) into regroup's ``GroupSpec``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from regroup.assignors import registry
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.consistent_hash import vnodes_option
from regroup.assignors.consumer_protocol import decode_sticky_user_data, encode_sticky_user_data
from regroup.assignors.copartitioned import copartition_groups
from regroup.assignors.redundant import replicas_option
from regroup.assignors.spec import (
    NO_GENERATION,
    Assignment,
    AssignmentError,
    GroupSpec,
    MemberSubscription,
    PartitionRacks,
)

#: Every adapter's JoinGroup protocol name is this prefix and regroup's strategy name: no client library names an
#: assignor so, and a group member that configures a library's assignor and ours offers both names.
PROTOCOL_PREFIX: Final = "regroup-"

#: kafka-python 3's ``StickyPartitionAssignor`` writes its user data through kafka-python's generic data encoding,
#: which puts an int16 version (1) in front of Kafka's ``StickyAssignorUserData`` v1, and reads it back the same
#: way; Kafka's Java client, aiokafka and regroup write the bare struct. The two cannot read each other's bytes.
KAFKA_PYTHON_STICKY_HEADER: Final = b"\x00\x01"

Partitions = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Strategy:
    """One regroup strategy as the adapters offer it."""

    #: regroup's strategy name (``regroup.assignors.registry``)
    name: str
    #: runs under KIP-429's cooperative protocol: members keep what they own across a rebalance and report it
    cooperative: bool = False
    #: the previous assignment travels as the sticky assignor's user data (KIP-54), not as owned partitions
    sticky_user_data: bool = False
    #: the strategy reads members' racks and partitions' replica racks
    rack_aware: bool = False

    @property
    def protocol(self) -> str:
        """The JoinGroup protocol name members send for it."""
        return PROTOCOL_PREFIX + self.name


STICKY: Final = Strategy("sticky", sticky_user_data=True, rack_aware=True)
COOPERATIVE_STICKY: Final = Strategy("cooperative-sticky", cooperative=True, rack_aware=True)
RANGE: Final = Strategy("range", rack_aware=True)
REDUNDANT: Final = Strategy("redundant")
COPARTITIONED: Final = Strategy("copartitioned")
CONSISTENT_HASH: Final = Strategy("consistent-hash")
STRATEGIES: Final = (STICKY, COOPERATIVE_STICKY, RANGE, REDUNDANT, COPARTITIONED, CONSISTENT_HASH)

_OPTION_CHECKS: Final[dict[str, Callable[[Mapping[str, Any]], object]]] = {
    "replicas": replicas_option,
    "copartitioned": copartition_groups,
    "vnodes": vnodes_option,
}


def checked_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as the strategies take them, each checked now (``AssignmentError`` names a bad one) rather than
    at the first rebalance this member leads."""
    for name in options:
        check = _OPTION_CHECKS.get(name)
        if check is None:
            raise AssignmentError(f"unknown option {name!r}; known: {', '.join(sorted(_OPTION_CHECKS))}")
        check(options)
    return dict(options)


def grouped(pairs: Iterable[tuple[str, int]]) -> dict[str, tuple[int, ...]]:
    """(topic, partition) pairs as topic → sorted distinct partitions, topics sorted."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, set()).add(partition)
    return {topic: tuple(sorted(ps)) for topic, ps in sorted(by_topic.items())}


@dataclass(slots=True)
class Ownership:
    """What a member was assigned last and in which generation: the previous assignment its next subscription
    reports. ``partitions`` is None until the first assignment (its subscription then reports none, as the
    libraries' sticky assignors do)."""

    partitions: dict[str, tuple[int, ...]] | None = None
    generation: int = NO_GENERATION

    def record(self, pairs: Iterable[tuple[str, int]], generation: int) -> None:
        self.partitions = grouped(pairs)
        self.generation = generation

    @property
    def owned(self) -> dict[str, tuple[int, ...]]:
        return {} if self.partitions is None else dict(self.partitions)


def encode_sticky(partitions: Partitions, generation: int, *, kafka_python: bool = False) -> bytes:
    """Sticky user data (``StickyAssignorUserData`` v1: previous assignment and generation) as Kafka writes it, or
    with ``kafka_python`` as kafka-python 3's sticky assignor writes it (behind its version header)."""
    body = encode_sticky_user_data(partitions, generation)
    return KAFKA_PYTHON_STICKY_HEADER + body if kafka_python else body


def decode_sticky(data: bytes | None) -> tuple[dict[str, tuple[int, ...]], int]:
    """(previous assignment, generation) from sticky user data written by Kafka's layout or kafka-python's.

    Kafka's layout starts with the int32 topic count, so its first two bytes are kafka-python's header only with
    65,536 topics or more; bytes starting so are read as kafka-python's. No user data, or bytes that parse as
    neither version, give nothing owned and generation -1 (Kafka's fallback)."""
    if not data:
        return {}, NO_GENERATION
    body = bytes(data)
    if body[:2] == KAFKA_PYTHON_STICKY_HEADER:
        body = body[2:]
    partitions, generation = decode_sticky_user_data(body)
    return partitions, NO_GENERATION if generation is None else generation


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member's subscription as an adapter reads it from either library, before it becomes regroup's
    ``MemberSubscription``: ``owned``/``generation`` are its previous assignment wherever the library carried it."""

    member_id: str
    topics: tuple[str, ...]
    owned: Partitions = field(default_factory=dict)
    generation: int = NO_GENERATION
    rack: str | None = None
    instance_id: str | None = None


def partition_counts(topics: Iterable[str], partitions_of: Callable[[str], Iterable[int] | None]) -> dict[str, int]:
    """topic → partition count for the topics the cluster metadata knows (``partitions_of`` gives None for the
    others, which are left out: the strategies ignore topics that do not exist). Partitions are numbered from 0,
    so the count is the highest number plus one."""
    counts: dict[str, int] = {}
    for topic in sorted(set(topics)):
        partitions = partitions_of(topic)
        if partitions is not None:
            numbers = set(partitions)
            counts[topic] = max(numbers) + 1 if numbers else 0
    return counts


def replica_racks(
    counts: Mapping[str, int], racks_of: Callable[[str, int], Iterable[str | None]]
) -> PartitionRacks | None:
    """topic → per partition, the racks holding one of its replicas (``racks_of`` gives them, None or empty for a
    broker without a rack); None when no partition has a replica on a rack, as the strategies expect then."""
    racks = {
        topic: tuple(frozenset(r for r in racks_of(topic, p) if r) for p in range(count))
        for topic, count in sorted(counts.items())
    }
    return racks if any(rs for per_partition in racks.values() for rs in per_partition) else None


class AdapterCore:
    """The library-free half of an adapter: its strategy, options and rack, the member's ownership, and the
    assignment of a group by regroup's strategy."""

    def __init__(self, strategy: Strategy, options: Mapping[str, Any], rack: str | None) -> None:
        self.strategy = strategy
        self.options = checked_options(options)
        self.rack = rack or None  # an empty rack id is no rack, as in Kafka
        self.ownership = Ownership()
        self.assignor: PartitionAssignor = registry.get(strategy.name)

    def group_spec(
        self, members: Sequence[MemberView], counts: Mapping[str, int], partition_racks: PartitionRacks | None
    ) -> GroupSpec:
        """The group as regroup's strategy takes it: each member's previous assignment and generation mapped to
        the strategy's own form (``PartitionAssignor.with_previous``: the sticky user data for ``sticky``, owned
        partitions for the others); replica racks only for a rack-aware strategy."""
        subscriptions = {
            m.member_id: MemberSubscription.of(
                m.topics, m.owned, generation=m.generation, rack=m.rack or None, instance_id=m.instance_id
            )
            for m in members
        }
        wanted = {t for m in members for t in m.topics}
        spec = GroupSpec(
            topics={t: n for t, n in counts.items() if t in wanted},
            members=subscriptions,
            partition_racks=partition_racks if self.strategy.rack_aware else None,
            options=self.options,
        )
        return self.assignor.with_previous(spec)

    def assign(self, spec: GroupSpec) -> Assignment:
        return self.assignor.assign(spec)


def assigned_topics(assignment: Assignment, member_id: str) -> list[tuple[str, list[int]]]:
    """One member's part of an assignment as the libraries' assignment objects list it: (topic, partitions),
    topics sorted, topics without partitions left out."""
    return [(topic, list(ps)) for topic, ps in sorted(assignment.get(member_id, {}).items()) if ps]
