"""Rack locality for the balanced-sticky family: after the engine has fixed how many partitions each member
gets and which ones it keeps, the partitions that move are placed so that as many as possible land on a
member in a rack holding one of their replicas.

Guarantee: balance (every member's count) and stickiness (every kept partition) are exactly those of the
engine's result; among assignments with both, the number of moved partitions placed rack-locally is
maximal. Solved as a min-cost flow from (topic, replica racks) classes to members, so the graph is small
however many partitions there are. Without replica racks, or when no member has a rack, nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ortools.graph.python import min_cost_flow

from regroup.assignors.racks import member_rack, topic_partition_racks
from regroup.assignors.spec import Assignment, GroupSpec


def localize(
    spec: GroupSpec, assignment: Assignment, previous: Mapping[str, Mapping[str, tuple[int, ...]]]
) -> Assignment:
    """``assignment`` with its moved partitions re-placed for rack locality (see the module docstring)."""
    racks = {m: member_rack(sub) for m, sub in spec.members.items()}
    if spec.partition_racks is None or not any(racks.values()):
        return assignment
    members = sorted(assignment)
    quota: dict[str, int] = {}
    kept: dict[str, dict[str, list[int]]] = {}
    # (topic, replica racks) -> moved partitions of that class, in partition order
    classes: dict[tuple[str, frozenset[str]], list[int]] = {}
    for m in members:
        was = previous.get(m, {})
        kept[m] = {}
        quota[m] = 0
        for topic, parts in assignment[m].items():
            before = set(was.get(topic, ()))
            replica_racks = topic_partition_racks(spec.partition_racks, topic, spec.topics.get(topic, 0))
            for p in parts:
                if p in before:
                    kept[m].setdefault(topic, []).append(p)
                else:
                    quota[m] += 1
                    racks_of = replica_racks[p] if p < len(replica_racks) else frozenset()
                    classes.setdefault((topic, racks_of), []).append(p)
    if not classes:
        return assignment
    keys = sorted(classes, key=lambda k: (k[0], sorted(k[1])))
    flow = min_cost_flow.SimpleMinCostFlow()
    source, sink = 0, 1
    class_node = {k: 2 + i for i, k in enumerate(keys)}
    member_node = {m: 2 + len(keys) + i for i, m in enumerate(members)}
    for k in keys:
        flow.add_arc_with_capacity_and_unit_cost(source, class_node[k], len(classes[k]), 0)
    arcs: list[tuple[int, tuple[str, frozenset[str]], str]] = []
    for k in keys:
        topic, class_racks = k
        for m in members:
            if topic in spec.members[m].topics:
                rack = racks[m]
                cost = 0 if rack is not None and rack in class_racks else 1
                arc = flow.add_arc_with_capacity_and_unit_cost(class_node[k], member_node[m], len(classes[k]), cost)
                arcs.append((arc, k, m))
    for m in members:
        flow.add_arc_with_capacity_and_unit_cost(member_node[m], sink, quota[m], 0)
    total = sum(len(v) for v in classes.values())
    flow.set_node_supply(source, total)
    flow.set_node_supply(sink, -total)
    if flow.solve() != flow.OPTIMAL:
        return assignment  # cannot happen: the engine's own placement is feasible
    out: dict[str, dict[str, list[int]]] = {m: {t: list(ps) for t, ps in kept[m].items()} for m in members}
    remaining = {k: list(v) for k, v in classes.items()}
    for arc, k, m in arcs:
        amount = flow.flow(arc)
        if amount:
            taken, remaining[k] = remaining[k][:amount], remaining[k][amount:]
            out[m].setdefault(k[0], []).extend(taken)
    return {m: {t: sorted(ps) for t, ps in sorted(out[m].items()) if ps} for m in members}
