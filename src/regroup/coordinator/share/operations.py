"""The share group's operations as the facade offers them, by group id: starting share partitions, acquiring
for a ShareFetch, acknowledging, releasing a member's records, and the read-only views ShareFetch reads
before it reads the log. A group id that names no share group has nothing to deliver."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups
from regroup.coordinator.share import delivery
from regroup.coordinator.share.group import ShareGroup, TopicPartition
from regroup.coordinator.share.partition import AckBatch, ShareError
from regroup.protocol.share import ShareAcquisition, ShareRead


def initialize(ctx: Ctx, groups: Groups, group_id: str, start_offsets: Mapping[TopicPartition, int]) -> None:
    group = groups.typed(group_id, ShareGroup)
    if group is not None:
        delivery.initialize(ctx, groups, group, start_offsets)


def next_available(groups: Groups, group_id: str, tp: TopicPartition, log_end: int) -> int | None:
    group = groups.typed(group_id, ShareGroup)
    partition = group.partitions.get(tp) if group is not None else None
    return None if partition is None else partition.next_available(log_end)


def uninitialized(groups: Groups, group_id: str, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    group = groups.typed(group_id, ShareGroup)
    return [] if group is None else [tp for tp in tps if tp not in group.partitions]


def acquire(
    ctx: Ctx,
    groups: Groups,
    group_id: str,
    member_id: str,
    wanted: Mapping[TopicPartition, tuple[int, int] | ShareRead],
    max_records: int,
) -> ShareAcquisition:
    """At most ``max_records`` delivered in all, partition by partition in ``wanted``'s order; each partition's
    read is ``(first offset, end offset)`` or a ``ShareRead`` (which may name aborted transactions' batches:
    those records are archived, and count against the partition's own acquisition only, as in Kafka)."""
    lock_ms = ctx.share_record_lock_duration_ms(group_id)
    group = groups.typed(group_id, ShareGroup)
    acquired: dict[TopicPartition, tuple[tuple[int, int, int], ...]] = {}
    archived = 0
    left = max_records
    for tp, read in wanted.items() if group is not None else ():
        if left <= 0:
            break
        assert group is not None
        runs, dropped = delivery.acquire(ctx, group, member_id, tp, _as_read(read), left)
        archived += dropped
        if runs:
            acquired[tp] = tuple((r.first_offset, r.last_offset, r.delivery_count) for r in runs)
            left -= sum(r.last_offset - r.first_offset + 1 for r in runs)
    return ShareAcquisition(acquired=acquired, lock_ms=lock_ms, archived=archived)


def _as_read(read: tuple[int, int] | ShareRead) -> ShareRead:
    return read if isinstance(read, ShareRead) else ShareRead(read[0], read[1])


def acknowledge(
    ctx: Ctx,
    groups: Groups,
    group_id: str,
    member_id: str,
    acknowledgements: Mapping[TopicPartition, tuple[AckBatch, ...]],
) -> dict[TopicPartition, ShareError]:
    group = groups.typed(group_id, ShareGroup)
    if group is None:
        return {tp: ShareError.INVALID_RECORD_STATE for tp in acknowledgements}
    return {
        tp: delivery.acknowledge(ctx, groups, group, member_id, tp, batches) for tp, batches in acknowledgements.items()
    }


def release(
    ctx: Ctx, groups: Groups, group_id: str, member_id: str, partitions: Iterable[TopicPartition] | None = None
) -> None:
    group = groups.typed(group_id, ShareGroup)
    if group is not None:
        delivery.release_member(ctx, groups, group, member_id, partitions)
