"""Group inspection (KIP-40 and later) for every group type: DescribeGroups, ListGroups, and DeleteGroups for
empty groups. What each type shows and allows is its ``GroupType``'s."""

from __future__ import annotations

from regroup.coordinator.context import Ctx
from regroup.coordinator.group_types import type_of
from regroup.coordinator.groups import Groups
from regroup.coordinator.offsets import OffsetStore
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.admin import (
    DeleteGroupsResponse,
    DescribedGroup,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from regroup.records.builders import new_offset_tombstone


def describe_group(groups: Groups, group_id: str, version: int) -> DescribedGroup:
    """DescribeGroups describes classic groups only (Kafka). A group of another type, like a missing one,
    is "Dead"; from version 6 (KIP-1043) it is GROUP_ID_NOT_FOUND with a message saying which."""
    if not group_id:
        return DescribedGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID, state="")
    group = groups.get(group_id)
    described = type_of(group).described(group) if group is not None else None
    if described is not None:
        return described
    if version < 6:
        return DescribedGroup(group_id=group_id, state="Dead")
    why = "is not a classic group" if group is not None else "not found"
    return DescribedGroup(
        group_id=group_id, error=ErrorCode.GROUP_ID_NOT_FOUND, state="Dead", error_message=f"Group {group_id} {why}."
    )


def list_groups(groups: Groups, req: ListGroupsRequest) -> ListGroupsResponse:
    states = {s.strip().lower() for s in req.states}
    types = {t.lower() for t in req.types}  # Kafka's GroupType.parse lower-cases but does not trim
    rows: list[ListedGroup] = [type_of(group).listed(group) for group in groups.values()]
    listed = [
        row
        for row in sorted(rows, key=lambda r: r.group_id)
        if (not states or row.state.lower() in states) and (not types or row.group_type in types)
    ]
    return ListGroupsResponse(groups=tuple(listed))


def delete_groups(ctx: Ctx, groups: Groups, store: OffsetStore, group_ids: list[str]) -> DeleteGroupsResponse:
    results: list[tuple[str, ErrorCode]] = []
    for group_id in group_ids:
        group = groups.get(group_id) if group_id else None
        if not group_id:
            results.append((group_id, ErrorCode.INVALID_GROUP_ID))
            continue
        if group is None:
            results.append((group_id, ErrorCode.GROUP_ID_NOT_FOUND))
            continue
        kind = type_of(group)
        try:
            kind.validate_delete(group)
        except ApiError as exc:
            results.append((group_id, exc.code))
            continue
        for topic, partition in sorted(store.of(group_id)):
            ctx.emit(new_offset_tombstone(group_id, topic, partition))
        kind.delete(ctx, groups, group)
        results.append((group_id, ErrorCode.NONE))
    return DeleteGroupsResponse(results=tuple(results))
