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
    """Resolved previous ownership, flat: ``parts[bounds[i]:bounds[i+1]]`` are member i's partitions
    (global indices, ascending); ``members`` repeats the member index for each entry."""

    parts: IntArray
    members: IntArray
    bounds: IntArray
    contested: IntArray  # partitions claimed by several members in the same highest generation

    @property
    def total(self) -> int:
        return len(self.parts)

    def sizes(self) -> IntArray:
        return np.diff(self.bounds)

    def per_member(self) -> tuple[IntArray, ...]:
        b = self.bounds.tolist()
        return tuple(self.parts[b[i] : b[i + 1]] for i in range(len(b) - 1))


def _subscribed_mask(layout: Layout, members: IntArray, topics: IntArray) -> np.ndarray:
    first = layout.member_topics[0] if layout.member_topics else None
    if first is not None and all(t is first for t in layout.member_topics):
        if len(first) == len(layout.topic_names):  # everyone subscribes to every topic of the layout
            return np.ones(len(topics), dtype=bool)
        return np.isin(topics, first)
    m, t = len(layout.member_names), len(layout.topic_names)
    if m * t <= 50_000_000:
        matrix = np.zeros((m, t), dtype=bool)
        arc_topic, arc_member = layout.arcs()
        matrix[arc_member, arc_topic] = True
        return matrix[members, topics]
    out = np.zeros(len(members), dtype=bool)  # pragma: no cover - gigantic groups only
    for i, subs in enumerate(layout.member_topics):
        sel = members == i
        out[sel] = np.isin(topics[sel], subs)
    return out


def resolve_claims(layout: Layout, raw: Sequence[IntArray], generations: Sequence[int]) -> Claims:
    """Resolve per-member raw claims (global indices, already restricted to existing partitions).

    Only claims on topics the member subscribes to count. Order-independent: the unique claimer with the
    highest generation wins; a tie at the highest generation leaves the partition unowned.
    """
    m = len(raw)
    sizes = np.fromiter(map(len, raw), dtype=np.int64, count=m)
    if sizes.sum() == 0:
        empty = np.empty(0, dtype=np.int64)
        return Claims(parts=empty, members=empty, bounds=np.zeros(m + 1, dtype=np.int64), contested=empty)
    return resolve_flat(layout, np.concatenate(raw), np.repeat(np.arange(m, dtype=np.int64), sizes), generations)


def resolve_flat(layout: Layout, parts: IntArray, members: IntArray, generations: Sequence[int]) -> Claims:
    """``resolve_claims`` of claims given flat: ``parts[k]`` (a global index of an existing partition) claimed by
    member ``members[k]``, one entry per claim, in any order."""
    n = layout.partition_total
    m = len(generations)
    empty = np.empty(0, dtype=np.int64)
    if not len(parts):
        return Claims(parts=empty, members=empty, bounds=np.zeros(m + 1, dtype=np.int64), contested=empty)
    topics = np.searchsorted(layout.offsets, parts, side="right") - 1
    keep = _subscribed_mask(layout, members, topics)
    if not keep.all():
        members, parts = members[keep], parts[keep]
    levels = np.asarray(generations, dtype=np.int64)
    if len(levels) and (levels == levels[0]).all():  # one generation (a server-side target): every claim counts
        winners_per_partition = np.bincount(parts, minlength=n)
        valid = winners_per_partition[parts] == 1
    else:
        gens = levels[members]
        # Highest generation per partition, and how many claimers reached it.
        best = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(best, parts, gens)
        at_best = gens == best[parts]
        winners_per_partition = np.bincount(parts[at_best], minlength=n)
        valid = at_best & (winners_per_partition[parts] == 1)
    contested = np.flatnonzero(winners_per_partition > 1).astype(np.int64)

    if not valid.all():
        parts, members = parts[valid], members[valid]
    # by member, then partition (members are already grouped: each one's claims ascending skip the sort)
    key = members * n + parts
    if len(key) > 1 and not (key[1:] > key[:-1]).all():
        order = np.argsort(key, kind="stable")
        parts, members = parts[order], members[order]
    bounds = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(members, minlength=m), out=bounds[1:])
    return Claims(parts=parts, members=members, bounds=bounds, contested=contested)
