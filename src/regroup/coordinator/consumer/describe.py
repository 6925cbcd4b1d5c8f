"""ConsumerGroupDescribe (KIP-848): epochs, state, the assignor in use, and every member with its current
and target assignment (topic ids with names)."""

from __future__ import annotations

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer.group import ConsumerGroup, Partitions
from regroup.coordinator.groups import Groups
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ErrorCode
from regroup.protocol.consumer import DescribedConsumerGroup, DescribedConsumerMember, DescribedTopicPartitions


def _described(parts: Partitions, image: ClusterImage) -> tuple[DescribedTopicPartitions, ...]:
    index = image.id_index()
    out = []
    for topic_id in sorted(parts, key=str):
        topic = index.get(topic_id)
        out.append(
            DescribedTopicPartitions(
                topic_id=topic_id, topic_name=topic.name if topic else "", partitions=tuple(sorted(parts[topic_id]))
            )
        )
    return tuple(out)


def describe_consumer_group(config: CoordinatorConfig, groups: Groups, group_id: str) -> DescribedConsumerGroup:
    if not group_id:
        return DescribedConsumerGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID)
    group = groups.typed(group_id, ConsumerGroup)
    if group is None:
        why = "is not a consumer group" if group_id in groups else "not found"
        return DescribedConsumerGroup(
            group_id=group_id, error=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} {why}."
        )
    return DescribedConsumerGroup(
        group_id=group_id,
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor(config.consumer_group_assignors[0]),
        members=tuple(
            DescribedConsumerMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_described(m.assigned, groups.image),
                target_assignment=_described(group.target_of(m.member_id), groups.image),
                uses_classic_protocol=m.classic is not None,
            )
            for m in group.members.values()
        ),
    )
