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
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence, Set

#: member id -> topic id -> partitions
Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]

#: One partition while assigning: (topic name, partition number), so that sorting gives the walk order.
_Slot = tuple[str, int]


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
    name_by_id = {topics[name][0]: name for name in names}
    held = {member: _held(current.get(member, {}), name_by_id, topics) for member in members}

    got: dict[str, set[_Slot]] = {member: set() for member in members}
    if members and all(wanted[member] == wanted[members[0]] for member in members):
        slots = [slot for name in names for slot in _slots(name, topics)]
        got.update(_share(members, slots, held))
    else:
        for name in names:
            subscribers = [member for member in members if name in wanted[member]]
            for member, slots_got in _share(subscribers, _slots(name, topics), held).items():
                got[member] |= slots_got
    return {member: _by_topic(got[member], topics) for member in members}


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


def _slots(name: str, topics: Mapping[str, tuple[uuid.UUID, int]]) -> list[_Slot]:
    return [(name, partition) for partition in range(max(topics[name][1], 0))]


def _held(
    owned: Mapping[uuid.UUID, frozenset[int]],
    name_by_id: Mapping[uuid.UUID, str],
    topics: Mapping[str, tuple[uuid.UUID, int]],
) -> set[_Slot]:
    """A member's current target as slots, keeping only partitions that exist in a topic somebody subscribes
    to."""
    out: set[_Slot] = set()
    for topic_id, partitions in owned.items():
        name = name_by_id.get(topic_id)
        if name is None:
            continue
        count = topics[name][1]
        out.update((name, partition) for partition in partitions if 0 <= partition < count)
    return out


def _share(members: Sequence[str], slots: Sequence[_Slot], held: Mapping[str, Set[_Slot]]) -> dict[str, set[_Slot]]:
    """Spread ``slots`` (sorted) over ``members`` (sorted), keeping what each member holds of them where the
    balance allows."""
    sharing, quota_list = quotas(len(members), len(slots))
    quota = dict(zip(members, quota_list, strict=True))
    wanted = frozenset(slots)
    own = {member: set(held.get(member, set()) & wanted) for member in members}

    # A member over its quota gives up its lowest partitions.
    for member in members:
        excess = len(own[member]) - quota[member]
        if excess > 0:
            own[member].difference_update(sorted(own[member])[:excess])

    # A partition with too many holders loses its lowest-ordered holders.
    holders: dict[_Slot, list[str]] = {slot: [] for slot in slots}
    for member in members:
        for slot in own[member]:
            holders[slot].append(member)
    for slot in slots:
        extra = holders[slot][: max(len(holders[slot]) - sharing, 0)]
        for member in extra:
            own[member].discard(slot)
        del holders[slot][: len(extra)]

    # Fill the missing slots, one pass over the partitions, with a cursor over the members still under quota
    # that persists from one partition to the next. The cursor may wrap around only if it placed something
    # since it last started; otherwise the partition is left short, and so is every later one that still
    # needs holders, since the cursor stays at the end with nothing placed.
    unfilled = [member for member in members if len(own[member]) < quota[member]]
    cursor = 0
    placed = False
    for slot in slots:
        if not unfilled:
            break
        missing = sharing - len(holders[slot])
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
            holders[slot].append(member)
            missing -= 1
            placed = True
            if len(own[member]) >= quota[member]:
                cursor -= 1
                del unfilled[cursor]
    return own


def _by_topic(slots: Set[_Slot], topics: Mapping[str, tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    by_name: dict[str, set[int]] = {}
    for name, partition in slots:
        by_name.setdefault(name, set()).add(partition)
    return {topics[name][0]: frozenset(by_name[name]) for name in sorted(by_name)}
