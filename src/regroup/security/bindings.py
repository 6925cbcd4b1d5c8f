"""ACL bindings and the filters that select them (Kafka's ``AclBinding`` / ``AclBindingFilter``), the checks
CreateAcls, DeleteAcls and DescribeAcls make on them, and how a filter matches a binding.

A binding is one ACL: a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal, host,
operation, ALLOW or DENY). A filter has the same fields, each of which may be open: a None name, principal or
host, ANY resource type, operation or permission, ANY or MATCH pattern type.

Matching (Kafka's ``ResourcePatternFilter.matches`` and ``AccessControlEntryFilter.matches``): each given
field must equal the binding's; the pattern type ANY takes any pattern type and then the name must equal the
binding's; MATCH takes every pattern that applies to the filter's name: a LITERAL of that name, the LITERAL
wildcard ``*``, and any PREFIXED pattern the name starts with.

Checks on a new binding (``validate_binding``), in Kafka's order (``AclApis.handleCreateAcls``, then
``AclControlManager.validateNewAcl``): a CLUSTER resource must be named ``kafka-cluster``; the name must not
be empty; the resource type must not be ANY or UNKNOWN, the pattern type must be LITERAL or PREFIXED, the
operation must not be ANY or UNKNOWN, the permission must be ALLOW or DENY. regroup also refuses two
bindings Kafka's controller stores: a principal that is not ``Type:name`` with a non-empty type
(``principal.parse_principal``; Kafka's authorizer fails on one without a colon when it meets it), and a
PREFIXED ``*`` (the wildcard is a LITERAL name; as a prefix it would only select names starting with ``*``).
Checks on a filter (``validate_filter``, Kafka's ``AclControlManager.validateFilter``): no UNKNOWN field.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final, TypeVar

from regroup.security.acl import CLUSTER_NAME, WILDCARD, AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.principal import parse_principal

__all__ = [
    "ANY_FILTER",
    "AclBinding",
    "AclBindingFilter",
    "exact_filter",
    "filter_matches",
    "from_code",
    "indefinite_field",
    "validate_binding",
    "validate_filter",
]

E = TypeVar("E", bound=IntEnum)


def from_code(enum: type[E], code: int) -> E:
    """The member of ``enum`` with wire code ``code``; UNKNOWN (code 0) for a code Kafka does not define, as
    Kafka's ``fromCode`` does."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A selection of ACLs (see the module doc); the defaults select every ACL."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY


#: the filter every ACL matches
ANY_FILTER: Final = AclBindingFilter()


def exact_filter(binding: AclBinding) -> AclBindingFilter:
    """The filter matching exactly ``binding`` (Kafka's ``AclBinding.toFilter``)."""
    return AclBindingFilter(
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission,
    )


def validate_binding(binding: AclBinding) -> str | None:
    """Why ``binding`` may not be created (one line, Kafka's words where Kafka checks it), or None."""
    name = binding.resource_name
    if binding.resource_type == ResourceType.CLUSTER and name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not name:
        return "Invalid empty resource name"
    if binding.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission.name}"
    if binding.pattern_type == PatternType.PREFIXED and name == WILDCARD:
        return "The wildcard resource name '*' must be LITERAL, not PREFIXED"
    try:
        parse_principal(binding.principal)
    except ValueError as exc:
        return f"Invalid principal: {exc}"
    return None


def validate_filter(acl_filter: AclBindingFilter) -> str | None:
    """Why ``acl_filter`` may not select ACLs (DeleteAcls, DescribeAcls), or None."""
    if acl_filter.resource_type == ResourceType.UNKNOWN or acl_filter.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if acl_filter.operation == AclOperation.UNKNOWN or acl_filter.permission == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None


def filter_matches(acl_filter: AclBindingFilter, binding: AclBinding) -> bool:
    """Whether ``acl_filter`` selects ``binding`` (see the module doc)."""
    return _pattern_matches(acl_filter, binding) and _entry_matches(acl_filter, binding)


def _pattern_matches(f: AclBindingFilter, b: AclBinding) -> bool:
    if f.resource_type != ResourceType.ANY and f.resource_type != b.resource_type:
        return False
    if f.pattern_type not in (PatternType.ANY, PatternType.MATCH) and f.pattern_type != b.pattern_type:
        return False
    if f.resource_name is None:
        return True
    if f.pattern_type == PatternType.ANY or f.pattern_type == b.pattern_type:
        return f.resource_name == b.resource_name
    # MATCH: every pattern that applies to the name
    if b.pattern_type == PatternType.LITERAL:
        return f.resource_name == b.resource_name or b.resource_name == WILDCARD
    if b.pattern_type == PatternType.PREFIXED:
        return f.resource_name.startswith(b.resource_name)
    return False


def _entry_matches(f: AclBindingFilter, b: AclBinding) -> bool:
    if f.principal is not None and f.principal != b.principal:
        return False
    if f.host is not None and f.host != b.host:
        return False
    if f.operation != AclOperation.ANY and f.operation != b.operation:
        return False
    return f.permission == AclPermissionType.ANY or f.permission == b.permission


def indefinite_field(acl_filter: AclBindingFilter) -> str | None:
    """Why ``acl_filter`` may match more than one ACL, or None when it matches at most one (Kafka's
    ``findIndefiniteField``)."""
    f = acl_filter
    if f.resource_type == ResourceType.ANY:
        return "Resource type is ANY."
    if f.resource_type == ResourceType.UNKNOWN:
        return "Resource type is UNKNOWN."
    if f.resource_name is None:
        return "Resource name is NULL."
    if f.pattern_type == PatternType.MATCH:
        return "Resource pattern type is MATCH."
    if f.pattern_type == PatternType.UNKNOWN:
        return "Resource pattern type is UNKNOWN."
    if f.principal is None:
        return "Principal is NULL"
    if f.host is None:
        return "Host is NULL"
    if f.operation == AclOperation.ANY:
        return "Operation is ANY"
    if f.operation == AclOperation.UNKNOWN:
        return "Operation is UNKNOWN"
    if f.permission == AclPermissionType.ANY:
        return "Permission type is ANY"
    if f.permission == AclPermissionType.UNKNOWN:
        return "Permission type is UNKNOWN"
    return None
