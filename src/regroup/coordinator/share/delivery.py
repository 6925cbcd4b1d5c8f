"""Delivering a share group's records (KIP-932): initializing a share partition at its start offset, acquiring
records for a member (ShareFetch; under read_committed, archiving those of aborted transactions instead of
delivering them), acknowledging them (ShareFetch or ShareAcknowledge), and releasing what a
member held when it leaves or its locks lapse.

Each operation works on a copy of the partition and puts the copy in place through the journal, so a refused
operation leaves the partition as it was. Acquiring writes no record (as in Kafka, a lock is not durable: after
a crash, acquired records are available again); acknowledging and releasing write the partition's state, so an
acknowledgement is durable before it is answered. The earliest lock of each partition is a timer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups
from regroup.coordinator.share.group import ShareGroup, TopicPartition, partition_order
from regroup.coordinator.share.partition import AckBatch, Acquired, ShareError, SharePartition
from regroup.coordinator.share.timers import ShareLocksTimer, locks_key
from regroup.coordinator.share.writes import ShareWrites
from regroup.protocol.share import ShareRead


def _schedule_locks(ctx: Ctx, group_id: str, tp: TopicPartition, partition: SharePartition) -> None:
    deadline = partition.next_deadline()
    if deadline is None:
        ctx.timers.cancel(locks_key(group_id, tp[0], tp[1]))
    else:
        ctx.timers.schedule(ShareLocksTimer(group_id, tp[0], tp[1]), deadline)


def _put(
    ctx: Ctx, groups: Groups, group: ShareGroup, tp: TopicPartition, old: SharePartition | None, new: SharePartition
) -> None:
    """``new`` replaces ``old``; its state is written when it differs from what was last written (the runs
    are computed once per side: this runs on every acknowledgement)."""
    batches = new.state_batches()
    if old is not None and old.start_offset == new.start_offset and old.state_batches() == batches:
        ctx.journal.put(group.partitions, tp, new)
    else:
        ShareWrites(ctx, groups).partition_state(group.group_id, tp, new, batches)
    _schedule_locks(ctx, group.group_id, tp, new)


def initialize(ctx: Ctx, groups: Groups, group: ShareGroup, start_offsets: Mapping[TopicPartition, int]) -> None:
    """Share partitions the group has no state for start at the given offsets (``share.auto.offset.reset``,
    resolved by the shell); partitions that have state keep it."""
    for tp in sorted(start_offsets, key=partition_order):
        if tp in group.partitions:
            continue
        partition = SharePartition(
            start_offsets[tp],
            delivery_limit=ctx.config.share_group_delivery_count_limit,
            max_in_flight=ctx.config.share_group_partition_max_record_locks,
        )
        ShareWrites(ctx, groups).partition_state(group.group_id, tp, partition)


def acquire(
    ctx: Ctx, group: ShareGroup, member_id: str, tp: TopicPartition, read: ShareRead, max_records: int
) -> tuple[list[Acquired], int]:
    """Acquire up to ``max_records`` available records of ``read`` for the member (none when the group has no
    state for the partition yet), then archive those of aborted transactions (read_committed): the records
    delivered, and how many were archived. As in Kafka, the archive is not written here: the partition's next
    state write carries it, and until then a restart only means the records are archived again when next
    acquired."""
    old = group.partitions.get(tp)
    if old is None or max_records <= 0:
        return [], 0
    new = old.copy()
    lock_ms = ctx.share_record_lock_duration_ms(group.group_id)
    acquired = new.acquire(member_id, read.end_offset, max_records, ctx.now_ms, lock_ms, min_offset=read.first_offset)
    delivered = new.archive_acquired(acquired, read.aborted) if read.aborted else acquired
    if acquired:
        ctx.journal.put(group.partitions, tp, new)
        _schedule_locks(ctx, group.group_id, tp, new)
    return delivered, _count(acquired) - _count(delivered)


def _count(runs: Sequence[Acquired]) -> int:
    return sum(run.last_offset - run.first_offset + 1 for run in runs)


def acknowledge(
    ctx: Ctx, groups: Groups, group: ShareGroup, member_id: str, tp: TopicPartition, batches: Sequence[AckBatch]
) -> ShareError:
    old = group.partitions.get(tp)
    if old is None:
        return ShareError.UNKNOWN_TOPIC_OR_PARTITION
    new = old.copy()
    error = new.acknowledge(member_id, batches, ctx.now_ms, ctx.share_record_lock_duration_ms(group.group_id))
    if error is ShareError.NONE:
        _put(ctx, groups, group, tp, old, new)
    return error


def release_member(
    ctx: Ctx, groups: Groups, group: ShareGroup, member_id: str, partitions: Iterable[TopicPartition] | None = None
) -> None:
    """Every record the member holds goes back (available, or archived at the delivery limit); of
    ``partitions`` only, when given."""
    wanted = group.partitions if partitions is None else partitions
    for tp in sorted(wanted, key=partition_order):
        old = group.partitions.get(tp)
        if old is None or not old.held_by(member_id):
            continue
        new = old.copy()
        new.release_member(member_id)
        _put(ctx, groups, group, tp, old, new)


def expire_locks(ctx: Ctx, groups: Groups, group: ShareGroup, tp: TopicPartition) -> None:
    old = group.partitions.get(tp)
    if old is None:
        return
    new = old.copy()
    if new.expire(ctx.now_ms):
        _put(ctx, groups, group, tp, old, new)
    else:
        _schedule_locks(ctx, group.group_id, tp, old)
