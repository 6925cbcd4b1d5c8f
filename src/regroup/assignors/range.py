"""Kafka's client-side ``range`` assignor, including its rack-aware form (KIP-881).

Owns: the range strategy itself and Kafka's member ordering for the classic assignors (static members by
``group.instance.id`` first, then dynamic members by member id, strings compared as Java does), which the
round-robin strategy reuses.

Range works topic by topic: the topic's subscribers in member order each get a contiguous block of its
partitions, the first ``partitions % subscribers`` of them one more than the rest. When members and
partition replicas both carry racks and some partition is not on every rack, partitions are first matched
to members on their rack without giving up per-topic balance (and, for topics with the same subscribers
and partition count, without giving up co-partitioning); whatever is left is handed out in range order.
"""

from __future__ import annotations

from dataclasses import dataclass

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.member_order import kafka_member_order
from regroup.assignors.racks import member_rack, topic_partition_racks, use_rack_aware_assignment
from regroup.assignors.range_assignment import RangeAssignment
from regroup.assignors.spec import (
    Assignment,
    AssignmentDict,
    GroupSpec,
    PartitionRacks,
    RebalanceProtocol,
)


@dataclass(frozen=True, slots=True)
class TopicSubscribers:
    """Who subscribes to what, in Kafka's member order, with one shared list per distinct subscriber set.

    ``order`` is the member ids in Kafka's member order; ``groups`` holds ascending positions in ``order``;
    ``topic_group`` maps each subscribed topic that exists with partitions to its subscribers' group.
    Topics with the same subscribers share a group, so large groups subscribing to many topics cost one
    list, not one per topic.
    """

    order: list[str]
    topic_group: dict[str, int]
    groups: list[list[int]]


def topic_subscribers(spec: GroupSpec) -> TopicSubscribers:
    """Build ``TopicSubscribers`` for ``spec``. Subscriptions to topics missing from ``spec.topics`` (or with
    no partitions) are ignored, as Kafka ignores topics without metadata; a topic listed twice in one
    subscription counts once."""
    order = kafka_member_order(spec.members)
    # Members with equal subscriptions are handled together: usually there are only a few patterns.
    patterns: dict[tuple[str, ...], list[int]] = {}
    for position, member in enumerate(order):
        patterns.setdefault(spec.members[member].topics, []).append(position)
    pattern_positions = list(patterns.values())
    topic_patterns: dict[str, list[int]] = {}
    for index, topics in enumerate(patterns):
        for topic in dict.fromkeys(topics):
            if spec.topics.get(topic, 0) > 0:
                topic_patterns.setdefault(topic, []).append(index)
    group_of_patterns: dict[tuple[int, ...], int] = {}
    groups: list[list[int]] = []
    topic_group: dict[str, int] = {}
    for topic, indexes in topic_patterns.items():
        key = tuple(indexes)
        group = group_of_patterns.get(key)
        if group is None:
            group = group_of_patterns[key] = len(groups)
            if len(indexes) == 1:
                groups.append(pattern_positions[indexes[0]])
            else:
                groups.append(sorted(pos for i in indexes for pos in pattern_positions[i]))
        topic_group[topic] = group
    return TopicSubscribers(order=order, topic_group=topic_group, groups=groups)


class RangeAssignor(PartitionAssignor):
    """Kafka's ``range`` strategy (``org.apache.kafka.clients.consumer.RangeAssignor``)."""

    name = "range"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def __init__(self, *, prefer_rack_aware_logic: bool = False) -> None:
        #: Take the rack-aware path whenever racks overlap, even when every rack holds every partition.
        #: Kafka keeps this switch for its own tests; it is off in production.
        self.prefer_rack_aware_logic = prefer_rack_aware_logic

    def assign(self, spec: GroupSpec) -> Assignment:
        if may_need_racks(spec):
            on_racks = rack_aware_ranges(
                spec, topic_subscribers(spec), prefer_rack_aware_logic=self.prefer_rack_aware_logic
            )
            if on_racks is not None:
                return on_racks
        return RangeAssignment(spec)  # the plain ranges, the server-side range's too


def may_need_racks(spec: GroupSpec) -> bool:
    """Whether ``rack_aware_ranges`` could apply: replica racks are given and some member has a rack."""
    return spec.partition_racks is not None and any(member_rack(sub) is not None for sub in spec.members.values())


def rack_aware_ranges(
    spec: GroupSpec, subs: TopicSubscribers, *, prefer_rack_aware_logic: bool = False
) -> Assignment | None:
    """Kafka's rack-aware range assignment (KIP-881) of ``spec``, or None when no topic is assigned rack-aware
    (then the plain ranges are the assignment). Shared by the client-side ``range`` and the server-side
    ``server-range``, whose plain ranges are the same.

    A topic is assigned rack-aware when one of its subscribers has a rack, some subscriber's rack holds a
    replica of it and some of its partitions are not on every rack holding its replicas (or always, with
    ``prefer_rack_aware_logic``, once a subscriber's rack holds a replica). Each subscriber still gets
    ``P // n`` or ``P // n + 1`` partitions of a topic, as many of each size as without racks; partitions are
    first matched to subscribers on a replica rack (in member order, up to those counts; topics with the same
    subscribers and partition count partition by partition together, so they stay co-partitioned), and the
    rest are handed out in range order.
    """
    if not may_need_racks(spec):
        return None
    assert spec.partition_racks is not None
    order = subs.order
    racks = [member_rack(spec.members[m]) for m in order]
    consumers = [
        _Consumers(group, [order[pos] for pos in positions], [racks[pos] for pos in positions])
        for group, positions in enumerate(subs.groups)
    ]
    states = [
        _TopicState(
            topic,
            spec.topics[topic],
            consumers[subs.topic_group[topic]],
            spec.partition_racks,
            prefer_rack_aware_logic,
        )
        for topic in sorted(subs.topic_group)
    ]
    if not any(state.needs_rack_aware for state in states):
        return None
    out: AssignmentDict = {m: {} for m in spec.members}
    _assign_rack_aware(states, out)
    return out


class _Consumers:
    """The subscribers of one or more topics (same subscribers, same racks), by index in member order."""

    __slots__ = ("group", "ids", "on_rack", "rack_set", "rackless", "racks")

    def __init__(self, group: int, ids: list[str], racks: list[str | None]) -> None:
        self.group = group
        self.ids = ids
        self.racks = racks
        self.rack_set = frozenset(r for r in racks if r is not None)
        self.rackless = [ci for ci, r in enumerate(racks) if r is None]
        self.on_rack: dict[str, list[int]] = {}
        for ci, r in enumerate(racks):
            if r is not None:
                self.on_rack.setdefault(r, []).append(ci)


class _TopicState:
    """Progress of one topic through the rack-aware range passes (Kafka's per-topic bookkeeping).

    Consumers are referred to by their index in ``consumers`` (member order). A consumer may hold at
    most ``quota`` partitions, or ``quota + 1`` while some of the ``extra`` larger shares are still free.
    Per-consumer counts and results are sparse: a topic with few partitions and many subscribers only
    touches the consumers it gives partitions to.
    """

    __slots__ = (
        "assigned",
        "by_rack",
        "consumers",
        "count",
        "cursor",
        "extra",
        "left",
        "needs_rack_aware",
        "partition_racks",
        "quota",
        "rack_cursor",
        "results",
        "taken",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        count: int,
        consumers: _Consumers,
        partition_racks: PartitionRacks,
        prefer_rack_aware_logic: bool,
    ) -> None:
        self.topic = topic
        self.count = count
        self.consumers = consumers
        self.quota, self.extra = divmod(count, len(consumers.ids))
        self.assigned: dict[int, int] = {}
        self.results: dict[int, list[int]] = {}
        self.taken = bytearray(count)
        self.left = count
        self.cursor = 0
        self.rack_cursor: dict[str, int] = {}
        self.by_rack: dict[str, list[int]] | None = None
        # Like Kafka, replica racks only matter for a topic when one of its subscribers has a rack; the
        # topic's "partition count" for co-partitioning is then its real count, otherwise zero.
        self.partition_racks: tuple[frozenset[str], ...] = (
            topic_partition_racks(partition_racks, topic, count) if consumers.rack_set else ()
        )
        self.needs_rack_aware = use_rack_aware_assignment(
            consumers.rack_set, self.partition_racks, prefer_rack_aware_logic=prefer_rack_aware_logic
        )

    def max_assignable(self, ci: int) -> int:
        limit = self.quota + (1 if self.extra > 0 else 0)
        return max(0, limit - self.assigned.get(ci, 0))

    def record(self, ci: int, partitions: list[int]) -> None:
        self.results.setdefault(ci, []).extend(partitions)
        taken = self.taken
        for p in partitions:
            taken[p] = 1
        self.left -= len(partitions)
        assigned = self.assigned[ci] = self.assigned.get(ci, 0) + len(partitions)
        if assigned > self.quota:
            self.extra -= 1

    def take_any(self, limit: int) -> list[int]:
        """The first ``limit`` unassigned partitions in partition order."""
        got: list[int] = []
        i, n, taken = self.cursor, self.count, self.taken
        while i < n and len(got) < limit:
            if not taken[i]:
                got.append(i)
            i += 1
        self.cursor = i
        return got

    def take_on_rack(self, rack: str, limit: int) -> list[int]:
        """The first ``limit`` unassigned partitions (in partition order) with a replica on ``rack``."""
        if self.by_rack is None:
            by_rack: dict[str, list[int]] = {r: [] for r in self.consumers.on_rack}
            for p, replica_racks in enumerate(self.partition_racks):
                for r in replica_racks:
                    partitions = by_rack.get(r)
                    if partitions is not None:
                        partitions.append(p)
            self.by_rack = by_rack
        candidates = self.by_rack[rack]
        got: list[int] = []
        i, taken = self.rack_cursor.get(rack, 0), self.taken
        while i < len(candidates) and len(got) < limit:
            p = candidates[i]
            if not taken[p]:
                got.append(p)
            i += 1
        self.rack_cursor[rack] = i
        return got

    def assign_ranges(self, *, match_racks: bool) -> None:
        """One range pass: each consumer in order takes the first unassigned partitions it may take (on its
        rack when ``match_racks`` and it has one), up to its current maximum."""
        for ci, rack in enumerate(self.consumers.racks):
            if self.left == 0:
                break
            limit = self.max_assignable(ci)
            if limit == 0:
                continue
            got = self.take_on_rack(rack, limit) if match_racks and rack is not None else self.take_any(limit)
            if got:
                self.record(ci, got)


def _assign_rack_aware(states: list[_TopicState], out: Assignment) -> None:
    # Topics with the same subscribers (and so the same racks) and the same partition count are
    # co-partitioned: partition p of all of them goes to one consumer. Every topic belongs to exactly one
    # group and the groups are independent, so the order groups are handled in does not matter.
    groups: dict[tuple[int, int], list[_TopicState]] = {}
    for state in states:
        groups.setdefault((state.consumers.group, len(state.partition_racks)), []).append(state)
    for group in groups.values():
        if len(group) > 1:
            _assign_copartitioned_on_racks(group)
        elif group[0].needs_rack_aware:
            group[0].assign_ranges(match_racks=True)

    for state in states:
        state.assign_ranges(match_racks=False)
        ids = state.consumers.ids
        for ci, partitions in state.results.items():
            partitions.sort()
            out[ids[ci]][state.topic] = partitions


def _assign_copartitioned_on_racks(group: list[_TopicState]) -> None:
    """Give partition p of every topic in ``group`` to the first consumer (in member order) that still has
    room and is rack-less or on a rack holding a replica of p for every topic; skip p if there is none.

    All states in the group start fresh and receive identical assignments, so their per-consumer counts
    stay equal and the first state's counts stand for all of them. A consumer that loses its room never
    gets it back (counts only grow and the number of larger shares only shrinks), so per rack a cursor
    over that rack's consumers finds the first one with room in amortised constant time.
    """
    lead = group[0]
    # Kafka groups by the size of the partition -> racks map, which is empty when no subscriber has a
    # rack: such a group has nothing to align.
    n_partitions = len(lead.partition_racks)
    if n_partitions == 0:
        return
    consumers = lead.consumers
    nobody = len(consumers.ids)
    rackless = consumers.rackless
    rackless_at = 0
    rack_at = dict.fromkeys(consumers.on_rack, 0)

    for p in range(n_partitions):
        while rackless_at < len(rackless) and lead.max_assignable(rackless[rackless_at]) == 0:
            rackless_at += 1
        best = rackless[rackless_at] if rackless_at < len(rackless) else nobody
        common = lead.partition_racks[p]
        for state in group[1:]:
            if not common:
                break
            common = common & state.partition_racks[p]
        for rack in common:
            on_rack = consumers.on_rack.get(rack)
            if on_rack is None:
                continue
            at = rack_at[rack]
            while at < len(on_rack) and lead.max_assignable(on_rack[at]) == 0:
                at += 1
            rack_at[rack] = at
            if at < len(on_rack) and on_rack[at] < best:
                best = on_rack[at]
        if best < nobody:
            for state in group:
                state.record(best, [p])
