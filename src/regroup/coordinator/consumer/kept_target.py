"""A consumer group's target assignment kept between computations, so that a member joining or leaving costs
what moves, not the group (``assignors.kept_assignment``).

It applies when the group's assignor is the optimal engine without racks (``uniform`` or ``optimal``, and no
subscribed partition has replica racks) and every member subscribes to the same existing topics: then the
engine's result depends on each member's current target only through the partitions it keeps, which the kept
state holds in order. Anything else, or a kept state that no longer matches the group, and the caller
computes the target in full (``target.compute_target``).

The kept state is soft: never in records, rebuilt from the members' current targets whenever it may be stale.
It remembers the very target objects the group held after it last wrote them; a record replayed since
(loading, another write, an operation rolled back by the journal) replaces those objects, and one identity
check per member sees it.
"""

from __future__ import annotations

import operator
import uuid
from dataclasses import dataclass

from regroup.assignors.kept_assignment import KeptAssignment
from regroup.coordinator.consumer.group import EMPTY, ConsumerGroup, Partitions
from regroup.coordinator.consumer.subscriptions import subscription_topics
from regroup.coordinator.consumer.writes import ConsumerWrites

#: a group's subscribed topics as the kept state numbers them: (name, topic id, partitions), by name
TopicLayout = tuple[tuple[str, uuid.UUID, int], ...]


#: the assignors whose target a group keeps between computations when racks play no part and its members'
#: subscriptions are the same: the optimal engine's homogeneous assignment
KEPT_TARGET_ASSIGNORS: frozenset[str] = frozenset({"uniform", "optimal"})


@dataclass(slots=True)
class KeptTarget:
    """The kept assignment of one group, the topic layout it was built for, and the target object each member
    had after it was last written."""

    layout: TopicLayout
    kept: KeptAssignment
    written: dict[str, Partitions | None]
    #: members whose target holds more than the kept state gives them (partitions of topics no longer
    #: subscribed or no longer existing, partitions another member's target holds too): their next target is
    #: written even if the run leaves them as they are
    dirty: set[str]


def kept_topics(group: ConsumerGroup, assignor_name: str) -> tuple[str, ...] | None:
    """The topics over which the group's target can be kept with ``assignor_name`` (``common_topics``), or
    None when it cannot: another assignor, or some subscribed partition has replica racks."""
    if assignor_name not in KEPT_TARGET_ASSIGNORS:
        return None
    if any(racks for topic in group.subscribed_topics.values() for racks in topic.racks):
        return None
    return common_topics(group)


def keep_loaded_target(group: ConsumerGroup, assignor_name: str) -> None:
    """Keep a group's target as loaded from its records, when it can be kept: the coordinator holds targets in
    the kept form, so the first member joining after a restart costs what moves too."""
    topics = kept_topics(group, assignor_name)
    if topics is not None:
        group.kept_target = _rebuild(group, _layout(group, topics))


def common_topics(group: ConsumerGroup) -> tuple[str, ...] | None:
    """The existing topics (sorted) every member subscribes to, when they all subscribe to the same ones and
    there is at least one; None otherwise."""
    existing = group.subscribed_topics
    resolved = group.resolved_regexes
    common: tuple[str, ...] | None = None
    for subscription in group.subscriptions:  # (each distinct subscription once, not each member)
        topics = tuple(sorted({t for t in subscription_topics(subscription, resolved) if t in existing}))
        if common is None:
            common = topics
        elif topics != common:
            return None
    return common or None


def update_kept_target(writes: ConsumerWrites, group: ConsumerGroup, topics: tuple[str, ...]) -> None:
    """Bring the group's target up to date for its current members over ``topics`` (``common_topics``),
    writing a target record for every member whose target changed or who has none."""
    layout = _layout(group, topics)
    state = group.kept_target
    group.kept_target = None  # (stale until every write below is done)
    members = group.members
    targets = group.targets
    if state is None or state.layout != layout or not _still_held(state, group):
        state = _rebuild(group, layout)
    written = state.written
    for gone in written.keys() - members.keys():
        del written[gone]
    kept = state.kept
    to_write = kept.run(members)
    to_write.update(members.keys() - targets.keys())
    to_write.update(m for m in state.dirty if m in members)
    state.dirty = set()
    topic_ids = [topic_id for _, topic_id, _ in layout]
    t_count = len(topic_ids)
    # (in the group's order, as the full computation)
    for member_id in list(filter(to_write.__contains__, members)) if to_write else ():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for key in kept.held[member_id]:
            partition, t = divmod(key, t_count)
            by_topic.setdefault(topic_ids[t], set()).add(partition)
        new = {topic_id: frozenset(ps) for topic_id, ps in by_topic.items()}
        if member_id not in targets or targets[member_id] != new:
            writes.target(group.group_id, member_id, new)
        written[member_id] = targets.get(member_id)
    group.kept_target = state


def _layout(group: ConsumerGroup, topics: tuple[str, ...]) -> TopicLayout:
    subscribed = group.subscribed_topics
    return tuple((name, subscribed[name].topic_id, subscribed[name].partitions) for name in topics)


def _still_held(state: KeptTarget, group: ConsumerGroup) -> bool:
    """Whether every member's current target is the object the kept state last saw (a member it never saw has
    no target)."""
    members = group.members
    return all(map(operator.is_, map(group.targets.get, members), map(state.written.get, members)))


def _rebuild(group: ConsumerGroup, layout: TopicLayout) -> KeptTarget:
    """The kept state of the group's current members and targets, as the full computation reads them (topics
    looked up by their ids' integers: a ``UUID`` hashes in Python, an ``int`` in C)."""
    index = {topic_id.int: t for t, (_, topic_id, _) in enumerate(layout)}
    counts = [count for _, _, count in layout]
    t_count = len(layout)
    held: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    targets = group.targets
    for member_id in group.members:
        keys: list[int] = []
        target = targets.get(member_id, EMPTY)
        sizes[member_id] = sum(len(ps) for ps in target.values())
        for topic_id, partitions in target.items():
            t = index.get(topic_id.int)
            if t is None or not partitions:
                continue
            if min(partitions) < 0 or max(partitions) >= counts[t]:
                partitions = frozenset(p for p in partitions if 0 <= p < counts[t])
            keys.extend([p * t_count + t for p in partitions])
        held[member_id] = keys
    kept = KeptAssignment([name for name, _, _ in layout], counts, held)
    written = {member_id: targets.get(member_id) for member_id in group.members}
    dirty = {member_id for member_id, keys in kept.held.items() if len(keys) != sizes[member_id]}
    return KeptTarget(layout=layout, kept=kept, written=written, dirty=dirty)
