"""``copartitioned``: partition p of every topic in a co-partition group goes to the same member.

This is co-partitioning (needed to join topics, KIP-28): records with the same key land in the
same partition number of two identically partitioned topics, so the member that joins them must read
partition p of both.

Semantics
    * ``options["copartitioned"]`` is a list of topic groups, e.g. ``[["orders", "payments"], ["a", "b"]]``
      (missing or ``None``: no groups, which makes this a balanced sticky single-owner assignor). Groups that
      share a topic are merged, because co-partitioning is transitive. Anything that is not a list of
      non-empty lists of topic names raises :class:`~regroup.assignors.spec.AssignmentError`.
    * Only the *active* topics of a group count: those that exist with at least one partition and have at
      least one subscriber. All active topics of a group must have the same partition count, otherwise
      ``AssignmentError`` names the topics and their counts (like Kafka Streams, which refuses to join topics
      that are not co-partitioned, rather than silently joining partition p of one with nothing).
    * Only members subscribed to *every* active topic of a group are eligible for it; if there is none,
      ``AssignmentError``. A member subscribed to just some of a group's topics gets none of them.
    * The unit of assignment is a *unit*: for a group, ``{(t, p) for t in group}`` for one partition number
      p (weight = number of active topics); for a topic in no group, a single partition (weight 1). Each unit
      goes to one eligible member, so the result is a valid single-owner assignment.

Balance: loads are counted in partitions. Units are placed most-constrained and heaviest first on the least
loaded eligible member, then a unit of weight w moves from the most loaded member A to the least loaded
eligible member B whenever ``load(A) − load(B) > w`` (each move lowers the sum of squared loads) until no such
move exists; the lightest suitable unit moves first, which keeps the number of moved partitions low. With
homogeneous subscriptions this guarantees max − min ≤ the weight of the lightest unit held by the most
loaded member (so ≤ the size of the largest group, and ≤ 1 once that member holds an ungrouped partition).
With heterogeneous subscriptions it is a best-effort local optimum.

Stickiness: the previous owner of a unit is the eligible member that owned most of its partitions
(``MemberSubscription.owned``; ties: highest generation, then member id). Every unit stays with its previous
owner, then moves happen only for balance, preferring units the giver did not own and the receiver did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.spec import Assignment, AssignmentDict, AssignmentError, GroupSpec, add_partition, normalized


@dataclass(frozen=True, slots=True)
class Unit:
    """Partitions that must go to one member: partition ``partition`` of each of ``topics``."""

    topics: tuple[str, ...]
    partition: int
    eligible: tuple[str, ...]

    @property
    def weight(self) -> int:
        return len(self.topics)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topics[0], self.partition)


def copartition_groups(options: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The validated ``copartitioned`` option as sorted, disjoint topic groups (overlapping groups merged)."""
    raw = options.get("copartitioned")
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        raise AssignmentError(f"copartitioned: option 'copartitioned' must be a list of topic lists, got {raw!r}")
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    for group in raw:
        if not isinstance(group, list | tuple) or not group or not all(isinstance(t, str) and t for t in group):
            raise AssignmentError(f"copartitioned: each group must be a non-empty list of topic names, got {group!r}")
        for t in group:
            parent.setdefault(t, t)
        first = find(group[0])
        for t in group[1:]:
            root = find(t)
            if root != first:
                parent[max(root, first)] = min(root, first)
                first = min(root, first)
    merged: dict[str, list[str]] = {}
    for t in sorted(parent):
        merged.setdefault(find(t), []).append(t)
    return sorted(tuple(ts) for ts in merged.values())


def build_units(spec: GroupSpec) -> list[Unit]:
    """Every unit of ``spec``, sorted by key; raises ``AssignmentError`` for unusable groups."""
    subscribers: dict[str, list[str]] = {}
    for m in sorted(spec.members):
        for t in spec.members[m].topics:
            if spec.topics.get(t, 0) > 0:
                subscribers.setdefault(t, []).append(m)
    units: list[Unit] = []
    grouped: set[str] = set()
    for group in copartition_groups(spec.options):
        grouped.update(group)
        active = tuple(t for t in group if t in subscribers)
        if not active:
            continue
        counts = {t: spec.topics[t] for t in active}
        if len(set(counts.values())) > 1:
            detail = ", ".join(f"{t}={n}" for t, n in counts.items())
            raise AssignmentError(
                f"copartitioned: topics of a co-partition group must have equal partition counts: {detail}"
            )
        eligible = tuple(sorted(set.intersection(*(set(subscribers[t]) for t in active))))
        if not eligible:
            raise AssignmentError(
                f"copartitioned: no member subscribes to all of the co-partitioned topics {', '.join(active)}"
            )
        units.extend(Unit(active, p, eligible) for p in range(counts[active[0]]))
    for t in sorted(subscribers):
        if t not in grouped:
            eligible = tuple(subscribers[t])
            units.extend(Unit((t,), p, eligible) for p in range(spec.topics[t]))
    return sorted(units, key=lambda u: u.key)


def _previous_owner(spec: GroupSpec, unit: Unit) -> str | None:
    best: tuple[int, int, str] | None = None
    for m in unit.eligible:
        owned = spec.members[m].owned
        count = sum(1 for t in unit.topics if unit.partition in owned.get(t, ()))
        if count:
            key = (-count, -spec.members[m].generation, m)
            if best is None or key < best:
                best = key
    return None if best is None else best[2]


class CopartitionedAssignor(PartitionAssignor):
    """Keeps partition p of co-partitioned topics together; balanced by partition count; sticky."""

    name = "copartitioned"

    def assign(self, spec: GroupSpec) -> Assignment:
        units = build_units(spec)
        members = sorted(spec.members)
        load = dict.fromkeys(members, 0)
        owner: list[str | None] = [None] * len(units)
        held: dict[str, set[int]] = {m: set() for m in members}
        previous = [_previous_owner(spec, u) for u in units]

        def place(i: int, m: str) -> None:
            owner[i] = m
            held[m].add(i)
            load[m] += units[i].weight

        # Phase 1: units stay with their previous owner.
        for i, prev in enumerate(previous):
            if prev is not None:
                place(i, prev)
        # Phase 2: the rest, most constrained and heaviest first, to the least loaded eligible member.
        pending = sorted(
            (i for i in range(len(units)) if owner[i] is None),
            key=lambda i: (len(units[i].eligible), -units[i].weight, units[i].key),
        )
        for i in pending:
            place(i, min(units[i].eligible, key=lambda m: (load[m], m)))
        # Phase 3: single-unit moves while one strictly lowers the sum of squared loads.
        self._balance(units, members, load, owner, held, previous)

        out: AssignmentDict = {m: {} for m in members}
        for i, unit in enumerate(units):
            m = owner[i]
            assert m is not None
            for t in unit.topics:
                add_partition(out, m, t, unit.partition)
        return normalized(out, spec)

    @staticmethod
    def _balance(
        units: Sequence[Unit],
        members: Sequence[str],
        load: dict[str, int],
        owner: list[str | None],
        held: dict[str, set[int]],
        previous: Sequence[str | None],
    ) -> None:
        eligible_sets = [frozenset(u.eligible) for u in units]
        while True:
            move: tuple[int, str, str] | None = None
            by_load = sorted(members, key=lambda m: (load[m], m))
            for giver in reversed(by_load):
                for receiver in by_load:
                    gap = load[giver] - load[receiver]
                    if gap < 2:
                        break
                    best: tuple[bool, bool, int, tuple[str, int]] | None = None
                    for i in held[giver]:
                        w = units[i].weight
                        if w >= gap or receiver not in eligible_sets[i]:
                            continue
                        key = (previous[i] == giver, previous[i] != receiver, w, units[i].key)
                        if best is None or key < best:
                            best = key
                            move = (i, giver, receiver)
                    if move is not None:
                        break
                if move is not None:
                    break
            if move is None:
                return
            i, giver, receiver = move
            held[giver].discard(i)
            held[receiver].add(i)
            load[giver] -= units[i].weight
            load[receiver] += units[i].weight
            owner[i] = receiver
