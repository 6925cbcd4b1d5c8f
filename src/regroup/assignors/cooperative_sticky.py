"""``cooperative-sticky`` (KIP-429): sticky, but a partition never moves directly between two members.

The assignment is computed like ``sticky`` from the owned partitions and generation the subscription
carries (v2+; older subscriptions carry the generation in this assignor's user data), rack-aware as Kafka
does when Kafka would (``rack_sticky``). Then every partition that would go to a new owner while another
present member still lists it as owned is withheld: the old owner sees it revoked after SyncGroup, rejoins,
and the follow-up rebalance hands it out.
"""

from __future__ import annotations

import numpy as np

from regroup.assignors.array_assignment import ArrayAssignment
from regroup.assignors.balance import Outcome
from regroup.assignors.base import MetadataInput, PartitionAssignor
from regroup.assignors.consumer_protocol import decode_cooperative_user_data, encode_cooperative_user_data
from regroup.assignors.homogeneous import assign_small
from regroup.assignors.layout import IntArray
from regroup.assignors.rack_sticky import assign_rack_aware
from regroup.assignors.racks import sticky_racks
from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec, MemberSubscription, RebalanceProtocol
from regroup.assignors.sticky import EngineRun, OwnedClaim, run_engine


def withhold_transfers(run: EngineRun) -> tuple[IntArray, ...]:
    """Remove from each member the partitions it did not list as owned while another present member did."""
    n = run.layout.partition_total
    sizes = [len(c) for c in run.raw_claims]
    if sum(sizes) == 0:
        return run.per_member
    claimers = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    claimed = np.concatenate(run.raw_claims)
    count = np.bincount(claimed, minlength=n)
    sole = np.full(n, -1, dtype=np.int64)
    single = count[claimed] == 1
    sole[claimed[single]] = claimers[single]
    out: list[IntArray] = []
    for i, assigned in enumerate(run.per_member):
        c = count[assigned]
        keep = (c == 0) | (sole[assigned] == i)
        crowded = np.flatnonzero(c >= 2)
        if len(crowded):
            keep[crowded] = np.isin(assigned[crowded], run.raw_claims[i])
        out.append(assigned[keep])
    return tuple(out)


class CooperativeStickyAssignor(PartitionAssignor):
    """Kafka's ``cooperative-sticky`` assignor."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def __init__(self, *, prefer_rack_aware_logic: bool = False) -> None:
        #: Take the rack-aware path whenever racks overlap, even when every rack holds every partition.
        #: Kafka keeps this switch for its own tests; it is off in production.
        self.prefer_rack_aware_logic = prefer_rack_aware_logic

    def metadata(self, state: MetadataInput) -> bytes | None:
        return encode_cooperative_user_data(state.generation)

    def member_claim(self, sub: MemberSubscription) -> OwnedClaim:
        """Owned partitions from the subscription; generation from v2+ or else from the user data."""
        generation = sub.generation
        if generation == NO_GENERATION and sub.user_data:
            decoded = decode_cooperative_user_data(sub.user_data)
            generation = NO_GENERATION if decoded is None else decoded
        return sub.owned, generation

    def assign(self, spec: GroupSpec) -> Assignment:
        claims = {m: self.member_claim(sub) for m, sub in spec.members.items()}
        racks = sticky_racks(spec, prefer_rack_aware_logic=self.prefer_rack_aware_logic)
        if racks is not None:
            return assign_rack_aware(spec, claims, racks, cooperative=True)
        assignment = assign_small(spec, claims, withhold=True)
        if assignment is None:
            run = run_engine(spec, claims)
            if not any(len(c) for c in run.raw_claims):
                return run.to_assignment()  # nobody owned anything: nothing to withhold
            assignment = ArrayAssignment(
                run.layout, Outcome(len(run.layout.member_names), per_member=withhold_transfers(run))
            )
        return assignment
