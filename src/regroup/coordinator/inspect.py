"""Group inspection (KIP-40 and later): DescribeGroups, ListGroups, and DeleteGroups for empty groups."""

from __future__ import annotations

from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupState
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.offsets import OffsetStore
from regroup.model.errors import ErrorCode
from regroup.protocol.admin import (
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from regroup.records.builders import new_group_tombstone, new_offset_tombstone


def describe_group(groups: dict[str, ClassicGroup], group_id: str) -> DescribedGroup:
    if not group_id:
        return DescribedGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID, state="")
    group = groups.get(group_id)
    if group is None or group.is_in(ClassicGroupState.DEAD):
        return DescribedGroup(group_id=group_id, state="Dead")
    stable = group.is_in(ClassicGroupState.STABLE)
    return DescribedGroup(
        group_id=group_id,
        state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=tuple(
            DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(group.protocol_name) if stable else b"",
                assignment=m.assignment,
            )
            for m in group.members.values()
        ),
    )


def list_groups(
    groups: dict[str, ClassicGroup], req: ListGroupsRequest, consumer_groups: dict[str, ConsumerGroup] | None = None
) -> ListGroupsResponse:
    states = {s.strip().lower() for s in req.states}
    types = {t.lower() for t in req.types}  # Kafka's GroupType.parse lower-cases but does not trim
    rows: list[ListedGroup] = []
    for group_id, group in groups.items():
        rows.append(
            ListedGroup(
                group_id=group_id,
                protocol_type=group.protocol_type or "",
                state=group.state.value,
                group_type="classic",
            )
        )
    for group_id, cgroup in (consumer_groups or {}).items():
        rows.append(
            ListedGroup(group_id=group_id, protocol_type="consumer", state=cgroup.state().value, group_type="consumer")
        )
    listed = [
        row
        for row in sorted(rows, key=lambda r: r.group_id)
        if (not states or row.state.lower() in states) and (not types or row.group_type in types)
    ]
    return ListGroupsResponse(groups=tuple(listed))


def delete_groups(
    ctx: Ctx,
    groups: dict[str, ClassicGroup],
    store: OffsetStore,
    group_ids: list[str],
    consumer_groups: dict[str, ConsumerGroup] | None = None,
) -> DeleteGroupsResponse:
    results: list[tuple[str, ErrorCode]] = []
    for group_id in group_ids:
        group = groups.get(group_id)
        cgroup = (consumer_groups or {}).get(group_id)
        if cgroup is not None:
            if cgroup.members:
                results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
                continue
            for topic, partition in sorted(store.of(group_id)):
                ctx.emit(new_offset_tombstone(group_id, topic, partition))
            ConsumerWrites(ctx, consumer_groups or {}).delete_group(cgroup)
            results.append((group_id, ErrorCode.NONE))
        elif not group_id:
            results.append((group_id, ErrorCode.INVALID_GROUP_ID))
        elif group is None or group.is_in(ClassicGroupState.DEAD):
            results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
        elif not group.is_in(ClassicGroupState.EMPTY):
            results.append((group_id, ErrorCode.NON_EMPTY_GROUP))
        else:
            for topic, partition in sorted(store.of(group_id)):
                ctx.emit(new_offset_tombstone(group_id, topic, partition))
            ctx.emit(new_group_tombstone(group_id))
            results.append((group_id, ErrorCode.NONE))
    return DeleteGroupsResponse(results=tuple(results))
