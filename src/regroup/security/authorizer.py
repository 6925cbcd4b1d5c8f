"""The ACL authorizer: the ACLs in force, indexed by resource, and Kafka's ``StandardAuthorizer`` decision.

The decision for a principal, a client host, an operation and a resource (type and name), as
``StandardAuthorizerData.authorize`` makes it:

1. a super user (``super.users``) may do anything;
2. the ACLs that *apply to the resource* are those of its type whose pattern matches its name: a LITERAL of
   that name, the LITERAL wildcard ``*``, a PREFIXED pattern the name starts with;
3. of those, an ACL *matches the request* when its principal is the principal or ``User:*``, its host is the
   host or ``*``, and its operation is the operation, or ALL, or — for ALLOW ACLs only — one that implies it:
   DESCRIBE is implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS (a DENY of READ does
   not deny DESCRIBE; a DENY of ALL denies everything);
4. any matching DENY: denied; else any matching ALLOW: allowed; else, when some ACL applies to the resource
   (whoever it names: any principal, host or operation), denied; when none does,
   ``allow.everyone.if.no.acl.found`` decides.

Lookups never scan the ACLs: LITERAL ACLs sit in a dict by (resource type, name), PREFIXED ones in a dict by
(resource type, prefix) probed with the name's prefixes of every length some prefix of that type has (at most
``len(name)`` probes, usually a handful); within a resource, ACLs are grouped by principal, so only the
principal's own and ``User:*``'s are read. ``describe`` and ``remove`` use the same index when the filter names
a resource type and a name, and read every ACL otherwise.

``authorized_operations`` is KIP-430's bit field (bit ``n`` set when operation code ``n`` is allowed), which
DescribeGroups, Metadata and DescribeCluster report when asked.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Final, TypeAlias

from regroup.security.acl import WILDCARD, AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.bindings import AclBinding, AclBindingFilter, filter_matches, validate_binding
from regroup.security.principal import parse_principal

__all__ = ["IMPLIES_DESCRIBE", "IMPLIES_DESCRIBE_CONFIGS", "WILDCARD_PRINCIPAL", "Authorizer", "parse_super_users"]

#: the principal of ACLs that apply to every principal
WILDCARD_PRINCIPAL: Final = "User:*"
#: operations whose ALLOW also allows DESCRIBE
#: most decisions remembered between two changes of the ACLs (``Authorizer.authorize``)
DECISIONS_CACHED: Final = 100_000
IMPLIES_DESCRIBE: Final = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
#: operations whose ALLOW also allows DESCRIBE_CONFIGS
IMPLIES_DESCRIBE_CONFIGS: Final = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

#: the ACLs of one resource pattern, by principal (each an insertion-ordered set)
_Bucket: TypeAlias = dict[str, dict[AclBinding, None]]


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's ``super.users``: principals separated by ``;``, blanks around them and empty entries ignored.
    A principal that is not ``Type:name`` raises ``ValueError``."""
    users = set()
    for entry in text.split(";"):
        principal = entry.strip()
        if principal:
            parse_principal(principal)
            users.add(principal)
    return frozenset(users)


class _Prefixes:
    """The PREFIXED ACLs of one resource type: by prefix, and the lengths the prefixes have (sorted)."""

    __slots__ = ("buckets", "count_by_length", "lengths")

    def __init__(self) -> None:
        self.buckets: dict[str, _Bucket] = {}
        self.count_by_length: dict[int, int] = {}
        self.lengths: list[int] = []

    def matching(self, name: str) -> Iterator[_Bucket]:
        """The buckets of the prefixes ``name`` starts with."""
        size = len(name)
        for length in self.lengths:
            if length > size:
                return
            bucket = self.buckets.get(name[:length])
            if bucket is not None:
                yield bucket

    def bucket_for_add(self, prefix: str) -> _Bucket:
        bucket = self.buckets.get(prefix)
        if bucket is None:
            bucket = self.buckets[prefix] = {}
            length = len(prefix)
            count = self.count_by_length.get(length, 0)
            if count == 0:
                bisect.insort(self.lengths, length)
            self.count_by_length[length] = count + 1
        return bucket

    def drop(self, prefix: str) -> None:
        """Forget the (now empty) bucket of ``prefix``."""
        del self.buckets[prefix]
        length = len(prefix)
        count = self.count_by_length[length] - 1
        if count:
            self.count_by_length[length] = count
        else:
            del self.count_by_length[length]
            self.lengths.remove(length)


class Authorizer:
    """The ACLs in force and Kafka's decision over them (see the module doc). Not thread-safe: the shell
    calls it from one thread."""

    def __init__(self, super_users: frozenset[str] = frozenset(), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        #: every ACL -> the order it was added in
        self._all: dict[AclBinding, int] = {}
        self._next = 0
        self._literal: dict[tuple[ResourceType, str], _Bucket] = {}
        self._prefixed: dict[ResourceType, _Prefixes] = {}
        #: decisions made since the ACLs last changed: (principal, host, operation, resource type, name) -> allowed.
        #: A member heartbeats with the same question every few seconds, so most checks are one lookup; any
        #: change to the ACLs empties it, and so does reaching ``DECISIONS_CACHED``
        self._decisions: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}
        #: counts the changes to the ACLs: a decision made at one generation holds while it is the same
        self.generation = 0

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, binding: object) -> bool:
        return binding in self._all

    # ------------------------------------------------------------------ the ACLs

    def bindings(self) -> list[AclBinding]:
        """Every ACL, in the order they were added."""
        return list(self._all)

    def add(self, bindings: Iterable[AclBinding]) -> int:
        """Add ``bindings`` (an ACL already present stays as it is); returns how many were new. A binding
        that ``validate_binding`` refuses raises ``ValueError`` and nothing is added."""
        todo = list(bindings)
        for binding in todo:
            problem = validate_binding(binding)
            if problem is not None:
                raise ValueError(f"{binding}: {problem}")
        added = 0
        for binding in todo:
            if binding in self._all:
                continue
            self._all[binding] = self._next
            self._next += 1
            added += 1
            self.generation += 1
            self._decisions.clear()
            bucket = self._bucket_for_add(binding)
            bucket.setdefault(binding.principal, {})[binding] = None
        return added

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``acl_filter`` selects, in the order they were added."""
        found = [b for b in self._candidates(acl_filter) if filter_matches(acl_filter, b)]
        found.sort(key=self._all.__getitem__)
        return found

    def remove(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove the ACLs ``acl_filter`` selects; returns them, in the order they were added."""
        removed = self.describe(acl_filter)
        for binding in removed:
            self._discard(binding)
        return removed

    def discard(self, bindings: Iterable[AclBinding]) -> None:
        """Remove exactly ``bindings`` (those not present are ignored)."""
        for binding in bindings:
            if binding in self._all:
                self._discard(binding)

    def _bucket_for_add(self, binding: AclBinding) -> _Bucket:
        if binding.pattern_type == PatternType.PREFIXED:
            prefixes = self._prefixed.get(binding.resource_type)
            if prefixes is None:
                prefixes = self._prefixed[binding.resource_type] = _Prefixes()
            return prefixes.bucket_for_add(binding.resource_name)
        return self._literal.setdefault((binding.resource_type, binding.resource_name), {})

    def _discard(self, binding: AclBinding) -> None:
        del self._all[binding]
        self.generation += 1
        self._decisions.clear()
        if binding.pattern_type == PatternType.PREFIXED:
            prefixes = self._prefixed[binding.resource_type]
            bucket = prefixes.buckets[binding.resource_name]
            _drop_from(bucket, binding)
            if not bucket:
                prefixes.drop(binding.resource_name)
                if not prefixes.buckets:
                    del self._prefixed[binding.resource_type]
            return
        key = (binding.resource_type, binding.resource_name)
        bucket = self._literal[key]
        _drop_from(bucket, binding)
        if not bucket:
            del self._literal[key]

    def _candidates(self, f: AclBindingFilter) -> Iterable[AclBinding]:
        """A superset of the ACLs ``f`` selects, from the index when ``f`` names a resource."""
        name, resource_type = f.resource_name, f.resource_type
        if name is None or resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return list(self._all)
        buckets: list[_Bucket] = []
        prefixes = self._prefixed.get(resource_type)
        if f.pattern_type == PatternType.MATCH:
            buckets.extend(self._applying(resource_type, name))
        else:
            if f.pattern_type in (PatternType.ANY, PatternType.LITERAL):
                literal = self._literal.get((resource_type, name))
                if literal is not None:
                    buckets.append(literal)
            if f.pattern_type in (PatternType.ANY, PatternType.PREFIXED) and prefixes is not None:
                prefixed = prefixes.buckets.get(name)
                if prefixed is not None:
                    buckets.append(prefixed)
        if f.principal is not None:
            return [b for bucket in buckets for b in bucket.get(f.principal, ())]
        return [b for bucket in buckets for acls in bucket.values() for b in acls]

    def _applying(self, resource_type: ResourceType, name: str) -> Iterator[_Bucket]:
        """The buckets of every pattern that applies to the resource: its LITERAL name, the wildcard, the
        prefixes it starts with."""
        literal = self._literal.get((resource_type, name))
        if literal is not None:
            yield literal
        if name != WILDCARD:
            wildcard = self._literal.get((resource_type, WILDCARD))
            if wildcard is not None:
                yield wildcard
        prefixes = self._prefixed.get(resource_type)
        if prefixes is not None:
            yield from prefixes.matching(name)

    # ------------------------------------------------------------------ the decision

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the resource (see the module
        doc)."""
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= DECISIONS_CACHED:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
        applies = allowed = False
        for bucket in self._applying(resource_type, name):
            applies = True
            for who in principals:
                for acl in bucket.get(who, ()):
                    if acl.host != WILDCARD and acl.host != host:
                        continue
                    if not _operation_matches(acl, operation):
                        continue
                    if acl.permission == AclPermissionType.DENY:
                        return False
                    allowed = True
        if allowed:
            return True
        return not applies and self.allow_everyone_if_no_acl_found

    def authorized_operations(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        operations: Iterable[AclOperation],
    ) -> int:
        """KIP-430's bit field of ``operations`` the principal may do on the resource: bit ``code`` set for
        each allowed operation (Kafka's ``Utils.to32BitField``)."""
        bits = 0
        for operation in operations:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << int(operation)
        return bits


def _operation_matches(acl: AclBinding, operation: AclOperation) -> bool:
    if acl.operation == AclOperation.ALL or acl.operation == operation:
        return True
    if acl.permission != AclPermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


def _drop_from(bucket: _Bucket, binding: AclBinding) -> None:
    acls = bucket[binding.principal]
    del acls[binding]
    if not acls:
        del bucket[binding.principal]
