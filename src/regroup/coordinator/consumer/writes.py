"""Writing consumer-group records: each helper builds a record (``records.builders``), applies it to the
in-memory group (so the live state is, by construction, what replaying the records gives) and emits it on
the context."""

from __future__ import annotations

from collections.abc import Iterable

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, Partitions, to_tuple
from regroup.coordinator.consumer.replay import replay
from regroup.coordinator.context import Ctx
from regroup.records.builders import (
    new_consumer_group_current_assignment_record,
    new_consumer_group_current_assignment_tombstone,
    new_consumer_group_epoch_record,
    new_consumer_group_epoch_tombstone,
    new_consumer_group_member_metadata_record,
    new_consumer_group_member_metadata_tombstone,
    new_consumer_group_subscription_metadata_record,
    new_consumer_group_subscription_metadata_tombstone,
    new_consumer_group_target_assignment_epoch_record,
    new_consumer_group_target_assignment_epoch_tombstone,
    new_consumer_group_target_assignment_record,
    new_consumer_group_target_assignment_tombstone,
)
from regroup.records.consumer import SubscribedTopic
from regroup.records.model import Record


class ConsumerWrites:
    def __init__(self, ctx: Ctx, groups: dict[str, ConsumerGroup]) -> None:
        self.ctx = ctx
        self.groups = groups

    def _write(self, record: Record) -> None:
        replay(self.groups, record, self.ctx.journal)
        self.ctx.emit(record)

    def group_epoch(self, group_id: str, epoch: int) -> None:
        self._write(new_consumer_group_epoch_record(group_id, epoch))

    def subscription_metadata(self, group_id: str, topics: Iterable[SubscribedTopic]) -> None:
        self._write(new_consumer_group_subscription_metadata_record(group_id, topics))

    def member_metadata(self, group_id: str, m: ConsumerGroupMember) -> None:
        self._write(new_consumer_group_member_metadata_record(group_id, m.member_id, m.metadata_value()))

    def target(self, group_id: str, member_id: str, partitions: Partitions) -> None:
        self._write(new_consumer_group_target_assignment_record(group_id, member_id, to_tuple(partitions)))

    def target_epoch(self, group_id: str, epoch: int) -> None:
        self._write(new_consumer_group_target_assignment_epoch_record(group_id, epoch))

    def current_assignment(self, group_id: str, m: ConsumerGroupMember) -> None:
        self._write(
            new_consumer_group_current_assignment_record(
                group_id,
                m.member_id,
                member_epoch=m.member_epoch,
                previous_member_epoch=m.previous_member_epoch,
                state=m.state.value,
                assigned=to_tuple(m.assigned),
                pending_revocation=to_tuple(m.pending_revocation),
            )
        )

    def remove_member(self, group_id: str, member_id: str) -> None:
        """Kafka's order: current assignment, target assignment, then the member's metadata."""
        self._write(new_consumer_group_current_assignment_tombstone(group_id, member_id))
        self._write(new_consumer_group_target_assignment_tombstone(group_id, member_id))
        self._write(new_consumer_group_member_metadata_tombstone(group_id, member_id))

    def delete_group(self, group: ConsumerGroup) -> None:
        """Tombstone every record of the group (members first, the epoch record last)."""
        group_id = group.group_id
        for member_id in list(group.members):
            self.remove_member(group_id, member_id)
        for member_id in list(group.targets):
            self._write(new_consumer_group_target_assignment_tombstone(group_id, member_id))
        self._write(new_consumer_group_target_assignment_epoch_tombstone(group_id))
        self._write(new_consumer_group_subscription_metadata_tombstone(group_id))
        self._write(new_consumer_group_epoch_tombstone(group_id))
