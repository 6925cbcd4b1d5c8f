"""Writing share-group records: each helper builds a record, applies it to the in-memory group (so the live
state is what replaying the records gives) and emits it on the context, with the events it makes happen
(``events.py``): a member joined or left, a new target, partitions a member may now fetch from or no longer,
the group deleted. A share partition's state is written from the partition object the operation changed,
which replaces the old one (journaled: a refused operation puts the old one back)."""

from __future__ import annotations

import uuid

from regroup.coordinator.context import Ctx
from regroup.coordinator.events import (
    GroupDeleted,
    GroupStateChanged,
    LeaveReason,
    MemberJoined,
    MemberLeft,
    PartitionsAssigned,
    PartitionsRevoked,
    TargetComputed,
)
from regroup.coordinator.groups import Groups
from regroup.coordinator.share.group import (
    EMPTY,
    TOPIC_ORDER,
    Partitions,
    ShareGroup,
    ShareGroupMember,
    ShareGroupState,
    TopicPartition,
    partition_order,
    to_tuple,
)
from regroup.coordinator.share.partition import SharePartition, StateBatch
from regroup.coordinator.share.replay import replay
from regroup.model.errors import CoordinatorBug
from regroup.records.model import Record
from regroup.records.share import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    SharePartitionStateBatch,
    SharePartitionStateKey,
    SharePartitionStateValue,
)

#: the assignor share groups use, by Kafka's name
SIMPLE_ASSIGNOR = "simple"


def state_changed(group: ShareGroup, state: ShareGroupState) -> GroupStateChanged:
    return GroupStateChanged(
        group_id=group.group_id,
        group_type="share",
        state=state.value,
        generation=group.group_epoch,
        protocol=SIMPLE_ASSIGNOR,
        protocol_type=None,
        leader=None,
        assignment_epoch=group.assignment_epoch,
        members=len(group.members),
    )


def report_state(group: ShareGroup, ctx: Ctx) -> None:
    """After a write to the group: a ``GroupStateChanged`` when its state or an epoch changed since the last
    report."""
    state = group.state()
    mark = (state, group.group_epoch, group.assignment_epoch)
    if mark != group.reported:
        group.reported = mark
        ctx.event(state_changed(group, state))


def state_record(
    group_id: str, tp: TopicPartition, partition: SharePartition, runs: tuple[StateBatch, ...] | None = None
) -> Record:
    """The partition's state record (``runs``: its ``state_batches()``, when the caller has them already)."""
    batches = tuple(
        SharePartitionStateBatch(
            first_offset=b.first_offset, last_offset=b.last_offset, state=int(b.state), delivery_count=b.delivery_count
        )
        for b in (partition.state_batches() if runs is None else runs)
    )
    key = SharePartitionStateKey(group_id=group_id, topic_id=tp[0], partition=tp[1])
    return Record(key, SharePartitionStateValue(start_offset=partition.start_offset, batches=batches))


class ShareWrites:
    def __init__(self, ctx: Ctx, groups: Groups) -> None:
        self.ctx = ctx
        self.groups = groups

    def _existing(self, group_id: str) -> ShareGroup:
        group = self.groups.typed(group_id, ShareGroup)
        if group is None:
            raise CoordinatorBug(f"no share group {group_id}")
        return group

    def _write(self, record: Record) -> None:
        replay(self.groups, record, self.ctx.journal)
        self.ctx.emit(record)

    def group_epoch(self, group_id: str, epoch: int) -> None:
        self._write(Record(ShareGroupMetadataKey(group_id=group_id), ShareGroupMetadataValue(epoch=epoch)))

    def member_metadata(self, group_id: str, m: ShareGroupMember) -> None:
        group = self._existing(group_id)
        joined = m.member_id not in group.members
        value = ShareGroupMemberMetadataValue(
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
        )
        self._write(Record(ShareGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id), value))
        if joined:
            self.ctx.event(MemberJoined(group_id, "share", m.member_id, m.client_id, group.group_epoch))

    def target(self, group_id: str, member_id: str, partitions: Partitions) -> None:
        key = ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id)
        self._write(Record(key, ShareGroupTargetAssignmentMemberValue(partitions=to_tuple(partitions))))

    def target_epoch(self, group_id: str, epoch: int) -> None:
        key = ShareGroupTargetAssignmentMetadataKey(group_id=group_id)
        # (its time kept only while the group has an assignment interval: the next computation waits for it)
        at_ms = self.ctx.now_ms if self.ctx.share_assignment_interval_ms(group_id) > 0 else 0
        self._write(
            Record(key, ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp_ms=at_ms))
        )
        group = self._existing(group_id)
        target_of = group.target_of
        targets = tuple((member_id, m.client_id, target_of(member_id)) for member_id, m in group.members.items())
        self.ctx.event(TargetComputed(group_id, epoch, SIMPLE_ASSIGNOR, targets))

    def current_assignment(self, group_id: str, m: ShareGroupMember) -> None:
        group = self._existing(group_id)
        old = group.members.get(m.member_id)
        before = old.assigned if old is not None else EMPTY
        revoked = _minus(before, m.assigned)
        if revoked:
            self.ctx.event(PartitionsRevoked(group_id, m.member_id, m.client_id, m.member_epoch, revoked))
        assigned = _minus(m.assigned, before)
        if assigned:
            self.ctx.event(PartitionsAssigned(group_id, m.member_id, m.client_id, m.member_epoch, assigned))
        value = ShareGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, assigned=to_tuple(m.assigned)
        )
        self._write(Record(ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id), value))

    def partition_state(
        self, group_id: str, tp: TopicPartition, partition: SharePartition, runs: tuple[StateBatch, ...] | None = None
    ) -> None:
        """``partition`` (a changed copy of the group's, or a new one) becomes the group's, and its state is
        written (``runs``: its ``state_batches()``, when the caller has them already)."""
        group = self._existing(group_id)
        self.ctx.journal.put(group.partitions, tp, partition)
        self.ctx.emit(state_record(group_id, tp, partition, runs))

    def partition_tombstone(self, group_id: str, tp: TopicPartition) -> None:
        key = SharePartitionStateKey(group_id=group_id, topic_id=tp[0], partition=tp[1])
        self._write(Record(key, None))

    def remove_member(self, group_id: str, member_id: str, reason: LeaveReason) -> None:
        """Current assignment, target assignment, then the member's metadata (Kafka's order)."""
        group = self._existing(group_id)
        member = group.members.get(member_id)
        if member is not None and member.assigned:
            self.ctx.event(
                PartitionsRevoked(group_id, member_id, member.client_id, member.member_epoch, to_tuple(member.assigned))
            )
        self._write(Record(ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None))
        self._write(Record(ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None))
        self._write(Record(ShareGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None))
        if member is not None:
            self.ctx.event(MemberLeft(group_id, "share", member_id, member.client_id, group.group_epoch, reason))

    def delete_group(self, group: ShareGroup, reason: LeaveReason = "group deleted") -> None:
        """Tombstone every record of the group, its share partitions' state included (the epoch record last)."""
        group_id = group.group_id
        dead = state_changed(group, ShareGroupState.DEAD)
        for member_id in list(group.members):
            self.remove_member(group_id, member_id, reason)
        self.ctx.event(dead)
        for member_id in list(group.targets):
            self._write(Record(ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None))
        for tp in sorted(group.partitions, key=partition_order):
            self.partition_tombstone(group_id, tp)
        self._write(Record(ShareGroupTargetAssignmentMetadataKey(group_id=group_id), None))
        self._write(Record(ShareGroupMetadataKey(group_id=group_id), None))
        self.ctx.event(GroupDeleted(group_id, "share"))


def _minus(a: Partitions, b: Partitions) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    """The partitions of ``a`` not in ``b``, sorted."""
    out: list[tuple[uuid.UUID, tuple[int, ...]]] = []
    for topic_id in sorted(a, key=TOPIC_ORDER):
        left = a[topic_id] - b.get(topic_id, frozenset())
        if left:
            out.append((topic_id, tuple(sorted(left))))
    return tuple(out)
