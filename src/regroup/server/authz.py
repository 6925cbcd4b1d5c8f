"""The one way a handler asks whether its request may do something: ``allowed`` (a yes or no, for the APIs that
answer per item or hide what the principal may not see) and ``require`` (raises the API's authorization error).
Without an authorizer (``authorizer.class.name`` unset) everything is allowed, as in Kafka.

Each handler's docstring names the ACL it checks, from Kafka's API-to-ACL table."""

from __future__ import annotations

from typing import Any, Protocol

from regroup.model.errors import ApiError, ErrorCode
from regroup.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from regroup.server.api import RequestContext


class Authorizer(Protocol):
    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool: ...


def authorizer_of(broker: Any) -> Authorizer | None:
    """The broker's authorizer, or None when authorization is off."""
    return getattr(broker, "authorizer", None)


def decisions_stamp(broker: Any) -> object | None:
    """What every decision for a principal and host depends on, to compare with a later one: equal stamps, same
    decisions. None: the decisions cannot be remembered (an authorizer that does not count its changes)."""
    authorizer = authorizer_of(broker)
    if authorizer is None:
        return ()
    generation = getattr(authorizer, "generation", None)
    return None if generation is None else (id(authorizer), generation)


def allowed(broker: Any, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    return permits(broker, ctx.principal, ctx.client_host, operation, resource_type, name)


def permits(
    broker: Any, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """``allowed`` for a principal and host given as they are (an answer given at once has no context)."""
    authorizer = authorizer_of(broker)
    if authorizer is None:
        return True
    return authorizer.authorize(principal, host, operation, resource_type, name)


def require(
    broker: Any,
    ctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    error: ErrorCode,
) -> None:
    """Raise ``ApiError(error)`` unless the request's principal may do ``operation`` on the resource."""
    if not allowed(broker, ctx, operation, resource_type, name):
        raise ApiError(error)


def require_cluster(broker: Any, ctx: RequestContext, operation: AclOperation) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED unless the principal may do ``operation`` on the cluster."""
    require(broker, ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
