"""Kafka's client-side ``roundrobin`` assignor.

Owns: the round-robin strategy. All partitions of all subscribed topics, sorted by (topic, partition),
are dealt one by one to the members in Kafka's member order (see ``range.kafka_member_order``), cycling
through the members and skipping any member not subscribed to the partition's topic; the cycle carries
on from where the previous partition left it, across topics. Kafka's round-robin assignor has no
rack-aware variant (KIP-881 covers range and the sticky assignors only), so member racks are ignored.
"""

from __future__ import annotations

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.roundrobin_assignment import RoundRobinAssignment
from regroup.assignors.spec import Assignment, GroupSpec, RebalanceProtocol


class RoundRobinAssignor(PartitionAssignor):
    """Kafka's ``roundrobin`` strategy (``org.apache.kafka.clients.consumer.RoundRobinAssignor``)."""

    name = "roundrobin"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def assign(self, spec: GroupSpec) -> Assignment:
        return RoundRobinAssignment(spec)
