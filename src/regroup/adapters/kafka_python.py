"""regroup's strategies as kafka-python partition assignors (kafka-python 3.0.12 or newer)::

    from regroup.adapters.kafka_python import RegroupStickyAssignor
    KafkaConsumer(..., partition_assignment_strategy=[RegroupStickyAssignor])

Each class is a kafka-python ``AbstractPartitionAssignor`` whose protocol name is ``regroup-`` and regroup's strategy
name. Its subscription is a consumer protocol subscription v3: the topics; the previous assignment and generation
(for ``regroup-sticky`` as the user data kafka-python's own sticky assignor writes, for the others as owned
partitions and generation id); the member's rack, given as ``rack=`` (kafka-python keeps its ``client_rack`` to
itself: assignors never see it). The leader reads replica racks from the cluster metadata (brokers' racks and each
partition's replicas) and runs regroup's strategy. ``rolling_upgrade(ours, theirs)`` gives the strategies of a
member while a group rolls from one of kafka-python's assignors to ours, member by member (docs/assignors.md,
"Using regroup's assignors from your client").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from regroup.adapters.common import (
    CONSISTENT_HASH,
    COOPERATIVE_STICKY,
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
    grouped,
    partition_counts,
    replica_racks,
)
from regroup.assignors.spec import NO_GENERATION, GroupSpec, PartitionRacks

_INSTALL = "pip install 'regroup[adapters]' (or pip install 'kafka-python>=3.0.12')"
try:
    from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
    from kafka.structs import TopicPartition
except ImportError as exc:  # no kafka-python, or one older than 3.0 (other modules, no RebalanceProtocol)
    if exc.name == "kafka":
        raise ImportError(f"regroup.adapters.kafka_python needs kafka-python: {_INSTALL}") from exc
    raise ImportError(f"regroup.adapters.kafka_python needs kafka-python 3.0.12 or newer ({exc}): {_INSTALL}") from exc

__all__ = [
    "RegroupAssignor",
    "RegroupConsistentHashAssignor",
    "RegroupCooperativeStickyAssignor",
    "RegroupCopartitionedAssignor",
    "RegroupRangeAssignor",
    "RegroupRedundantAssignor",
    "RegroupStickyAssignor",
    "rolling_upgrade",
]

#: the consumer protocol version of every subscription the adapters send (v3: owned partitions, generation, rack)
SUBSCRIPTION_VERSION = 3


# kafka-python ships no type information: its base class is ``Any`` to mypy, so subclassing it needs the ignore.
class RegroupAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """A regroup strategy as a kafka-python assignor; use one of the subclasses below."""

    strategy: ClassVar[Strategy]
    name: ClassVar[str]

    def __init__(self, *, rack: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        self._core = AdapterCore(self.strategy, options or {}, rack)
        self._followers: list[Any] = []

    def supported_protocols(self) -> list[Any]:
        """COOPERATIVE for cooperative-sticky (kafka-python refuses a consumer whose assignors share no protocol, so
        it cannot list eager and cooperative assignors together), EAGER for the others."""
        return [RebalanceProtocol.COOPERATIVE if self.strategy.cooperative else RebalanceProtocol.EAGER]

    # ------------------------------------------------------------------------------------------- member side
    def metadata(self, topics: Iterable[str]) -> Any:
        """This member's subscription: v3, with its previous assignment, generation and rack."""
        state = self._core.ownership
        owned: Mapping[str, tuple[int, ...]] = {}
        user_data = b""
        if self.strategy.sticky_user_data:
            if state.partitions is not None:  # (none before the first assignment, as kafka-python's sticky)
                user_data = encode_sticky(state.partitions, state.generation, kafka_python=True)
        else:
            owned = state.owned
        entry = ConsumerProtocolSubscription.TopicPartition
        return ConsumerProtocolSubscription(
            version=SUBSCRIPTION_VERSION,
            topics=sorted(set(topics)),
            user_data=user_data,
            owned_partitions=[entry(topic=t, partitions=list(ps)) for t, ps in owned.items()],
            generation_id=state.generation,
            rack_id=self._core.rack,
        )

    def on_assignment(self, assignment: Any, generation: int) -> None:
        """Remember the assignment for the next subscription; pass it on to a library assignor linked by
        ``rolling_upgrade`` so that its subscriptions stay current too."""
        self.record(assignment, generation)
        for follower in self._followers:
            follower.on_assignment(assignment, generation)

    def record(self, assignment: Any, generation: int) -> None:
        """Take ``assignment`` (a ``ConsumerProtocolAssignment``) as what this member owns since ``generation``."""
        self._core.ownership.record(((str(tp.topic), int(tp.partition)) for tp in assignment.partitions()), generation)

    # ------------------------------------------------------------------------------------------- leader side
    def assign(self, cluster: Any, members: Sequence[Any]) -> dict[str, Any]:
        """Every member's ``ConsumerProtocolAssignment`` from regroup's strategy."""
        assignment = self._core.assign(self.group_spec(cluster, members))
        return {
            str(m.member_id): ConsumerProtocolAssignment(0, assigned_topics(assignment, str(m.member_id)), b"")
            for m in members
        }

    def group_spec(self, cluster: Any, members: Sequence[Any]) -> GroupSpec:
        """The group as regroup's strategy sees it: partition counts and replica racks from ``cluster`` (a
        ``ClusterMetadata``), members from the JoinGroup response's members (their metadata decoded or not)."""
        views = [self.member_view(m) for m in members]
        counts = partition_counts((t for v in views for t in v.topics), cluster.partitions_for_topic)
        racks = None
        if self.strategy.rack_aware and any(v.rack for v in views):
            racks = cluster_racks(cluster, counts)
        return self._core.group_spec(views, counts, racks)

    def member_view(self, member: Any) -> MemberView:
        """One JoinGroup member: topics, previous assignment and generation where this strategy carries them, rack
        (v3), static instance id."""
        metadata = member.metadata
        if isinstance(metadata, bytes | bytearray | memoryview):
            metadata = ConsumerProtocolSubscription.decode(bytes(metadata))
        if self.strategy.sticky_user_data:
            owned, generation = decode_sticky(metadata.user_data)
        else:
            listed = getattr(metadata, "owned_partitions", None) or ()
            owned = grouped((str(e.topic), int(p)) for e in listed for p in e.partitions)
            reported = getattr(metadata, "generation_id", None)  # (v2+; kafka-python decodes older ones as -1)
            generation = NO_GENERATION if reported is None else int(reported)
        instance_id = getattr(member, "group_instance_id", None)
        return MemberView(
            member_id=str(member.member_id),
            topics=tuple(str(t) for t in metadata.topics),
            owned=owned,
            generation=generation,
            rack=getattr(metadata, "rack_id", None) or None,
            instance_id=None if instance_id is None else str(instance_id),
        )


def cluster_racks(cluster: Any, counts: Mapping[str, int]) -> PartitionRacks | None:
    """Replica racks from kafka-python's ``ClusterMetadata``: the brokers' racks (Metadata v1+) and, per partition,
    which brokers hold a replica (``is_replica_node``)."""
    racks = {b.node_id: str(b.rack) for b in cluster.brokers() if getattr(b, "rack", None)}
    if not racks:
        return None

    def racks_of(topic: str, partition: int) -> list[str]:
        tp = TopicPartition(topic, partition)
        return [rack for node, rack in racks.items() if cluster.is_replica_node(tp, node) is not None]

    return replica_racks(counts, racks_of)


class RegroupStickyAssignor(RegroupAssignor):
    """``regroup-sticky``: regroup's ``sticky`` (KIP-54, eager) — the best balance any subscription pattern allows,
    then the most partitions kept. Previous assignment in the user data kafka-python's ``StickyPartitionAssignor``
    writes; rack-local placement of moved partitions when members give ``rack`` and brokers have racks."""

    strategy = STICKY
    name = STICKY.protocol

    def __init__(self, *, rack: str | None = None) -> None:
        super().__init__(rack=rack)


class RegroupCooperativeStickyAssignor(RegroupAssignor):
    """``regroup-cooperative-sticky``: regroup's ``cooperative-sticky`` (KIP-429) — sticky, and no partition moves
    directly between two members: it is revoked in one rebalance and assigned in the next."""

    strategy = COOPERATIVE_STICKY
    name = COOPERATIVE_STICKY.protocol

    def __init__(self, *, rack: str | None = None) -> None:
        super().__init__(rack=rack)


class RegroupRangeAssignor(RegroupAssignor):
    """``regroup-range``: Kafka's range, rack-aware as Kafka's Java client is since KIP-881 (kafka-python's own
    ``range`` is not)."""

    strategy = RANGE
    name = RANGE.protocol

    def __init__(self, *, rack: str | None = None) -> None:
        super().__init__(rack=rack)


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
    """``regroup-consistent-hash``: a hash ring with ``vnodes`` points per member (its static instance id when it
    has one, else its member id); a joining or leaving member moves only its own share."""

    strategy = CONSISTENT_HASH
    name = CONSISTENT_HASH.protocol

    def __init__(self, *, vnodes: int = 100) -> None:
        super().__init__(options={"vnodes": vnodes})


class _Companion(AbstractPartitionAssignor):  # type: ignore[misc]  # (kafka-python's untyped base, as above)
    """A library assignor as ``rolling_upgrade`` lists it: unchanged on the wire, and every assignment it receives
    is also recorded by the regroup adapter it is linked to."""

    def __init__(self, theirs: Any, ours: RegroupAssignor) -> None:
        self._theirs, self._ours = theirs, ours

    @property
    def name(self) -> str:
        return str(self._theirs.name)

    def supported_protocols(self) -> list[Any]:
        return list(self._theirs.supported_protocols())

    def metadata(self, topics: Iterable[str]) -> Any:
        return self._theirs.metadata(topics)

    def assign(self, cluster: Any, members: Sequence[Any]) -> Any:
        return self._theirs.assign(cluster, members)

    def on_assignment(self, assignment: Any, generation: int) -> None:
        self._theirs.on_assignment(assignment, generation)
        self._ours.record(assignment, generation)


def rolling_upgrade(ours: RegroupAssignor, theirs: Any) -> list[Any]:
    """The ``partition_assignment_strategy`` of a member while its group rolls from ``theirs`` (one of kafka-python's
    assignors, class or instance) to ``ours``: ``[ours, theirs]``, ours first, so the group's vote keeps ``theirs``
    until every member offers ``ours`` and then switches. The two are linked: whichever the group uses, both learn
    every assignment this member receives, so the first rebalance under ``ours`` is sticky to what members own, and
    a group falling back to ``theirs`` (a member rolled back) finds its previous assignments current too."""
    if isinstance(theirs, type):
        theirs = theirs()
    if theirs.name == ours.name:
        raise ValueError(f"rolling_upgrade needs two different assignors, got {ours.name!r} twice")
    ours._followers.append(theirs)
    return [ours, _Companion(theirs, ours)]
