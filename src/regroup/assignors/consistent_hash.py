"""``consistent-hash``: each partition goes to the first subscribed member clockwise on a hash ring.

Consistent hashing does not depend on the members agreeing about the metadata: the
owner of a partition is a function of that partition alone, so two members that disagree about a topic's
partition count still agree on who owns every partition they both know about. The price is that the
assignment is **not balanced by design**; :func:`imbalance` reports how far it is from even.

Semantics
    * Every member contributes ``options["vnodes"]`` points (virtual nodes; int in 1..10000, default 100;
      missing or ``None`` means the default; anything else raises
      :class:`~regroup.assignors.spec.AssignmentError`) to a 64-bit ring. A point is
      ``blake2b-64(identity, i)`` where the identity is the member's ``instance_id`` (static membership) when
      set, else its member id; so a static member that restarts under a new member id keeps its partitions.
    * Partition ``(t, p)`` hashes to ``blake2b-64(t, p)`` and goes to the owner of the first point at or after
      it (wrapping around) *among the members subscribed to t*. Ties between equal points go to the smaller
      member id (two members sharing an instance id: the smaller member id wins every point).
    * Hashing is keyed BLAKE2b (never Python's per-process salted ``hash``), so every process, on every
      platform, computes the same owners.

Guarantees
    * The owner of ``(t, p)`` depends only on ``t``, ``p`` and the set of members subscribed to ``t``: not on
      the partition count of ``t``, other topics, other members' subscriptions, or member order.
    * Monotonicity: when a member joins, the only partitions that change owner are the ones it takes, about
      ``1/(M+1)`` of its topics' partitions; when a member leaves, only its own partitions move.
    * No balance guarantee: with V virtual nodes the loads spread roughly like ``1 ± 1/sqrt(V)`` of the mean,
      and a topic with few partitions can put all of them on one member. No stickiness input is used either:
      stability comes from the hashing itself.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Mapping
from typing import Any

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.metrics import loads
from regroup.assignors.spec import Assignment, AssignmentDict, AssignmentError, GroupSpec, add_partition, normalized

DEFAULT_VNODES = 100
MAX_VNODES = 10_000

_NODE_PERSON = b"regroup-ch-node"
_PARTITION_PERSON = b"regroup-ch-part"


def _hash64(person: bytes, name: str, number: int) -> int:
    """Stable 64-bit hash of ``(name, number)``; the length prefix keeps the encoding unambiguous."""
    data = name.encode("utf-8")
    digest = hashlib.blake2b(
        len(data).to_bytes(4, "big") + data + number.to_bytes(8, "big", signed=True),
        digest_size=8,
        person=person,
    ).digest()
    return int.from_bytes(digest, "big")


def vnode_point(identity: str, index: int) -> int:
    """Ring position of virtual node ``index`` of the member known as ``identity``."""
    return _hash64(_NODE_PERSON, identity, index)


def partition_point(topic: str, partition: int) -> int:
    """Ring position of partition ``topic``-``partition``."""
    return _hash64(_PARTITION_PERSON, topic, partition)


def vnodes_option(options: Mapping[str, Any]) -> int:
    """The validated ``vnodes`` option (default :data:`DEFAULT_VNODES`)."""
    value = options.get("vnodes")
    if value is None:
        return DEFAULT_VNODES
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VNODES:
        raise AssignmentError(f"consistent-hash: option 'vnodes' must be an integer in 1..{MAX_VNODES}, got {value!r}")
    return value


class _Ring:
    """Sorted (point, member) pairs of a set of members, with clockwise lookup."""

    def __init__(self, nodes: list[tuple[int, str]]) -> None:
        nodes.sort()
        self.points = [p for p, _ in nodes]
        self.owners = [m for _, m in nodes]

    def owner(self, point: int) -> str:
        i = bisect.bisect_left(self.points, point)
        return self.owners[i % len(self.owners)]


class ConsistentHashAssignor(PartitionAssignor):
    """Consistent hashing with virtual nodes; deterministic, metadata-tolerant, not balanced."""

    name = "consistent-hash"

    def extra_metrics(self, spec: GroupSpec, assignment: Assignment) -> dict[str, object]:
        return {"imbalance": imbalance(spec, assignment)}

    def assign(self, spec: GroupSpec) -> Assignment:
        vnodes = vnodes_option(spec.options)
        points: dict[str, list[tuple[int, str]]] = {}
        subscribers: dict[str, list[str]] = {}
        for m in sorted(spec.members):
            sub = spec.members[m]
            identity = sub.instance_id if sub.instance_id is not None else m
            points[m] = [(vnode_point(identity, i), m) for i in range(vnodes)]
            for t in sub.topics:
                subscribers.setdefault(t, []).append(m)

        rings: dict[tuple[str, ...], _Ring] = {}  # topics with the same subscribers share a ring
        out: AssignmentDict = {m: {} for m in spec.members}
        for topic in sorted(subscribers):
            members = tuple(subscribers[topic])
            ring = rings.get(members)
            if ring is None:
                ring = rings[members] = _Ring([node for m in members for node in points[m]])
            for p in range(spec.topics.get(topic, 0)):
                add_partition(out, ring.owner(partition_point(topic, p)), topic, p)
        return normalized(out, spec)


def imbalance(spec: GroupSpec, assignment: Mapping[str, Mapping[str, list[int]]]) -> dict[str, float]:
    """How unbalanced ``assignment`` is, over the members that subscribe to at least one existing partition.

    Returns ``members`` (that count), ``partitions`` (assigned to them), ``mean_load``, ``min_load``,
    ``max_load``, ``max_min_spread`` and ``max_mean_ratio`` (1.0 is perfect; 1.0 when nothing is assigned).
    Works for any single-owner assignment, not only consistent hashing.
    """
    size = loads(assignment)
    counts = [size.get(m, 0) for m in sorted(spec.members) if spec.subscribed_partition_count(m) > 0]
    if not counts:
        return {
            "members": 0,
            "partitions": 0,
            "mean_load": 0.0,
            "min_load": 0,
            "max_load": 0,
            "max_min_spread": 0,
            "max_mean_ratio": 1.0,
        }
    total = sum(counts)
    mean = total / len(counts)
    return {
        "members": len(counts),
        "partitions": total,
        "mean_load": round(mean, 6),
        "min_load": min(counts),
        "max_load": max(counts),
        "max_min_spread": max(counts) - min(counts),
        "max_mean_ratio": round(max(counts) / mean, 6) if mean > 0 else 1.0,
    }
