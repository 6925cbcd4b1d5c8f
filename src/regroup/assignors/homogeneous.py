"""The optimal engine's homogeneous path (``balance``) for small groups, in plain loops over lists.

A group leader assigns a few hundred or thousand partitions to tens of members, rebalance after rebalance.
At that size the NumPy path spends nearly all its time in the fixed cost of its few dozen array operations
(and in building and converting the arrays), so this module computes the very same assignment with plain
loops: same balance, same kept partitions, same tie-breaking, same dict order in the result. ``balance``
keeps the NumPy path for large groups (where it is the faster one) and for heterogeneous subscriptions.

The steps, as in ``balance._assign_homogeneous`` (global index = offset of the topic + partition, topics in
sorted order, members in sorted id order):

1. each member's claims: existing partitions of the subscribed topics, duplicates dropped;
2. resolution (``ownership``): the unique claimer at the highest generation is credited, a tie credits nobody;
3. the ⌈N/M⌉ slots go, in member order, to members credited with at least that many; every member keeps
   its credited partitions up to its quota, the lowest partition numbers first (then the lowest topic);
4. the remaining partitions, in global order, go out least-loaded-first: slot by slot, level by level,
   members in order within a level (a ⌊N/M⌋ member may take a ⌈N/M⌉ slot while some are left).

``withhold`` is the cooperative step (``cooperative_sticky.withhold_transfers``): a partition is not given
to a member that did not claim it while another member did.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Final

from regroup.assignors.spec import NO_GENERATION, Assignment, AssignmentDict, GroupSpec

#: Larger groups keep the NumPy path. Up to this bound the plain loops were measured faster, interpreted:
#: 0.3-0.6 of the NumPy path's time for 500 to 20,000 partitions (sticky's engine and cooperative-sticky,
#: one member gone from a group that owned everything; docs/benchmarks.md, "Lab"). Beyond it the NumPy
#: path's lower cost per partition is expected to win; the crossover itself is not measured.
SMALL_GROUP_PARTITIONS: Final = 20_000

_UNCLAIMED: Final = -1
_CONTESTED: Final = -2


def shared_topics(spec: GroupSpec, members: list[str]) -> list[str] | None:
    """The existing topics (sorted) every member subscribes to, if all members list the same topics and at
    least one exists; None otherwise (then the general engine decides)."""
    all_subs = spec.members
    first = all_subs[members[0]].topics
    for member in members:
        if all_subs[member].topics != first:
            return None
    sizes = spec.topics
    topics = sorted({t for t in first if sizes.get(t, 0) > 0})
    return topics if topics else None


def assign_small(
    spec: GroupSpec, claims: Mapping[str, tuple[Mapping[str, tuple[int, ...]], int]], *, withhold: bool
) -> Assignment | None:
    """The engine's assignment for ``claims`` (member -> (partitions it says it owned, generation)),
    cooperatively withheld if ``withhold``, for a small homogeneous group; None when the group is not one
    (empty, heterogeneous or too large)."""
    members = sorted(spec.members)
    if not members:
        return None
    sizes = spec.topics
    if sum(sizes.get(t, 0) for t in set(spec.members[members[0]].topics)) > SMALL_GROUP_PARTITIONS:
        return None  # (too large, whatever the others subscribe to: this many are the first member's alone)
    topics = shared_topics(spec, members)
    if topics is None:
        return None
    counts = [int(spec.topics[t]) for t in topics]
    n = sum(counts)
    if n > SMALL_GROUP_PARTITIONS:
        return None
    offsets = _offsets(counts)
    index = {topic: t for t, topic in enumerate(topics)}
    raw: list[list[int]] = []
    generations: list[int] = []
    seen = [-1] * n
    for member in members:
        claim = claims.get(member)
        raw.append(_claims_of(claim[0] if claim is not None else None, index, counts, offsets, seen, len(raw)))
        generations.append(claim[1] if claim is not None else NO_GENERATION)
    winner = _resolve(raw, generations, n)
    owner, kept = _keep_quota(raw, winner, topics, offsets, n)
    _hand_out(owner, kept)
    if withhold:
        _withhold(owner, raw)
    return _to_assignment(owner, members, topics, counts, offsets)


def _offsets(counts: list[int]) -> list[int]:
    out = [0]
    total = 0
    for count in counts:
        total += count
        out.append(total)
    return out


def _claims_of(
    owned: Mapping[str, tuple[int, ...]] | None,
    index: dict[str, int],
    counts: list[int],
    offsets: list[int],
    seen: list[int],
    member: int,
) -> list[int]:
    """Global indices of the member's owned partitions that exist, duplicates dropped (in claim order);
    ``seen[g] == member`` marks the partitions already taken from this member's claim. ``index``: topic ->
    its number (the member's owned topics are walked, not every topic of the group)."""
    out: list[int] = []
    if not owned:
        return out
    for topic, partitions in owned.items():
        t = index.get(topic)
        if t is None or not partitions:
            continue
        count = counts[t]
        base = offsets[t]
        for p in partitions:
            if 0 <= p < count and seen[base + p] != member:
                seen[base + p] = member
                out.append(base + p)
    return out


def _resolve(raw: list[list[int]], generations: list[int], n: int) -> list[int]:
    """Per partition, the member credited with it (``ownership.resolve_claims``), else unclaimed/contested."""
    winner = [_UNCLAIMED] * n
    best = [0] * n
    for i in range(len(raw)):
        generation = generations[i]
        for g in raw[i]:
            if winner[g] == _UNCLAIMED or generation > best[g]:
                winner[g] = i
                best[g] = generation
            elif generation == best[g]:
                winner[g] = _CONTESTED
    return winner


def _keep_quota(
    raw: list[list[int]], winner: list[int], topics: list[str], offsets: list[int], n: int
) -> tuple[list[int], list[int]]:
    """Owner per partition (-1: none) after every member kept its credited partitions up to its quota,
    and how many each member kept. The ⌈N/M⌉ quotas go to the first members (in order) credited with that
    many, so each member's quota is known when its turn comes."""
    m = len(raw)
    quota, extra = divmod(n, m)
    slots_used = 0
    owner = [-1] * n
    kept = [0] * m
    t_count = len(topics)
    for i in range(m):
        mine = [g for g in raw[i] if winner[g] == i]
        cap = quota
        if len(mine) > quota and slots_used < extra:
            cap = quota + 1
            slots_used += 1
        if len(mine) > cap:
            mine = _lowest_partitions(mine, cap, offsets, t_count)
        for g in mine:
            owner[g] = i
        kept[i] = len(mine)
    return owner, kept


def _lowest_partitions(parts: list[int], keep: int, offsets: list[int], t_count: int) -> list[int]:
    """The ``keep`` partitions with the lowest partition numbers, then the lowest topics (Kafka's order
    when a member has more than its quota), sorted on one int key per partition."""
    keys: list[int] = []
    for g in parts:
        t = _topic_of(g, offsets)
        keys.append((g - offsets[t]) * t_count + t)
    keys.sort()
    out: list[int] = []
    for key in keys[:keep]:
        local, t = divmod(key, t_count)
        out.append(offsets[t] + local)
    return out


def _topic_of(g: int, offsets: list[int]) -> int:
    return bisect_right(offsets, g) - 1


def _hand_out(owner: list[int], counts: list[int]) -> None:
    """Give every partition without an owner, in global order, to the least-loaded member (member order
    within a load), within the quotas: the slots of ``balance._assign_homogeneous``. ``counts``: how many
    partitions each member already has."""
    n = len(owner)
    m = len(counts)
    quota, extra = divmod(n, m)
    unassigned = [g for g in range(n) if owner[g] < 0]
    if not unassigned:
        return
    # caps: quota + 1 for the members already holding that many, and for every other member while more
    # ⌈N/M⌉ slots remain than such members
    full = 0
    for c in counts:
        if c > quota:
            full += 1
    floating = 1 if extra > full else 0
    limits = [quota + 1 if c > quota else quota + floating for c in counts]
    k = 0
    level = min(counts)
    while k < len(unassigned) and level <= quota:  # (the slots always suffice: quota is the top level)
        for i in range(m):
            if counts[i] <= level < limits[i]:
                owner[unassigned[k]] = i
                k += 1
                if k == len(unassigned):
                    break
        level += 1


def _withhold(owner: list[int], raw: list[list[int]]) -> None:
    """Take from each member the partitions it did not claim while another member did."""
    first = [_UNCLAIMED] * len(owner)
    for i in range(len(raw)):
        for g in raw[i]:
            if first[g] == _UNCLAIMED:
                first[g] = i
            elif first[g] != i:
                first[g] = _CONTESTED
    for g in range(len(owner)):
        claimer = first[g]
        i = owner[g]
        if i < 0 or claimer in (_UNCLAIMED, i):
            continue
        if claimer == _CONTESTED and g in raw[i]:
            continue
        owner[g] = -1


def _to_assignment(
    owner: list[int], members: list[str], topics: list[str], counts: list[int], offsets: list[int]
) -> Assignment:
    """Member -> topic -> ascending partitions, members and topics in sorted order (``Layout.to_assignment``)."""
    out: AssignmentDict = {member: {} for member in members}
    per_member = [out[member] for member in members]
    # each member's list for the topic being filled, valid while its topic stamp is that topic
    current: list[list[int]] = [[]] * len(members)
    stamp = [-1] * len(members)
    for t in range(len(topics)):
        base = offsets[t]
        for p in range(counts[t]):
            i = owner[base + p]
            if i < 0:
                continue
            if stamp[i] == t:
                current[i].append(p)
            else:
                listed = [p]
                current[i] = listed
                stamp[i] = t
                per_member[i][topics[t]] = listed
    return out
