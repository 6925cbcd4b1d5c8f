"""Writing consumer-group records: each helper builds a record, applies it to the in-memory group (so the
live state is, by construction, what replaying the records gives) and emits it on the context."""

from __future__ import annotations

from collections.abc import Iterable

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, Partitions, to_tuple
from regroup.coordinator.consumer.replay import replay
from regroup.coordinator.context import Ctx
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
    SubscribedTopic,
)
from regroup.records.model import Record


class ConsumerWrites:
    def __init__(self, ctx: Ctx, groups: dict[str, ConsumerGroup]) -> None:
        self.ctx = ctx
        self.groups = groups

    def _write(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
        replay(self.groups, key, value, self.ctx.journal)
        self.ctx.emit(Record(key, value))

    def group_epoch(self, group_id: str, epoch: int) -> None:
        self._write(ConsumerGroupMetadataKey(group_id=group_id), ConsumerGroupMetadataValue(epoch=epoch))

    def subscription_metadata(self, group_id: str, topics: Iterable[SubscribedTopic]) -> None:
        value = ConsumerGroupPartitionMetadataValue(topics=tuple(sorted(topics, key=lambda t: t.name)))
        self._write(ConsumerGroupPartitionMetadataKey(group_id=group_id), value)

    def member_metadata(self, group_id: str, m: ConsumerGroupMember) -> None:
        value = ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex,
            server_assignor=m.server_assignor,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            classic=m.classic,
        )
        self._write(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id), value)

    def target(self, group_id: str, member_id: str, partitions: Partitions) -> None:
        value = ConsumerGroupTargetAssignmentMemberValue(partitions=to_tuple(partitions))
        self._write(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), value)

    def target_epoch(self, group_id: str, epoch: int) -> None:
        value = ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch)
        self._write(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), value)

    def current_assignment(self, group_id: str, m: ConsumerGroupMember) -> None:
        value = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch,
            previous_member_epoch=m.previous_member_epoch,
            state=m.state.value,
            assigned=to_tuple(m.assigned),
            pending_revocation=to_tuple(m.pending_revocation),
        )
        self._write(ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id), value)

    def remove_member(self, group_id: str, member_id: str) -> None:
        """Kafka's order: current assignment, target assignment, then the member's metadata."""
        self._write(ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None)
        self._write(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)
        self._write(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None)

    def delete_group(self, group: ConsumerGroup) -> None:
        """Tombstone every record of the group (members first, the epoch record last)."""
        group_id = group.group_id
        for member_id in list(group.members):
            self.remove_member(group_id, member_id)
        for member_id in list(group.targets):
            self._write(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)
        self._write(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None)
        self._write(ConsumerGroupPartitionMetadataKey(group_id=group_id), None)
        self._write(ConsumerGroupMetadataKey(group_id=group_id), None)
