"""DescribeAcls (v1–v3), CreateAcls (v1–v3) and DeleteAcls (v1–v3): Kafka's ACL administration over the
broker's durable ACLs (``server/acl_store.py``, ``broker.acls``), as Kafka's ``AclApis`` answers it.

ACLs checked (Kafka's API-to-ACL table): DescribeAcls needs DESCRIBE on the CLUSTER, CreateAcls and
DeleteAcls need ALTER on the CLUSTER; otherwise the whole request is CLUSTER_AUTHORIZATION_FAILED. That check
comes first; then, without an authorizer (``authorizer.class.name`` unset: ``broker.acls`` is None),
every ACL API answers SECURITY_DISABLED with Kafka's message ("No Authorizer is configured on the broker" for
DescribeAcls, "No Authorizer is configured." for the others).

- **DescribeAcls**: the ACLs the filter selects (``security/bindings.py``: a None name, principal or host and
  an ANY type, operation or permission select all; the pattern type MATCH selects every ACL that applies to
  the name: its LITERAL, the ``*`` wildcard and the prefixes it starts with), grouped by resource pattern; the
  answer encoded by hand, 1,000 ACLs between two yields to the loop (``server/acl_answers.py``).
  A filter with an UNKNOWN field (a code Kafka does not define) is INVALID_REQUEST.
- **CreateAcls**: each creation is checked on its own (``validate_binding``: a CLUSTER resource named
  ``kafka-cluster``, a non-empty name, concrete types, a LITERAL or PREFIXED pattern, a ``Type:name``
  principal); a refused one gets INVALID_REQUEST with the reason. The others are stored together, durably,
  before the answer; one that exists already succeeds again. Kafka refuses a request with UNKNOWN or ANY
  fields as a whole; regroup answers those creations one by one.
- **DeleteAcls**: each filter (checked like DescribeAcls') deletes the ACLs it selects and lists them; all
  filters are matched against the ACLs as they were before the request, so an ACL two filters select is
  listed under both. The deletions of the request are stored together, durably, before the answer.

A write that fails is KAFKA_STORAGE_ERROR for the creations or filters it concerned, and nothing changes.
The versions are those kio ships (Kafka's v0, without pattern types, is not served).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from regroup.model.errors import ErrorCode
from regroup.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.bindings import AclBinding, AclBindingFilter, from_code, validate_filter
from regroup.server.acl_answers import FilterResult, deleted_acls_answer, described_acls_answer
from regroup.server.acl_store import AclStore
from regroup.server.api import ApiSpec, RequestContext
from regroup.server.authz import require_cluster
from regroup.server.handlers._common import respond

__all__ = [
    "CREATE_ACLS",
    "DELETE_ACLS",
    "DESCRIBE_ACLS",
    "SPECS",
    "handle_create_acls",
    "handle_delete_acls",
    "handle_describe_acls",
]

log = logging.getLogger(__name__)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
NO_AUTHORIZER_DESCRIBE: Final = "No Authorizer is configured on the broker"
NO_AUTHORIZER: Final = "No Authorizer is configured."
STORAGE_ERROR: Final = KioErrorCode.kafka_storage_error


def _store(broker: Any) -> AclStore | None:
    store: AclStore | None = getattr(broker, "acls", None)
    return store


def _filter(entity: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or of one DeleteAcls filter (same field names)."""
    return AclBindingFilter(
        resource_type=from_code(ResourceType, entity.resource_type_filter),
        resource_name=entity.resource_name_filter,
        pattern_type=from_code(PatternType, entity.pattern_type_filter),
        principal=entity.principal_filter,
        host=entity.host_filter,
        operation=from_code(AclOperation, entity.operation),
        permission=from_code(AclPermissionType, entity.permission_type),
    )


def _binding(creation: Any) -> AclBinding:
    return AclBinding(
        resource_type=from_code(ResourceType, creation.resource_type),
        resource_name=creation.resource_name,
        pattern_type=from_code(PatternType, creation.resource_pattern_type),
        principal=creation.principal,
        host=creation.host,
        operation=from_code(AclOperation, creation.operation),
        permission=from_code(AclPermissionType, creation.permission_type),
    )


# ---------------------------------------------------------------------- DescribeAcls


async def handle_describe_acls(broker: Any, ctx: RequestContext, request: Any) -> Any:
    require_cluster(broker, ctx, AclOperation.DESCRIBE)
    store = _store(broker)
    if store is None:
        return _describe_response(ctx, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE, [])
    acl_filter = _filter(request)
    problem = validate_filter(acl_filter)
    if problem is not None:
        return _describe_response(ctx, ErrorCode.INVALID_REQUEST, problem, [])
    empty = respond(ctx, error_code=ErrorCode.NONE, error_message=None, resources=[])
    return await described_acls_answer(empty, store.describe(acl_filter), ())


def _describe_response(ctx: RequestContext, code: ErrorCode, message: str | None, acls: Sequence[AclBinding]) -> Any:
    resources: dict[tuple[ResourceType, str, PatternType], list[dict[str, Any]]] = {}
    for b in acls:
        resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission}
        )
    return respond(
        ctx,
        error_code=code,
        error_message=message,
        resources=[
            {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": entries}
            for (rt, name, pt), entries in resources.items()
        ],
    )


def _describe_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _describe_response(ctx, code, None, [])


# ---------------------------------------------------------------------- CreateAcls


async def handle_create_acls(broker: Any, ctx: RequestContext, request: Any) -> Any:
    require_cluster(broker, ctx, AclOperation.ALTER)
    store = _store(broker)
    if store is None:
        return _create_response(ctx, [(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)] * len(request.creations))
    bindings = [_binding(c) for c in request.creations]
    try:
        errors = await store.create_aside(bindings)
    except OSError as exc:
        log.error("storing %d ACLs failed: %s", len(bindings), exc)
        failed = (STORAGE_ERROR, f"{type(exc).__name__}: {exc}")
        return _create_response(ctx, [failed] * len(bindings))
    return _create_response(
        ctx, [(ErrorCode.NONE, None) if e is None else (ErrorCode.INVALID_REQUEST, e) for e in errors]
    )


def _create_response(ctx: RequestContext, results: Sequence[tuple[int, str | None]]) -> Any:
    return respond(ctx, results=[{"error_code": code, "error_message": message} for code, message in results])


def _create_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _create_response(ctx, [(code, None)] * len(request.creations))


# ---------------------------------------------------------------------- DeleteAcls


async def handle_delete_acls(broker: Any, ctx: RequestContext, request: Any) -> Any:
    require_cluster(broker, ctx, AclOperation.ALTER)
    store = _store(broker)
    if store is None:
        return _delete_error_response(ctx, len(request.filters), ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    filters = [_filter(f) for f in request.filters]
    problems = [validate_filter(f) for f in filters]
    valid = [f for f, p in zip(filters, problems, strict=True) if p is None]
    try:
        deleted = iter(await store.delete_aside(valid))
    except OSError as exc:
        log.error("storing the deletion of ACLs failed: %s", exc)
        failed = _filter_result(STORAGE_ERROR, f"{type(exc).__name__}: {exc}", [])
        return respond(
            ctx,
            filter_results=[
                failed if p is None else _filter_result(ErrorCode.INVALID_REQUEST, p, []) for p in problems
            ],
        )
    results: list[FilterResult] = [
        (ErrorCode.NONE, None, next(deleted)) if p is None else (ErrorCode.INVALID_REQUEST, p, []) for p in problems
    ]
    codes = tuple(int(code) for code, _, _ in results if code)
    return await deleted_acls_answer(respond(ctx, filter_results=[]), results, codes)


def _filter_result(code: int, message: str | None, acls: Sequence[AclBinding]) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "matching_acls": [
            {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "resource_type": b.resource_type,
                "resource_name": b.resource_name,
                "pattern_type": b.pattern_type,
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation,
                "permission_type": b.permission,
            }
            for b in acls
        ],
    }


def _delete_error_response(ctx: RequestContext, count: int, code: ErrorCode, message: str | None) -> Any:
    return respond(ctx, filter_results=[_filter_result(code, message, [])] * count)


def _delete_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _delete_error_response(ctx, len(request.filters), code, None)


SPECS: list[ApiSpec] = [
    ApiSpec(DESCRIBE_ACLS, 1, 3, handle_describe_acls, _describe_error),
    ApiSpec(CREATE_ACLS, 1, 3, handle_create_acls, _create_error),
    ApiSpec(DELETE_ACLS, 1, 3, handle_delete_acls, _delete_error),
]
