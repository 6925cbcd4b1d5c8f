"""The optimal engine's homogeneous assignment kept between runs, so that the next run costs what moves.

A KIP-848 coordinator recomputes its group's target whenever the group epoch moves: a member joins or
leaves, a subscription changes. When every member subscribes to the same topics and racks play no part, the
engine's assignment (``homogeneous``, the same as ``balance`` on large groups) is decided by each member's
current partitions only through one rule: a member keeps its partitions up to its quota, the lowest partition
numbers first (then the lowest topic), and the partitions nobody keeps go out in global order, least loaded
member first. So this module holds, per member, its partitions sorted by that rule (one integer *key* per
partition: ``partition * topic_count + topic``, topics numbered in sorted name order); a run walks the members
once to cut whoever is over its quota and hands out only what was cut or left behind. Cost: the members
(a few integer operations each) plus the partitions that move, not every partition of the group.

``KeptAssignment.run`` returns exactly what ``homogeneous.assign_small`` returns for the same group and the
same claims at one generation (tested against it on random groups and histories).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress

#: members coming or going in one run beyond which the run sorts the members again rather than placing each
_RESORT = 64


class KeptAssignment:
    """One homogeneous group's assignment over fixed topics (sorted names, partition counts)."""

    def __init__(
        self, topics: Sequence[str], counts: Sequence[int], held: Mapping[str, Iterable[int]] | None = None
    ) -> None:
        """The state in which each member of ``held`` holds the partitions whose keys it lists (existing ones
        only, any order; a partition two members list is held by neither: equal claims credit nobody, as
        ``ownership`` resolves them)."""
        self.topics: tuple[str, ...] = tuple(topics)
        self.counts: tuple[int, ...] = tuple(counts)
        offsets = [0]
        for count in self.counts:
            offsets.append(offsets[-1] + count)
        #: global index of each topic's partition 0 (one more entry: the total)
        self.offsets: tuple[int, ...] = tuple(offsets)
        self.total = offsets[-1]
        self.topic_count = len(self.topics)
        #: member -> its partitions as keys, ascending (the order in which it keeps them)
        self.held: dict[str, list[int]] = {member: sorted(set(keys)) for member, keys in (held or {}).items()}
        #: the members of ``held``, sorted, once a run has sorted them
        self._order: list[str] | None = None
        claimed = sum(len(keys) for keys in self.held.values())
        taken: set[int] = set()
        for keys in self.held.values():
            taken.update(keys)
        if len(taken) != claimed:
            self._drop_contested()
            taken = set()
            for keys in self.held.values():
                taken.update(keys)
        #: keys nobody holds (all of them until the group has a member)
        self.unassigned: list[int] = []
        if len(taken) != self.total:
            t_count = self.topic_count
            every = (p * t_count + t for t in range(t_count) for p in range(self.counts[t]))
            self.unassigned = [key for key in every if key not in taken]

    def _drop_contested(self) -> None:
        seen: set[int] = set()
        contested: set[int] = set()
        for keys in self.held.values():
            for key in keys:
                if key in seen:
                    contested.add(key)
                seen.add(key)
        for member, keys in self.held.items():
            self.held[member] = [key for key in keys if key not in contested]

    @classmethod
    def from_claims(
        cls, topics: Sequence[str], counts: Sequence[int], claims: Mapping[str, Mapping[str, Iterable[int]]]
    ) -> KeptAssignment:
        """The state in which each member holds what it claims: topic -> partitions; partitions of other
        topics, and partitions that do not exist, are left out."""
        index = {name: t for t, name in enumerate(topics)}
        t_count = len(topics)
        held: dict[str, list[int]] = {}
        for member, by_topic in claims.items():
            keys: list[int] = []
            for name, partitions in by_topic.items():
                t = index.get(name)
                if t is not None:
                    keys.extend(p * t_count + t for p in partitions if 0 <= p < counts[t])
            held[member] = keys
        return cls(topics, counts, held)

    def global_index(self, key: int) -> int:
        partition, t = divmod(key, self.topic_count)
        return self.offsets[t] + partition

    def partitions_of(self, member: str) -> dict[str, list[int]]:
        """The member's partitions, topic -> ascending partition numbers, topics in sorted order."""
        by_topic: dict[int, list[int]] = {}
        t_count = self.topic_count
        for key in self.held.get(member, ()):
            partition, t = divmod(key, t_count)
            by_topic.setdefault(t, []).append(partition)
        return {self.topics[t]: by_topic[t] for t in sorted(by_topic)}

    def run(self, members: Iterable[str]) -> set[str]:
        """Assign the group's partitions to ``members`` (the group as it is now; members not held before start
        with nothing, members held before and absent now leave their partitions behind). Returns the members
        whose partitions changed, new members included.

        The members' order is kept sorted between runs (``order``), so a run in which a few members came or
        went sorts nothing; the walk over the members that decides who is over its quota runs in C-level
        iterators, and only the members that lose partitions are visited one by one."""
        held = self.held
        present = members.keys() if isinstance(members, dict) else set(members)
        gone = held.keys() - present
        new = present - held.keys()
        order = self._order
        if order is None or len(gone) + len(new) > _RESORT:
            for member in gone:
                self.unassigned.extend(held.pop(member))
            for member in new:
                held[member] = []
            order = self._order = sorted(held)
        else:
            for member in gone:
                self.unassigned.extend(held.pop(member))
                del order[bisect_left(order, member)]
            for member in new:
                held[member] = []
                insort(order, member)
        changed = set(new)
        if not order:
            return changed
        quota, extra = divmod(self.total, len(order))
        loads = list(map(len, map(held.__getitem__, order)))
        # the members over the quota, in order: the first ``extra`` of them may keep quota + 1, the others quota
        over = list(compress(range(len(order)), map(quota.__lt__, loads)))
        for cap, indexes in ((quota + 1, over[:extra]), (quota, over[extra:])):
            for i in compress(indexes, map(cap.__lt__, map(loads.__getitem__, indexes))):
                keys = held[order[i]]
                self.unassigned.extend(keys[cap:])
                del keys[cap:]
                loads[i] = cap
                changed.add(order[i])
        if self.unassigned:
            changed.update(self._hand_out(order, loads, quota, extra))
        return changed

    def _hand_out(self, order: list[str], loads: list[int], quota: int, extra: int) -> set[str]:
        """Every unassigned partition, in global order, to the least-loaded member (member order within a
        load), within the quotas: ``homogeneous._hand_out`` level by level, visiting only the members that take
        something at each level."""
        pending = sorted(self.unassigned, key=self.global_index)
        self.unassigned = []
        full = sum(1 for load in loads if load > quota)
        floating = 1 if extra > full else 0
        # below the quota every member whose load is at most the level takes one per level; at the quota only
        # the members that may still grow to quota + 1 (every member's limit is quota, or quota + 1)
        waiting = sorted(range(len(order)), key=loads.__getitem__)
        next_waiting = 0
        active: list[int] = []
        given: dict[int, list[int]] = {}
        k = 0
        level = loads[waiting[0]]
        while k < len(pending) and level <= quota:
            while next_waiting < len(waiting) and loads[waiting[next_waiting]] <= level:
                insort(active, waiting[next_waiting])
                next_waiting += 1
            for i in active:
                if level == quota and (loads[i] > quota or not floating):
                    continue
                given.setdefault(i, []).append(pending[k])
                k += 1
                if k == len(pending):
                    break
            level += 1
        self.unassigned = pending[k:]  # (none while some member is under its quota)
        out: set[str] = set()
        for i, keys in given.items():
            member = order[i]
            mine = self.held[member]
            mine.extend(keys)
            mine.sort()
            out.add(member)
        return out
