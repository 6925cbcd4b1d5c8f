"""``new_xxx_record`` / ``new_xxx_tombstone``: the only place a record is put together from its parts (key
fields and value), for classic groups, offsets and KIP-848 consumer groups (Kafka's
GroupCoordinatorRecordHelpers). The coordinator builds every record it writes or snapshots through these, but
for one: OffsetCommit's records are put together in its own per-partition loop (``coordinator/offsets.py``
``offset_commit``: a request may commit 10,000 partitions in one step), exactly as ``new_offset_commit_record``
does, which tests/property/test_offset_commit_records.py holds it to."""

from __future__ import annotations

from collections.abc import Iterable

from regroup.records.consumer import (
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
    PartitionSet,
    SubscribedTopic,
)
from regroup.records.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PendingOffsetCommitKey,
    Record,
    TxnMarkerKey,
    TxnMarkerValue,
)

# ------------------------------------------------------------------------------------ classic groups, offsets


def new_group_metadata_record(group_id: str, value: GroupMetadataValue) -> Record:
    return Record(GroupMetadataKey(group_id=group_id), value)


def new_group_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id=group_id), None)


def new_offset_commit_record(group_id: str, topic: str, partition: int, value: OffsetCommitValue) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), value)


def new_offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), None)


def new_pending_offset_record(
    producer_id: int, group_id: str, topic: str, partition: int, value: OffsetCommitValue
) -> Record:
    key = PendingOffsetCommitKey(producer_id=producer_id, group_id=group_id, topic=topic, partition=partition)
    return Record(key, value)


def new_pending_offset_tombstone(producer_id: int, group_id: str, topic: str, partition: int) -> Record:
    key = PendingOffsetCommitKey(producer_id=producer_id, group_id=group_id, topic=topic, partition=partition)
    return Record(key, None)


def new_txn_marker_record(producer_id: int, group_id: str, committed: bool) -> Record:
    return Record(TxnMarkerKey(producer_id=producer_id, group_id=group_id), TxnMarkerValue(committed=committed))


# ----------------------------------------------------------------------------------- KIP-848 consumer groups


def new_consumer_group_epoch_record(group_id: str, epoch: int) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id=group_id), ConsumerGroupMetadataValue(epoch=epoch))


def new_consumer_group_epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id=group_id), None)


def new_consumer_group_subscription_metadata_record(group_id: str, topics: Iterable[SubscribedTopic]) -> Record:
    """The group's subscribed topics, sorted by name."""
    value = ConsumerGroupPartitionMetadataValue(topics=tuple(sorted(topics, key=lambda t: t.name)))
    return Record(ConsumerGroupPartitionMetadataKey(group_id=group_id), value)


def new_consumer_group_subscription_metadata_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupPartitionMetadataKey(group_id=group_id), None)


def new_consumer_group_member_metadata_record(
    group_id: str, member_id: str, value: ConsumerGroupMemberMetadataValue
) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), value)


def new_consumer_group_member_metadata_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None)


def new_consumer_group_target_assignment_record(group_id: str, member_id: str, partitions: PartitionSet) -> Record:
    value = ConsumerGroupTargetAssignmentMemberValue(partitions=partitions)
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), value)


def new_consumer_group_target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)


def new_consumer_group_target_assignment_epoch_record(group_id: str, epoch: int, at_ms: int = 0) -> Record:
    value = ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp_ms=at_ms)
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), value)


def new_consumer_group_target_assignment_epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None)


def new_consumer_group_current_assignment_record(
    group_id: str,
    member_id: str,
    *,
    member_epoch: int,
    previous_member_epoch: int,
    state: str,
    assigned: PartitionSet,
    pending_revocation: PartitionSet,
) -> Record:
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member_epoch,
        previous_member_epoch=previous_member_epoch,
        state=state,
        assigned=assigned,
        pending_revocation=pending_revocation,
    )
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), value)


def new_consumer_group_current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None)


def new_consumer_group_regex_record(group_id: str, regex: str, topics: tuple[str, ...], resolved_at_ms: int) -> Record:
    return Record(
        ConsumerGroupRegularExpressionKey(group_id=group_id, regex=regex),
        ConsumerGroupRegularExpressionValue(topics=topics, resolved_at_ms=resolved_at_ms),
    )


def new_consumer_group_regex_tombstone(group_id: str, regex: str) -> Record:
    return Record(ConsumerGroupRegularExpressionKey(group_id=group_id, regex=regex), None)
