"""The target assignment of a consumer group (Kafka's TargetAssignmentBuilder): runs the group's server-side
assignor over every member's subscription and current target, and writes a target record for each member
whose target changed plus the new target epoch."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.consistent_hash import ConsistentHashAssignor
from regroup.assignors.server_range import ServerRangeAssignor
from regroup.assignors.spec import AssignmentError, GroupSpec, MemberSubscription
from regroup.assignors.sticky import OptimalAssignor
from regroup.assignors.uniform import UniformAssignor
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.consumer.kept_target import kept_topics, update_kept_target
from regroup.coordinator.consumer.subscriptions import member_topics
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.model.errors import ApiError, ErrorCode

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
        update_kept_target(writes, group, topics)
        writes.target_epoch(group.group_id, group.group_epoch, assignor_name)
        return
    group.kept_target = None
    _compute_in_full(writes, group, assignor_name)


def _compute_in_full(writes: ConsumerWrites, group: ConsumerGroup, assignor_name: str) -> None:
    """Run the assignor over every member's subscription and current target."""
    group_epoch = group.group_epoch
    members = group.members
    topics = group.subscribed_topics
    names = {t.topic_id: t.name for t in topics.values()}
    ids = {t.name: t.topic_id for t in topics.values()}
    subs: dict[str, MemberSubscription] = {}
    for member_id, m in members.items():
        previous = group.target_of(member_id)
        owned = {names[t]: tuple(sorted(ps)) for t, ps in previous.items() if t in names}
        subs[member_id] = MemberSubscription.of(
            [t for t in member_topics(m, group.resolved_regexes) if t in topics],
            owned,
            rack=m.rack_id,
            instance_id=m.instance_id,
        )
    racks = {t.name: tuple(frozenset(r) for r in t.racks) for t in topics.values() if t.racks and any(t.racks)}
    spec = GroupSpec(
        topics={t.name: t.partitions for t in topics.values()}, members=subs, partition_racks=racks or None
    )
    try:
        result = SERVER_ASSIGNORS[assignor_name].assign(spec)
    except (AssignmentError, KeyError, ValueError) as exc:
        raise ApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}"
        ) from None
    for member_id in members:
        new: dict[uuid.UUID, frozenset[int]] = {
            ids[name]: frozenset(ps) for name, ps in result.get(member_id, {}).items() if ps
        }
        if member_id not in group.targets or group.targets[member_id] != new:
            writes.target(group.group_id, member_id, new)
    writes.target_epoch(group.group_id, group_epoch, assignor_name)
