"""Rack helpers shared by the rack-aware (KIP-881) client-side assignors.

Owns: what counts as a member's rack, the per-partition replica racks of one topic as seen by an assignor,
and Kafka's rule for when rack-aware assignment is worth doing at all (``AbstractPartitionAssignor``'s
``useRackAwareAssignment``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from regroup.assignors.spec import MemberSubscription, PartitionRacks

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
