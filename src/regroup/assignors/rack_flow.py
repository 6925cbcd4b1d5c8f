"""Rack-aware ``sticky`` and ``cooperative-sticky`` for groups whose members subscribe to different topics.

Kafka's general sticky assignment is a heuristic (it keeps matched previous partitions, hands the rest to
the least loaded matched member, then moves partitions until no member has two more than another
subscriber of one of its topics). Here its priorities are optimised exactly, in this order:

1. **balance**: the engine's guarantee (``balance``): decreasingly minimal partition counts;
2. **matched stickiness**: the most partitions kept by their credited previous owner, counting only
   partitions that are not mismatched for that owner (Kafka gives the mismatched ones up first);
3. **rack locality**: the fewest partitions on a member with a rack holding none of their replicas;
4. **mismatched stickiness**: then the most of the remaining credited partitions kept by their owner.

Ties are broken by member order and partition order. It is one min-cost flow over small aggregates:
partitions are pooled by (topic, replica racks); a member's credited partitions of one pool form a class
that either stays with it or joins the pool; pools feed the *doors* of their topic, one per member rack
(and one for members without a rack), a mismatch costing on that arc; doors feed their members; members
feed the sink through unit arcs priced like the engine's (convex in the load). Lexicographic weights make
each priority outweigh everything below it: any two flows differ by simple cycles, and a simple cycle
crosses at most two priced arcs per member and per door or pool, so a weight above that many times the
next one (or above that objective's whole range, whichever is smaller) suffices. Loads are searched in a
box around the engine's own loads, widened when the optimum touches its edge (as in ``balance``). Should
the weights not fit in 64-bit costs (very large groups), every member's load is fixed to the engine's
instead: balance and priority 2 stay exact, and locality is the best for those loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from ortools.graph.python import min_cost_flow

from regroup.assignors import balance
from regroup.assignors.array_assignment import ArrayAssignment
from regroup.assignors.layout import IntArray, Layout, build_layout
from regroup.assignors.ownership import Claims, resolve_claims
from regroup.assignors.racks import StickyRacks
from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec

_INITIAL_BOX = 2
_COST_LIMIT = 1 << 62


def assign_by_flow(
    spec: GroupSpec,
    claims: Mapping[str, tuple[Mapping[str, Sequence[int]], int]],
    racks: StickyRacks,
    *,
    cost_limit: int = _COST_LIMIT,
) -> Assignment:
    """The assignment described in the module docstring (every member present). ``cost_limit`` bounds the
    largest arc cost times the number of nodes of a flow with convex load costs (tests lower it to reach
    the fixed-load fallback)."""
    layout = build_layout(spec)
    if not layout.member_names or layout.partition_total == 0:
        return {m: {} for m in spec.members}
    members = layout.member_names
    raw = layout.claims_of([claims[m][0] if m in claims else {} for m in members])
    generations = [claims[m][1] if m in claims else NO_GENERATION for m in members]
    credited = resolve_claims(layout, raw, generations).per_member()
    if balance.is_homogeneous(layout) and len(layout.topic_names) > 1:
        problem = _Problem(*_one_topic(layout, racks), credited)
    else:
        problem = _Problem(layout, racks, credited)
    return ArrayAssignment(layout, balance.Outcome(len(members), per_member=problem.solve(cost_limit)))


#: the one topic of ``_one_topic``'s layout
_ALL_TOPICS = ""


def _one_topic(layout: Layout, racks: StickyRacks) -> tuple[Layout, StickyRacks]:
    """The same group with its topics seen as one (partitions keep their global indices), for a homogeneous
    group: when every member subscribes to every topic, no cost depends on a partition's topic, only on its
    replica racks, so the flow over (topic, replica racks) pools and (topic, member rack) doors has the
    optimum of the flow over (replica racks) pools and (member rack) doors, a network as many times smaller as
    there are topics. Ties between topics are then broken by partition order, which every priority allows."""
    total = layout.partition_total
    whole = np.zeros(1, dtype=np.int64)
    one = Layout(
        topic_names=(_ALL_TOPICS,),
        topic_index={_ALL_TOPICS: 0},
        counts=np.array([total], dtype=np.int64),
        offsets=np.array([0, total], dtype=np.int64),
        member_names=layout.member_names,
        member_topics=tuple(whole for _ in layout.member_names),
    )
    merged = tuple(s for t in layout.topic_names for s in racks.partition_racks[t])
    return one, StickyRacks(
        member_racks=racks.member_racks,
        partition_racks={_ALL_TOPICS: merged},
        members_on_rack=racks.members_on_rack,
    )


class _Problem:
    """The flow network of one assignment, built once and solved for one or more load boxes."""

    def __init__(self, layout: Layout, racks: StickyRacks, credited: Sequence[IntArray]) -> None:
        self.layout = layout
        m = len(layout.member_names)
        topic_of = layout.topic_of
        # replica rack sets, interned; pools are (topic, rack set) pairs
        set_ids: dict[frozenset[str], int] = {}
        set_of = np.fromiter(
            (set_ids.setdefault(s, len(set_ids)) for t in layout.topic_names for s in racks.partition_racks[t]),
            dtype=np.int64,
            count=layout.partition_total,
        )
        rack_sets = list(set_ids)
        pool_keys, pool_of = np.unique(topic_of * len(rack_sets) + set_of, return_inverse=True)
        self.pool_of = pool_of.astype(np.int64)
        self.pool_topic = (pool_keys // len(rack_sets)).astype(np.int64)
        self.pool_set = (pool_keys % len(rack_sets)).astype(np.int64)
        pools = len(pool_keys)
        self.pool_size = np.bincount(self.pool_of, minlength=pools).astype(np.int64)
        by_pool = np.argsort(self.pool_of, kind="stable").astype(np.int64)
        self.pool_parts = np.split(by_pool, np.cumsum(self.pool_size)[:-1])  # ascending within a pool
        # mismatch[i][s]: member i has a rack and set s does not hold it
        member_rack = [racks.member_racks.get(name) for name in layout.member_names]
        self.mismatch = [
            [rack is not None and rack not in rack_sets[s] for s in range(len(rack_sets))] for rack in member_rack
        ]
        # doors: (topic, member rack or None) -> the subscribers of the topic on that rack; pools feed doors
        door_ids: dict[tuple[int, str | None], int] = {}
        self.door_members: list[list[int]] = []
        for i, topics in enumerate(layout.member_topics):
            for t in topics.tolist():
                door = door_ids.setdefault((t, member_rack[i]), len(door_ids))
                if door == len(self.door_members):
                    self.door_members.append([])
                self.door_members[door].append(i)
        doors_of_topic: list[list[tuple[int, str | None]]] = [[] for _ in layout.topic_names]
        for (t, rack), door in door_ids.items():
            doors_of_topic[t].append((door, rack))
        self.pool_doors: list[list[tuple[int, bool]]] = [
            [
                (door, rack is not None and rack not in rack_sets[int(self.pool_set[q])])
                for door, rack in doors_of_topic[t]
            ]
            for q, t in enumerate(self.pool_topic.tolist())
        ]
        # classes: a member's credited partitions of one pool
        self.class_member: list[int] = []
        self.class_pool: list[int] = []
        self.class_parts: list[IntArray] = []
        self.class_eligible: list[bool] = []
        uncredited = self.pool_size.copy()
        for i, parts in enumerate(credited):
            if len(parts) == 0:
                continue
            owned_pools = self.pool_of[parts]
            order = np.argsort(owned_pools, kind="stable")
            parts, owned_pools = parts[order], owned_pools[order]
            cuts = np.flatnonzero(np.diff(owned_pools)) + 1
            for chunk, pool in zip(np.split(parts, cuts), owned_pools[np.r_[0, cuts]].tolist(), strict=True):
                self.class_member.append(i)
                self.class_pool.append(pool)
                self.class_parts.append(chunk)
                self.class_eligible.append(not self.mismatch[i][int(self.pool_set[pool])])
                uncredited[pool] -= len(chunk)
        self.uncredited = uncredited
        self.capacity = np.zeros(m, dtype=np.int64)  # most partitions each member could take
        np.add.at(
            self.capacity,
            np.repeat(np.arange(m), [len(t) for t in layout.member_topics]),
            layout.counts[np.concatenate(layout.member_topics)] if m else np.empty(0, np.int64),
        )
        self.engine_loads = self._engine_loads(credited)
        # lexicographic weights (see the module docstring)
        kept_matched = sum(len(p) for p, ok in zip(self.class_parts, self.class_eligible, strict=True) if ok)
        kept_other = sum(len(p) for p, ok in zip(self.class_parts, self.class_eligible, strict=True) if not ok)
        total = layout.partition_total
        # priced arcs in a simple cycle: at most two at each member (keep arcs) and two at each door or
        # pool it passes (pool -> door arcs)
        cycle = 2 * m + 2 * min(len(self.door_members), pools)
        self.w_other = 1 if kept_other else 0
        self.w_rack = self.w_other * min(cycle, kept_other) + 1
        self.w_matched = min(self.w_rack * total + self.w_other * kept_other, cycle * self.w_rack) + 1
        below = self.w_matched * kept_matched + self.w_rack * total + self.w_other * kept_other
        self.w_balance = min(below, cycle * self.w_matched) // 2 + 1

    def _engine_loads(self, credited: Sequence[IntArray]) -> IntArray:
        """Each member's load in the engine's assignment when only matched claims count."""
        layout = self.layout
        chunks: list[list[IntArray]] = [[] for _ in layout.member_names]
        for i, parts, ok in zip(self.class_member, self.class_parts, self.class_eligible, strict=True):
            if ok:
                chunks[i].append(parts)
        eligible = [np.concatenate(c) if c else np.empty(0, dtype=np.int64) for c in chunks]
        sizes = np.fromiter((len(p) for p in eligible), dtype=np.int64, count=len(eligible))
        bounds = np.zeros(len(eligible) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bounds[1:])
        parts = np.concatenate([np.sort(p) for p in eligible]) if sizes.sum() else np.empty(0, dtype=np.int64)
        members = np.repeat(np.arange(len(eligible), dtype=np.int64), sizes)
        claims = Claims(parts=parts, members=members, bounds=bounds, contested=np.empty(0, dtype=np.int64))
        outcome = balance.assign(layout, claims)
        return outcome.loads()

    def solve(self, cost_limit: int) -> tuple[IntArray, ...]:
        loads = self.engine_loads
        box = np.full(len(loads), _INITIAL_BOX, dtype=np.int64)
        centre = loads
        while True:
            lo = np.maximum(0, centre - box)
            hi = np.minimum(self.capacity, centre + box)
            result = self._solve_box(lo, hi, cost_limit)
            if result is None:  # the weights would overflow: keep the engine's loads
                result = self._solve_box(loads, loads, _COST_LIMIT)
                assert result is not None
                return result
            placed, got = result, self._loads_of(result)
            touching = ((got == lo) & (lo > 0)) | ((got == hi) & (hi < self.capacity))
            if not touching.any():
                return placed
            box = np.where(touching, box * 4, box)
            centre = got

    def _loads_of(self, per_member: tuple[IntArray, ...]) -> IntArray:
        return np.fromiter((len(p) for p in per_member), dtype=np.int64, count=len(per_member))

    def _solve_box(self, lo: IntArray, hi: IntArray, cost_limit: int) -> tuple[IntArray, ...] | None:
        """The optimum with every member's load in ``[lo, hi]`` (fixed when equal); None when the costs of
        the convex load arcs would pass ``cost_limit``."""
        layout = self.layout
        m = len(layout.member_names)
        pools = len(self.pool_size)
        classes = len(self.class_member)
        doors = len(self.door_members)
        class_base = pools
        door_base = pools + classes
        member_base = door_base + doors
        sink = member_base + m
        fixed = bool(np.array_equal(lo, hi))
        widths = hi - lo
        base = int(lo.min())
        top_unit = int((hi - base).max()) if m else 0
        largest = max(self.w_matched, self.w_rack, 0 if fixed else self.w_balance * (2 * top_unit - 1))
        if largest * (sink + 2) >= cost_limit:
            if fixed:  # pragma: no cover - beyond any group these weights are built for
                raise OverflowError("rack-aware assignment costs do not fit in 64 bits")
            return None

        flow = min_cost_flow.SimpleMinCostFlow()
        # a class either stays with its owner or joins its pool
        class_nodes = np.arange(classes, dtype=np.int64) + class_base
        class_sizes = np.fromiter((len(p) for p in self.class_parts), dtype=np.int64, count=classes)
        keep_costs = np.where(self.class_eligible, -self.w_matched, self.w_rack - self.w_other).astype(np.int64)
        keep_arcs = flow.add_arcs_with_capacity_and_unit_cost(
            class_nodes, np.asarray(self.class_member, dtype=np.int64) + member_base, class_sizes, keep_costs
        )
        flow.add_arcs_with_capacity_and_unit_cost(
            class_nodes, np.asarray(self.class_pool, dtype=np.int64), class_sizes, np.zeros(classes, dtype=np.int64)
        )
        # pools feed the doors of their topic (a mismatch costs), doors feed their members
        pool_door = [(q, door, missed) for q in range(pools) for door, missed in self.pool_doors[q]]
        pool_door_arcs = flow.add_arcs_with_capacity_and_unit_cost(
            np.fromiter((q for q, _, _ in pool_door), dtype=np.int64, count=len(pool_door)),
            np.fromiter((d for _, d, _ in pool_door), dtype=np.int64, count=len(pool_door)) + door_base,
            self.pool_size[[q for q, _, _ in pool_door]],
            np.fromiter((self.w_rack if x else 0 for _, _, x in pool_door), dtype=np.int64, count=len(pool_door)),
        )
        door_member = [(d, i) for d in range(doors) for i in self.door_members[d]]
        door_member_arcs = flow.add_arcs_with_capacity_and_unit_cost(
            np.fromiter((d for d, _ in door_member), dtype=np.int64, count=len(door_member)) + door_base,
            np.fromiter((i for _, i in door_member), dtype=np.int64, count=len(door_member)) + member_base,
            np.full(len(door_member), layout.partition_total, dtype=np.int64),
            np.zeros(len(door_member), dtype=np.int64),
        )
        if not fixed:
            unit_member = np.repeat(np.arange(m, dtype=np.int64), widths)
            starts = np.repeat(np.cumsum(widths) - widths, widths)
            level = np.repeat(lo, widths) + (np.arange(len(unit_member), dtype=np.int64) - starts) + 1
            flow.add_arcs_with_capacity_and_unit_cost(
                unit_member + member_base,
                np.full(len(unit_member), sink, dtype=np.int64),
                np.ones(len(unit_member), dtype=np.int64),
                self.w_balance * (2 * (level - base) - 1),
            )
        supplies = np.zeros(sink + 1, dtype=np.int64)
        supplies[:pools] = self.uncredited
        supplies[class_base:door_base] = class_sizes
        supplies[member_base:sink] = -lo
        supplies[sink] = -(layout.partition_total - int(lo.sum()))
        flow.set_nodes_supplies(np.arange(sink + 1, dtype=np.int64), supplies)
        status = flow.solve()
        if status == flow.BAD_COST_RANGE:  # pragma: no cover - the bound above is stricter than OR-Tools'
            return None
        if status != flow.OPTIMAL:  # pragma: no cover - the engine's own assignment lies in every box
            raise RuntimeError(f"min-cost flow failed: {status}")

        # each class keeps its lowest partitions; what it gives up joins its pool. Pools hand their partitions
        # out in ascending order to their doors in order, doors to their members in member order.
        assigned: list[list[IntArray]] = [[] for _ in range(m)]
        given_up = np.zeros(layout.partition_total, dtype=bool)
        credited = np.zeros(layout.partition_total, dtype=bool)
        kept_counts = flow.flows(keep_arcs).tolist()
        for c, kept in enumerate(kept_counts):
            parts = self.class_parts[c]
            credited[parts] = True
            given_up[parts[kept:]] = True
            assigned[self.class_member[c]].append(parts[:kept])
        handed_out = given_up | ~credited
        queues = [parts[handed_out[parts]] for parts in self.pool_parts]
        taken = [0] * pools
        at_door: list[list[IntArray]] = [[] for _ in range(doors)]
        for (q, door, _), amount in zip(pool_door, flow.flows(pool_door_arcs).tolist(), strict=True):
            if amount:
                at_door[door].append(queues[q][taken[q] : taken[q] + amount])
                taken[q] += amount
        door_queues = [np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64) for parts in at_door]
        given = [0] * doors
        for (door, i), amount in zip(door_member, flow.flows(door_member_arcs).tolist(), strict=True):
            if amount:
                assigned[i].append(door_queues[door][given[door] : given[door] + amount])
                given[door] += amount
        return tuple(np.concatenate(a) if a else np.empty(0, dtype=np.int64) for a in assigned)
