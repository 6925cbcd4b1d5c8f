"""ShareGroupDescribe (KIP-932): epochs, state, the assignor, and every member with its assignment (topic ids
with names).

``share_group_rows`` takes the same answer in two steps for a big group, as ``consumer/describe.py`` does for
consumer groups: first the group's header and, per member, its fields and its assignment as they are (cheap:
``Partitions`` are replaced when they change, never changed in place), then ``DescribedShareMembers`` turns the
rows into described members a slice at a time. ``describe_share_group`` is both steps at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from regroup.coordinator.described_partitions import DescribedPartitions
from regroup.coordinator.groups import Groups
from regroup.coordinator.share.group import Partitions, ShareGroup
from regroup.coordinator.share.writes import SIMPLE_ASSIGNOR
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ErrorCode
from regroup.protocol.share import DescribedShareGroup, DescribedShareMember, DescribedSharePartitions

#: one member as ``share_group_rows`` takes it: (member id, rack id, member epoch, client id, client host,
#: subscribed topic names, assignment)
MemberRow = tuple[str, str | None, int, str, str, tuple[str, ...], Partitions]


class DescribedShareMembers:
    """Member rows as ``DescribedShareMember``s, against the cluster image the rows were taken with (topic names
    looked up and topic ids ordered once per topic, not once per member)."""

    __slots__ = ("_partitions",)

    def __init__(self, image: ClusterImage) -> None:
        self._partitions = DescribedPartitions(image, DescribedSharePartitions)

    def member(self, row: MemberRow) -> DescribedShareMember:
        return DescribedShareMember(
            member_id=row[0],
            rack_id=row[1],
            member_epoch=row[2],
            client_id=row[3],
            client_host=row[4],
            subscribed_topic_names=row[5],
            assignment=self._partitions(row[6]),
        )


def share_group_rows(groups: Groups, group_id: str) -> tuple[DescribedShareGroup, list[MemberRow]]:
    """The group as ShareGroupDescribe answers it, without its members (``members`` empty), and the rows of its
    members (empty for an error)."""
    if not group_id:
        return DescribedShareGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID), []
    group = groups.typed(group_id, ShareGroup)
    if group is None:
        why = "is not a share group" if group_id in groups else "not found"
        message = f"Group {group_id} {why}."
        return DescribedShareGroup(group_id=group_id, error=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message), []
    rows: list[MemberRow] = [
        (m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host, m.subscribed_topic_names, m.assigned)
        for m in group.members.values()
    ]
    header = DescribedShareGroup(
        group_id=group_id,
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR,
    )
    return header, rows


def describe_share_group(groups: Groups, group_id: str) -> DescribedShareGroup:
    header, rows = share_group_rows(groups, group_id)
    if header.error is not ErrorCode.NONE:
        return header
    return with_members(header, rows, DescribedShareMembers(groups.image))


def with_members(
    header: DescribedShareGroup, rows: Sequence[MemberRow], described: DescribedShareMembers
) -> DescribedShareGroup:
    """``header`` with the members ``rows`` describe."""
    return dataclasses.replace(header, members=tuple(described.member(row) for row in rows))
