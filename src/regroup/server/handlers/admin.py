"""Group inspection and deletion: DescribeGroups (v0-6; v6, KIP-1043: a group that is not classic is
GROUP_ID_NOT_FOUND with a message), ListGroups (v0-5, state filter v4+, type filter v5+),
DeleteGroups (v0-2). The core decides everything (KIP-40 semantics, "Dead" for unknown groups,
NON_EMPTY_GROUP, ...); this module only maps versions. There is no authorizer: when a DescribeGroups v3+
client asks for authorized operations it gets every operation a group supports (READ, DELETE, DESCRIBE), as
Kafka reports without an authorizer."""

from __future__ import annotations

from typing import Any

from regroup.model.errors import ErrorCode
from regroup.protocol.admin import DeleteGroupsResponse, DescribedGroup, ListGroupsRequest, ListGroupsResponse
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.handlers._common import respond

DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42
#: Kafka's AclOperation codes READ=3, DELETE=6, DESCRIBE=8 as a bit field
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
OPERATIONS_NOT_REQUESTED = -(2**31)


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


async def describe_groups(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    group_ids = list(request.groups)
    described: tuple[DescribedGroup, ...] = await broker.coordinator.call(
        lambda c, key, now: c.describe_groups(group_ids, key, now, ctx.api_version)
    )
    wanted = bool(getattr(request, "include_authorized_operations", False))
    operations = GROUP_OPERATIONS if wanted else OPERATIONS_NOT_REQUESTED
    return respond(ctx, groups=[_described(g, operations) for g in described])


# ----------------------------------------------------------------------------------------- ListGroups
def _list_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, groups=[])


async def list_groups(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    req = ListGroupsRequest(
        states=tuple(getattr(request, "states_filter", ())), types=tuple(getattr(request, "types_filter", ()))
    )
    resp: ListGroupsResponse = await broker.coordinator.call(lambda c, key, now: c.list_groups(req, key, now))
    return respond(
        ctx,
        error_code=resp.error,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in resp.groups
        ],
    )


# --------------------------------------------------------------------------------------- DeleteGroups
def _delete_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, results=[{"group_id": g, "error_code": code} for g in request.groups_names])


async def delete_groups(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    group_ids = list(request.groups_names)
    resp: DeleteGroupsResponse = await broker.coordinator.call(lambda c, key, now: c.delete_groups(group_ids, key, now))
    return respond(ctx, results=[{"group_id": g, "error_code": code} for g, code in resp.results])


SPECS = [
    ApiSpec(DESCRIBE_GROUPS, 0, 6, describe_groups, _describe_error),
    ApiSpec(LIST_GROUPS, 0, 5, list_groups, _list_error),
    ApiSpec(DELETE_GROUPS, 0, 2, delete_groups, _delete_error),
]
