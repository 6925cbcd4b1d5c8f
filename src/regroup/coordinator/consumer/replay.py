"""Applying consumer-group records to the in-memory groups: the only way their hard state changes. The live
path applies each record as it is written; loading applies the same records in log order."""

from __future__ import annotations

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerMember, MemberState, to_set
from regroup.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecordKey,
    ConsumerRecordValue,
)


def _group(groups: dict[str, ConsumerGroup], group_id: str, create: bool) -> ConsumerGroup | None:
    group = groups.get(group_id)
    if group is None and create:
        group = ConsumerGroup(group_id=group_id)
        groups[group_id] = group
    return group


def replay(groups: dict[str, ConsumerGroup], key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
    group = _group(groups, key.group_id, create=value is not None)
    if group is None:
        return
    if isinstance(key, ConsumerGroupMetadataKey):
        if value is None:
            del groups[key.group_id]  # the group's other records were tombstoned before
        else:
            assert isinstance(value, ConsumerGroupMetadataValue)
            group.group_epoch = value.epoch
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        if value is None:
            group.subscribed_topics = {}
        else:
            assert isinstance(value, ConsumerGroupPartitionMetadataValue)
            group.subscribed_topics = {t.name: t for t in value.topics}
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        if value is None:
            group.assignment_epoch = 0
        else:
            assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
            group.assignment_epoch = value.assignment_epoch
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        if value is None:
            group.targets.pop(key.member_id, None)
        else:
            assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
            group.targets[key.member_id] = to_set(value.partitions)
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        if value is None:
            group.drop_member(key.member_id)
            return
        assert isinstance(value, ConsumerGroupMemberMetadataValue)
        old = group.members.get(key.member_id)
        member = old.copy() if old is not None else ConsumerMember(member_id=key.member_id)
        member.instance_id = value.instance_id
        member.rack_id = value.rack_id
        member.client_id = value.client_id
        member.client_host = value.client_host
        member.subscribed_topic_names = value.subscribed_topic_names
        member.subscribed_topic_regex = value.subscribed_topic_regex
        member.server_assignor = value.server_assignor
        member.rebalance_timeout_ms = value.rebalance_timeout_ms
        member.classic = value.classic
        group.set_member(member)
    elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        old = group.members.get(key.member_id)
        if old is None and value is None:
            return
        member = old.copy() if old is not None else ConsumerMember(member_id=key.member_id)
        if value is None:
            member.member_epoch = -1
            member.previous_member_epoch = -1
            member.state = MemberState.STABLE
            member.assigned = {}
            member.pending_revocation = {}
        else:
            assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.state = MemberState(value.state)
            member.assigned = to_set(value.assigned)
            member.pending_revocation = to_set(value.pending_revocation)
        group.set_member(member)
