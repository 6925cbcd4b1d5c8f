"""Which previous owner a partition is credited to, when members' claims disagree.

Kafka's sticky assignors resolve conflicting claims by generation: the claim made in the highest
generation wins, stale (lower) generations are ignored, and when two members claim a partition in the same
(highest) generation nobody is credited with it — the partition is treated as unowned. A member without a
generation counts as generation -1. Claims on topics the member no longer subscribes to, on unknown topics
or on partitions that no longer exist are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from regroup.assignors.layout import IntArray, Layout


@dataclass(frozen=True, slots=True)
class Claims:
    """Resolved previous ownership: per member, the global partition indices it is credited with."""

    owned: tuple[IntArray, ...]
    contested: IntArray  # partitions claimed by several members in the same highest generation

    @property
    def total(self) -> int:
        return sum(len(o) for o in self.owned)


def resolve_claims(layout: Layout, raw: Sequence[IntArray], generations: Sequence[int]) -> Claims:
    """Resolve per-member raw claims (global indices, already restricted to existing partitions).

    Only claims on topics the member subscribes to count. Order-independent: the unique claimer with the
    highest generation wins; a tie at the highest generation leaves the partition unowned.
    """
    n = layout.partition_total
    offsets = layout.offsets
    filtered: list[IntArray] = []
    for topics, claim in zip(layout.member_topics, raw, strict=True):
        if len(claim) == 0 or len(topics) == 0:
            filtered.append(np.empty(0, dtype=np.int64))
            continue
        claim_topics = np.searchsorted(offsets, claim, side="right") - 1
        filtered.append(claim[np.isin(claim_topics, topics)])

    sizes = np.fromiter((len(c) for c in filtered), dtype=np.int64, count=len(filtered))
    if sizes.sum() == 0:
        return Claims(owned=tuple(filtered), contested=np.empty(0, dtype=np.int64))
    members = np.repeat(np.arange(len(filtered), dtype=np.int64), sizes)
    parts = np.concatenate(filtered)
    gens = np.repeat(np.asarray(generations, dtype=np.int64), sizes)

    # Highest generation per partition, and how many claimers reached it.
    best = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(best, parts, gens)
    at_best = gens == best[parts]
    winners_per_partition = np.bincount(parts[at_best], minlength=n)
    valid = at_best & (winners_per_partition[parts] == 1)
    contested = np.flatnonzero(winners_per_partition > 1).astype(np.int64)

    owned_parts = parts[valid]
    owned_members = members[valid]
    order = np.argsort(owned_members, kind="stable")
    counts = np.bincount(owned_members, minlength=len(filtered))
    split = np.split(owned_parts[order], np.cumsum(counts)[:-1])
    return Claims(owned=tuple(np.sort(s) for s in split), contested=contested)
