"""The plain ranges of the server-side range assignor (``server_range``), read lazily: each member's
``topic -> partitions`` built when it is read, every member's in one pass when all are read.

A module of its own, and interpreted in the compiled build (``tools/compiled.py``): a ``Mapping`` subclass
cannot be a compiled class.
"""

from __future__ import annotations

from itertools import chain

from regroup.assignors.lazy_assignment import LazyAssignment
from regroup.assignors.member_order import kafka_member_order
from regroup.assignors.spec import AssignmentDict, GroupSpec

#: (member id, its partitions) for every subscriber that gets a non-empty range, in member order.
Ranges = list[tuple[str, list[int]]]


def topic_ranges(partitions: int, subscribers: list[str]) -> Ranges:
    """The contiguous ranges of a topic with ``partitions`` partitions over ``subscribers`` (in member order).

    Only subscribers with at least one partition are listed. ``assign`` hands out copies of these lists, so
    topics sharing one result never share a list object.
    """
    if partitions <= 0 or not subscribers:
        return []
    quota, extra = divmod(partitions, len(subscribers))
    served = len(subscribers) if quota > 0 else extra
    out: Ranges = []
    start = 0
    for i in range(served):
        end = start + quota + (1 if i < extra else 0)
        out.append((subscribers[i], list(range(start, end))))
        start = end
    return out


class RangeAssignment(LazyAssignment):
    """The plain ranges of a spec, member -> topic -> partitions, each member's built when read (reading all
    of them builds them in one pass). What is computed up front costs the members once and the distinct
    (subscribers, partition count) pairs, not the partitions."""

    def __init__(self, spec: GroupSpec) -> None:
        super().__init__(spec.members)
        self.spec = spec
        members = spec.members
        order = kafka_member_order(members)

        # Members with the same subscription share their per-topic positions, so group them first: a
        # homogeneous group is then one group however many members it has. Positions are indices into
        # ``order``, so every group's list is ascending. (Subscriptions are looked up by object first: members
        # usually share one tuple, and hashing a tuple hashes every name in it.)
        by_object: dict[int, tuple[str, ...]] = {}
        by_raw: dict[tuple[str, ...], list[int]] = {}
        for position, member in enumerate(order):
            topics = members[member].topics
            raw = by_object.get(id(topics))
            if raw is None:
                raw = by_object[id(topics)] = tuple(topics)
            by_raw.setdefault(raw, []).append(position)
        existing_of = {raw: tuple(sorted({t for t in raw if t in spec.topics})) for raw in by_raw}
        by_subscription: dict[tuple[str, ...], list[list[int]]] = {}
        for raw, positions in by_raw.items():
            if existing_of[raw]:
                by_subscription.setdefault(existing_of[raw], []).append(positions)

        # A topic's subscribers are fixed by which subscription groups include it (its signature); topics with
        # one signature share their subscriber list, and with equal partition counts also their ranges.
        signature_of: dict[str, list[int]] = {}
        group_positions: list[list[list[int]]] = []
        for group_index, (subscription, position_lists) in enumerate(sorted(by_subscription.items())):
            group_positions.append(position_lists)
            for topic in subscription:
                signature_of.setdefault(topic, []).append(group_index)

        subscribers_of: dict[tuple[int, ...], list[str]] = {}
        #: topic -> its ranges, in topic order
        self.topic_ranges: dict[str, Ranges] = {}
        #: topic -> its signature (``index_of``'s key)
        self.topic_signature: dict[str, tuple[int, ...]] = {}
        ranges_of: dict[tuple[tuple[int, ...], int], Ranges] = {}
        for topic in sorted(signature_of):
            signature = tuple(signature_of[topic])
            count = spec.topics[topic]
            ranges = ranges_of.get((signature, count))
            if ranges is None:
                subscribers = subscribers_of.get(signature)
                if subscribers is None:
                    lists = [positions for g in signature for positions in group_positions[g]]
                    merged = lists[0] if len(lists) == 1 else sorted(chain.from_iterable(lists))
                    subscribers = [order[p] for p in merged]
                    subscribers_of[signature] = subscribers
                ranges = topic_ranges(count, subscribers)
                ranges_of[(signature, count)] = ranges
            self.topic_ranges[topic] = ranges
            self.topic_signature[topic] = signature
        self._subscribers_of = subscribers_of
        self._raw_of = by_object
        self._existing_of = existing_of
        self._index_of: dict[tuple[int, ...], dict[str, int]] = {}

    def build_one(self, member: str) -> dict[str, list[int]]:
        topics = self.spec.members[member].topics
        raw = self._raw_of.get(id(topics))
        existing = self._existing_of[raw] if raw is not None else ()
        view: dict[str, list[int]] = {}
        for topic in existing:
            signature = self.topic_signature[topic]
            index_of = self._index_of.get(signature)
            if index_of is None:
                subscribers = self._subscribers_of[signature]
                index_of = self._index_of[signature] = dict(zip(subscribers, range(len(subscribers)), strict=True))
            ranges = self.topic_ranges[topic]
            i = index_of[member]
            if i < len(ranges):
                view[topic] = ranges[i][1].copy()
        return view

    def build_all(self) -> AssignmentDict:
        out: AssignmentDict = {m: {} for m in self.spec.members}
        for topic, ranges in self.topic_ranges.items():
            # Copying a shared list is much cheaper than building the partition numbers again.
            for member, partitions in ranges:
                out[member][topic] = partitions.copy()
        return out
