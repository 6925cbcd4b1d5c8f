"""Group inspection (KIP-40 and later) for every group type: DescribeGroups, ListGroups, and DeleteGroups for
empty groups. What each type shows and allows is its ``GroupType``'s.

``listed_rows`` and ``described_rows`` are the same answers as plain tuples, cheap to take in one step for
10,000 groups or members (a tuple costs a twentieth of a frozen dataclass): the server reads them in its first
step and builds the answer's entities a chunk at a time (``server/inspection_answers.py``). The tuples hold
only immutable values (strings, bytes), so what they say stays what the group was when they were taken.
``list_groups`` and ``describe_group`` are the same rows as the protocol's dataclasses; the tests hold both
equal to each group type's own ``listed`` and ``described``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from regroup.coordinator.classic.group import ClassicGroup, ClassicStates
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.context import Ctx
from regroup.coordinator.group_types import type_of
from regroup.coordinator.groups import Groups
from regroup.coordinator.offsets import OffsetStore
from regroup.coordinator.share.group import ShareGroup
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.admin import (
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from regroup.records.builders import new_offset_tombstone

#: one ListGroups row: (group id, protocol type, state, group type)
ListedRow = tuple[str, str, str, str]
#: one DescribeGroups member: (member id, group instance id, client id, client host, metadata, assignment)
MemberRow = tuple[str, str | None, str, str, bytes, bytes]
#: one DescribeGroups group: (group id, error, state, protocol type, protocol data, members, error message)
DescribedRow = tuple[str, ErrorCode, str, str, str, Sequence[MemberRow], str | None]


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


def _classic_row(group: Any) -> ListedRow:
    return (group.group_id, group.protocol_type or "", group.state._value_, "classic")


def _consumer_row(group: Any) -> ListedRow:
    return (group.group_id, "consumer", group.state()._value_, "consumer")


def _share_row(group: Any) -> ListedRow:
    return (group.group_id, "share", group.state()._value_, "share")


#: each group type's ``listed`` as a tuple (a type missing here is listed through its ``GroupType``)
_LISTED_ROWS: Final[dict[type, Callable[[Any], ListedRow]]] = {
    ClassicGroup: _classic_row,
    ConsumerGroup: _consumer_row,
    ShareGroup: _share_row,
}


def _listed_row(group: Any) -> ListedRow:
    row = type_of(group).listed(group)
    return (row.group_id, row.protocol_type, row.state, row.group_type)


def listed_rows(groups: Groups, req: ListGroupsRequest) -> list[ListedRow]:
    """The groups ListGroups answers ``req`` with, by group id, as rows."""
    return listed_rows_of(groups, sorted(groups), req)


def listed_rows_of(groups: Groups, group_ids: Iterable[str], req: ListGroupsRequest) -> list[ListedRow]:
    """``listed_rows`` of the groups among ``group_ids`` (in their order) that exist: a server lists many
    groups a slice of ids at a time, from ``sorted(groups)``."""
    states = {s.strip().lower() for s in req.states}
    types = {t.lower() for t in req.types}  # Kafka's GroupType.parse lower-cases but does not trim
    get = _LISTED_ROWS.get
    found = groups.get
    rows = [(get(type(group)) or _listed_row)(group) for group in map(found, group_ids) if group is not None]
    if not states and not types:
        return rows
    return [row for row in rows if (not states or row[2].lower() in states) and (not types or row[3] in types)]


def group_counts(groups: Groups) -> Counter[tuple[str, str, str]]:
    """How many groups there are by (state, group type, protocol type), as ListGroups would list them: for the
    metrics, without the rows' sort and entities."""
    get = _LISTED_ROWS.get
    counts: Counter[tuple[str, str, str]] = Counter()
    for group in groups.values():
        _, protocol_type, state, group_type = (get(type(group)) or _listed_row)(group)
        counts[(state, group_type, protocol_type)] += 1
    return counts


def list_groups(groups: Groups, req: ListGroupsRequest) -> ListGroupsResponse:
    listed = tuple(
        ListedGroup(group_id=g, protocol_type=p, state=s, group_type=t) for g, p, s, t in listed_rows(groups, req)
    )
    return ListGroupsResponse(groups=listed)


def described_rows(groups: Groups, group_ids: Sequence[str], version: int) -> list[DescribedRow]:
    """``describe_group`` of each of ``group_ids`` as a row (a classic group's members as tuples)."""
    out: list[DescribedRow] = []
    for group_id in group_ids:
        group = groups.get(group_id) if group_id else None
        if type(group) is ClassicGroup and not group.is_in(ClassicStates.DEAD):
            stable = group.is_in(ClassicStates.STABLE)
            protocol = group.protocol_name
            members: list[MemberRow] = [
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(protocol) if stable else b"",
                    m.assignment,
                )
                for m in group.members.values()
            ]
            data = (protocol or "") if stable else ""
            out.append((group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "", data, members, None))
            continue
        d = describe_group(groups, group_id, version)
        rows = [
            (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata, m.assignment) for m in d.members
        ]
        out.append((d.group_id, d.error, d.state, d.protocol_type, d.protocol_data, rows, d.error_message))
    return out


def described_group(row: DescribedRow) -> DescribedGroup:
    """A row of ``described_rows`` as the protocol's ``DescribedGroup``."""
    group_id, error, state, protocol_type, protocol_data, members, message = row
    return DescribedGroup(
        group_id=group_id,
        error=error,
        state=state,
        protocol_type=protocol_type,
        protocol_data=protocol_data,
        members=tuple(
            DescribedMember(
                member_id=m[0], group_instance_id=m[1], client_id=m[2], client_host=m[3], metadata=m[4], assignment=m[5]
            )
            for m in members
        ),
        error_message=message,
    )


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
