"""``uniform``: the KIP-848 server-side assignor — balanced and sticky to each member's current target.

The coordinator passes each member's current target assignment as ``owned`` and its rack (``RackId`` of its
heartbeat) as ``rack``, and the replica racks of every subscribed partition as ``partition_racks``.
Homogeneous and heterogeneous subscriptions both go through the optimal engine (``balance``), so the target
is the best achievable balance and, among those, moves the fewest partitions away from their current target
owner.

Rack-aware when some member's rack holds a replica of some subscribed partition (``racks.uniform_racks``).
A partition is *cross-rack* for a member with a rack when none of its replicas is on that rack (members
without a rack are cross-rack for nothing). Then the target optimises, exactly and in this order
(``rack_flow``, the same priorities as the rack-aware sticky assignors on differing subscriptions):

1. balance: the engine's decreasingly minimal partition counts, as without racks;
2. the most partitions kept by a current owner they are not cross-rack for;
3. the fewest cross-rack placements;
4. the most of the other current partitions kept.

So a member keeps a partition on its rack (or any partition, when it has no rack) whenever balance allows,
and gives up a partition whose replicas have all left its rack when a member on a replica rack can take it
without costing balance.
"""

from __future__ import annotations

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.rack_flow import assign_by_flow
from regroup.assignors.racks import uniform_racks
from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec, RebalanceProtocol
from regroup.assignors.sticky import engine_assignment


class UniformAssignor(PartitionAssignor):
    """Server-side uniform assignor (Kafka's ``uniform``), rack-aware."""

    name = "uniform"
    supported_protocols = (RebalanceProtocol.COOPERATIVE,)
    server_side = True

    def assign(self, spec: GroupSpec) -> Assignment:
        # A target assignment has no generations: every claim counts equally.
        claims = {m: (sub.owned, NO_GENERATION) for m, sub in spec.members.items()}
        racks = uniform_racks(spec)
        if racks is None:
            return engine_assignment(spec, claims)
        return assign_by_flow(spec, claims, racks)
