"""``regroup assign --explain``: why each partition whose owner changed moved.

The rules (docs/assignors.md, "Why a partition moved: `regroup assign --explain`"):

* A partition's *previous owner* is the member of the input that lists it in ``owned`` with the highest
  generation (none counts as -1); when several list it in that generation, or nobody does, it has none.
* A partition is reported when its new owner (none when the strategy revokes it for now) is not its previous
  owner; one without a previous owner only when it has a new owner and some member owned a partition before.
* Its reason is the first that holds: ``lost owner`` (it has no previous owner, or its previous owner no
  longer subscribes to its topic), ``rack`` (its replica racks are known, its previous owner's rack holds
  none of them, and its new owner's rack holds one — with no new owner: some member subscribed to its topic
  sits on such a rack), ``balance`` (any other move: its previous owner could have kept it).

Which partitions moved is found on arrays (a million partitions); only the moved ones are looked at one by one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from regroup.assignors.layout import IntArray, number_topics
from regroup.assignors.metrics import flatten_assignment
from regroup.assignors.racks import member_rack, topic_partition_racks
from regroup.assignors.spec import GroupSpec

LOST_OWNER = "lost owner"
BALANCE = "balance"
RACK = "rack"
REASONS = (LOST_OWNER, BALANCE, RACK)


class ExplainError(ValueError):
    """The assignment cannot be explained move by move (a partition with several owners)."""


def explain(spec: GroupSpec, assignment: Mapping[str, Mapping[str, Sequence[int]]]) -> dict[str, object]:
    """``{"moved": [{"topic", "partition", "from", "to", "reason"}, ...], "reasons": {reason: count}}``,
    the moves in (topic, partition) order; ``from``/``to`` are null for no owner."""
    topics, topic_index, counts, offsets = number_topics(spec.topics, spec.topics)
    total = int(offsets[-1])
    names = list(dict.fromkeys(itertools.chain(spec.members, assignment)))
    member_index = {m: i for i, m in enumerate(names)}

    owner = np.full(total, -1, dtype=np.int64)  # new owner of each partition
    members, glob = _entries(assignment, member_index, topic_index, counts, offsets)
    if len(glob):
        held = np.bincount(glob, minlength=total)
        if int(held.max()) > 1:
            twice = int(np.flatnonzero(held > 1)[0])
            raise ExplainError(f"{_name(topics, offsets, twice)} has several owners; moves are told for one owner")
        owner[glob] = members

    previous = np.full(total, -1, dtype=np.int64)  # previous owner of each partition
    owned = {m: sub.owned for m, sub in spec.members.items()}
    members, glob = _entries(owned, member_index, topic_index, counts, offsets)
    if len(glob):
        generation = np.array([spec.members[m].generation for m in owned], dtype=np.int64)
        gens = generation[members]  # (members of ``owned`` come first in ``names``)
        best = np.full(total, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(best, glob, gens)
        at_best = gens == best[glob]
        claimers = np.bincount(glob[at_best], minlength=total)
        single = at_best & (claimers[glob] == 1)
        previous[glob[single]] = members[single]
        moved = np.flatnonzero((owner != previous) & ((previous >= 0) | (owner >= 0)))
    else:
        moved = np.empty(0, dtype=np.int64)

    entries: list[dict[str, object]] = []
    tally = dict.fromkeys(REASONS, 0)
    reasons = _Reasons(spec)
    topic_of = np.searchsorted(offsets, moved, side="right") - 1
    for g, t in zip(moved.tolist(), topic_of.tolist(), strict=True):
        topic, partition = topics[t], g - int(offsets[t])
        was, now = int(previous[g]), int(owner[g])
        before = names[was] if was >= 0 else None
        after = names[now] if now >= 0 else None
        reason = reasons.of(topic, partition, before, after)
        tally[reason] += 1
        entries.append({"topic": topic, "partition": partition, "from": before, "to": after, "reason": reason})
    return {"moved": entries, "reasons": tally}


class _Reasons:
    """The reason of one move (the rules above), with each member's topics and each topic's replica racks
    looked up once."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        self.subscribed: dict[str, frozenset[str]] = {}
        self.replicas: dict[str, tuple[frozenset[str], ...]] = {}
        self.local: dict[tuple[str, frozenset[str]], bool] = {}

    def of(self, topic: str, partition: int, before: str | None, after: str | None) -> str:
        if before is None:
            return LOST_OWNER
        topics = self.subscribed.get(before)
        if topics is None:
            topics = self.subscribed[before] = frozenset(self.spec.members[before].topics)
        if topic not in topics:
            return LOST_OWNER
        racks = self.replicas.get(topic)
        if racks is None:
            racks = self.replicas[topic] = topic_partition_racks(
                self.spec.partition_racks, topic, self.spec.topics[topic]
            )
        replicas = racks[partition]
        if not replicas or member_rack(self.spec.members[before]) in replicas:
            return BALANCE
        if after is not None and after in self.spec.members:
            return RACK if member_rack(self.spec.members[after]) in replicas else BALANCE
        return RACK if self._rack_local_subscriber(topic, replicas) else BALANCE

    def _rack_local_subscriber(self, topic: str, replicas: frozenset[str]) -> bool:
        """Some member subscribed to ``topic`` sits on a rack in ``replicas``."""
        key = (topic, replicas)
        found = self.local.get(key)
        if found is None:
            members = self.spec.members.values()
            found = self.local[key] = any(topic in sub.topics and member_rack(sub) in replicas for sub in members)
        return found


def _entries(
    assignment: Mapping[str, Mapping[str, Sequence[int]]],
    member_index: Mapping[str, int],
    topic_index: Mapping[str, int],
    counts: IntArray,
    offsets: IntArray,
) -> tuple[IntArray, IntArray]:
    """(member index, global partition index) of every listed partition that exists."""
    members, topic_of, flat, _ = flatten_assignment(assignment, member_index, topic_index)
    limits = np.append(counts, 0)[topic_of]  # topic -1 (unknown): no partition exists
    ok = (topic_of >= 0) & (flat >= 0) & (flat < limits)
    return members[ok], offsets[topic_of[ok]] + flat[ok]


def _name(topics: Sequence[str], offsets: IntArray, glob: int) -> str:
    t = int(np.searchsorted(offsets, glob, side="right")) - 1
    return f"{topics[t]}-{glob - int(offsets[t])}"
