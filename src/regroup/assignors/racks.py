"""Rack helpers shared by the rack-aware assignors: the client-side ones of KIP-881 and the server-side ones.

Owns: what counts as a member's rack, the per-partition replica racks of one topic as seen by an assignor,
Kafka's rule for when rack-aware assignment is worth doing at all (``AbstractPartitionAssignor``'s
``useRackAwareAssignment``), and the group-wide rack view of the sticky assignors (``sticky_racks``) and of
the server-side ``uniform`` (``uniform_racks``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from regroup.assignors.spec import GroupSpec, MemberSubscription, PartitionRacks

_NO_RACKS: frozenset[str] = frozenset()


def member_rack(subscription: MemberSubscription) -> str | None:
    """The member's rack, or None when it has none. Kafka treats an empty rack id as no rack."""
    return subscription.rack or None


def topic_partition_racks(
    partition_racks: PartitionRacks | None, topic: str, partition_count: int
) -> tuple[frozenset[str], ...]:
    """Replica racks of each partition ``0..partition_count-1`` of ``topic``.

    Partitions the metadata says nothing about (no ``partition_racks`` at all, topic missing, or a tuple
    shorter than the partition count) have no known rack: an empty set, as for replicas whose broker has no
    ``broker.rack``. Entries beyond ``partition_count`` are ignored.
    """
    if partition_racks is None:
        return (_NO_RACKS,) * partition_count
    known = partition_racks.get(topic, ())
    if len(known) >= partition_count:
        return tuple(known[:partition_count])
    return tuple(known) + (_NO_RACKS,) * (partition_count - len(known))


def use_rack_aware_assignment(
    consumer_racks: Iterable[str],
    racks_per_partition: Sequence[frozenset[str]],
    *,
    prefer_rack_aware_logic: bool = False,
) -> bool:
    """Kafka's test for rack-aware assignment of one topic.

    False when no consumer has a rack or no consumer rack holds any replica of the topic. Otherwise true
    when some partition is not replicated on every rack that holds the topic (rack alignment can make a
    difference), or always when ``prefer_rack_aware_logic`` is set (a switch Kafka keeps for its own tests,
    forcing the rack-aware code path even when every rack has every partition).
    """
    consumers = frozenset(consumer_racks)
    if not consumers:
        return False
    all_racks: frozenset[str] = frozenset().union(*racks_per_partition)
    if consumers.isdisjoint(all_racks):
        return False
    if prefer_rack_aware_logic:
        return True
    return any(racks != all_racks for racks in racks_per_partition)


@dataclass(frozen=True, slots=True)
class StickyRacks:
    """Member racks and replica racks of the subscribed partitions, for a group assigned rack-aware.

    ``member_racks`` holds only members with a rack; ``partition_racks`` every subscribed topic (one
    frozenset per partition, empty when no replica has a rack); ``members_on_rack`` counts the members
    (subscribed to anything or not) on each rack.
    """

    member_racks: Mapping[str, str]
    partition_racks: Mapping[str, tuple[frozenset[str], ...]]
    members_on_rack: Mapping[str, int]

    def mismatched(self, member: str, topic: str, partition: int) -> bool:
        """The member has a rack and no replica of the partition is on it."""
        rack = self.member_racks.get(member)
        return rack is not None and rack not in self.partition_racks[topic][partition]

    def matched_members(self, topic: str, partition: int) -> int:
        """How many members sit on a rack holding a replica of the partition."""
        return sum(self.members_on_rack.get(r, 0) for r in self.partition_racks[topic][partition])


def sticky_racks(spec: GroupSpec, *, prefer_rack_aware_logic: bool = False) -> StickyRacks | None:
    """The rack view when Kafka's sticky assignors would assign this group rack-aware, else None.

    ``prefer_rack_aware_logic`` is Kafka's switch for its own tests: take the rack-aware path whenever a
    member rack holds some replica, even if every partition is on every replica rack.
    """
    member_racks = {m: rack for m, sub in spec.members.items() if (rack := member_rack(sub)) is not None}
    if not member_racks or spec.partition_racks is None:
        return None
    # (distinct subscriptions first: members usually share one tuple, or at least equal ones)
    lists = set({id(sub.topics): sub.topics for sub in spec.members.values()}.values())
    subscribed = sorted({t for topics in lists for t in topics if spec.topics.get(t, 0) > 0})
    partition_racks = {t: topic_partition_racks(spec.partition_racks, t, spec.topics[t]) for t in subscribed}
    every_partition = [racks for t in subscribed for racks in partition_racks[t]]
    if not use_rack_aware_assignment(
        member_racks.values(), every_partition, prefer_rack_aware_logic=prefer_rack_aware_logic
    ):
        return None
    members_on_rack: dict[str, int] = {}
    for rack in member_racks.values():
        members_on_rack[rack] = members_on_rack.get(rack, 0) + 1
    return StickyRacks(member_racks=member_racks, partition_racks=partition_racks, members_on_rack=members_on_rack)


def uniform_racks(spec: GroupSpec) -> StickyRacks | None:
    """The rack view of the server-side ``uniform`` assignor, or None when racks cannot matter.

    Racks count whenever some member's rack holds a replica of some subscribed partition: Kafka's sticky test
    without its last condition. Even when every partition is on every replica rack, a member on a rack holding
    no replica is cross-rack for all of them, so who takes the larger shares still decides how many placements
    are rack-local.
    """
    if spec.partition_racks is None:
        return None
    return sticky_racks(spec, prefer_rack_aware_logic=True)
