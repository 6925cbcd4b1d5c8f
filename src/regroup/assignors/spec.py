"""Plain data model shared by every assignor: what goes in (a group spec) and what comes out.

Everything here is immutable, plain Python: topic names, partition counts, member subscriptions.
An assignor never sees a socket, a clock or a coordinator object; it sees a ``GroupSpec``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: member id -> topic -> sorted partition numbers. Every member of the spec appears (possibly empty). What an
#: assignor returns: a plain dict, or an ``array_assignment.ArrayAssignment`` that builds each member's view when
#: it is read.
Assignment = Mapping[str, dict[str, list[int]]]

#: an ``Assignment`` being built: member id -> topic -> partitions
AssignmentDict = dict[str, dict[str, list[int]]]

#: topic -> partition -> ids of the racks holding a replica of that partition.
PartitionRacks = Mapping[str, tuple[frozenset[str], ...]]


class RebalanceProtocol(enum.IntEnum):
    """The client-side rebalance protocols a classic assignor can support (Kafka's numbering)."""

    EAGER = 0
    COOPERATIVE = 1


NO_GENERATION = -1


# The spec's values are built for every member at every assignment: they are not frozen (a frozen dataclass
# costs about 10k instructions per object in the compiled build; docs/architecture.md). ``Final`` fields keep
# them immutable for mypy; ``unsafe_hash`` keeps the field-based hash a frozen dataclass has.


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class MemberSubscription:
    """One member as an assignor sees it.

    ``owned``/``generation`` are the partitions the member owned in its last generation, as carried by the
    subscription (KIP-429 owned partitions, v1+) — or, for server-side assignors, the member's current target.
    ``user_data`` is the assignor-specific blob from the subscription (for ``sticky``, its previous assignment).
    """

    topics: Final[tuple[str, ...]]
    owned: Final[Mapping[str, tuple[int, ...]]] = field(default_factory=dict)
    generation: Final[int] = NO_GENERATION
    rack: Final[str | None] = None
    instance_id: Final[str | None] = None
    user_data: Final[bytes | None] = None

    @staticmethod
    def of(
        topics: list[str] | tuple[str, ...],
        owned: Mapping[str, list[int] | tuple[int, ...]] | None = None,
        *,
        generation: int = NO_GENERATION,
        rack: str | None = None,
        instance_id: str | None = None,
        user_data: bytes | None = None,
    ) -> MemberSubscription:
        """Convenience constructor normalising lists to sorted tuples."""
        return MemberSubscription(
            topics=tuple(sorted(set(topics))),
            owned={t: tuple(sorted(set(ps))) for t, ps in sorted((owned or {}).items()) if ps},
            generation=generation,
            rack=rack,
            instance_id=instance_id,
            user_data=user_data,
        )


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class GroupSpec:
    """Everything an assignor is given: topic metadata, members and strategy options."""

    topics: Final[Mapping[str, int]]
    members: Final[Mapping[str, MemberSubscription]]
    partition_racks: Final[PartitionRacks | None] = None
    options: Final[Mapping[str, Any]] = field(default_factory=dict)

    def subscribed_partition_count(self, member_id: str) -> int:
        """How many existing partitions the member's subscription covers."""
        return sum(self.topics.get(t, 0) for t in self.members[member_id].topics)


class AssignmentError(ValueError):
    """The spec cannot be assigned by this strategy (bad options, contradictory input)."""


def add_partition(assignment: AssignmentDict, member: str, topic: str, partition: int) -> None:
    """Append one partition to a member's assignment (callers sort at the end)."""
    assignment.setdefault(member, {}).setdefault(topic, []).append(partition)


def normalized(assignment: Mapping[str, Mapping[str, list[int]]], spec: GroupSpec) -> AssignmentDict:
    """Every member present, topics without partitions dropped, partitions sorted."""
    out: AssignmentDict = {}
    for member in spec.members:
        per_topic = assignment.get(member, {})
        out[member] = {t: sorted(ps) for t, ps in sorted(per_topic.items()) if ps}
    return out
