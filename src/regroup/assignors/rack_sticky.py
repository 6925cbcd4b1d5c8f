"""Rack-aware ``sticky`` and ``cooperative-sticky`` (KIP-881), as Kafka's client assigns them since 3.5.

Owns: the group-wide test for rack-aware sticky assignment, the view of member and replica racks it uses,
Kafka's assignment for groups whose members all subscribe to the same topics (reproduced step for step,
since it is deterministic), and the cooperative rule for partitions changing owner. Groups with differing
subscriptions go to ``rack_flow`` (Kafka's heuristic there is replaced by an exact optimisation of the
same priorities).

Kafka's sticky assignors take the rack-aware path when some member declares a rack, some member rack
holds a replica of some subscribed partition, and some subscribed partition is not replicated on every
rack that holds replicas (``use_rack_aware_assignment``, applied to all subscribed partitions at once).
On that path a partition is *mismatched* for a member with a rack when none of its replicas is on that
rack (a partition without replica racks is mismatched for every member with a rack; members without a
rack match everything), and a member's previous partitions that are mismatched for it are given up
before anything else: it can get them back only when no matched member has room for them.

Same subscriptions (Kafka's constrained assignment), with N partitions and M members:

1. every member keeps its matched previous partitions, lowest partition number first, up to ⌊N/M⌋; the
   N mod M shares of ⌈N/M⌉ go to members that kept that many, in the order Kafka visits members (the
   iteration order of a Java ``HashMap`` of member ids, see ``java_hash_map_order``);
2. the other partitions, in (topic, partition) order stably sorted by how many members sit on a rack
   holding one of their replicas (scarcest first), go to a matched member with room: first round-robin
   over the members still under ⌊N/M⌋ (member id order), else the first member (in order of reaching
   ⌊N/M⌋) that may still take a ⌈N/M⌉ share; a partition with no matched member with room waits;
3. the partitions left go round-robin to the members under ⌊N/M⌋, then to those that may take a ⌈N/M⌉
   share.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from regroup.assignors.member_order import java_string_key
from regroup.assignors.rack_flow import assign_by_flow
from regroup.assignors.racks import StickyRacks
from regroup.assignors.spec import NO_GENERATION, Assignment, AssignmentDict, GroupSpec

#: member -> (partitions it says it owned, generation), as the sticky assignors read them.
Claims = Mapping[str, tuple[Mapping[str, Sequence[int]], int]]
TopicPartition = tuple[str, int]


def assign_rack_aware(spec: GroupSpec, claims: Claims, racks: StickyRacks, *, cooperative: bool) -> Assignment:
    """Kafka's rack-aware sticky assignment of ``spec`` (cooperatively withheld when ``cooperative``)."""
    if spec.members and len({frozenset(sub.topics) for sub in spec.members.values()}) == 1:
        return assign_same_subscriptions(spec, claims, racks, cooperative=cooperative)
    assignment = assign_by_flow(spec, claims, racks)
    return withhold_claimed_elsewhere(spec, assignment, claims) if cooperative else assignment


# ---------------------------------------------------------------------------------------------------------------
# claims


def credited_claims(spec: GroupSpec, claims: Claims) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition]]:
    """Per member, the partitions it is credited with (``ownership``'s rule: the unique claimer at the
    highest generation; claims on topics it does not subscribe to or on partitions that do not exist are
    dropped), and the partitions claimed by several members at that highest generation."""
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member in sorted(spec.members):
        owned, generation = claims.get(member, ({}, NO_GENERATION))
        subscribed = spec.members[member].topics
        for topic, partitions in owned.items():
            count = spec.topics.get(topic, 0)
            if topic not in subscribed:
                continue
            for p in set(partitions):
                if not 0 <= p < count:
                    continue
                seen = best.get((topic, p))
                if seen is None or generation > seen[0]:
                    best[(topic, p)] = (generation, [member])
                elif generation == seen[0]:
                    seen[1].append(member)
    credited: dict[str, list[TopicPartition]] = {m: [] for m in spec.members}
    contested: set[TopicPartition] = set()
    for tp, (_, holders) in best.items():
        if len(holders) == 1:
            credited[holders[0]].append(tp)
        else:
            contested.add(tp)
    return credited, contested


def withhold_claimed_elsewhere(spec: GroupSpec, assignment: Assignment, claims: Claims) -> Assignment:
    """The cooperative rule: a member does not get a partition it did not list as owned while another
    member did (that member must revoke it first; the follow-up rebalance hands it out)."""
    claimers: dict[TopicPartition, set[str]] = {}
    for member, (owned, _) in claims.items():
        if member not in spec.members:
            continue
        for topic, partitions in owned.items():
            for p in partitions:
                claimers.setdefault((topic, p), set()).add(member)
    out: AssignmentDict = {}
    for member, per_topic in assignment.items():
        kept: dict[str, list[int]] = {}
        for topic, partitions in per_topic.items():
            mine = [p for p in partitions if member in claimers.get((topic, p), (member,))]
            if mine:
                kept[topic] = mine
        out[member] = kept
    return out


# ---------------------------------------------------------------------------------------------------------------
# Java's hash-map order


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` as an unsigned 32-bit integer (over UTF-16 code units)."""
    h = 0
    encoded = value.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(encoded), 2):
        h = (31 * h + (encoded[i] << 8 | encoded[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: Iterable[str]) -> list[str]:
    """The order a Java ``HashMap`` (default sizing) iterates over these string keys.

    Keys go to bucket ``(h ^ (h >>> 16)) & (capacity - 1)`` of a table of 16 buckets doubled while more
    than three quarters full; iteration is by bucket. Keys sharing a bucket iterate in insertion order,
    which depends on how the map was filled: here they are taken in Java string order.
    """
    ordered = sorted(keys, key=java_string_key)
    capacity = 16
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1

    def bucket(key: str) -> int:
        h = java_string_hash(key)
        return (h ^ (h >> 16)) & mask

    return sorted(ordered, key=bucket)


# ---------------------------------------------------------------------------------------------------------------
# same subscriptions: Kafka's constrained assignment


class _AtQuota:
    """Members holding exactly ⌊N/M⌋ partitions that may still take a ⌈N/M⌉ share, in list order.

    Kafka keeps them in a list it searches from the front for the first member on a given rack and polls
    from the front; here each rack keeps its members in list order so both take amortised constant time.
    """

    def __init__(self, racks: Mapping[str, str]) -> None:
        self.racks = racks
        self.order: deque[str] = deque()
        self.by_rack: dict[str, deque[str]] = {}
        self.present: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.present)

    def add(self, member: str) -> None:
        self.order.append(member)
        self.present.add(member)
        rack = self.racks.get(member)
        if rack is not None:
            self.by_rack.setdefault(rack, deque()).append(member)

    def clear(self) -> None:
        self.order.clear()
        self.by_rack.clear()
        self.present.clear()

    def first_on(self, replica_racks: frozenset[str], position: Mapping[str, int]) -> str | None:
        """The first member in list order whose rack holds a replica (``position``: list order)."""
        found: str | None = None
        for rack in replica_racks:
            queue = self.by_rack.get(rack)
            if not queue:
                continue
            while queue and queue[0] not in self.present:
                queue.popleft()
            if queue and (found is None or position[queue[0]] < position[found]):
                found = queue[0]
        return found

    def remove(self, member: str) -> None:
        self.present.discard(member)

    def poll(self) -> str:
        while self.order[0] not in self.present:
            self.order.popleft()
        member = self.order.popleft()
        self.present.discard(member)
        return member


class _UnderQuota:
    """Members still under ⌊N/M⌋, in member id order, searched round-robin for a rack (Kafka's list of
    unfilled members and its moving start index; ranks stand for list positions)."""

    def __init__(self, members: list[str], racks: Mapping[str, str]) -> None:
        self.members = members
        self.alive = [True] * len(members)
        self.size = len(members)
        self.rack_of = [racks.get(member) for member in members]
        self.by_rack: dict[str, list[int]] = {}
        for rank, rack in enumerate(self.rack_of):
            if rack is not None:
                self.by_rack.setdefault(rack, []).append(rank)

    def next_on(self, replica_racks: frozenset[str], start: int) -> int | None:
        """Rank of the first alive member at or after rank ``start`` (cyclically) on a replica rack."""
        best: int | None = None
        best_distance = 0
        n = len(self.members)
        for rack in replica_racks:
            ranks = self.by_rack.get(rack)
            if not ranks:
                continue
            i = bisect.bisect_left(ranks, start)
            rank = ranks[i] if i < len(ranks) else ranks[0]
            distance = (rank - start) % n
            if best is None or distance < best_distance:
                best, best_distance = rank, distance
        return best

    def remove(self, rank: int) -> None:
        self.alive[rank] = False
        self.size -= 1
        rack = self.rack_of[rank]
        if rack is not None:
            ranks = self.by_rack[rack]
            del ranks[bisect.bisect_left(ranks, rank)]

    def remaining(self) -> list[str]:
        return [m for m, alive in zip(self.members, self.alive, strict=True) if alive]


def assign_same_subscriptions(spec: GroupSpec, claims: Claims, racks: StickyRacks, *, cooperative: bool) -> Assignment:
    """Kafka's rack-aware assignment for a group whose members all subscribe to the same topics (see the
    module docstring). With ``cooperative``, partitions moving to a new owner are withheld, as Kafka's
    cooperative assignor does: those given up by their credited owner, and those several members claimed
    in the same generation."""
    members = list(spec.members)
    topics = sorted(
        {t for t in next(iter(spec.members.values())).topics if spec.topics.get(t, 0) > 0}, key=java_string_key
    )
    total = sum(spec.topics[t] for t in topics)
    min_quota, over = divmod(total, len(members))
    max_quota = min_quota + (1 if over else 0)
    expected_over, current_over = over, 0

    credited, contested = credited_claims(spec, claims)
    held: dict[str, list[TopicPartition]] = {m: [] for m in members}
    maybe_revoked: dict[TopicPartition, str] = {}
    taken: set[TopicPartition] = set()
    under_quota: list[str] = []
    at_quota: list[str] = []

    # 1. keep matched previous partitions up to the quota
    for member in java_hash_map_order(members):
        own: list[TopicPartition] = []
        for tp in credited[member]:
            if racks.mismatched(member, *tp):
                maybe_revoked[tp] = member
            else:
                own.append(tp)
        own.sort(key=lambda tp: (tp[1], java_string_key(tp[0])))
        if len(own) < min_quota:
            keep = len(own)
            under_quota.append(member)
        elif len(own) >= max_quota and current_over < expected_over:
            keep = max_quota
            current_over += 1
            if current_over == expected_over:
                at_quota.clear()
        else:
            keep = min_quota
            if current_over < expected_over:
                at_quota.append(member)
        held[member].extend(own[:keep])
        taken.update(own[:keep])
        for tp in own[keep:]:
            maybe_revoked[tp] = member

    under_quota.sort(key=java_string_key)
    at_quota.sort(key=java_string_key)
    unassigned = [(t, p) for t in topics for p in range(spec.topics[t]) if (t, p) not in taken]
    unassigned.sort(key=lambda tp: racks.matched_members(*tp))
    moved: dict[TopicPartition, str] = {}

    def give(tp: TopicPartition, member: str) -> int:
        held[member].append(tp)
        if tp in contested or maybe_revoked.get(tp, member) != member:
            moved[tp] = member
        return len(held[member])

    # 2. rack-matched members with room first
    under_search = _UnderQuota(under_quota, racks.member_racks)
    at_quota_search = _AtQuota(racks.member_racks)
    for member in at_quota:
        at_quota_search.add(member)
    sequence = {member: i for i, member in enumerate(at_quota)}
    start = 0
    left: list[TopicPartition] = []
    for tp in unassigned:
        replica_racks = racks.partition_racks[tp[0]][tp[1]]
        chosen: str | None = None
        rank = under_search.next_on(replica_racks, start) if under_search.size else None
        if rank is not None:
            chosen = under_quota[rank]
            count = len(held[chosen]) + 1
            if count >= min_quota:
                under_search.remove(rank)
                if count < max_quota and current_over < expected_over:
                    sequence[chosen] = len(sequence)
                    at_quota_search.add(chosen)
            start = (rank + 1) % len(under_quota)
        elif at_quota_search:
            chosen = at_quota_search.first_on(replica_racks, sequence)
            if chosen is not None and len(held[chosen]) + 1 == max_quota:
                at_quota_search.remove(chosen)
                current_over += 1
                if current_over == expected_over:
                    at_quota_search.clear()
        if chosen is None:
            left.append(tp)
        else:
            give(tp, chosen)

    # 3. round-robin for the rest
    pending = under_search.remaining()
    at = 0
    for tp in left:
        if at < len(pending):
            chosen = pending[at]
            at += 1
        elif pending:
            chosen = pending[0]
            at = 1
        elif at_quota_search:
            chosen = at_quota_search.poll()
        else:  # pragma: no cover - the quotas always leave room for every partition
            raise AssertionError("no member left with room")
        count = give(tp, chosen)
        if count == min_quota and at > 0 and pending[at - 1] == chosen:
            del pending[at - 1]
            at -= 1
            sequence[chosen] = len(sequence)
            at_quota_search.add(chosen)
        elif count == max_quota:
            current_over += 1

    out: AssignmentDict = {m: {} for m in spec.members}
    for member, partitions in held.items():
        per_topic = out[member]
        for topic, p in partitions:
            if cooperative and moved.get((topic, p)) == member:
                continue
            per_topic.setdefault(topic, []).append(p)
        for topic in per_topic:
            per_topic[topic].sort()
        out[member] = dict(sorted(per_topic.items()))
    return out
