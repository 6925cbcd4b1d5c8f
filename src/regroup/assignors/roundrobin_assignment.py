"""The round-robin assignment of a spec (``roundrobin``), read lazily: each member's ``topic -> partitions``
built when it is read, every member's in one pass when all are read.

Where each topic's deal starts is fixed by the topics before it (the cycle carries on across topics), so it
is computed up front for every topic, a few integer operations each; a member's view then needs only its
place among each topic's subscribers. Interpreted in the compiled build (``tools/compiled.py``): a ``Mapping``
subclass cannot be a compiled class.
"""

from __future__ import annotations

from bisect import bisect_left

from regroup.assignors.lazy_assignment import LazyAssignment
from regroup.assignors.member_order import java_string_key
from regroup.assignors.range import topic_subscribers
from regroup.assignors.spec import AssignmentDict, GroupSpec


class RoundRobinAssignment(LazyAssignment):
    """All partitions of all subscribed topics, sorted by (topic, partition), dealt one by one to the members in
    Kafka's member order, skipping members not subscribed to the partition's topic."""

    def __init__(self, spec: GroupSpec) -> None:
        super().__init__(spec.members)
        self.spec = spec
        subs = topic_subscribers(spec)
        self.order = subs.order
        self.groups = subs.groups
        #: per topic, in the deal's order: (topic, its subscribers' group, where its deal starts in the group)
        self.deals: list[tuple[str, int, int]] = []
        next_position = 0  # position in ``order`` of the next member the cycle will consider
        for topic in sorted(subs.topic_group, key=java_string_key):
            count = spec.topics[topic]
            group = subs.topic_group[topic]
            positions = subs.groups[group]
            n_subs = len(positions)
            # The first partition goes to the first subscriber at or after the cycle's position (wrapping
            # round); partition k to subscriber (first + k) mod n_subs.
            first = bisect_left(positions, next_position)
            if first == n_subs:
                first = 0
            self.deals.append((topic, group, first))
            last = positions[(first + count - 1) % n_subs]
            next_position = (last + 1) % len(self.order)
        self._position_of: dict[str, int] | None = None
        self._index_in: dict[int, dict[int, int]] = {}

    def build_one(self, member: str) -> dict[str, list[int]]:
        if self._position_of is None:
            self._position_of = {m: p for p, m in enumerate(self.order)}
        position = self._position_of.get(member)
        view: dict[str, list[int]] = {}
        if position is None:
            return view
        counts = self.spec.topics
        for topic, group, first in self.deals:
            index_in = self._index_in.get(group)
            if index_in is None:
                index_in = self._index_in[group] = {p: i for i, p in enumerate(self.groups[group])}
            i = index_in.get(position)
            if i is None:
                continue
            n_subs = len(index_in)
            offset = (i - first) % n_subs
            count = counts[topic]
            if offset < count:
                view[topic] = list(range(offset, count, n_subs))
        return view

    def build_all(self) -> AssignmentDict:
        out: AssignmentDict = {m: {} for m in self.spec.members}
        order = self.order
        counts = self.spec.topics
        for topic, group, first in self.deals:
            positions = self.groups[group]
            n_subs = len(positions)
            count = counts[topic]
            for offset in range(min(n_subs, count)):
                out[order[positions[(first + offset) % n_subs]]][topic] = list(range(offset, count, n_subs))
        return out
