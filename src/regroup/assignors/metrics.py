"""Quality metrics of an assignment: validity, balance (max−min and KIP-54's score), stickiness."""

from __future__ import annotations

from collections.abc import Mapping

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
    return {m: sum(len(ps) for ps in per_topic.values()) for m, per_topic in assignment.items()}


def plain_loads(assignment: Assignment) -> list[int]:
    """Number of partitions per member, of an assignment of plain dicts and lists (``loads``' values; the
    compiled build reads these directly where a ``Mapping`` takes generic calls)."""
    return [sum(len(ps) for ps in per_topic.values()) for per_topic in assignment.values()]


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


def _plain(assignment: Mapping[str, Mapping[str, list[int]]]) -> Assignment:
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
    size = loads(assignment)
    if not size or max(size.values()) - min(size.values()) <= 1:
        return True
    subscribers: dict[str, list[str]] = {}
    for m, sub in spec.members.items():
        for t in sub.topics:
            subscribers.setdefault(t, []).append(m)
    for member, per_topic in assignment.items():
        for topic, partitions in per_topic.items():
            if not partitions:
                continue
            for other in subscribers.get(topic, []):
                if size[other] + 2 <= size[member]:
                    return False
    return True


def summary(
    spec: GroupSpec, assignment: Assignment, previous: Mapping[str, Mapping[str, list[int]]] | None = None
) -> dict[str, object]:
    """All metrics as one JSON-friendly dict (what the CLI prints)."""
    counts = loads(assignment)
    out: dict[str, object] = {
        "valid": is_valid(spec, assignment),
        "members": len(assignment),
        "partitions_assigned": sum(counts.values()),
        "min_partitions": min(counts.values()) if counts else 0,
        "max_partitions": max(counts.values()) if counts else 0,
        "max_min_spread": max_min_spread(assignment),
        "balance_score": balance_score(assignment),
        "kip54_balanced": kip54_balanced(spec, assignment),
    }
    if previous is not None:
        out["partitions_moved"] = partitions_moved(previous, assignment)
        out["fraction_kept"] = round(fraction_kept(previous, assignment), 6)
    return out
