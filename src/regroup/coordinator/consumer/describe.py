"""ConsumerGroupDescribe (KIP-848): epochs, state, the assignor in use, and every member with its current
and target assignment (topic ids with names).

``consumer_group_rows`` takes the same answer in two steps for a group of 10,000 members: first what the group
is now, cheap (the header and, per member, its fields and its two assignments as they are: ``Partitions`` are
replaced when they change, never changed in place), then ``DescribedMembers`` turns those rows into the
described members a slice at a time (``server/inspection_answers.py`` yields to the event loop between slices).
``describe_consumer_group`` is both steps at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer.group import ConsumerGroup, Partitions
from regroup.coordinator.described_partitions import DescribedPartitions
from regroup.coordinator.groups import Groups
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ErrorCode
from regroup.protocol.consumer import DescribedConsumerGroup, DescribedConsumerMember, DescribedTopicPartitions

#: one member as ``consumer_group_rows`` takes it: (member id, instance id, rack id, member epoch, client id,
#: client host, subscribed topic names, subscribed topic regex, assignment, target assignment, classic protocol)
MemberRow = tuple[str, str | None, str | None, int, str, str, tuple[str, ...], str | None, Partitions, Partitions, bool]


class DescribedMembers:
    """Member rows as ``DescribedConsumerMember``s, against the cluster image the rows were taken with (topic
    names looked up and topic ids ordered once per topic, not once per member)."""

    __slots__ = ("_partitions",)

    def __init__(self, image: ClusterImage) -> None:
        self._partitions = DescribedPartitions(image, DescribedTopicPartitions)

    def member(self, row: MemberRow) -> DescribedConsumerMember:
        return DescribedConsumerMember(
            member_id=row[0],
            instance_id=row[1],
            rack_id=row[2],
            member_epoch=row[3],
            client_id=row[4],
            client_host=row[5],
            subscribed_topic_names=row[6],
            subscribed_topic_regex=row[7],
            assignment=self._partitions(row[8]),
            target_assignment=self._partitions(row[9]),
            uses_classic_protocol=row[10],
        )


def consumer_group_rows(
    config: CoordinatorConfig, groups: Groups, group_id: str
) -> tuple[DescribedConsumerGroup, list[MemberRow]]:
    """The group as ConsumerGroupDescribe answers it, without its members (``members`` empty), and the rows of
    its members (empty for an error)."""
    if not group_id:
        return DescribedConsumerGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID), []
    group = groups.typed(group_id, ConsumerGroup)
    if group is None:
        why = "is not a consumer group" if group_id in groups else "not found"
        message = f"Group {group_id} {why}."
        return DescribedConsumerGroup(group_id=group_id, error=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message), []
    target_of = group.target_of
    rows: list[MemberRow] = [
        (
            m.member_id,
            m.instance_id,
            m.rack_id,
            m.member_epoch,
            m.client_id,
            m.client_host,
            m.subscribed_topic_names,
            m.subscribed_topic_regex,
            m.assigned,
            target_of(m.member_id),
            m.classic is not None,
        )
        for m in group.members.values()
    ]
    header = DescribedConsumerGroup(
        group_id=group_id,
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor(config.consumer_group_assignors[0]),
    )
    return header, rows


def describe_consumer_group(config: CoordinatorConfig, groups: Groups, group_id: str) -> DescribedConsumerGroup:
    header, rows = consumer_group_rows(config, groups, group_id)
    if header.error is not ErrorCode.NONE:
        return header
    return with_members(header, rows, DescribedMembers(groups.image))


def with_members(
    header: DescribedConsumerGroup, rows: Sequence[MemberRow], described: DescribedMembers
) -> DescribedConsumerGroup:
    """``header`` with the members ``rows`` describe."""
    return dataclasses.replace(header, members=tuple(described.member(row) for row in rows))
