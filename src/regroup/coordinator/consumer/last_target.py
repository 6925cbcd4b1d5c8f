"""What a consumer group's last full target computation read and produced (``target.compute_in_full``: the
path for heterogeneous subscriptions, racks and every assignor but the kept target's), kept so that the next
one converts only the members whose subscription or target changed since, and writes only the targets that
moved.

Each member's entry holds its subscription as the assignor read it and, as ``owned``, the target the
computation left it. An entry is trusted only while the member's target is the very object the group held
after that computation, and the member's topics, rack and instance id read the same: a record replayed since
(loading, another write, an operation rolled back by the journal) replaces the target object, and one identity
check sees it. When every member's ``owned`` comes from the last result's arrays (``ArrayAssignment``), the
engine reads the claims straight from them and the members whose targets moved are found by comparing the two
results' owner arrays (``moved_members``) instead of converting every member's view.

The state is soft: never in records, dropped whenever the group's subscribed topics or assignor change.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, pairwise

import numpy as np

from regroup.assignors.array_assignment import ArrayAssignment, LatestAssignment
from regroup.assignors.balance import Outcome
from regroup.assignors.layout import IntArray, Layout
from regroup.assignors.spec import Assignment, MemberSubscription, PartitionRacks
from regroup.coordinator.consumer.group import ConsumerGroupMember, Partitions, ResolvedRegex
from regroup.coordinator.consumer.kept_target import KeptTarget
from regroup.coordinator.consumer.subscriptions import member_topics
from regroup.records.consumer import SubscribedTopic


@dataclass(slots=True)
class MemberInput:
    """One member as the last computation read it, and the target it left the member with."""

    #: the member's topics as ``subscriptions.member_topics`` gave them (names and resolved regex)
    names: tuple[str, ...]
    rack: str | None
    instance_id: str | None
    #: the member's target object after the computation (None: it had none)
    target: Partitions | None
    #: the assignor's subscription for the member, ``owned`` being the target above as the assignor reads it
    subscription: MemberSubscription


@dataclass(slots=True)
class TopicInputs:
    """The group's subscribed topics as every computation over them reads them."""

    #: the group's subscribed-topic values the inputs were built from (compared object by object)
    source: tuple[SubscribedTopic, ...]
    names: dict[uuid.UUID, str]
    ids: dict[str, uuid.UUID]
    partitions: dict[str, int]
    racks: PartitionRacks | None

    @staticmethod
    def of(source: tuple[SubscribedTopic, ...]) -> TopicInputs:
        racks = {t.name: tuple(frozenset(r) for r in t.racks) for t in source if t.racks and any(t.racks)}
        return TopicInputs(
            source=source,
            names={t.topic_id: t.name for t in source},
            ids={t.name: t.topic_id for t in source},
            partitions={t.name: t.partitions for t in source},
            racks=racks or None,
        )


@dataclass(slots=True)
class LastTarget:
    """The last full computation of one group."""

    assignor: str
    topics: TopicInputs
    members: dict[str, MemberInput]
    result: Assignment
    #: when ``result`` has arrays: the cell every entry's ``owned`` view reads, pointing at ``result``
    latest: LatestAssignment | None


def from_kept(
    members: Mapping[str, ConsumerGroupMember],
    targets: Mapping[str, Partitions],
    resolved: Mapping[str, ResolvedRegex],
    state: KeptTarget,
    assignor: str,
    source: tuple[SubscribedTopic, ...],
) -> LastTarget | None:
    """The last computation as the kept target of a homogeneous group says it was, for the group's first full
    computation since (a member joining with other topics: a rolling change of subscription), so that it too
    converts only the members that changed. None when the kept state no longer matches the group."""
    layout = state.layout
    topics = TopicInputs.of(source)
    if any(
        topics.ids.get(name) != topic_id or topics.partitions.get(name) != count for name, topic_id, count in layout
    ):
        return None
    held = state.kept.held
    written = state.written
    member_names = tuple(sorted(held))
    t_count = len(layout)
    counts = np.fromiter((count for _, _, count in layout), dtype=np.int64, count=t_count)
    offsets = np.zeros(t_count + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    held_sets = list(map(held.__getitem__, member_names))
    sizes = np.fromiter(map(len, held_sets), dtype=np.int64, count=len(member_names))
    keys = np.fromiter(chain.from_iterable(held_sets), dtype=np.int64, count=int(sizes.sum()))
    partition, topic = np.divmod(keys, t_count)
    flat = offsets[topic] + partition
    n = int(offsets[-1])
    names = tuple(name for name, _, _ in layout)
    every_topic = np.arange(t_count, dtype=np.int64)
    array_layout = Layout(
        topic_names=names,
        topic_index={name: t for t, name in enumerate(names)},
        counts=counts,
        offsets=offsets,
        member_names=member_names,
        member_topics=tuple(every_topic for _ in member_names),
    )
    if not len(flat) or (int(flat.min()) >= 0 and int(flat.max()) < n and int(np.bincount(flat).max()) == 1):
        # (one owner per partition: the owner array says it all, split per member only if someone asks)
        owner = np.full(n, -1, dtype=np.int64)
        owner[flat] = np.repeat(np.arange(len(member_names), dtype=np.int64), sizes)
        outcome = Outcome(len(member_names), owner=owner)
    else:
        cuts = np.zeros(len(member_names) + 1, dtype=np.int64)
        np.cumsum(sizes, out=cuts[1:])
        outcome = Outcome(len(member_names), per_member=[flat[a:b] for a, b in pairwise(cuts.tolist())])
    result = ArrayAssignment(array_layout, outcome)
    latest = LatestAssignment(result)
    entries: dict[str, MemberInput] = {}
    dirty = state.dirty
    subscribed = topics.partitions
    # whether a member's topics, as the assignor reads them, are the layout's: by value (members share values)
    reads_layout: dict[tuple[str, ...], bool] = {}
    for member_id, m in members.items():
        target = targets.get(member_id)
        if member_id not in held or member_id in dirty or written.get(member_id) is not target:
            continue
        # (``member_topics``, its call skipped for a member without a regex)
        wanted = m.subscribed_topic_names if m.subscribed_topic_regex is None else member_topics(m, resolved)
        same = reads_layout.get(wanted)
        if same is None:
            same = reads_layout[wanted] = tuple(sorted({t for t in wanted if t in subscribed})) == names
        if not same:
            continue  # (its subscription changed since: converted afresh)
        entries[member_id] = MemberInput(
            names=wanted,
            rack=m.rack_id,
            instance_id=m.instance_id,
            target=target,
            subscription=MemberSubscription(
                topics=names, owned=latest.owned(member_id), rack=m.rack_id, instance_id=m.instance_id
            ),
        )
    return LastTarget(assignor=assignor, topics=topics, members=entries, result=result, latest=latest)


def moved_members(before: Assignment, after: Assignment) -> set[str] | None:
    """The members of ``after`` whose partitions differ from what ``before`` gave them (a member absent from
    ``before`` had none), computed on both results' owner arrays; None when either is not an
    ``ArrayAssignment`` or they number the partitions differently."""
    if not isinstance(before, ArrayAssignment) or not isinstance(after, ArrayAssignment):
        return None
    old, new = before.layout, after.layout
    if old.topic_names != new.topic_names or not np.array_equal(old.counts, new.counts):
        return None
    n = new.partition_total
    position = after.position
    # before's member numbers as after's (-1: gone), with one more entry so that an owner of -1 maps to -1
    renumber = np.fromiter(
        (*(position.get(name, -1) for name in old.member_names), -1), dtype=np.int64, count=len(old.member_names) + 1
    )
    owner_before = renumber[_owner_array(before, n)]
    owner_after = _owner_array(after, n)
    differ = owner_before != owner_after
    if not differ.any():
        return set()
    touched = np.unique(np.concatenate([owner_before[differ], owner_after[differ]]))
    names = new.member_names
    return {names[i] for i in touched.tolist() if i >= 0}


def _owner_array(result: ArrayAssignment, n: int) -> IntArray:
    """Global partition index -> member number in the result (-1: nobody)."""
    outcome = result.outcome
    if outcome.owner is not None and len(outcome.owner) == n:
        return outcome.owner
    owner = np.full(n, -1, dtype=np.int64)
    per_member = outcome.per_member
    sizes = np.fromiter((len(a) for a in per_member), dtype=np.int64, count=len(per_member))
    if sizes.sum():
        owner[np.concatenate(per_member)] = np.repeat(np.arange(len(per_member), dtype=np.int64), sizes)
    return owner
