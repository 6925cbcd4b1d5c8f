"""``sticky`` (KIP-54) and ``optimal``: balance first, then stickiness, previous assignment in user data.

The sticky assignor carries each member's previous assignment and generation in its subscription user
data (Kafka's StickyAssignorUserData v1; v0 has no generation). Conflicting claims are resolved by
generation (see ``ownership``). The assignment itself comes from the optimal engine in ``balance``: its
balance is the best achievable for any subscription pattern and, among the best-balanced assignments, it
keeps the most partitions where they were. When Kafka would assign the group rack-aware (KIP-881), ``sticky``
follows Kafka's rack rules instead (``rack_sticky``). ``optimal`` is the same engine reading the owned
partitions straight from the subscription (like ``cooperative-sticky``) without the cooperative revocation
step; it places moved partitions rack-locally afterwards (``rack_locality``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from regroup.assignors import balance
from regroup.assignors.array_assignment import ArrayAssignment, claims_from_views, flat_claims_from_views, scan_views
from regroup.assignors.base import MetadataInput, PartitionAssignor
from regroup.assignors.consumer_protocol import decode_sticky_user_data, encode_sticky_user_data
from regroup.assignors.homogeneous import assign_small
from regroup.assignors.layout import IntArray, Layout, build_layout
from regroup.assignors.ownership import resolve_claims, resolve_flat
from regroup.assignors.rack_locality import localize
from regroup.assignors.rack_sticky import assign_rack_aware
from regroup.assignors.racks import sticky_racks
from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec, MemberSubscription, RebalanceProtocol

OwnedClaim = tuple[Mapping[str, tuple[int, ...]], int]


@dataclass(frozen=True, slots=True)
class EngineRun:
    """One run of the optimal engine, kept in compact form for callers that post-process it."""

    layout: Layout
    raw_claims: tuple[IntArray, ...]  # per member: existing partitions it listed as owned
    outcome: balance.Outcome

    @property
    def per_member(self) -> tuple[IntArray, ...]:
        """Per member: the global partition indices assigned."""
        return self.outcome.per_member

    def to_assignment(self) -> Assignment:
        """The result as a mapping whose member views are built when read (``array_assignment``)."""
        return ArrayAssignment(self.layout, self.outcome)


_NO_CLAIM: OwnedClaim = ({}, NO_GENERATION)


def _in_order(
    layout: Layout, claims: Mapping[str, OwnedClaim]
) -> tuple[list[Mapping[str, tuple[int, ...]]], list[int]]:
    """The owned partitions and generation of each member of ``layout``, in its order."""
    found: list[OwnedClaim] = list(map(claims.get, layout.member_names, itertools.repeat(_NO_CLAIM)))
    return [c[0] for c in found], [c[1] for c in found]


def run_engine(spec: GroupSpec, claims: Mapping[str, OwnedClaim]) -> EngineRun:
    """Run the optimal engine on ``claims``: member -> (partitions it says it owned, generation)."""
    layout = build_layout(spec)
    owned, generations = _in_order(layout, claims)
    raw = claims_from_views(layout, owned) or layout.claims_of(owned)
    resolved = resolve_claims(layout, raw, generations)
    outcome = balance.assign(layout, resolved)
    return EngineRun(layout=layout, raw_claims=raw, outcome=outcome)


def _engine_result(spec: GroupSpec, claims: Mapping[str, OwnedClaim]) -> ArrayAssignment:
    """``run_engine(spec, claims).to_assignment()``, the claims read flat from the last result's owner array
    when every member's owned is a view of it (``flat_claims_from_views``)."""
    layout = build_layout(spec)
    owned, generations = _in_order(layout, claims)
    scan = scan_views(owned)
    flat = flat_claims_from_views(layout, owned, scan) if scan is not None else None
    if flat is not None:
        resolved = resolve_flat(layout, flat[0], flat[1], generations)
    else:
        raw = (claims_from_views(layout, owned, scan) if scan is not None else None) or layout.claims_of(owned)
        resolved = resolve_claims(layout, raw, generations)
    return ArrayAssignment(layout, balance.assign(layout, resolved))


def assign_balanced(spec: GroupSpec, claims: Mapping[str, OwnedClaim]) -> Assignment:
    """``run_engine`` as a plain assignment, moved partitions placed rack-locally where racks are known."""
    return localized(spec, engine_assignment(spec, claims), claims)


def engine_assignment(spec: GroupSpec, claims: Mapping[str, OwnedClaim]) -> Assignment:
    """``run_engine`` as a plain assignment (racks not considered)."""
    assignment = assign_small(spec, claims, withhold=False)
    if assignment is None:
        assignment = _engine_result(spec, claims)
    return assignment


def localized(spec: GroupSpec, assignment: Assignment, claims: Mapping[str, OwnedClaim]) -> Assignment:
    """``rack_locality.localize`` of the engine's result (nothing to do without replica racks)."""
    if spec.partition_racks is None:
        return assignment
    return localize(spec, assignment, {m: claim[0] for m, claim in claims.items()})


class StickyAssignor(PartitionAssignor):
    """Kafka's ``sticky`` assignor (eager), previous assignment carried in user data."""

    name = "sticky"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def __init__(self, *, prefer_rack_aware_logic: bool = False) -> None:
        #: Take the rack-aware path whenever racks overlap, even when every rack holds every partition.
        #: Kafka keeps this switch for its own tests; it is off in production.
        self.prefer_rack_aware_logic = prefer_rack_aware_logic

    def metadata(self, state: MetadataInput) -> bytes | None:
        if not state.owned and state.generation == NO_GENERATION:
            return None
        return encode_sticky_user_data(state.owned, state.generation)

    def member_claim(self, sub: MemberSubscription) -> OwnedClaim:
        """Kafka's memberData: always the user data (an eager member has revoked its owned partitions)."""
        if not sub.user_data:
            return {}, NO_GENERATION
        partitions, generation = decode_sticky_user_data(sub.user_data)
        return partitions, NO_GENERATION if generation is None else generation

    def assign(self, spec: GroupSpec) -> Assignment:
        claims = {m: self.member_claim(sub) for m, sub in spec.members.items()}
        racks = sticky_racks(spec, prefer_rack_aware_logic=self.prefer_rack_aware_logic)
        if racks is not None:
            return assign_rack_aware(spec, claims, racks, cooperative=False)
        return engine_assignment(spec, claims)

    def with_previous(self, spec: GroupSpec) -> GroupSpec:
        members = {}
        for member_id, sub in spec.members.items():
            user_data = sub.user_data
            if sub.owned or sub.generation != NO_GENERATION:
                user_data = encode_sticky_user_data(sub.owned, sub.generation)
            members[member_id] = MemberSubscription(
                topics=sub.topics,
                owned={},
                generation=NO_GENERATION,
                rack=sub.rack,
                instance_id=sub.instance_id,
                user_data=user_data,
            )
        return GroupSpec(
            topics=spec.topics, members=members, partition_racks=spec.partition_racks, options=spec.options
        )


class OptimalAssignor(PartitionAssignor):
    """The optimal balanced-sticky engine reading owned partitions and generation from the subscription."""

    name = "optimal"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def assign(self, spec: GroupSpec) -> Assignment:
        claims = {m: (sub.owned, sub.generation) for m, sub in spec.members.items()}
        return assign_balanced(spec, claims)
