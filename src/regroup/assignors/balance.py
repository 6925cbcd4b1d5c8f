"""The optimal balanced-sticky engine behind ``sticky``, ``cooperative-sticky``, ``optimal`` and ``uniform``.

Guarantee (for any subscription pattern): the per-member partition counts are *decreasingly minimal* —
no feasible assignment has a lexicographically smaller vector of counts sorted in decreasing order. This is
the same as minimising the sum of squared counts, and it minimises every symmetric convex measure of
imbalance at once: the maximum count, max−min among the attainable, KIP-54's pairwise balance score.
Among all such assignments, the number of partitions that stay with their (resolved) previous owner is
maximal. Ties are then broken deterministically (member order, partition order).

Two paths:

* homogeneous (every member subscribes to the same topics): counts are ⌊N/M⌋ or ⌈N/M⌉; members keep their
  previous partitions up to their quota (the ⌈N/M⌉ slots go, in member order, to members that owned that
  many), then unassigned partitions are handed out least-loaded-first in (topic, partition) order.
* heterogeneous: a min-cost flow over (topic → member) aggregates, solved with OR-Tools. Costs are
  lexicographic: ``BIG * (sum of squared member counts) − (partitions kept)``. Convex member costs are
  modelled by unit arcs inside a box around a greedy estimate; if the optimum touches an artificial box
  edge, the box is widened and the flow solved again, so the result is the optimum of the unboxed problem.
  When every member can keep all it owns with the counts within one of each other (a member leaving a
  balanced group, most fresh groups), that assignment is an optimum already and no flow is solved
  (``_kept_and_even``).

The assignors send small homogeneous groups (up to ``homogeneous.SMALL_GROUP_PARTITIONS`` partitions) to
``homogeneous.assign_small`` instead: the same homogeneous path in plain loops, with identical results.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from ortools.graph.python import min_cost_flow

from regroup.assignors.layout import IntArray, Layout, stable_argsort
from regroup.assignors.ownership import Claims

_INITIAL_BOX = 2


class Outcome:
    """Per member, the global partition indices assigned: given per member, or as one owner array (global
    index -> member, -1 for none) split per member only when someone asks (``per_member``)."""

    def __init__(
        self, members: int, *, per_member: Sequence[IntArray] | None = None, owner: IntArray | None = None
    ) -> None:
        self.members = members
        self._per_member = tuple(per_member) if per_member is not None else None
        self.owner = owner

    @property
    def per_member(self) -> tuple[IntArray, ...]:
        if self._per_member is None:
            assert self.owner is not None
            self._per_member = split_by_owner(self.owner, self.members)
        return self._per_member

    def member_parts(self, i: int) -> IntArray:
        """Member ``i``'s global indices (ascending when read from the owner array): one scan of the owner array
        while it is not split and is no longer than a few times the members (a reader wanting a few members
        of a large group skips the split of every one)."""
        owner = self.owner
        if self._per_member is None and owner is not None and len(owner) <= 4 * self.members:
            return np.flatnonzero(owner == i)
        return self.per_member[i]

    def owner_array(self, n: int) -> IntArray | None:
        """Global index (``0..n-1``) -> member (-1: nobody); None when the per-member arrays give a partition to
        several members or fall outside ``0..n-1``."""
        owner = self.owner
        if owner is not None and len(owner) == n:
            return owner
        per_member = self.per_member
        sizes = np.fromiter(map(len, per_member), dtype=np.int64, count=len(per_member))
        owner = np.full(n, -1, dtype=np.int64)
        if sizes.sum():
            flat = np.concatenate(per_member)
            if int(flat.min()) < 0 or int(flat.max()) >= n or int(np.bincount(flat).max()) > 1:
                return None
            owner[flat] = np.repeat(np.arange(len(per_member), dtype=np.int64), sizes)
        self.owner = owner
        return owner

    def loads(self) -> IntArray:
        """How many partitions each member has."""
        if self._per_member is None and self.owner is not None:
            return np.bincount(self.owner[self.owner >= 0], minlength=self.members).astype(np.int64)
        return np.fromiter((len(p) for p in self.per_member), dtype=np.int64, count=self.members)


def is_homogeneous(layout: Layout) -> bool:
    """Every member subscribes to the same (non-empty) set of existing topics."""
    first = layout.member_topics[0] if layout.member_topics else None
    return (
        first is not None
        and len(first) > 0
        and all(t is first or np.array_equal(first, t) for t in layout.member_topics)
    )


def assign(layout: Layout, claims: Claims) -> Outcome:
    """Optimal balanced, then maximally sticky, assignment, given the resolved previous ownership."""
    if not layout.member_names:
        return Outcome(0, per_member=())
    if layout.partition_total == 0:
        return Outcome(len(layout.member_names), owner=np.empty(0, dtype=np.int64))
    if is_homogeneous(layout):
        return _assign_homogeneous(layout, claims)
    return _assign_heterogeneous(layout, claims)


# ---------------------------------------------------------------------------------------------------------------
# homogeneous


def _assign_homogeneous(layout: Layout, claims: Claims) -> Outcome:
    n = layout.partition_total
    m = len(layout.member_names)
    quota, extra = divmod(n, m)
    sizes = claims.sizes()
    if not sizes.any():  # nothing owned: the hand-out below deals the partitions round-robin in global order
        return Outcome(m, owner=np.arange(n, dtype=np.int64) % m)
    caps = np.full(m, quota, dtype=np.int64)
    # the ceil(N/M) slots go, in member order, to members that owned at least that many
    big_owners = np.flatnonzero(sizes >= quota + 1)[:extra]
    caps[big_owners] = quota + 1
    slots_used = len(big_owners)

    owner = np.full(n, -1, dtype=np.int64)
    claim, claim_member = claims.parts, claims.members
    over = sizes > caps
    if not over.any():
        owner[claim] = claim_member
    else:  # only the members over their quota are cut: the others keep every partition they are credited with
        trimmed = over[claim_member]
        owner[claim[~trimmed]] = claim_member[~trimmed]
        claim, claim_member = claim[trimmed], claim_member[trimmed]
        topics = np.searchsorted(layout.offsets, claim, side="right") - 1
        local = claim - layout.offsets[topics]
        # keep order within a member: by partition number, then topic (Kafka's order when trimming)
        order = np.lexsort((topics, local, claim_member))
        claim, claim_member = claim[order], claim_member[order]
        over_sizes = sizes[over]
        rank = np.arange(len(claim), dtype=np.int64) - np.repeat(np.cumsum(over_sizes) - over_sizes, over_sizes)
        kept = rank < caps[claim_member]
        owner[claim[kept]] = claim_member[kept]
    counts = np.bincount(owner[owner >= 0], minlength=m).astype(np.int64)

    unassigned = np.flatnonzero(owner < 0)
    if len(unassigned):
        floating = np.where(caps == quota, 1 if extra > slots_used else 0, 0)
        slots = caps - counts + floating
        members = np.repeat(np.arange(m, dtype=np.int64), slots)
        starts = np.repeat(counts - np.cumsum(slots) + slots, slots)
        levels = starts + np.arange(len(members), dtype=np.int64)
        order = stable_argsort(levels)  # (level, member): members are already ascending
        owner[unassigned] = members[order[: len(unassigned)]]
    return Outcome(m, owner=owner)


def split_by_owner(owner: IntArray, m: int) -> tuple[IntArray, ...]:
    """Per member ``0..m-1``, the ascending global indices ``owner`` gives it (views into one array)."""
    assigned = np.flatnonzero(owner >= 0)
    who = owner[assigned]
    flat = assigned[stable_argsort(who)].astype(np.int64)
    bounds = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(who, minlength=m), out=bounds[1:])
    cuts = bounds.tolist()
    return tuple(flat[a:b] for a, b in itertools.pairwise(cuts))


# ---------------------------------------------------------------------------------------------------------------
# heterogeneous


def _greedy_loads(layout: Layout, arc_topic: IntArray, arc_member: IntArray) -> IntArray:
    """A feasible load vector: topics with the fewest subscribers first, each water-filled onto its
    least-loaded subscribers. Only used to centre the solver's search box."""
    t_count = len(layout.topic_names)
    by_topic = np.argsort(arc_topic, kind="stable")  # each topic's subscribers in member order
    subscribers = arc_member[by_topic]
    bounds = np.zeros(t_count + 1, dtype=np.int64)
    np.cumsum(np.bincount(arc_topic, minlength=t_count), out=bounds[1:])
    cuts = bounds.tolist()
    loads = np.zeros(len(layout.member_names), dtype=np.int64)
    for t in sorted(range(t_count), key=lambda t: (cuts[t + 1] - cuts[t], t)):
        subs = subscribers[cuts[t] : cuts[t + 1]]
        if len(subs) == 0:
            continue
        loads[subs] += _water_fill(loads[subs], int(layout.counts[t]))
    return loads


def _water_fill(current: IntArray, amount: int) -> IntArray:
    """Integer increments summing to ``amount`` that raise the lowest entries of ``current`` first."""
    order = np.argsort(current, kind="stable")
    sorted_loads = current[order]
    k = len(sorted_loads)
    # cost to raise the first j entries to sorted_loads[j-1]
    prefix = np.cumsum(sorted_loads)
    fill_cost = sorted_loads * np.arange(1, k + 1) - prefix
    j = int(np.searchsorted(fill_cost, amount, side="right"))  # entries 0..j-1 get levelled
    base = prefix[j - 1]
    level, rest = divmod(amount + int(base), j)
    inc_sorted = np.zeros(k, dtype=np.int64)
    inc_sorted[:j] = level - sorted_loads[:j]
    inc_sorted[:rest] += 1
    inc = np.empty(k, dtype=np.int64)
    inc[order] = inc_sorted
    return inc


def _assign_heterogeneous(layout: Layout, claims: Claims) -> Outcome:
    m = len(layout.member_names)
    t_count = len(layout.topic_names)
    topic_of = layout.topic_of
    # aggregate arcs: every (topic, member) subscription, plus how many of that topic the member owns
    arc_topic, arc_member = layout.arcs()
    owned_count = np.zeros((m, t_count), dtype=np.int64) if m * t_count <= 50_000_000 else None
    sticky_pairs: dict[tuple[int, int], int] = {}
    if owned_count is not None:
        if claims.total:
            cells = claims.members * t_count + topic_of[claims.parts]
            owned_count = np.bincount(cells, minlength=m * t_count).astype(np.int64).reshape(m, t_count)
        sticky = owned_count[arc_member, arc_topic]
    else:  # pragma: no cover - only for gigantic groups
        for i, claim in enumerate(claims.per_member()):
            for t, c in zip(*np.unique(topic_of[claim], return_counts=True), strict=True):
                sticky_pairs[(i, int(t))] = int(c)
        sticky = np.fromiter(
            (sticky_pairs.get((int(mm), int(tt)), 0) for mm, tt in zip(arc_member, arc_topic, strict=True)),
            dtype=np.int64,
            count=len(arc_member),
        )
    eligible = np.zeros(m, dtype=np.int64)
    np.add.at(eligible, arc_member, layout.counts[arc_topic])
    served = np.zeros(t_count, dtype=bool)
    served[arc_topic] = True
    total = int(layout.counts[served].sum())
    big = int(sticky.sum()) + 1

    kept_even = _kept_and_even(layout, arc_topic, arc_member, sticky, total, served)
    if kept_even is not None:
        return _place(layout, claims, arc_topic, arc_member, *kept_even)

    estimate = _greedy_loads(layout, arc_topic, arc_member)
    box = np.full(m, _INITIAL_BOX, dtype=np.int64)
    # the first box also reaches the even share: the optimum is often there, and a box that holds it in its
    # interior needs one solve where widening from the greedy estimate alone needs several
    even = total // m if m else 0
    first = True
    while True:
        lo = np.maximum(0, estimate - box)
        hi = np.minimum(eligible, estimate + box)
        if first:
            lo = np.maximum(0, np.minimum(lo, even - _INITIAL_BOX))
            hi = np.minimum(eligible, np.maximum(hi, even + 1 + _INITIAL_BOX))
            first = False
        flows_normal, flows_sticky, loads = _solve(layout, arc_topic, arc_member, sticky, lo, hi, total, big, served)
        touch_lo = (loads == lo) & (lo > 0)
        touch_hi = (loads == hi) & (hi < eligible)
        touching = touch_lo | touch_hi
        if not touching.any():
            break
        box = np.where(touching, box * 4, box)
        estimate = loads

    return _place(layout, claims, arc_topic, arc_member, flows_normal, flows_sticky)


def _kept_and_even(
    layout: Layout, arc_topic: IntArray, arc_member: IntArray, sticky: IntArray, total: int, served: np.ndarray
) -> tuple[IntArray, IntArray] | None:
    """The flows on the normal and sticky arcs of an assignment in which the counts differ by at most one and
    every member keeps as much as such counts allow, when the greedy below finds one (None when it does not).

    Such an assignment is an optimum of the flow's problem without solving it. Counts within one of each other
    have the least sum of squares any assignment of ``total`` partitions can have: ``q = total // m`` each and
    ``r = total % m`` of them one more. Among those, at most ``min(owned, q)`` stay with each member, plus one
    for each of ``r`` members owning more than ``q``: members keep up to ``q``, the first ``r`` (member order)
    owning more keep ``q + 1``, and a member cut back gives up partitions of its most-subscribed topics first
    (they are the easiest to place elsewhere). (Among optima the flow solver may pick another; this one is as
    deterministic.) The partitions nobody keeps go topic by topic, those with the fewest subscribers first, each
    water-filled onto its least-loaded subscribers (member order among equals); if the counts end more than one
    apart, the flow decides. A member leaving a balanced group, a member joining one whose subscriptions let it
    reach the even share, or a fresh group whose subscriptions let every member reach it, ends here."""
    m = len(layout.member_names)
    if m == 0:
        return None
    t_count = len(layout.topic_names)
    loads = np.bincount(arc_member, weights=sticky, minlength=m).astype(np.int64)
    quota, extra = divmod(total, m)
    caps = np.full(m, quota, dtype=np.int64)
    caps[np.flatnonzero(loads > quota)[:extra]] = quota + 1
    kept_arcs = sticky
    over = loads > caps
    if over.any():
        kept_arcs = _cut_back(arc_topic, arc_member, sticky, loads - caps, over, t_count)
        loads = np.minimum(loads, caps)
    kept = np.bincount(arc_topic, weights=kept_arcs, minlength=t_count).astype(np.int64)
    orphans = np.where(served, layout.counts - kept, 0)
    by_topic = np.argsort(arc_topic, kind="stable")
    bounds = np.searchsorted(arc_topic[by_topic], np.arange(t_count + 1)).tolist()
    flows = np.zeros(len(arc_topic), dtype=np.int64)
    for t in sorted(np.flatnonzero(orphans).tolist(), key=lambda t: (bounds[t + 1] - bounds[t], t)):
        arcs = by_topic[bounds[t] : bounds[t + 1]]
        members = arc_member[arcs]
        given = _water_fill(loads[members], int(orphans[t]))
        loads[members] += given
        flows[arcs] = given
    if int(loads.max()) - int(loads.min()) > 1:
        return None
    return flows, kept_arcs


def _cut_back(
    arc_topic: IntArray, arc_member: IntArray, sticky: IntArray, excess: IntArray, over: np.ndarray, t_count: int
) -> IntArray:
    """``sticky`` less ``excess`` partitions of each member marked ``over``, taken from its arcs to the topics
    with the most subscribers first (the higher topic first among equals)."""
    subscribers = np.bincount(arc_topic, minlength=t_count)
    arcs = np.flatnonzero(over[arc_member] & (sticky > 0))
    order = np.lexsort((-arc_topic[arcs], -subscribers[arc_topic[arcs]], arc_member[arcs]))
    arcs = arcs[order]
    members = arc_member[arcs]
    held = sticky[arcs]
    # what the member's earlier arcs (in this order) give up before this one
    before = np.cumsum(held) - held
    first = np.ones(len(arcs), dtype=bool)
    first[1:] = members[1:] != members[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(len(arcs)), 0))
    given_up_before = before - before[start]
    drop = np.clip(excess[members] - given_up_before, 0, held)
    out = sticky.copy()
    out[arcs] = held - drop
    return out


def _solve(
    layout: Layout,
    arc_topic: IntArray,
    arc_member: IntArray,
    sticky: IntArray,
    lo: IntArray,
    hi: IntArray,
    total: int,
    big: int,
    served: np.ndarray,
) -> tuple[IntArray, IntArray, IntArray]:
    m = len(layout.member_names)
    t_count = len(layout.topic_names)
    sink = t_count + m
    flow = min_cost_flow.SimpleMinCostFlow()
    caps = layout.counts[arc_topic]
    normal_arcs = flow.add_arcs_with_capacity_and_unit_cost(
        arc_topic, arc_member + t_count, caps, np.zeros(len(arc_topic), dtype=np.int64)
    )
    has_sticky = np.flatnonzero(sticky > 0)
    sticky_arcs = flow.add_arcs_with_capacity_and_unit_cost(
        arc_topic[has_sticky],
        arc_member[has_sticky] + t_count,
        sticky[has_sticky],
        np.full(len(has_sticky), -1, dtype=np.int64),
    )
    # unit arcs member -> sink for loads lo+1 .. hi, cost of the k-th unit: big * (2k - 1) (shifted)
    widths = hi - lo
    unit_member = np.repeat(np.arange(m, dtype=np.int64), widths)
    starts = np.repeat(np.cumsum(widths) - widths, widths)
    unit_k = np.repeat(lo, widths) + (np.arange(len(unit_member), dtype=np.int64) - starts) + 1
    base = int(lo.min()) if m else 0
    flow.add_arcs_with_capacity_and_unit_cost(
        unit_member + t_count,
        np.full(len(unit_member), sink, dtype=np.int64),
        np.ones(len(unit_member), dtype=np.int64),
        big * (2 * (unit_k - base) - 1),
    )
    supplies = np.zeros(sink + 1, dtype=np.int64)
    supplies[:t_count] = np.where(served, layout.counts, 0)
    supplies[t_count:sink] = -lo
    supplies[sink] = -(total - int(lo.sum()))
    flow.set_nodes_supplies(np.arange(sink + 1, dtype=np.int64), supplies)
    status = flow.solve()
    if status != flow.OPTIMAL:  # pragma: no cover - the box always contains the greedy solution
        raise RuntimeError(f"min-cost flow failed: {status}")
    flows_normal = flow.flows(normal_arcs)
    flows_sticky = np.zeros(len(arc_topic), dtype=np.int64)
    flows_sticky[has_sticky] = flow.flows(sticky_arcs)
    loads = np.zeros(m, dtype=np.int64)
    np.add.at(loads, arc_member, flows_normal + flows_sticky)
    return flows_normal.astype(np.int64), flows_sticky, loads


def _place(
    layout: Layout,
    claims: Claims,
    arc_topic: IntArray,
    arc_member: IntArray,
    flows_normal: IntArray,
    flows_sticky: IntArray,
) -> Outcome:
    """Turn aggregate flows into concrete partitions: each member keeps ``flows_sticky`` of its owned
    partitions of the topic (lowest numbers first); the rest of each topic goes out in ascending partition
    order to members with remaining need, in member order."""
    m = len(layout.member_names)
    n = layout.partition_total
    owner = np.full(n, -1, dtype=np.int64)
    _keep(owner, layout, claims, arc_topic, arc_member, flows_sticky)
    need_arcs = np.flatnonzero(flows_normal > 0)
    order = np.lexsort((arc_member[need_arcs], arc_topic[need_arcs]))
    need_arcs = need_arcs[order]
    for t in np.unique(arc_topic[need_arcs]).tolist():
        arcs_t = need_arcs[arc_topic[need_arcs] == t]
        lo, hi = int(layout.offsets[t]), int(layout.offsets[t + 1])
        free = np.flatnonzero(owner[lo:hi] < 0) + lo
        owner[free] = np.repeat(arc_member[arcs_t], flows_normal[arcs_t])
    return Outcome(m, owner=owner)


def _keep(
    owner: IntArray,
    layout: Layout,
    claims: Claims,
    arc_topic: IntArray,
    arc_member: IntArray,
    flows_sticky: IntArray,
) -> None:
    """Give each member the first ``flows_sticky`` of its owned partitions of each topic (lowest first), in
    one pass over every claim at once: each claim's rank within its (member, topic) is compared with what the
    member keeps of that topic."""
    m, t_count = len(layout.member_names), len(layout.topic_names)
    total = claims.total
    if total == 0:
        return
    if m * t_count > 50_000_000:  # pragma: no cover - only for gigantic groups: no dense member x topic table
        keep_count = {
            (int(arc_member[a]), int(arc_topic[a])): int(flows_sticky[a])
            for a in np.flatnonzero(flows_sticky > 0).tolist()
        }
        for i, claim in enumerate(claims.per_member()):
            claim_topics = layout.topic_of[claim]
            for t in np.unique(claim_topics).tolist():
                k = keep_count.get((i, t), 0)
                if k:
                    owner[claim[claim_topics == t][:k]] = i
        return
    keeps = np.zeros((m, t_count), dtype=np.int64)
    keeps[arc_member, arc_topic] = flows_sticky
    parts, members = claims.parts, claims.members
    key = members * layout.partition_total + parts
    if not (key[1:] >= key[:-1]).all():  # (resolved claims come by member, then partition already)
        order = np.argsort(key, kind="stable")
        parts, members = parts[order], members[order]
    topics = layout.topic_of[parts]  # (by member, then topic, then partition)
    first = np.ones(total, dtype=bool)
    first[1:] = (members[1:] != members[:-1]) | (topics[1:] != topics[:-1])
    positions = np.arange(total)
    rank = positions - np.maximum.accumulate(np.where(first, positions, 0))
    kept = rank < keeps[members, topics]
    owner[parts[kept]] = members[kept]
