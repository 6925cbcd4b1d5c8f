"""A share group's "offsets" (KIP-932's admin view): each share partition's start offset and lag, and the
administrator's changes to them. AlterShareGroupOffsets restarts partitions at given offsets (the group must
have no members; a group that does not exist is created, as Kafka does); DeleteShareGroupOffsets forgets every
partition of the named topics (the group must exist and be empty), so they start again where
``share.auto.offset.reset`` says when next fetched."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from regroup.coordinator.context import Ctx
from regroup.coordinator.events import GroupCreated
from regroup.coordinator.groups import Groups
from regroup.coordinator.share.group import ShareGroup, TopicPartition, partition_order
from regroup.coordinator.share.partition import SharePartition
from regroup.coordinator.share.writes import ShareWrites
from regroup.model.errors import ApiError, ErrorCode


def _share_group(groups: Groups, group_id: str) -> ShareGroup | None:
    existing = groups.get(group_id)
    if existing is not None and not isinstance(existing, ShareGroup):
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    return existing


def describe(
    groups: Groups, group_id: str, log_ends: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    """(start offset, lag) of each partition of ``log_ends`` the group has state for (KIP-1226's lag: records
    between the start offset and the log end not yet acknowledged or archived)."""
    group = groups.typed(group_id, ShareGroup)
    if group is None:
        return {}
    out = {}
    for tp, log_end in log_ends.items():
        partition = group.partitions.get(tp)
        if partition is not None:
            out[tp] = (partition.start_offset, partition.lag(log_end))
    return out


def initialized(groups: Groups, group_id: str) -> tuple[TopicPartition, ...]:
    """Every partition the group has state for."""
    group = groups.typed(group_id, ShareGroup)
    return () if group is None else tuple(sorted(group.partitions, key=partition_order))


def alter(ctx: Ctx, groups: Groups, group_id: str, start_offsets: Mapping[TopicPartition, int]) -> None:
    if not group_id:
        raise ApiError(ErrorCode.INVALID_GROUP_ID)
    group = _share_group(groups, group_id)
    if group is not None and group.members:
        raise ApiError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    writes = ShareWrites(ctx, groups)
    if group is None:
        group = ShareGroup(group_id=group_id)
        groups.add(ctx.journal, group)
        ctx.event(GroupCreated(group_id, "share"))
        writes.group_epoch(group_id, 0)
    for tp in sorted(start_offsets, key=partition_order):
        partition = SharePartition(
            max(start_offsets[tp], 0),
            delivery_limit=ctx.config.share_group_delivery_count_limit,
            max_in_flight=ctx.config.share_group_partition_max_record_locks,
        )
        writes.partition_state(group_id, tp, partition)


def delete(
    ctx: Ctx,
    groups: Groups,
    group_id: str,
    topic_ids: list[uuid.UUID],
    partitions: Iterable[TopicPartition] | None = None,
) -> dict[uuid.UUID, ErrorCode]:
    """Forget the state of every partition of the topics (of those among ``partitions`` only, when given: a shell
    deleting many a few hundred at a time); per topic NONE, or UNKNOWN_TOPIC_OR_PARTITION when the group has
    none for it (before this call)."""
    group = _share_group(groups, group_id)
    if group is None:
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    if group.members:
        raise ApiError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    writes = ShareWrites(ctx, groups)
    named = set(topic_ids)
    held = {tp[0] for tp in group.partitions}
    out = {t: ErrorCode.NONE if t in held else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for t in topic_ids}
    wanted = group.partitions if partitions is None else [tp for tp in partitions if tp in group.partitions]
    for tp in sorted((tp for tp in wanted if tp[0] in named), key=partition_order):
        writes.partition_tombstone(group_id, tp)
    return out
