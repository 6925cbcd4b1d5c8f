"""The share group's ``simple`` assignor: which members each partition of a subscribed topic goes to.

Share groups need no exclusivity, so a partition may be shared. This module owns the whole decision, following
the behaviour of Kafka's ``SimpleAssignor`` (its homogeneous and heterogeneous builders):

* When every member subscribes to the same set of existing topics (homogeneous), all their partitions form one
  pool spread over all members. Otherwise (heterogeneous) each topic is spread separately over its own
  subscribers, so balance holds per topic rather than over the whole group.
* In a pool of ``M`` members and ``P`` partitions every partition wants ``S = ceil(M / P)`` holders, and the
  ``S * P`` slots are split into per-member quotas ``d[i] = ceil(x * (i + 1)) - ceil(x * i)`` with
  ``x = S * P / M``, computed exactly in integers, so quotas differ by at most one and sum to ``S * P``
  (Kafka computes them in doubles, which now and then rounds one member's quota up by one).
* Stickiness: each member's current target is kept where still allowed. Partitions of topics it no longer
  subscribes to (or of topics that no longer exist, or past a topic's partition count) are dropped; a member
  over its quota gives up its lowest partitions; a partition with more than ``S`` holders loses its
  lowest-ordered holders. The partitions short of holders are then walked once, in order, handing slots to the
  members still under quota with a round-robin cursor that carries over from one partition to the next and
  skips members already holding the partition. The cursor may go back to the first member only if it placed
  something since it last started there; otherwise, as in Kafka, the walk gives up, leaving that partition and
  any later one short of holders. This only happens when every member still under quota already holds the
  partition, and costs at most one partition per such member: loads still differ by at most one and every
  partition keeps at least one holder.

Kafka walks hash maps, so its exact choices vary with hashing. Here every walk is in sorted order: members by
member id (which also fixes each member's index ``i`` for its quota), partitions by topic name, then partition
number. The result therefore depends only on the inputs, never on mapping insertion order.

Unlike Kafka, a subscribed topic name that does not exist is skipped instead of failing the whole assignment,
and a member with no existing subscribed topic simply gets an empty assignment. The module does no I/O.

A pool's partitions are numbered in walk order (a topic's partitions follow the topics before it by name) and
the walk works on those numbers. When every partition wants one holder (``M <= P``, the usual case) the slots
short of a holder are dealt in whole rounds of the members still under quota, as the walk would hand them out
one by one, so a group over 10,000 partitions is assigned in about a millisecond rather than ten.
"""

from __future__ import annotations

import uuid
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import chain

#: member id -> topic id -> partitions
Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]

#: a pool's topics in walk order: (name, topic id, partition count, number of its first partition in the pool)
_Pool = list[tuple[str, uuid.UUID, int, int]]


def assign(
    subscriptions: Mapping[str, tuple[str, ...]],
    topics: Mapping[str, tuple[uuid.UUID, int]],
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Assignment:
    """Compute the target assignment of a share group.

    ``subscriptions``: member id -> the topic names it subscribes to. ``topics``: the existing topics by name ->
    (topic id, partition count). ``current``: member id -> its current target assignment, the source of
    stickiness (a member missing here holds nothing; entries for members not in ``subscriptions`` are ignored).

    Returns an entry for every member of ``subscriptions``; each maps topic id -> a non-empty set of partitions.
    """
    members = sorted(subscriptions)
    wanted = {member: frozenset(name for name in subscriptions[member] if name in topics) for member in members}
    names = sorted(frozenset[str]().union(*wanted.values()))
    got: dict[str, dict[uuid.UUID, frozenset[int]]] = {member: {} for member in members}
    if members and all(wanted[member] == wanted[members[0]] for member in members):
        pools = [(members, names)]
    else:
        pools = [([member for member in members if name in wanted[member]], [name]) for name in names]
    for subscribers, pool_names in pools:
        pool = _pool(pool_names, topics)
        size = pool[-1][3] + pool[-1][2] if pool else 0
        held = [_held(current.get(member, {}), pool) for member in subscribers]
        for member, slots in zip(subscribers, _share(len(subscribers), size, held), strict=True):
            got[member].update(_by_topic(slots, pool))
    return {member: {t: got[member][t] for t in sorted(got[member], key=_name_of(topics))} for member in members}


def quotas(members: int, partitions: int) -> tuple[int, list[int]]:
    """For a pool of ``members`` members and ``partitions`` partitions: the number of holders each partition
    wants and each member's quota, by the member's index in the pool (no quotas when there is nothing to
    share)."""
    if members <= 0 or partitions <= 0:
        return 0, [0] * max(members, 0)
    sharing = _ceil_div(members, partitions)
    total = sharing * partitions
    return sharing, [_ceil_div(total * (i + 1), members) - _ceil_div(total * i, members) for i in range(members)]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _name_of(topics: Mapping[str, tuple[uuid.UUID, int]]) -> Callable[[uuid.UUID], str]:
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    return names.__getitem__


def _pool(names: Sequence[str], topics: Mapping[str, tuple[uuid.UUID, int]]) -> _Pool:
    pool: _Pool = []
    first = 0
    for name in names:
        topic_id, count = topics[name]
        pool.append((name, topic_id, max(count, 0), first))
        first += max(count, 0)
    return pool


def _held(owned: Mapping[uuid.UUID, frozenset[int]], pool: _Pool) -> set[int]:
    """A member's current target as the pool's slot numbers, keeping only partitions that exist in the pool's
    topics."""
    out: set[int] = set()
    for _, topic_id, count, first in pool:
        partitions = owned.get(topic_id)
        if not partitions:
            continue
        if min(partitions) < 0 or max(partitions) >= count:
            partitions = frozenset(p for p in partitions if 0 <= p < count)
        out.update(partitions if first == 0 else map(first.__add__, partitions))
    return out


def _share(members: int, size: int, held: Sequence[set[int]]) -> list[set[int]]:
    """Spread slots ``0 .. size - 1`` over ``members`` members (by index), keeping what each member holds of them
    (``held``, sets of slots, taken over) where the balance allows."""
    sharing, quota = quotas(members, size)
    own = list(held)

    # A member over its quota gives up its lowest partitions.
    for i, mine in enumerate(own):
        excess = len(mine) - quota[i]
        if excess > 0:
            mine.difference_update(sorted(mine)[:excess])

    # A partition with too many holders loses its lowest-ordered holders.
    holders = Counter(chain.from_iterable(own))
    for slot in sorted(slot for slot, count in holders.items() if count > sharing):
        extra = holders[slot] - sharing
        for mine in own:
            if extra == 0:
                break
            if slot in mine:
                mine.discard(slot)
                extra -= 1
        holders[slot] = sharing

    unfilled = [i for i in range(members) if len(own[i]) < quota[i]]
    if sharing == 1:
        _deal(own, quota, unfilled, [slot for slot in range(size) if slot not in holders])
    else:
        _walk(own, quota, unfilled, sharing, size, holders)
    return own


def _deal(own: list[set[int]], quota: list[int], unfilled: list[int], empty: list[int]) -> None:
    """(One holder a slot) Hand the slots without a holder (in order) to the members still under quota as the walk
    does, round-robin with members leaving the round once they reach their quota: in whole rounds, each as long
    as the fewest slots any member still lacks, the member at position ``k`` of the round taking every slot at
    ``k`` plus a multiple of the round's size."""
    base = 0
    while unfilled and base < len(empty):
        width = len(unfilled)
        rounds = min(quota[i] - len(own[i]) for i in unfilled)
        end = min(base + rounds * width, len(empty))
        for k, i in enumerate(unfilled):
            own[i].update(empty[base + k : end : width])
        base = end
        unfilled = [i for i in unfilled if len(own[i]) < quota[i]]


def _walk(
    own: list[set[int]], quota: list[int], unfilled: list[int], sharing: int, size: int, holders: Counter[int]
) -> None:
    """Fill the missing slots, one pass over the partitions, with a cursor over the members still under quota
    that persists from one partition to the next. The cursor may wrap around only if it placed something since
    it last started; otherwise the partition is left short, and so is every later one that still needs holders,
    since the cursor stays at the end with nothing placed."""
    cursor = 0
    placed = False
    for slot in range(size):
        if not unfilled:
            break
        missing = sharing - holders[slot]
        while missing > 0:
            if cursor >= len(unfilled):
                if not placed or not unfilled:
                    break
                cursor = 0
                placed = False
            member = unfilled[cursor]
            cursor += 1
            if slot in own[member]:
                continue
            own[member].add(slot)
            missing -= 1
            placed = True
            if len(own[member]) >= quota[member]:
                cursor -= 1
                del unfilled[cursor]


def _by_topic(slots: set[int], pool: _Pool) -> dict[uuid.UUID, frozenset[int]]:
    if not slots:
        return {}
    if len(pool) == 1:
        return {pool[0][1]: frozenset(slots)}
    ordered = sorted(slots)
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _, topic_id, count, first in pool:
        chosen = ordered[bisect_left(ordered, first) : bisect_left(ordered, first + count)]
        if chosen:
            out[topic_id] = frozenset(chosen) if first == 0 else frozenset(slot - first for slot in chosen)
    return out
