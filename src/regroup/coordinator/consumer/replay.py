"""Applying consumer-group records to the in-memory groups: the only way their hard state changes. The live
path applies each record as it is written, recording in the operation's journal how to take each change
back (a refused operation is rolled back); loading applies the same records in log order, unjournaled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupMemberState, to_set
from regroup.coordinator.groups import Groups
from regroup.coordinator.journal import Journal
from regroup.records.consumer import (
    CONSUMER_KEY_TYPES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from regroup.records.model import Record

#: loading: changes are not journaled
_UNJOURNALED: Final = Journal()


def _group(groups: Groups, group_id: str, create: bool, journal: Journal) -> ConsumerGroup | None:
    """The consumer group ``group_id`` names; with ``create``, a new one when there is none. A group of
    another type under the id was retired before (the live path removes it first; in the log its tombstone
    comes first, or it is the simple group that loading made for offsets committed earlier)."""
    group = groups.typed(group_id, ConsumerGroup)
    if group is None and create:
        group = ConsumerGroup(group_id=group_id)
        groups.add(journal, group)
    return group


def _set_member(group: ConsumerGroup, member: ConsumerGroupMember, journal: Journal) -> None:
    if journal.active:
        journal.undo(_member_restorer(group, member.member_id, group.members.get(member.member_id)))
    group.set_member(member)


def _drop_member(group: ConsumerGroup, member_id: str, journal: Journal) -> None:
    if journal.active and member_id in group.members:
        journal.undo(_member_restorer(group, member_id, group.members[member_id]))
    group.drop_member(member_id)


def _member_restorer(group: ConsumerGroup, member_id: str, old: ConsumerGroupMember | None) -> Callable[[], None]:
    def restore() -> None:
        if old is None:
            group.drop_member(member_id)
        else:
            group.set_member(old)

    return restore


def replay(groups: Groups, record: Record, journal: Journal = _UNJOURNALED) -> None:
    """Apply one consumer-group record (any other record is ignored)."""
    key, value = record.key, record.value
    if not isinstance(key, CONSUMER_KEY_TYPES):
        return
    group = _group(groups, key.group_id, value is not None, journal)
    if group is None:
        return
    if isinstance(key, ConsumerGroupMetadataKey):
        if value is None:
            groups.remove(journal, key.group_id)  # the group's other records were tombstoned before
        else:
            assert isinstance(value, ConsumerGroupMetadataValue)
            journal.set(group, "group_epoch", value.epoch)
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        if value is None:
            journal.set(group, "subscribed_topics", {})
        else:
            assert isinstance(value, ConsumerGroupPartitionMetadataValue)
            journal.set(group, "subscribed_topics", {t.name: t for t in value.topics})
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        if value is None:
            journal.set(group, "assignment_epoch", 0)
            journal.set(group, "assignment_timestamp_ms", 0)
        else:
            assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
            journal.set(group, "assignment_epoch", value.assignment_epoch)
            journal.set(group, "assignment_timestamp_ms", value.assignment_timestamp_ms)
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        if value is None:
            journal.remove(group.resolved_regexes, key.regex)
        else:
            assert isinstance(value, ConsumerGroupRegularExpressionValue)
            journal.put(group.resolved_regexes, key.regex, value)
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        if value is None:
            journal.remove(group.targets, key.member_id)
        else:
            assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
            journal.put(group.targets, key.member_id, to_set(value.partitions))
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        if value is None:
            _drop_member(group, key.member_id, journal)
            return
        assert isinstance(value, ConsumerGroupMemberMetadataValue)
        old = group.members.get(key.member_id)
        member = old.copy() if old is not None else ConsumerGroupMember(member_id=key.member_id)
        member.set_metadata(value)
        _set_member(group, member, journal)
    elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        old = group.members.get(key.member_id)
        if old is None and value is None:
            return
        member = old.copy() if old is not None else ConsumerGroupMember(member_id=key.member_id)
        if value is None:
            member.member_epoch = -1
            member.previous_member_epoch = -1
            member.state = ConsumerGroupMemberState.STABLE
            member.assigned = {}
            member.pending_revocation = {}
        else:
            assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.state = ConsumerGroupMemberState(value.state)
            member.assigned = to_set(value.assigned)
            member.pending_revocation = to_set(value.pending_revocation)
        _set_member(group, member, journal)
