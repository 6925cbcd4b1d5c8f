"""Group inspection and deletion: DescribeGroups (v0-6; v6, KIP-1043: a group that is not classic is
GROUP_ID_NOT_FOUND with a message), ListGroups (v0-5, state filter v4+, type filter v5+),
DeleteGroups (v0-2). The core decides everything (KIP-40 semantics, "Dead" for unknown groups,
NON_EMPTY_GROUP, ...); this module maps versions and checks the ACLs. When a DescribeGroups v3+ client asks for
authorized operations (KIP-430) it gets the group operations (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
ALTER_CONFIGS: Kafka 4's, group configurations included) the principal may do: every one without an authorizer.

Authorization, as Kafka's ``KafkaApis`` checks it:

* DescribeGroups: DESCRIBE on each Group; a group without it is GROUP_AUTHORIZATION_FAILED (nothing of it
  disclosed), listed ahead of the groups the coordinator describes.
* ListGroups: DESCRIBE on the Cluster lists every group; without it only the groups the principal may DESCRIBE
  are listed (never CLUSTER_AUTHORIZATION_FAILED).
* DeleteGroups: DELETE on each Group; a group without it is GROUP_AUTHORIZATION_FAILED and left alone (the
  coordinator is asked only about the others), listed after them.
"""

from __future__ import annotations

from typing import Any

from regroup.model.errors import ErrorCode
from regroup.protocol.admin import DeleteGroupsResponse, DescribedGroup, ListGroupsRequest, ListGroupsResponse
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed
from regroup.server.handlers._common import respond
from regroup.server.handlers.authorized import GROUP_OPERATIONS, authorized_operations
from regroup.server.handlers.authorized import NOT_REQUESTED as OPERATIONS_NOT_REQUESTED

__all__ = ["GROUP_OPERATIONS", "OPERATIONS_NOT_REQUESTED", "SPECS"]

DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42


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
    """DESCRIBE on each Group."""
    group_ids: list[str] = []
    refused: list[dict[str, Any]] = []
    for group_id in request.groups:
        if allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            group_ids.append(group_id)
        else:
            failed = DescribedGroup(group_id=group_id, error=ErrorCode.GROUP_AUTHORIZATION_FAILED, state="")
            refused.append(_described(failed, OPERATIONS_NOT_REQUESTED))
    described: tuple[DescribedGroup, ...] = ()
    if group_ids:
        described = await broker.coordinator.call(
            lambda c, key, now: c.describe_groups(group_ids, key, now, ctx.api_version)
        )
    wanted = bool(getattr(request, "include_authorized_operations", False))
    return respond(
        ctx,
        groups=refused
        + [
            _described(
                g,
                authorized_operations(broker, ctx, ResourceType.GROUP, g.group_id, GROUP_OPERATIONS)
                if wanted and g.error is ErrorCode.NONE
                else OPERATIONS_NOT_REQUESTED,
            )
            for g in described
        ],
    )


# ----------------------------------------------------------------------------------------- ListGroups
def _list_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, groups=[])


async def list_groups(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    """DESCRIBE on the Cluster: every group; else the groups with DESCRIBE on the Group."""
    every_group = allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    req = ListGroupsRequest(
        states=tuple(getattr(request, "states_filter", ())), types=tuple(getattr(request, "types_filter", ()))
    )
    resp: ListGroupsResponse = await broker.coordinator.call(lambda c, key, now: c.list_groups(req, key, now))
    listed = resp.groups
    if not every_group:
        listed = tuple(g for g in listed if allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id))
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
            for g in listed
        ],
    )


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
    results: list[tuple[str, ErrorCode]] = []
    if group_ids:
        resp: DeleteGroupsResponse = await broker.coordinator.call(
            lambda c, key, now: c.delete_groups(group_ids, key, now)
        )
        results.extend(resp.results)
    results.extend(refused.items())
    return respond(ctx, results=[{"group_id": g, "error_code": code} for g, code in results])


SPECS = [
    ApiSpec(DESCRIBE_GROUPS, 0, 6, describe_groups, _describe_error),
    ApiSpec(LIST_GROUPS, 0, 5, list_groups, _list_error),
    ApiSpec(DELETE_GROUPS, 0, 2, delete_groups, _delete_error),
]
