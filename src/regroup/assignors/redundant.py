"""``redundant``: every partition is assigned to N distinct members ("redundant partitioning").

Use case: search indexers that keep several replicas of an index. Every copy consumes the
partition in full; there is no leader/follower distinction between the N owners and the order in which they
are listed means nothing. Each owner should commit offsets under its own group or keep its own position
(members of one group share committed offsets, so N owners committing into the same group would overwrite
each other's offsets); this assignor only decides *who* reads *what*.

Semantics
    * ``options["replicas"]`` = N (int ≥ 1, default 2; a missing key or ``None`` means the default).
      Anything else raises :class:`~regroup.assignors.spec.AssignmentError`.
    * Partition ``(t, p)`` goes to exactly ``min(N, S_t)`` *distinct* members subscribed to ``t``, where
      ``S_t`` is the number of members subscribed to ``t``. With fewer than N subscribers, every subscriber
      gets every partition of ``t``. ``N = 1`` is an ordinary balanced sticky single-owner assignment.
    * Balance is over replica *slots* (a member holding 3 partitions has load 3 whatever the other owners
      are). The final loads cannot be improved by moving slots along any chain of members, which makes them
      lexicographically optimal for the given subscriptions (the set of achievable load vectors is the base
      polytope of a polymatroid, where this local condition is global): in particular the maximum is as low
      and the minimum as high as the subscriptions allow. With homogeneous subscriptions, max − min ≤ 1.
    * Stickiness: every replica a member previously owned (``MemberSubscription.owned``) and can still own
      is kept, then slots are only moved when balance requires it, one at a time from the most loaded member,
      preferring slots the giver did not previously own and slots the receiver did. When more members claim
      a partition than it has replicas, the claims with the highest generation win (ties: member id).
    * New replicas go to the least loaded eligible member; ties go to the member sharing the fewest
      partitions with the partition's other owners, so replica sets are spread out and a failed member's
      partitions are re-replicated from, and onto, many different members.

The result is not valid in the sense of :func:`regroup.assignors.metrics.validity_errors` (which expects a
single owner per partition); use :func:`replica_errors` to check a redundant assignment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from itertools import combinations
from typing import Any

from regroup.assignors import metrics
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.spec import Assignment, AssignmentDict, AssignmentError, GroupSpec, normalized

DEFAULT_REPLICAS = 2

TopicPartition = tuple[str, int]


def replicas_option(options: Mapping[str, Any]) -> int:
    """The validated ``replicas`` option (default :data:`DEFAULT_REPLICAS`)."""
    value = options.get("replicas")
    if value is None:
        return DEFAULT_REPLICAS
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AssignmentError(f"redundant: option 'replicas' must be an integer >= 1, got {value!r}")
    return value


def replica_errors(
    spec: GroupSpec, assignment: Mapping[str, Mapping[str, list[int]]], replicas: int | None = None
) -> list[str]:
    """Reasons ``assignment`` is not a valid redundant assignment of ``spec`` (empty list when valid).

    Valid means: every member present, only subscribed and existing partitions given, no member lists a
    partition twice, and each partition of a subscribed topic has exactly ``min(N, subscribers)`` owners.
    ``replicas`` defaults to the spec's option.
    """
    n = replicas_option(spec.options) if replicas is None else replicas
    errors, owners = metrics.ownership_errors(spec, assignment)
    subscribers: dict[str, int] = {}
    for sub in spec.members.values():
        for topic in sub.topics:
            subscribers[topic] = subscribers.get(topic, 0) + 1
    for topic, p in metrics.subscribed_partitions(spec):
        want = min(n, subscribers[topic])
        got = len(set(owners.get((topic, p), [])))
        if got != want:
            errors.append(f"{topic}-{p} has {got} owners, expected {want}")
    return errors


class _State:
    """Mutable working state of one ``assign`` call."""

    def __init__(self, spec: GroupSpec) -> None:
        self.members = sorted(spec.members)
        self.subscribed: dict[str, frozenset[str]] = {
            m: frozenset(t for t in spec.members[m].topics if spec.topics.get(t, 0) > 0) for m in self.members
        }
        self.held: dict[str, dict[str, set[int]]] = {m: {} for m in self.members}
        self.load: dict[str, int] = dict.fromkeys(self.members, 0)
        self.holders: dict[TopicPartition, set[str]] = {}
        # Previously owned slots (member -> topic -> partitions), restricted to what is still assignable.
        self.previous: dict[str, dict[str, frozenset[int]]] = {}
        for m in self.members:
            sub = spec.members[m]
            self.previous[m] = {
                t: frozenset(p for p in ps if 0 <= p < spec.topics[t])
                for t, ps in sorted(sub.owned.items())
                if t in self.subscribed[m]
            }

    def was_owned(self, member: str, topic: str, partition: int) -> bool:
        return partition in self.previous[member].get(topic, frozenset())

    def give(self, member: str, topic: str, partition: int) -> None:
        self.held[member].setdefault(topic, set()).add(partition)
        self.holders.setdefault((topic, partition), set()).add(member)
        self.load[member] += 1

    def take(self, member: str, topic: str, partition: int) -> None:
        self.held[member][topic].discard(partition)
        self.holders[(topic, partition)].discard(member)
        self.load[member] -= 1

    def best_slot(self, giver: str, receiver: str) -> TopicPartition | None:
        """The slot ``giver`` should hand to ``receiver`` (None when no slot can move between them)."""
        best: tuple[bool, bool, str, int] | None = None
        receiver_topics = self.subscribed[receiver]
        for topic, partitions in self.held[giver].items():
            if topic not in receiver_topics or not partitions:
                continue
            theirs = self.held[receiver].get(topic, set())
            for p in partitions:
                if p in theirs:
                    continue
                key = (self.was_owned(giver, topic, p), not self.was_owned(receiver, topic, p), topic, p)
                if best is None or key < best:
                    best = key
        return None if best is None else (best[2], best[3])


class RedundantAssignor(PartitionAssignor):
    """Each partition to ``replicas`` distinct subscribers, balanced by replica slots and sticky."""

    name = "redundant"

    def extra_metrics(self, spec: GroupSpec, assignment: Assignment) -> dict[str, object]:
        errors = replica_errors(spec, assignment)
        return {"valid": not errors, "replicas": replicas_option(spec.options)}

    def assign(self, spec: GroupSpec) -> Assignment:
        n = replicas_option(spec.options)
        state = _State(spec)
        subscribers: dict[str, list[str]] = {}
        for m in state.members:
            for t in sorted(state.subscribed[m]):
                subscribers.setdefault(t, []).append(m)
        wanted = {t: min(n, len(ms)) for t, ms in subscribers.items()}

        self._keep_previous(spec, state, wanted)
        self._fill(spec, state, subscribers, wanted)
        self._balance(state)

        out: AssignmentDict = {m: {t: sorted(ps) for t, ps in state.held[m].items()} for m in state.members}
        return normalized(out, spec)

    @staticmethod
    def _keep_previous(spec: GroupSpec, state: _State, wanted: Mapping[str, int]) -> None:
        """Phase 1: every still-valid previous replica stays; over-claimed partitions keep the newest."""
        claims: dict[TopicPartition, list[str]] = {}
        for m in state.members:
            for t, ps in state.previous[m].items():
                for p in sorted(ps):
                    claims.setdefault((t, p), []).append(m)
        for (t, p), claimants in sorted(claims.items()):
            claimants.sort(key=lambda m: (-spec.members[m].generation, m))
            for m in claimants[: wanted[t]]:
                state.give(m, t, p)

    @staticmethod
    def _fill(spec: GroupSpec, state: _State, subscribers: Mapping[str, list[str]], wanted: Mapping[str, int]) -> None:
        """Phase 2: missing replicas go to the least loaded eligible member, most constrained topics first.

        Ties between equally loaded members go to the one sharing the fewest partitions with the current
        holders, so replica sets are spread out: when a member fails, its partitions' surviving copies are on
        many different members and their replacement copies can go anywhere.
        """
        shared: dict[str, dict[str, int]] = {m: {} for m in state.members}

        def share(a: str, b: str) -> None:
            shared[a][b] = shared[a].get(b, 0) + 1
            shared[b][a] = shared[b].get(a, 0) + 1

        for holders in state.holders.values():
            for a, b in combinations(sorted(holders), 2):
                share(a, b)
        for t in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
            candidates = subscribers[t]
            for p in range(spec.topics[t]):
                holders = state.holders.setdefault((t, p), set())
                while len(holders) < wanted[t]:
                    chosen = min(
                        (m for m in candidates if m not in holders),
                        key=lambda m: (state.load[m], sum(shared[m].get(h, 0) for h in holders), m),
                    )
                    for h in holders:
                        share(chosen, h)
                    state.give(chosen, t, p)

    @staticmethod
    def _balance(state: _State) -> None:
        """Phase 3: shift one slot at a time along the shortest chain from an overloaded member to a member
        with at least two fewer slots, until no such chain exists (each shift lowers the sum of squares)."""
        while True:
            low = min(state.load.values(), default=0)
            shifted = False
            for source in sorted(state.members, key=lambda m: (-state.load[m], m)):
                if state.load[source] < low + 2:
                    break
                path = RedundantAssignor._find_chain(state, source)
                if path is not None:
                    for giver, receiver, (t, p) in path:
                        state.take(giver, t, p)
                        state.give(receiver, t, p)
                    shifted = True
                    break
            if not shifted:
                return

    @staticmethod
    def _find_chain(state: _State, source: str) -> list[tuple[str, str, TopicPartition]] | None:
        """Breadth-first search for the shortest chain of single-slot moves from ``source`` to a member whose
        load is at most ``load[source] - 2`` (intermediate loads are unchanged by the shift)."""
        limit = state.load[source] - 2
        parent: dict[str, tuple[str, TopicPartition] | None] = {source: None}
        queue = deque([source])
        by_load = sorted(state.members, key=lambda m: (state.load[m], m))
        while queue:
            u = queue.popleft()
            for v in by_load:
                if v in parent or not state.subscribed[v]:
                    continue
                slot = state.best_slot(u, v)
                if slot is None:
                    continue
                parent[v] = (u, slot)
                if state.load[v] <= limit:
                    path: list[tuple[str, str, TopicPartition]] = []
                    node = v
                    while (link := parent[node]) is not None:
                        path.append((link[0], node, link[1]))
                        node = link[0]
                    path.reverse()
                    return path
                queue.append(v)
        return None
