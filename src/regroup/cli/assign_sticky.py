"""Kafka's ``sticky`` for ``regroup assign``, reading the owned partitions and generation the input gives.

``sticky`` carries a member's previous assignment in its subscription user data, so ``with_previous`` encodes
every member's owned partitions and ``assign`` decodes them again: here they are read from the spec instead,
the same claims without the round trip.
"""

from __future__ import annotations

from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.assignors.sticky import OwnedClaim, StickyAssignor


class OwnedSticky(StickyAssignor):
    """``sticky`` whose member data is the owned partitions and generation given in the spec: what
    ``StickyAssignor.member_claim`` decodes from the user data ``with_previous`` encodes them into."""

    def member_claim(self, sub: MemberSubscription) -> OwnedClaim:
        return sub.owned, sub.generation

    def with_previous(self, spec: GroupSpec) -> GroupSpec:
        return spec


def owned_sticky(assignor: object) -> OwnedSticky:
    """``assignor`` (Kafka's ``sticky``) reading owned partitions from the spec."""
    assert isinstance(assignor, StickyAssignor)
    return OwnedSticky(prefer_rack_aware_logic=assignor.prefer_rack_aware_logic)
