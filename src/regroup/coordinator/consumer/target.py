"""The target assignment of a consumer group (Kafka's TargetAssignmentBuilder): runs the group's server-side
assignor over every member's subscription and current target, and writes a target record for each member
whose target changed plus the new target epoch."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from regroup.assignors.array_assignment import ArrayAssignment, LatestAssignment
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.consistent_hash import ConsistentHashAssignor
from regroup.assignors.server_range import ServerRangeAssignor
from regroup.assignors.spec import AssignmentError, GroupSpec, MemberSubscription
from regroup.assignors.sticky import OptimalAssignor
from regroup.assignors.uniform import UniformAssignor
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, Partitions, ResolvedRegex
from regroup.coordinator.consumer.kept_target import KeptTarget, kept_topics, update_kept_target
from regroup.coordinator.consumer.last_target import LastTarget, MemberInput, TopicInputs, from_kept, moved_members
from regroup.coordinator.consumer.subscriptions import member_topics
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.model.errors import ApiError, ErrorCode
from regroup.records.consumer import SubscribedTopic

#: the server-side assignors by the names clients send in ServerAssignor (``group.remote.assignor``): Kafka's two
#: (``uniform``, ``range``) and regroup's ``optimal`` (the balanced-sticky engine, sticky to the current target,
#: never moving a partition for its rack) and ``consistent-hash`` (a hash ring, stateless). Each gives every
#: subscribed partition exactly one owner, as a KIP-848 target must. ``range`` is regroup's ``server-range``.
SERVER_ASSIGNORS: Mapping[str, PartitionAssignor] = {
    "uniform": UniformAssignor(),
    "range": ServerRangeAssignor(),
    "optimal": OptimalAssignor(),
    "consistent-hash": ConsistentHashAssignor(),
}

#: the server-side assignors whose target depends on the members' racks and the partitions' replica racks: a
#: member's rack changing bumps the group epoch of a group using one of them (``ops.rack_change_bumps``)
RACK_AWARE_SERVER_ASSIGNORS: frozenset[str] = frozenset({"uniform", "range", "optimal"})


def compute_target(writes: ConsumerWrites, group: ConsumerGroup, assignor_name: str) -> None:
    """Compute and write the target for the group's current epoch from its members, their current targets
    and its subscribed topics: from the kept target where it applies, in full otherwise."""
    topics = kept_topics(group, assignor_name)
    if topics is not None:
        group.last_target = None
        update_kept_target(writes, group, topics)
        writes.target_epoch(group.group_id, group.group_epoch, assignor_name)
        return
    inputs = gather(group, assignor_name, copy=False)
    apply_target(writes, group, inputs, compute_in_full(inputs))


@dataclass(slots=True)
class TargetInputs:
    """Everything one full computation reads, taken from the group at one moment (``gather``)."""

    group_id: str
    group_epoch: int
    assignor: str
    members: Mapping[str, ConsumerGroupMember]
    targets: Mapping[str, Partitions]
    resolved: Mapping[str, ResolvedRegex]
    source: tuple[SubscribedTopic, ...]
    #: the last computation, if still of this assignor and these topics
    last: LastTarget | None
    #: the kept target of a group that just stopped being homogeneous (its first full computation starts
    #: from it), else None
    kept: KeptTarget | None


@dataclass(slots=True)
class ComputedTarget:
    """What a full computation decided: the targets to write and the state the next computation starts from."""

    #: (member id, new target) for every member whose target changed, in the members' order
    changes: list[tuple[str, Partitions]]
    #: the next ``group.last_target``: a changed member's entry holds its new target until ``apply_target``
    #: puts the group's own object (the one the record's replay made) in its place
    last: LastTarget
    #: the result's arrays, when it has them: ``latest.current`` once the targets are written
    views: ArrayAssignment | None


def gather(group: ConsumerGroup, assignor_name: str, *, copy: bool) -> TargetInputs:
    """The inputs of the group's next full computation. The group's soft target state passes to them (the
    group holds none until ``apply_target``). ``copy``: the group's mappings are copied (a computation run
    beside the coordinator's own thread), else read as they are (run at once)."""
    state, group.kept_target = group.kept_target, None
    last, group.last_target = group.last_target, None
    kept = state if last is None else None
    source = tuple(group.subscribed_topics.values())
    if last is not None and (last.assignor != assignor_name or last.topics.source != source):
        last = None
    members, targets, resolved = group.members, group.targets, group.resolved_regexes
    if copy:
        members, targets, resolved = dict(members), dict(targets), dict(resolved)
    return TargetInputs(
        group_id=group.group_id,
        group_epoch=group.group_epoch,
        assignor=assignor_name,
        members=members,
        targets=targets,
        resolved=resolved,
        source=source,
        last=last,
        kept=kept,
    )


def compute_in_full(inputs: TargetInputs) -> ComputedTarget:
    """Run the assignor over every member's subscription and current target, converting only the members that
    changed since the last computation (``last_target``). Reads nothing but ``inputs``: safe on any thread
    while the group moves on, as long as nothing else changes what ``inputs`` hold."""
    assignor_name = inputs.assignor
    members = inputs.members
    targets = inputs.targets
    resolved = inputs.resolved
    last = inputs.last
    source = inputs.source
    if last is None and inputs.kept is not None:
        # the group just stopped being homogeneous: its first full computation starts from the kept target
        last = from_kept(members, targets, resolved, inputs.kept, assignor_name, source)
    topics = last.topics if last is not None else TopicInputs.of(source)
    names, partitions = topics.names, topics.partitions
    before = last.members if last is not None else {}
    # whether every member's owned is what the last result gave it (or nothing, for a member without a target)
    as_left = last is not None
    subs: dict[str, MemberSubscription] = {}
    # the members whose entry was not reused, or without a target: their target as read, and their topics
    fresh: dict[str, tuple[Partitions | None, tuple[str, ...]]] = {}
    for member_id, m in members.items():
        wanted = (
            m.subscribed_topic_names if m.subscribed_topic_regex is None else member_topics(m, resolved)
        )  # (``member_topics``, its call skipped for a member without a regex)
        target = targets.get(member_id)
        entry = before.get(member_id)
        if (
            entry is not None
            and entry.target is target
            and entry.rack == m.rack_id
            and entry.instance_id == m.instance_id
            and (entry.names is wanted or entry.names == wanted)
        ):
            subs[member_id] = entry.subscription
            if target is None:
                fresh[member_id] = (None, wanted)
            continue
        fresh[member_id] = (target, wanted)
        if target:
            as_left = False
        subs[member_id] = MemberSubscription.of(
            [t for t in wanted if t in partitions],
            {names[t]: tuple(ps) for t, ps in target.items() if t in names} if target else None,
            rack=m.rack_id,
            instance_id=m.instance_id,
        )
    spec = GroupSpec(topics=partitions, members=subs, partition_racks=topics.racks)
    try:
        result = SERVER_ASSIGNORS[assignor_name].assign(spec)
    except (AssignmentError, KeyError, ValueError) as exc:
        raise ApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"Failed to compute a new target assignment for epoch {inputs.group_epoch}: {exc}",
        ) from None
    moved = moved_members(last.result, result) if as_left and last is not None else None
    views = result if isinstance(result, ArrayAssignment) else None
    # the views every entry's owned reads when the result has arrays: kept from one computation to the next, so
    # an entry whose member's target did not change stays as it is
    latest = None
    if views is not None:
        latest = last.latest if last is not None and last.latest is not None else LatestAssignment(views)
    ids = topics.ids
    # an entry stays as it is when its member's subscription and target did not change, and what it owns reads
    # the same in the new result
    same_views = (views is None) == (last is None or last.latest is None)
    kept: dict[str, MemberInput]
    revisit: Iterable[str]
    if moved is not None and same_views:
        # every member outside ``fresh`` and ``moved`` kept its entry and its target: only those are visited
        kept = dict(before)
        for gone in before.keys() - members.keys():
            del kept[gone]
        visit = fresh.keys() | moved
        revisit = [member_id for member_id in members if member_id in visit]  # (in the members' order, as written)
    else:
        kept = {}
        revisit = members
    changes: list[tuple[str, Partitions]] = []
    for member_id in revisit:
        m = members[member_id]
        target = targets.get(member_id)
        if moved is None or member_id in moved or member_id not in targets:
            new: dict[uuid.UUID, frozenset[int]] = {
                ids[name]: frozenset(ps) for name, ps in result.get(member_id, {}).items() if ps
            }
            if member_id not in targets or targets[member_id] != new:
                changes.append((member_id, new))
                target = new  # (until ``apply_target`` puts the group's own object in its place)
        sub = subs[member_id]
        entry = before.get(member_id)
        if entry is not None and sub is entry.subscription and target is entry.target and same_views:
            kept[member_id] = entry  # (unchanged, and what it owns reads the same in the new result)
            continue
        got = fresh.get(member_id)
        if got is None:  # (its entry was reused: what the assignor read is the entry's)
            assert entry is not None
            read, wanted = entry.target, entry.names
        else:
            read, wanted = got
        owned: Mapping[str, tuple[int, ...]]
        if latest is not None:  # (the next run reads the arrays themselves)
            owned = latest.owned(member_id)
        elif target is read:  # (unchanged: what the assignor read is what the member has)
            owned = sub.owned
        else:
            owned = {names[t]: tuple(sorted(ps)) for t, ps in target.items() if t in names} if target else {}
        kept[member_id] = MemberInput(
            names=wanted,
            rack=m.rack_id,
            instance_id=m.instance_id,
            target=target,
            subscription=MemberSubscription(topics=sub.topics, owned=owned, rack=sub.rack, instance_id=sub.instance_id),
        )
    next_last = LastTarget(assignor=assignor_name, topics=topics, members=kept, result=result, latest=latest)
    return ComputedTarget(changes=changes, last=next_last, views=views)


def apply_target(writes: ConsumerWrites, group: ConsumerGroup, inputs: TargetInputs, computed: ComputedTarget) -> None:
    """Write what ``compute_in_full`` decided for ``inputs``: the targets that changed, then the target epoch
    (``inputs.group_epoch``); the group keeps the computation's state for the next one."""
    group_id = group.group_id
    entries = computed.last.members
    targets = group.targets
    for member_id, new in computed.changes:
        writes.target(group_id, member_id, new)
        entry = entries.get(member_id)
        if entry is not None:
            entry.target = targets.get(member_id)
    writes.target_epoch(group_id, inputs.group_epoch, inputs.assignor)
    latest, views = computed.last.latest, computed.views
    if latest is not None and views is not None:
        latest.current = views  # (only now: a computation that fails leaves the last one as it was)
    group.last_target = computed.last
