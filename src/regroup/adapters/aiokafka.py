"""regroup's strategies as aiokafka partition assignors (aiokafka 0.14 or newer)::

    from regroup.adapters.aiokafka import RegroupStickyAssignor
    AIOKafkaConsumer(..., partition_assignment_strategy=(RegroupStickyAssignor(),))

Each class is an aiokafka ``AbstractPartitionAssignor`` whose protocol name is ``regroup-`` and regroup's strategy
name. aiokafka is eager-only and decodes every subscription as consumer protocol v0 (topics and user data) before
its assignor sees it, so everything a member reports travels in the user data: its previous assignment and
generation as Kafka's ``StickyAssignorUserData`` v1, the bytes aiokafka's own sticky assignor writes. aiokafka
never tells an assignor the generation (``on_assignment`` has none; its own sticky assignor reports -1 forever),
so these adapters number assignments themselves: the leader writes one more than the highest generation its
members report into every assignment's user data (an int32), and each member reports that number back, which
lets a stale claim lose to a newer one as Kafka's generations do. Not available through aiokafka: members' racks
(``client_rack`` is not given to assignors and v0 has no rack field), so no rack-aware placement; static instance
ids (the leader gets member ids only), so ``regroup-consistent-hash`` hashes member ids; cooperative rebalancing.
``rolling_upgrade(ours, theirs)`` gives the strategies of a member while a group rolls from one of aiokafka's
assignors to ours (docs/assignors.md, "Using regroup's assignors from your client").
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

from regroup.adapters.common import (
    CONSISTENT_HASH,
    COPARTITIONED,
    RANGE,
    REDUNDANT,
    STICKY,
    AdapterCore,
    MemberView,
    Strategy,
    assigned_topics,
    decode_sticky,
    encode_sticky,
    partition_counts,
)
from regroup.assignors.spec import NO_GENERATION, GroupSpec

_INSTALL = "pip install 'regroup[adapters]' (or pip install 'aiokafka>=0.14')"
try:
    # aiokafka ships no type information (no py.typed), so mypy cannot follow these imports.
    from aiokafka.coordinator.assignors.abstract import (  # type: ignore[import-untyped]
        AbstractPartitionAssignor,
    )
    from aiokafka.coordinator.protocol import (  # type: ignore[import-untyped]
        ConsumerProtocolMemberAssignment,
        ConsumerProtocolMemberMetadata,
    )
except ImportError as exc:  # no aiokafka, or one without the assignor API these adapters implement
    if exc.name == "aiokafka":
        raise ImportError(f"regroup.adapters.aiokafka needs aiokafka: {_INSTALL}") from exc
    raise ImportError(f"regroup.adapters.aiokafka needs aiokafka 0.14 or newer ({exc}): {_INSTALL}") from exc

__all__ = [
    "RegroupAssignor",
    "RegroupConsistentHashAssignor",
    "RegroupCopartitionedAssignor",
    "RegroupRangeAssignor",
    "RegroupRedundantAssignor",
    "RegroupStickyAssignor",
    "rolling_upgrade",
]

_GENERATION: Final = struct.Struct(">i")


def encode_generation(generation: int) -> bytes:
    """An assignment's user data: the generation the leader numbered it with (int32)."""
    return _GENERATION.pack(generation)


def decode_generation(user_data: bytes | None) -> int:
    """The generation in an assignment's user data; -1 when there is none (an assignment of another assignor)."""
    if not user_data or len(user_data) != _GENERATION.size:
        return NO_GENERATION
    generation: int = _GENERATION.unpack(bytes(user_data))[0]
    return generation


# aiokafka ships no type information: its base class is ``Any`` to mypy, so subclassing it needs the ignore.
class RegroupAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """A regroup strategy as an aiokafka assignor; use one of the subclasses below (instances: aiokafka calls its
    assignors' methods on whatever it is given)."""

    strategy: ClassVar[Strategy]
    name: ClassVar[str]

    def __init__(self, *, options: Mapping[str, Any] | None = None) -> None:
        self._core = AdapterCore(self.strategy, options or {}, None)
        self._followers: list[Any] = []

    # ------------------------------------------------------------------------------------------- member side
    def metadata(self, topics: Iterable[str]) -> Any:
        """This member's subscription: v0, its previous assignment and generation in the user data."""
        state = self._core.ownership
        user_data = b"" if state.partitions is None else encode_sticky(state.partitions, state.generation)
        return ConsumerProtocolMemberMetadata(0, sorted(set(topics)), user_data)

    def on_assignment(self, assignment: Any) -> None:
        """Remember the assignment and the generation its leader numbered it with; pass it on to a library
        assignor linked by ``rolling_upgrade``."""
        self.record(assignment, decode_generation(assignment.user_data))
        for follower in self._followers:
            follower.on_assignment(assignment)

    def record(self, assignment: Any, generation: int) -> None:
        """Take ``assignment`` (a ``ConsumerProtocolMemberAssignment``) as what this member owns since
        ``generation``."""
        self._core.ownership.record(((str(tp.topic), int(tp.partition)) for tp in assignment.partitions()), generation)

    # ------------------------------------------------------------------------------------------- leader side
    def assign(self, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
        """Every member's ``ConsumerProtocolMemberAssignment`` from regroup's strategy, numbered one past the
        highest generation the members report."""
        views = self.member_views(members)
        assignment = self._core.assign(self._spec(cluster, views))
        generation = max((v.generation for v in views), default=NO_GENERATION) + 1
        user_data = encode_generation(generation)
        return {
            str(member_id): ConsumerProtocolMemberAssignment(0, assigned_topics(assignment, str(member_id)), user_data)
            for member_id in members
        }

    def group_spec(self, cluster: Any, members: Mapping[str, Any]) -> GroupSpec:
        """The group as regroup's strategy sees it: partition counts from ``cluster`` (a ``ClusterMetadata``),
        members from their decoded v0 subscriptions (no racks: aiokafka gives none)."""
        return self._spec(cluster, self.member_views(members))

    def _spec(self, cluster: Any, views: Sequence[MemberView]) -> GroupSpec:
        counts = partition_counts((t for v in views for t in v.topics), cluster.partitions_for_topic)
        return self._core.group_spec(views, counts, None)

    @staticmethod
    def member_views(members: Mapping[str, Any]) -> list[MemberView]:
        """The members' decoded v0 subscriptions: topics, and the previous assignment and generation in the user
        data (Kafka's sticky layout, or kafka-python's)."""
        views = []
        for member_id, metadata in members.items():
            owned, generation = decode_sticky(metadata.user_data)
            views.append(
                MemberView(
                    member_id=str(member_id),
                    topics=tuple(str(t) for t in metadata.subscription),
                    owned=owned,
                    generation=generation,
                )
            )
        return views


class RegroupStickyAssignor(RegroupAssignor):
    """``regroup-sticky``: regroup's ``sticky`` (KIP-54, eager) — the best balance any subscription pattern allows,
    then the most partitions kept."""

    strategy = STICKY
    name = STICKY.protocol

    def __init__(self) -> None:
        super().__init__()


class RegroupRangeAssignor(RegroupAssignor):
    """``regroup-range``: Kafka's range (rack-aware only where members have racks, which aiokafka cannot give)."""

    strategy = RANGE
    name = RANGE.protocol

    def __init__(self) -> None:
        super().__init__()


class RegroupRedundantAssignor(RegroupAssignor):
    """``regroup-redundant``: every partition to ``replicas`` distinct members, balanced and sticky."""

    strategy = REDUNDANT
    name = REDUNDANT.protocol

    def __init__(self, *, replicas: int = 2) -> None:
        super().__init__(options={"replicas": replicas})


class RegroupCopartitionedAssignor(RegroupAssignor):
    """``regroup-copartitioned``: partition p of every topic of a ``copartitioned`` group goes to one member."""

    strategy = COPARTITIONED
    name = COPARTITIONED.protocol

    def __init__(self, *, copartitioned: Sequence[Sequence[str]] = ()) -> None:
        super().__init__(options={"copartitioned": [list(group) for group in copartitioned]})


class RegroupConsistentHashAssignor(RegroupAssignor):
    """``regroup-consistent-hash``: a hash ring with ``vnodes`` points per member id; a joining or leaving member
    moves only its own share."""

    strategy = CONSISTENT_HASH
    name = CONSISTENT_HASH.protocol

    def __init__(self, *, vnodes: int = 100) -> None:
        super().__init__(options={"vnodes": vnodes})


class _Companion(AbstractPartitionAssignor):  # type: ignore[misc]  # (aiokafka's untyped base, as above)
    """A library assignor as ``rolling_upgrade`` lists it: unchanged on the wire, and every assignment it receives
    is also recorded by the regroup adapter it is linked to (generation unknown: aiokafka gives none)."""

    def __init__(self, theirs: Any, ours: RegroupAssignor) -> None:
        self._theirs, self._ours = theirs, ours

    @property
    def name(self) -> str:
        return str(self._theirs.name)

    def metadata(self, topics: Iterable[str]) -> Any:
        return self._theirs.metadata(topics)

    def assign(self, cluster: Any, members: Mapping[str, Any]) -> Any:
        return self._theirs.assign(cluster, members)

    def on_assignment(self, assignment: Any) -> None:
        self._theirs.on_assignment(assignment)
        self._ours.record(assignment, NO_GENERATION)


def rolling_upgrade(ours: RegroupAssignor, theirs: Any) -> list[Any]:
    """The ``partition_assignment_strategy`` of a member while its group rolls from ``theirs`` (one of aiokafka's
    assignors, class or instance, used as given) to ``ours``: ``[ours, theirs]``, ours first, so the group's vote
    keeps ``theirs`` until every member offers ``ours`` and then switches. The two are linked: whichever the group
    uses, both learn every assignment this member receives (see ``regroup.adapters.kafka_python.rolling_upgrade``).
    aiokafka's own sticky assignor keeps its state in class attributes, shared by every consumer of a process."""
    if theirs.name == ours.name:
        raise ValueError(f"rolling_upgrade needs two different assignors, got {ours.name!r} twice")
    ours._followers.append(theirs)
    return [ours, _Companion(theirs, ours)]
