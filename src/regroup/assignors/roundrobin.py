"""Kafka's client-side ``roundrobin`` assignor.

Owns: the round-robin strategy. All partitions of all subscribed topics, sorted by (topic, partition),
are dealt one by one to the members in Kafka's member order (see ``range.kafka_member_order``), cycling
through the members and skipping any member not subscribed to the partition's topic; the cycle carries
on from where the previous partition left it, across topics. Kafka's round-robin assignor has no
rack-aware variant (KIP-881 covers range and the sticky assignors only), so member racks are ignored.
"""

from __future__ import annotations

from bisect import bisect_left

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.range import java_string_key, topic_subscribers
from regroup.assignors.spec import Assignment, AssignmentDict, GroupSpec, RebalanceProtocol


class RoundRobinAssignor(PartitionAssignor):
    """Kafka's ``roundrobin`` strategy (``org.apache.kafka.clients.consumer.RoundRobinAssignor``)."""

    name = "roundrobin"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def assign(self, spec: GroupSpec) -> Assignment:
        subs = topic_subscribers(spec)
        order = subs.order
        out: AssignmentDict = {m: {} for m in spec.members}
        # Position in ``order`` of the next member the cycle will consider.
        next_position = 0
        for topic in sorted(subs.topic_group, key=java_string_key):
            count = spec.topics[topic]
            positions = subs.groups[subs.topic_group[topic]]
            n_subs = len(positions)
            # The first partition goes to the first subscriber at or after the cycle's position (wrapping
            # round); every later partition of the topic to the subscriber after the previous one. So
            # partition k goes to subscriber (first + k) mod n_subs.
            first = bisect_left(positions, next_position)
            if first == n_subs:
                first = 0
            for offset in range(min(n_subs, count)):
                member = order[positions[(first + offset) % n_subs]]
                out[member][topic] = list(range(offset, count, n_subs))
            last = positions[(first + count - 1) % n_subs]
            next_position = (last + 1) % len(order)
        return out
