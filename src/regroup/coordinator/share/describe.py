"""ShareGroupDescribe (KIP-932): epochs, state, the assignor, and every member with its assignment (topic ids
with names)."""

from __future__ import annotations

from regroup.coordinator.groups import Groups
from regroup.coordinator.share.group import Partitions, ShareGroup
from regroup.coordinator.share.writes import SIMPLE_ASSIGNOR
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ErrorCode
from regroup.protocol.share import DescribedShareGroup, DescribedShareMember, DescribedSharePartitions


def _described(parts: Partitions, image: ClusterImage) -> tuple[DescribedSharePartitions, ...]:
    index = image.id_index()
    out = []
    for topic_id in sorted(parts, key=str):
        topic = index.get(topic_id)
        out.append(
            DescribedSharePartitions(
                topic_id=topic_id, topic_name=topic.name if topic else "", partitions=tuple(sorted(parts[topic_id]))
            )
        )
    return tuple(out)


def describe_share_group(groups: Groups, group_id: str) -> DescribedShareGroup:
    if not group_id:
        return DescribedShareGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID)
    group = groups.typed(group_id, ShareGroup)
    if group is None:
        why = "is not a share group" if group_id in groups else "not found"
        return DescribedShareGroup(
            group_id=group_id, error=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} {why}."
        )
    return DescribedShareGroup(
        group_id=group_id,
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR,
        members=tuple(
            DescribedShareMember(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                assignment=_described(m.assigned, groups.image),
            )
            for m in group.members.values()
        ),
    )
