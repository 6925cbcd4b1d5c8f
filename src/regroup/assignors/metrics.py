"""Quality metrics of an assignment: validity, balance (max−min and KIP-54's score), stickiness."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from regroup.assignors.layout import IntArray, number_topics
from regroup.assignors.spec import Assignment, GroupSpec

Owners = Mapping[tuple[str, int], str]


def ownership_errors(
    spec: GroupSpec, assignment: Mapping[str, Mapping[str, list[int]]]
) -> tuple[list[str], dict[tuple[str, int], list[str]]]:
    """Checks every strategy shares, and who owns what.

    Errors: a member of the spec missing from the assignment, an unknown member, a partition of a topic the
    member does not subscribe to or of a partition that does not exist, a partition listed twice by one
    member. Also returns (topic, partition) -> owners in assignment order (existing partitions only).
    """
    errors: list[str] = []
    owners_of: dict[tuple[str, int], list[str]] = {}
    for member in spec.members:
        if member not in assignment:
            errors.append(f"member {member} missing from the assignment")
    for member, per_topic in assignment.items():
        sub = spec.members.get(member)
        if sub is None:
            errors.append(f"unknown member {member} in the assignment")
            continue
        for topic, partitions in per_topic.items():
            if topic not in sub.topics:
                errors.append(f"{member} got {topic} without subscribing to it")
            if len(set(partitions)) != len(partitions):
                errors.append(f"{member} lists a partition of {topic} twice")
            count = spec.topics.get(topic, 0)
            for p in partitions:
                if not 0 <= p < count:
                    errors.append(f"{member} got non-existent partition {topic}-{p}")
                    continue
                owners_of.setdefault((topic, p), []).append(member)
    return errors, owners_of


def subscribed_partitions(spec: GroupSpec) -> list[tuple[str, int]]:
    """Every existing partition of a topic at least one member subscribes to, in (topic, partition) order."""
    subscribed = {t for s in spec.members.values() for t in s.topics}
    return [(t, p) for t in sorted(subscribed) for p in range(spec.topics.get(t, 0))]


def validity_errors(spec: GroupSpec, assignment: Mapping[str, Mapping[str, list[int]]]) -> list[str]:
    """Reasons the assignment is invalid for a single-owner strategy (empty list when valid).

    Valid means: every member of the spec is present, nobody gets a partition of a topic it did not
    subscribe to or that does not exist, no partition is given twice, and every partition of a topic with
    at least one subscriber is given to someone.
    """
    errors, owners_of = ownership_errors(spec, assignment)
    for (topic, p), holders in owners_of.items():
        if len(holders) > 1:
            errors.append(f"{topic}-{p} given to both {holders[0]} and {holders[1]}")
    for topic, p in subscribed_partitions(spec):
        if (topic, p) not in owners_of:
            errors.append(f"{topic}-{p} is subscribed but unassigned")
    return errors


def is_valid(spec: GroupSpec, assignment: Mapping[str, Mapping[str, list[int]]]) -> bool:
    """True when ``validity_errors`` finds nothing."""
    return not validity_errors(spec, assignment)


def loads(assignment: Mapping[str, Mapping[str, list[int]]]) -> dict[str, int]:
    """Number of partitions per member."""
    return {m: sum(map(len, per_topic.values())) for m, per_topic in assignment.items()}


def plain_loads(assignment: Assignment) -> list[int]:
    """Number of partitions per member, of an assignment of plain dicts and lists (``loads``' values; the
    compiled build reads these directly where a ``Mapping`` takes generic calls)."""
    return [sum(map(len, per_topic.values())) for per_topic in assignment.values()]


def spread_of(counts: list[int]) -> int:
    """max − min of the members' partition counts (0 for none)."""
    return max(counts) - min(counts) if counts else 0


def score_of(counts: list[int]) -> int:
    """KIP-54's balance score of the members' partition counts (see ``balance_score``)."""
    ordered = sorted(counts)
    n = len(ordered)
    return sum(x * (2 * i - n + 1) for i, x in enumerate(ordered))


def max_min_spread(assignment: Mapping[str, Mapping[str, list[int]]]) -> int:
    """max − min of partitions per member (0 for an empty group)."""
    return spread_of(list(loads(assignment).values()))


def balance_score(assignment: Mapping[str, Mapping[str, list[int]]]) -> int:
    """KIP-54's overall balance score: the sum over all member pairs of |size difference|.

    Computed in O(n log n): with sizes sorted ascending, element i contributes ``x_i * (2i - n + 1)``.
    """
    return score_of(list(loads(assignment).values()))


def owners(assignment: Mapping[str, Mapping[str, list[int]]]) -> dict[tuple[str, int], str]:
    """(topic, partition) -> member."""
    return {(t, p): m for m, per_topic in assignment.items() for t, ps in per_topic.items() for p in ps}


def slots(assignment: Mapping[str, Mapping[str, list[int]]]) -> set[tuple[str, str, int]]:
    """Every (member, topic, partition) ownership in the assignment."""
    return {(m, t, p) for m, per_topic in assignment.items() for t, ps in per_topic.items() for p in ps}


def partitions_moved(
    previous: Mapping[str, Mapping[str, list[int]]], current: Mapping[str, Mapping[str, list[int]]]
) -> int:
    """Previous ownerships that are gone: partitions that had an owner before and now have a different owner
    (or none). Counted per (member, partition), so it also works for multi-owner strategies."""
    return len(slots(previous) - slots(current))


def fraction_kept(
    previous: Mapping[str, Mapping[str, list[int]]], current: Mapping[str, Mapping[str, list[int]]]
) -> float:
    """Share of previous ownerships that survived (1.0 when nothing was owned)."""
    return plain_fraction_kept(_plain(previous), _plain(current))


def _plain(assignment: Mapping[str, Mapping[str, Sequence[int]]]) -> Assignment:
    return {m: {t: list(ps) for t, ps in per_topic.items()} for m, per_topic in assignment.items()}


def plain_fraction_kept(previous: Assignment, current: Assignment) -> float:
    """``fraction_kept`` of assignments of plain dicts and lists. Counted per (member, topic) with sets of
    partitions, which gives ``slots``' counts without building a tuple per ownership."""
    before = kept = 0
    for member, per_topic in previous.items():
        now = current.get(member)
        for topic, partitions in per_topic.items():
            owned = set(partitions)
            before += len(owned)
            still = now.get(topic) if now is not None else None
            if still is not None and owned:
                kept += len(owned.intersection(still))
    if not before:
        return 1.0
    return kept / before


def sorted_fraction_kept(previous: Assignment, current: Assignment) -> float:
    """``plain_fraction_kept`` of assignments whose partition lists are ascending (as ``sorted`` gives them):
    each (member, topic) pair of lists is merged rather than made into sets (most hold a few partitions)."""
    before = kept = 0
    for member, per_topic in previous.items():
        now = current.get(member)
        for topic, partitions in per_topic.items():
            still = now.get(topic) if now is not None else None
            distinct, common = _merge_count(partitions, still if still is not None else [])
            before += distinct
            kept += common
    if not before:
        return 1.0
    return kept / before


def _merge_count(owned: list[int], still: list[int]) -> tuple[int, int]:
    """(distinct partitions of ``owned``, how many of them ``still`` holds), both lists ascending."""
    distinct = common = j = 0
    n = len(still)
    for i, partition in enumerate(owned):
        if i and partition == owned[i - 1]:
            continue
        distinct += 1
        while j < n and still[j] < partition:
            j += 1
        if j < n and still[j] == partition:
            common += 1
    return distinct, common


def kip54_balanced(spec: GroupSpec, assignment: Assignment) -> bool:
    """KIP-54's definition of balanced: sizes differ by at most one, or no partition can move from a
    member A to another subscriber B of its topic where B has two or more fewer partitions than A."""
    return _kip54_balanced(spec, assignment, loads(assignment))


def _kip54_balanced(spec: GroupSpec, assignment: Assignment, size: Mapping[str, int]) -> bool:
    """``kip54_balanced`` with the members' partition counts (``loads``) given."""
    if not size or max(size.values()) - min(size.values()) <= 1:
        return True
    subscribers: dict[str, list[str]] = {}
    for m, sub in spec.members.items():
        for t in sub.topics:
            subscribers.setdefault(t, []).append(m)
    smallest: dict[str, int | None] = {}  # per topic, its smallest subscriber: the only B worth checking
    for member, per_topic in assignment.items():
        for topic, partitions in per_topic.items():
            if not partitions or topic not in subscribers:
                continue
            if topic not in smallest:
                others = subscribers[topic]
                smallest[topic] = min(size[o] for o in others) if all(o in size for o in others) else None
            least = smallest[topic]
            if least is None:  # a subscriber missing from the assignment: pair by pair, as defined
                for other in subscribers[topic]:
                    if size[other] + 2 <= size[member]:
                        return False
            elif least + 2 <= size[member]:
                return False
    return True


def summary(
    spec: GroupSpec, assignment: Assignment, previous: Mapping[str, Mapping[str, Sequence[int]]] | None = None
) -> dict[str, object]:
    """All metrics as one JSON-friendly dict (what the CLI prints).

    Computed on arrays (``_ArrayView``) when the assignment gives every partition at most one owner and
    nothing outside the members' subscriptions; otherwise by the definitions above. Same results either way.
    """
    counts = loads(assignment)
    view = _ArrayView.of(spec, assignment)
    out: dict[str, object] = {
        "valid": view.valid if view is not None else is_valid(spec, assignment),
        "members": len(assignment),
        "partitions_assigned": sum(counts.values()),
        "min_partitions": min(counts.values()) if counts else 0,
        "max_partitions": max(counts.values()) if counts else 0,
        "max_min_spread": spread_of(list(counts.values())),
        "balance_score": score_of(list(counts.values())),
        "kip54_balanced": _kip54_balanced(spec, assignment, counts),
    }
    if previous is not None:
        kept = view.kept(previous) if view is not None else None
        if kept is None:
            plain = _plain(previous)
            out["partitions_moved"] = partitions_moved(plain, assignment)
            out["fraction_kept"] = round(fraction_kept(plain, assignment), 6)
        else:
            before, still = kept
            out["partitions_moved"] = before - still
            out["fraction_kept"] = round(still / before if before else 1.0, 6)
    return out


@dataclass(frozen=True, slots=True)
class _ArrayView:
    """An assignment as one owner per partition: ``owner[offsets[topic] + p]`` is the index (in
    ``member_index``) of the member holding partition p of topic, -1 when nobody does. Topics are the
    existing ones some member subscribes to."""

    member_index: Mapping[str, int]
    topic_index: Mapping[str, int]
    counts: IntArray
    offsets: IntArray
    owner: IntArray
    valid: bool

    @staticmethod
    def of(spec: GroupSpec, assignment: Assignment) -> _ArrayView | None:
        """The view, or None when the assignment is not one a single-owner strategy gives (an unknown or
        missing member, a topic the member does not subscribe to, a partition that does not exist or is held
        twice): then only the definitions tell what is wrong."""
        if assignment.keys() != spec.members.keys():
            return None
        distinct = {s.topics for s in spec.members.values()}
        _, topic_index, counts, offsets = number_topics(spec.topics, (t for ts in distinct for t in ts))
        member_index = {m: i for i, m in enumerate(assignment)}
        topic_sets: dict[tuple[str, ...], frozenset[str]] = {}
        for member, per_topic in assignment.items():
            topics = spec.members[member].topics
            allowed = topic_sets.get(topics)
            if allowed is None:
                allowed = topic_sets[topics] = frozenset(topics)
            if not allowed.issuperset(per_topic):
                return None
        try:
            members, topic_ids, partitions, _ = flatten_assignment(assignment, member_index, topic_index)
        except (OverflowError, TypeError, ValueError):
            return None
        if len(partitions):
            if int(topic_ids.min()) < 0 or int(partitions.min()) < 0:
                return None
            if bool((partitions >= counts[topic_ids]).any()):
                return None
        total = int(offsets[-1])
        owner = np.full(total, -1, dtype=np.int64)
        glob = offsets[topic_ids] + partitions
        owner[glob] = members
        held = int(np.count_nonzero(owner >= 0))
        if held != len(glob):  # a partition held twice
            return None
        return _ArrayView(
            member_index=member_index,
            topic_index=topic_index,
            counts=counts,
            offsets=offsets,
            owner=owner,
            valid=held == total,
        )

    def kept(self, previous: Mapping[str, Mapping[str, Sequence[int]]]) -> tuple[int, int] | None:
        """(distinct previous ownerships, how many of them the assignment keeps), or None when a previous
        partition number is too large or not an integer."""
        member_index = {m: self.member_index.get(m, -1) for m in previous}
        try:
            members, topic_ids, partitions, lengths = flatten_assignment(previous, member_index, self.topic_index)
        except (OverflowError, TypeError, ValueError):
            return None
        distinct = _distinct(partitions, lengths)
        if distinct is None:
            return None
        members, topic_ids, partitions = members[distinct], topic_ids[distinct], partitions[distinct]
        counts = np.append(self.counts, 0)  # topic -1 (unknown or unsubscribed): nothing exists there
        ok = (members >= 0) & (partitions >= 0) & (partitions < counts[topic_ids])
        glob = self.offsets[topic_ids[ok]] + partitions[ok]
        still = int(np.count_nonzero(self.owner[glob] == members[ok]))
        return len(distinct), still


def flatten_assignment(
    assignment: Mapping[str, Mapping[str, Sequence[int]]],
    member_index: Mapping[str, int],
    topic_index: Mapping[str, int],
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """One entry per (member, topic, partition): member indices, topic indices (-1 for a topic not in
    ``topic_index``) and partition numbers, in the assignment's order; and the length of each (member, topic)
    list. Raises ``TypeError`` when a partition number is not an ``int`` (``OverflowError`` when too large)."""
    per_member = list(assignment.values())
    entries = np.fromiter(map(len, per_member), dtype=np.int64, count=len(per_member))
    keys = list(itertools.chain.from_iterable(pt.keys() for pt in per_member))
    lists = list(itertools.chain.from_iterable(pt.values() for pt in per_member))
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    topic_ids = np.fromiter(map(topic_index.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys))
    flat = list(itertools.chain.from_iterable(lists))
    if not set(map(type, flat)) <= {int}:
        raise TypeError("partition numbers must be int")
    partitions = np.fromiter(flat, dtype=np.int64, count=len(flat))
    member_ids = np.fromiter(map(member_index.__getitem__, assignment), dtype=np.int64, count=len(per_member))
    members = np.repeat(np.repeat(member_ids, entries), lengths)
    return members, np.repeat(topic_ids, lengths), partitions, lengths


def _distinct(partitions: IntArray, lengths: IntArray) -> IntArray | None:
    """Indices of the entries that are distinct (member, topic, partition) ownerships, the first of each
    (partitions and list lengths as ``flatten_assignment`` gives them); None for numbers too large to sort this way."""
    if not len(partitions):
        return np.empty(0, dtype=np.int64)
    rising = np.diff(partitions) > 0
    starts = np.cumsum(lengths)[:-1]
    starts = starts[(starts > 0) & (starts < len(partitions))]
    rising[starts - 1] = True  # a new (member, topic) list starts there
    if bool(rising.all()):  # every list ascending without repeats: each entry is its own ownership
        return np.arange(len(partitions), dtype=np.int64)
    if int(partitions.min()) < 0 or int(partitions.max()) >= 1 << 40 or len(lengths) >= 1 << 22:
        return None
    list_of = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    first: IntArray = np.unique((list_of << 40) | partitions, return_index=True)[1].astype(np.int64)
    return first
