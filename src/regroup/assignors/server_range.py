"""``server-range``: the KIP-848 server-side range assignor, with the semantics of Kafka's
``org.apache.kafka.coordinator.group.assignor.RangeAssignor`` as rewritten in Kafka 3.9 (KAFKA-16944).

Owns: the server-side range strategy. It reuses the classic assignors' member order (``member_order.member_sort_key``)
because Kafka's coordinator orders members the same way, and the client-side range's rack-aware assignment.

Kafka's semantics, which this module reproduces exactly when racks play no part:

* Members are put in one order: static members (those with an instance id) first, by instance id, then dynamic
  members by member id; strings compare as Java's ``String.compareTo`` does (UTF-16 code units). Two members
  claiming one instance id, which the coordinator never allows, are ordered by member id.
* Each topic is handled on its own. Its ``P`` partitions are cut into contiguous ranges over its ``n``
  subscribers in member order: the first ``P % n`` subscribers get ``P // n + 1`` partitions, the others
  ``P // n``. When ``n > P`` the last ``n - P`` subscribers get nothing of that topic.
* Hence co-partitioning: topics with the same set of subscribers and the same partition count give partition
  ``p`` to the same member. In a homogeneous group (everyone subscribes to the same topics) this covers every
  pair of topics with equal partition counts. Kafka's separate homogeneous and heterogeneous code paths compute
  the same thing, so there is a single path here.
* No stickiness to the current target: the assignment is recomputed from the member order every time, and
  ``owned`` (the member's current target) is ignored, as are generations. Stability comes only from
  the order: static members keep their share across restarts with new member ids as long as the set of
  members, their subscriptions and the partition counts stay the same. When a member joins or leaves, every
  subscriber of its topics that sorts after it has its ranges shifted, and the others' range sizes change with
  ``n`` — whatever the formula gives is what a member keeps.
* Rack-aware where Kafka's server-side range is not (it never read racks): when members have racks (the
  ``RackId`` of their heartbeats) and the replica racks say a topic's partitions are not on every rack, the
  topic is assigned as the client-side ``range`` assigns it under KIP-881 (``range.rack_aware_ranges``, the
  one implementation of both): the same per-member counts, partitions matched to subscribers on a replica
  rack first, co-partitioning kept. Without racks both compute the same ranges; this module keeps its own
  faster path for that case.
* Topics a member subscribes to that do not exist are ignored (the coordinator only hands existing topics to
  the assignor; Kafka's assignor would throw otherwise). Every member of the spec appears in the output, with
  an empty mapping when it gets nothing; topics with no partitions for a member are left out.
"""

from __future__ import annotations

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.range import may_need_racks, rack_aware_ranges, topic_subscribers
from regroup.assignors.range_assignment import RangeAssignment
from regroup.assignors.spec import Assignment, GroupSpec, RebalanceProtocol


class ServerRangeAssignor(PartitionAssignor):
    """Server-side range assignor (Kafka's KIP-848 ``range``)."""

    name = "server-range"
    supported_protocols = (RebalanceProtocol.COOPERATIVE,)
    server_side = True

    def assign(self, spec: GroupSpec) -> Assignment:
        if not spec.members:
            return {}
        if may_need_racks(spec):
            on_racks = rack_aware_ranges(spec, topic_subscribers(spec))
            if on_racks is not None:
                return on_racks
        return RangeAssignment(spec)
