"""``uniform``: the KIP-848 server-side assignor — balanced and sticky to each member's current target.

The coordinator passes each member's current target assignment as ``owned``. Homogeneous and
heterogeneous subscriptions both go through the optimal engine (``balance``), so the target is the best
achievable balance and, among those, moves the fewest partitions away from their current target owner.
"""

from __future__ import annotations

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec, RebalanceProtocol
from regroup.assignors.sticky import assign_balanced


class UniformAssignor(PartitionAssignor):
    """Server-side uniform assignor (Kafka's ``uniform``)."""

    name = "uniform"
    supported_protocols = (RebalanceProtocol.COOPERATIVE,)
    server_side = True

    def assign(self, spec: GroupSpec) -> Assignment:
        # A target assignment has no generations: every claim counts equally.
        claims = {m: (sub.owned, NO_GENERATION) for m, sub in spec.members.items()}
        return assign_balanced(spec, claims)
