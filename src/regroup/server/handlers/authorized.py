"""Kafka's authorized-operations bit fields (KIP-430) and the authorization questions the handlers share beyond
a plain yes or no (``server/authz.py``).

Bit ``n`` of a bit field stands for Kafka's ``AclOperation`` code ``n``. ``*_OPERATIONS`` are the operations
a resource type supports in the KIP-430 answers, what a broker without an authorizer reports;
``authorized_operations`` narrows one of them to what the request's principal may do, as Kafka's
``AuthHelper.authorizedOperations`` does (an ACL check per operation, each a LITERAL resource of that name).

``authorize_by_resource_type`` is KIP-679's question "may the principal do this operation on *some* resource
of the type", which InitProducerId asks for an idempotent producer without IDEMPOTENT_WRITE on the cluster
(WRITE on any topic is enough), answered as Kafka's ``Authorizer.authorizeByResourceType`` answers it.
"""

from __future__ import annotations

from typing import Any, Final

from regroup.security.acl import WILDCARD, AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.server.api import RequestContext
from regroup.server.authz import allowed, authorizer_of

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

#: the schemas' default: the client did not ask (or the API did not compute them)
NOT_REQUESTED: Final = -(2**31)


def bits(*operations: int) -> int:
    """The bit field of ``operations`` (AclOperation codes)."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


TOPIC_OPERATIONS: Final = bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPERATIONS: Final = bits(
    CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
)
GROUP_OPERATIONS: Final = bits(READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)

#: the principal of ACLs that name every principal
_EVERY_PRINCIPAL: Final = "User:*"
#: the resource name Kafka asks about first, so that a super user is allowed whatever the DENY ACLs say
_ANY_NAME: Final = "hardcode"


def authorized_operations(
    broker: Any, ctx: RequestContext, resource_type: ResourceType, name: str, all_ops_bits: int
) -> int:
    """The operations of ``all_ops_bits`` the request's principal may do on the resource, as a bit field
    (``all_ops_bits`` itself when there is no authorizer)."""
    if authorizer_of(broker) is None:
        return all_ops_bits
    field = 0
    for code in range(all_ops_bits.bit_length()):
        if all_ops_bits >> code & 1 and allowed(broker, ctx, AclOperation(code), resource_type, name):
            field |= 1 << code
    return field


def authorize_by_resource_type(
    broker: Any, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """KIP-679: may the principal do ``operation`` on at least one resource of ``resource_type``? Kafka's
    rules: allowed when the operation is allowed on an arbitrary name (a super user; no ACL at all with
    ``allow.everyone.if.no.acl.found``); denied by a DENY of the wildcard name; else allowed when an ALLOW ACL
    of the principal (or ``User:*``) from this host (or ``*``) for the operation (or ALL) names the wildcard, or
    a LITERAL name no LITERAL DENY names and no PREFIXED DENY covers, or a prefix no shorter PREFIXED DENY
    covers."""
    authorizer = authorizer_of(broker)
    if authorizer is None or authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, _ANY_NAME):
        return True
    bindings = getattr(authorizer, "bindings", None)
    if bindings is None:
        return False
    denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allowed_names: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    wildcard_allowed = False
    for acl in bindings():
        if acl.resource_type != resource_type or acl.pattern_type not in denied:
            continue
        if acl.host not in (ctx.client_host, WILDCARD) or acl.principal not in (ctx.principal, _EVERY_PRINCIPAL):
            continue
        if acl.operation not in (operation, AclOperation.ALL):
            continue
        if acl.permission == AclPermissionType.DENY:
            if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                return False
            denied[acl.pattern_type].add(acl.resource_name)
        elif acl.permission == AclPermissionType.ALLOW:
            if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                wildcard_allowed = True
            else:
                allowed_names[acl.pattern_type].add(acl.resource_name)
    if wildcard_allowed:
        return True
    for pattern_type, names in allowed_names.items():
        for name in names:
            if pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                continue
            if not any(name[:length] in denied[PatternType.PREFIXED] for length in range(1, len(name) + 1)):
                return True
    return False
