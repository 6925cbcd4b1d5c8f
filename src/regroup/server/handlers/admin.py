"""Group inspection and deletion: DescribeGroups (v0-6; v6, KIP-1043: a group that is not classic is
GROUP_ID_NOT_FOUND with a message), ListGroups (v0-5, state filter v4+, type filter v5+),
DeleteGroups (v0-2). The core decides everything (KIP-40 semantics, "Dead" for unknown groups,
NON_EMPTY_GROUP, ...); this module maps versions and checks the ACLs. When a DescribeGroups v3+ client asks for
authorized operations (KIP-430) it gets the group operations (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
ALTER_CONFIGS: Kafka 4's, group configurations included) the principal may do: every one without an authorizer.

DescribeGroups and ListGroups read the core's rows in their first step and build their answers a chunk at a time,
yielding to the event loop between chunks (``server/inspection_answers.py``): 10,000 groups or members are
answered without holding the loop for the whole answer. DeleteGroups asks the core about ``DELETE_GROUPS_CHUNK``
groups per call, in the request's order, each group once (a group named twice gets the same answer twice).

Authorization, as Kafka's ``KafkaApis`` checks it:

* DescribeGroups: DESCRIBE on each Group; a group without it is GROUP_AUTHORIZATION_FAILED (nothing of it
  disclosed), listed ahead of the groups the coordinator describes.
* ListGroups: DESCRIBE on the Cluster lists every group; without it only the groups the principal may DESCRIBE
  are listed (never CLUSTER_AUTHORIZATION_FAILED).
* DeleteGroups: DELETE on each Group; a group without it is GROUP_AUTHORIZATION_FAILED and left alone (the
  coordinator is asked only about the others), listed after them.
"""

from __future__ import annotations

import functools
from typing import Any

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.inspect import DescribedRow, ListedRow, MemberRow, described_rows, listed_rows_of
from regroup.coordinator.result import RequestKey, Result
from regroup.model.errors import ErrorCode
from regroup.protocol.admin import DeleteGroupsResponse, DescribedGroup, ListGroupsRequest
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed
from regroup.server.encoded import PreEncoded
from regroup.server.entities import build
from regroup.server.handlers._common import respond
from regroup.server.handlers.authorized import GROUP_OPERATIONS, authorized_operations
from regroup.server.handlers.authorized import NOT_REQUESTED as OPERATIONS_NOT_REQUESTED
from regroup.server.inspection_answers import (
    element_class,
    encode_array,
    encode_items,
    entity_bytes,
    read,
    read_pacer,
    spliced,
)
from regroup.server.offset_answers import Pacer, pause

__all__ = ["GROUP_OPERATIONS", "OPERATIONS_NOT_REQUESTED", "SPECS"]

DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42
#: groups a DeleteGroups hands the core per call (about 9 µs a group there, and its records written apart): a
#: DeleteGroups of 10,000 groups was one call of about 90 ms on the event loop, and calls of 500 groups still
#: 10-13 ms on a loaded server
DELETE_GROUPS_CHUNK = 200
#: a DeleteGroups result costs about two units of a chunk to encode (4 µs: 1,000 of them in one step were 4 ms)
DELETED_GROUP_WEIGHT = 2
#: groups a ListGroups lists per core call, a turn of the loop between two (all 11,000 of them in one call:
#: 15-35 ms of the loop on a slow machine, its first request held the loop 60-74 ms with kio's first import)
LIST_GROUPS_CHUNK = 1_000


# ------------------------------------------------------------------------------------- DescribeGroups
def _described(group: DescribedGroup, operations: int) -> dict[str, Any]:
    return {
        "error_code": group.error,
        "error_message": group.error_message,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol_data,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in group.members
        ],
        "authorized_operations": operations if group.error is ErrorCode.NONE else OPERATIONS_NOT_REQUESTED,
    }


def _describe_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    groups = [DescribedGroup(group_id=g, error=code, state="") for g in request.groups]
    return respond(ctx, groups=[_described(g, OPERATIONS_NOT_REQUESTED) for g in groups])


def _member_fields(m: MemberRow) -> dict[str, Any]:
    return {
        "member_id": m[0],
        "group_instance_id": m[1],
        "client_id": m[2],
        "client_host": m[3],
        "member_metadata": m[4],
        "member_assignment": m[5],
    }


#: a classic member costs about two listed groups to encode, a described group (its entity written by kio) about
#: forty
MEMBER_WEIGHT, GROUP_WEIGHT = 2, 40


async def _described_bytes(group_class: type[Any], row: DescribedRow, operations: int, pacer: Pacer) -> bytes:
    """One group of a DescribeGroups answer, its members encoded a chunk at a time."""
    group_id, error, state, protocol_type, protocol_data, members, message = row
    empty = build(
        group_class,
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state=state,
        protocol_type=protocol_type,
        protocol_data=protocol_data,
        members=[],
        authorized_operations=operations if error is ErrorCode.NONE else OPERATIONS_NOT_REQUESTED,
    )
    if pacer.due(GROUP_WEIGHT):
        await pause()
    if not members:
        return entity_bytes(empty)
    member_class = element_class(group_class, "members")
    parts = await encode_items(member_class, members, pacer, _member_fields, MEMBER_WEIGHT)
    return await spliced(empty, "members", parts, pacer)


async def describe_groups(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on each Group."""
    group_ids: list[str] = []
    refused: list[dict[str, Any]] = []
    for group_id in request.groups:
        if allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            group_ids.append(group_id)
        else:
            failed = DescribedGroup(group_id=group_id, error=ErrorCode.GROUP_AUTHORIZATION_FAILED, state="")
            refused.append(_described(failed, OPERATIONS_NOT_REQUESTED))
    rows: list[DescribedRow] = []
    if group_ids:
        version = ctx.api_version
        rows = await read(broker, lambda c: described_rows(c.groups, group_ids, version))
    wanted = bool(getattr(request, "include_authorized_operations", False))
    empty = respond(ctx, groups=refused)
    group_class = element_class(type(empty), "groups")
    pacer = read_pacer(sum(len(row[5]) for row in rows))
    parts = [entity_bytes(group) for group in empty.groups]
    for row in rows:
        operations = (
            authorized_operations(broker, ctx, ResourceType.GROUP, row[0], GROUP_OPERATIONS)
            if wanted and row[1] is ErrorCode.NONE
            else OPERATIONS_NOT_REQUESTED
        )
        parts.append(await _described_bytes(group_class, row, operations, pacer))
    body = await spliced(respond(ctx, groups=[]), "groups", parts, pacer)
    codes = [int(g.error_code) for g in empty.groups] + [int(row[1]) for row in rows]
    return PreEncoded(type(empty), body, tuple(code for code in codes if code))


# ----------------------------------------------------------------------------------------- ListGroups
def _list_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, groups=[])


def _listed_fields(row: ListedRow) -> dict[str, Any]:
    return {"group_id": row[0], "protocol_type": row[1], "group_state": row[2], "group_type": row[3]}


def _listed_slice(group_ids: list[str], req: ListGroupsRequest, coordinator: Any) -> list[ListedRow]:
    return listed_rows_of(coordinator.groups, group_ids, req)


async def list_groups(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on the Cluster: every group; else the groups with DESCRIBE on the Group."""
    every_group = allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    req = ListGroupsRequest(
        states=tuple(getattr(request, "states_filter", ())), types=tuple(getattr(request, "types_filter", ()))
    )
    group_ids: list[str] = await read(broker, lambda c: sorted(c.groups))
    listed: list[ListedRow] = []
    for first in range(0, len(group_ids), LIST_GROUPS_CHUNK):
        if first:
            await pause()  # (each slice of groups its own core call, the loop given a turn between two)
        ids = group_ids[first : first + LIST_GROUPS_CHUNK]
        listed += await read(broker, functools.partial(_listed_slice, ids, req))
    if not every_group:
        listed = [g for g in listed if allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g[0])]
    empty = respond(ctx, error_code=ErrorCode.NONE, groups=[])
    return await encode_array(empty, "groups", listed, _listed_fields, pacer=read_pacer(len(listed)))


# --------------------------------------------------------------------------------------- DeleteGroups
def _delete_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, results=[{"group_id": g, "error_code": code} for g in request.groups_names])


async def delete_groups(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DELETE on each Group."""
    group_ids: list[str] = []
    refused: dict[str, ErrorCode] = {}
    for group_id in request.groups_names:
        if allowed(broker, ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            group_ids.append(group_id)
        else:
            refused[group_id] = ErrorCode.GROUP_AUTHORIZATION_FAILED
    unique = list(dict.fromkeys(group_ids))  # (a group named twice is answered alike, whichever call it falls in)
    outcome: dict[str, ErrorCode] = {}
    for start in range(0, len(unique), DELETE_GROUPS_CHUNK):
        resp: DeleteGroupsResponse = await broker.coordinator.call(
            functools.partial(_delete_chunk, unique[start : start + DELETE_GROUPS_CHUNK])
        )
        for group_id, code in resp.results:
            outcome.setdefault(group_id, code)
    results = [(group_id, outcome[group_id]) for group_id in group_ids]
    results.extend(refused.items())
    # (encoded a chunk at a time: kio's entities for 10,000 groups are tens of milliseconds in one step)
    codes = (code for _, code in results)
    return await encode_array(
        respond(ctx, results=[]), "results", results, _deleted_fields, codes, weight=DELETED_GROUP_WEIGHT
    )


def _deleted_fields(result: tuple[str, ErrorCode]) -> dict[str, Any]:
    return {"group_id": result[0], "error_code": result[1]}


def _delete_chunk(group_ids: list[str], coordinator: GroupCoordinator, key: RequestKey, now_ms: int) -> Result:
    return coordinator.delete_groups(group_ids, key, now_ms)


SPECS = [
    ApiSpec(DESCRIBE_GROUPS, 0, 6, describe_groups, _describe_error),
    ApiSpec(LIST_GROUPS, 0, 5, list_groups, _list_error),
    ApiSpec(DELETE_GROUPS, 0, 2, delete_groups, _delete_error),
]
