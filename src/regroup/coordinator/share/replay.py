"""Applying share-group records to the in-memory groups: the only way their hard state changes. The live path
applies each group record as it is written, journaled so that a refused operation is taken back; loading
applies the same records in log order, unjournaled. A share partition's state record rebuilds the partition
at load; on the live path the partition object the write was computed on is put in place instead (it also
holds the acquisition locks, which no record carries)."""

from __future__ import annotations

from typing import Final

from regroup.coordinator.groups import Groups
from regroup.coordinator.journal import Journal
from regroup.coordinator.share.group import ShareGroup, ShareGroupMember, to_set
from regroup.coordinator.share.partition import SharePartition, StateBatch
from regroup.records.model import Record
from regroup.records.share import (
    SHARE_KEY_TYPES,
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
    SharePartitionStateKey,
    SharePartitionStateValue,
)

_UNJOURNALED: Final = Journal()


def _group(groups: Groups, group_id: str, create: bool, journal: Journal) -> ShareGroup | None:
    group = groups.typed(group_id, ShareGroup)
    if group is None and create:
        group = ShareGroup(group_id=group_id)
        groups.add(journal, group)
    return group


def partition_from_record(value: SharePartitionStateValue) -> SharePartition:
    return SharePartition.from_state(
        value.start_offset,
        tuple(StateBatch(b.first_offset, b.last_offset, b.state, b.delivery_count) for b in value.batches),
    )


def replay(groups: Groups, record: Record, journal: Journal = _UNJOURNALED) -> None:
    """Apply one share-group record (any other record is ignored)."""
    key, value = record.key, record.value
    if not isinstance(key, SHARE_KEY_TYPES):
        return
    group = _group(groups, key.group_id, value is not None, journal)
    if group is None:
        return
    if isinstance(key, ShareGroupMetadataKey):
        if value is None:
            groups.remove(journal, key.group_id)  # the group's other records were tombstoned before
        else:
            assert isinstance(value, ShareGroupMetadataValue)
            journal.set(group, "group_epoch", value.epoch)
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        if value is None:
            journal.set(group, "assignment_epoch", 0)
            journal.set(group, "assignment_timestamp_ms", 0)
        else:
            assert isinstance(value, ShareGroupTargetAssignmentMetadataValue)
            journal.set(group, "assignment_epoch", value.assignment_epoch)
            journal.set(group, "assignment_timestamp_ms", value.assignment_timestamp_ms)
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        if value is None:
            journal.remove(group.targets, key.member_id)
        else:
            assert isinstance(value, ShareGroupTargetAssignmentMemberValue)
            journal.put(group.targets, key.member_id, to_set(value.partitions))
    elif isinstance(key, ShareGroupMemberMetadataKey):
        if value is None:
            journal.remove(group.members, key.member_id)
            return
        assert isinstance(value, ShareGroupMemberMetadataValue)
        old = group.members.get(key.member_id)
        member = old.copy() if old is not None else ShareGroupMember(member_id=key.member_id)
        member.rack_id = value.rack_id
        member.client_id = value.client_id
        member.client_host = value.client_host
        member.subscribed_topic_names = value.subscribed_topic_names
        journal.put(group.members, key.member_id, member)
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        old = group.members.get(key.member_id)
        if old is None:
            if value is None:
                return
            old = ShareGroupMember(member_id=key.member_id)
        member = old.copy()
        if value is None:
            member.member_epoch = member.previous_member_epoch = -1
            member.assigned = {}
        else:
            assert isinstance(value, ShareGroupCurrentMemberAssignmentValue)
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.assigned = to_set(value.assigned)
        journal.put(group.members, key.member_id, member)
    elif isinstance(key, SharePartitionStateKey):
        tp = (key.topic_id, key.partition)
        if value is None:
            if journal.remove(group.partitions, tp) is not None:
                group.states_removed += 1  # (not taken back with the rest: it only makes a heartbeat look again)
        else:
            assert isinstance(value, SharePartitionStateValue)
            journal.put(group.partitions, tp, partition_from_record(value))
