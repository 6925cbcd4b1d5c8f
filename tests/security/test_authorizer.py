"""The authorizer against Kafka's ``StandardAuthorizer`` rules: worked examples, then property tests holding
``authorize``, ``describe`` and ``remove`` to plain scans over every ACL written here from Kafka's rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.security.acl import WILDCARD, AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.authorizer import Authorizer, parse_super_users
from regroup.security.bindings import (
    ANY_FILTER,
    AclBinding,
    AclBindingFilter,
    exact_filter,
    filter_matches,
    from_code,
    indefinite_field,
    validate_binding,
    validate_filter,
)

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB, HOST = "User:alice", "User:bob", "10.0.0.1"


def acl(
    name: str,
    op: AclOperation = Op.READ,
    perm: AclPermissionType = Perm.ALLOW,
    principal: str = ALICE,
    host: str = "*",
    pattern: PatternType = PT.LITERAL,
    rt: ResourceType = RT.TOPIC,
) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def authorizer(*bindings: AclBinding, supers: frozenset[str] = frozenset(), everyone: bool = False) -> Authorizer:
    a = Authorizer(supers, everyone)
    a.add(bindings)
    return a


def may(a: Authorizer, op: AclOperation, name: str, principal: str = ALICE, host: str = HOST) -> bool:
    return a.authorize(principal, host, op, RT.TOPIC, name)


# ---------------------------------------------------------------------- examples


def test_deny_beats_allow() -> None:
    a = authorizer(acl("t"), acl("t", perm=Perm.DENY))
    assert not may(a, Op.READ, "t")
    # a DENY for everyone beats the principal's own ALLOW, whichever pattern carries it
    a = authorizer(acl("t"), acl("t", perm=Perm.DENY, principal="User:*", pattern=PT.PREFIXED))
    assert not may(a, Op.READ, "t")
    assert not may(authorizer(acl("t"), acl("*", perm=Perm.DENY)), Op.READ, "t")


def test_implied_operations_for_allow_only() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert may(authorizer(acl("t", op)), Op.DESCRIBE, "t"), op
    for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE):
        assert not may(authorizer(acl("t", op)), Op.DESCRIBE, "t"), op
    assert may(authorizer(acl("t", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, "t")
    assert not may(authorizer(acl("t", Op.ALTER)), Op.DESCRIBE_CONFIGS, "t")
    assert not may(authorizer(acl("t", Op.DESCRIBE)), Op.READ, "t")
    assert not may(authorizer(acl("t", Op.READ)), Op.WRITE, "t")
    # a DENY denies only its own operation (or everything, for ALL)
    a = authorizer(acl("t", Op.ALL), acl("t", Op.READ, Perm.DENY))
    assert may(a, Op.DESCRIBE, "t") and may(a, Op.WRITE, "t") and not may(a, Op.READ, "t")
    a = authorizer(acl("t", Op.ALL), acl("t", Op.ALL, Perm.DENY))
    assert not may(a, Op.DESCRIBE, "t")
    assert may(authorizer(acl("t", Op.ALL)), Op.TWO_PHASE_COMMIT, "t")


def test_prefixed_and_literal_patterns() -> None:
    a = authorizer(acl("pay", pattern=PT.PREFIXED))
    assert may(a, Op.READ, "payments") and may(a, Op.READ, "pay")
    assert not may(a, Op.READ, "pa") and not may(a, Op.READ, "xpay")
    literal = authorizer(acl("pay"))
    assert may(literal, Op.READ, "pay") and not may(literal, Op.READ, "payments")
    # several prefixes of one name all apply
    a = authorizer(acl("p", pattern=PT.PREFIXED), acl("pay", Op.WRITE, pattern=PT.PREFIXED), acl("payx"))
    assert may(a, Op.READ, "payments") and may(a, Op.WRITE, "payments")


def test_wildcard_resource() -> None:
    a = authorizer(acl(WILDCARD))
    assert may(a, Op.READ, "anything") and may(a, Op.READ, WILDCARD)
    assert not a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "anything")  # only its own resource type
    # a PREFIXED pattern "*" would only select names starting with "*": refused
    assert validate_binding(acl(WILDCARD, pattern=PT.PREFIXED)) is not None


def test_wildcard_principal() -> None:
    a = authorizer(acl("t", principal="User:*"))
    assert may(a, Op.READ, "t", principal=BOB) and may(a, Op.READ, "t", principal="User:*")
    assert may(a, Op.READ, "t", principal="Group:x")  # Kafka's one wildcard is User:*, for every principal type
    assert not may(authorizer(acl("t", principal="Group:*")), Op.READ, "t", principal="Group:x")


def test_host() -> None:
    a = authorizer(acl("t", host=HOST))
    assert may(a, Op.READ, "t", host=HOST) and not may(a, Op.READ, "t", host="10.0.0.2")
    assert may(authorizer(acl("t", host="*")), Op.READ, "t", host="10.0.0.2")


def test_super_users() -> None:
    a = authorizer(acl("t", Op.ALL, Perm.DENY, principal="User:*"), supers=frozenset({"User:admin"}))
    assert may(a, Op.WRITE, "t", principal="User:admin")
    assert a.authorize("User:admin", HOST, Op.ALTER, RT.CLUSTER, "kafka-cluster")
    assert not may(a, Op.WRITE, "t", principal=BOB)


def test_allow_everyone_if_no_acl_found() -> None:
    assert may(authorizer(everyone=True), Op.WRITE, "t")
    assert not may(authorizer(everyone=False), Op.WRITE, "t")
    # any ACL on the resource counts, whoever it names
    assert not may(authorizer(acl("t", principal=BOB), everyone=True), Op.READ, "t")
    assert not may(authorizer(acl("t", host="10.9.9.9"), everyone=True), Op.READ, "t")
    assert not may(authorizer(acl("t", Op.WRITE), everyone=True), Op.READ, "t")
    assert not may(authorizer(acl("t", pattern=PT.PREFIXED, principal=BOB), everyone=True), Op.READ, "tx")
    assert not may(authorizer(acl("*", principal=BOB), everyone=True), Op.READ, "tx")
    # ACLs of other resources do not
    assert may(authorizer(acl("u", principal=BOB), everyone=True), Op.READ, "t")
    assert may(authorizer(acl("t", principal=BOB, rt=RT.GROUP), everyone=True), Op.READ, "t")
    assert may(authorizer(acl("tx", pattern=PT.PREFIXED, principal=BOB), everyone=True), Op.READ, "t")


def test_authorized_operations_bit_field() -> None:
    a = authorizer(acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS))
    ops = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]
    bits = a.authorized_operations(ALICE, HOST, RT.TOPIC, "t", ops)
    assert bits == (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11)
    assert a.authorized_operations(BOB, HOST, RT.TOPIC, "t", ops) == 0


def test_add_remove_describe() -> None:
    a = Authorizer()
    first, second = acl("t"), acl("p", pattern=PT.PREFIXED)
    assert a.add([first, second, first]) == 2 and a.add([first]) == 0
    assert a.bindings() == [first, second] and len(a) == 2
    with pytest.raises(ValueError, match="Invalid empty resource name"):
        a.add([acl("x"), acl("")])
    assert len(a) == 2  # nothing of a refused batch
    assert a.describe(AclBindingFilter(resource_name="pt", pattern_type=PT.MATCH)) == [second]
    assert a.remove(exact_filter(first)) == [first]
    assert a.bindings() == [second] and not may(a, Op.READ, "t")
    assert a.remove(ANY_FILTER) == [second] and len(a) == 0 and a.bindings() == []


def test_parse_super_users() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" ") == frozenset()
    assert parse_super_users(";  User:bob  ;  User:alice ") == frozenset({"User:bob", "User:alice"})
    with pytest.raises(ValueError, match="principalType:principalName but got bob"):
        parse_super_users("bob;User:alice")


@pytest.mark.parametrize(
    ("binding", "problem"),
    [
        (acl("x", rt=RT.CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (acl(""), "Invalid empty resource name"),
        (acl("x", rt=RT.ANY), "Invalid resourceType ANY"),
        (acl("x", rt=RT.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (acl("x", pattern=PT.MATCH), "Invalid patternType MATCH"),
        (acl("x", pattern=PT.ANY), "Invalid patternType ANY"),
        (acl("x", Op.ANY), "Invalid operation ANY"),
        (acl("x", Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (acl("x", perm=Perm.ANY), "Invalid permissionType ANY"),
        (acl("x", principal="alice"), "Invalid principal: expected a string in format principalType:principalName"),
        (acl("x", principal=":alice"), "Invalid principal"),
    ],
)
def test_validate_binding(binding: AclBinding, problem: str) -> None:
    found = validate_binding(binding)
    assert found is not None and found.startswith(problem)


def test_validate_binding_accepts() -> None:
    assert validate_binding(acl("kafka-cluster", Op.ALTER, rt=RT.CLUSTER)) is None
    assert validate_binding(acl("*")) is None
    assert validate_binding(acl("pre", pattern=PT.PREFIXED, principal="User:*")) is None


def test_validate_filter_and_codes() -> None:
    assert validate_filter(ANY_FILTER) is None
    assert validate_filter(AclBindingFilter(resource_type=from_code(RT, 99))) == "Unknown patternFilter."
    assert validate_filter(AclBindingFilter(pattern_type=PT.UNKNOWN)) == "Unknown patternFilter."
    assert validate_filter(AclBindingFilter(operation=from_code(Op, -3))) == "Unknown entryFilter."
    assert validate_filter(AclBindingFilter(permission=Perm.UNKNOWN)) == "Unknown entryFilter."
    assert from_code(RT, 2) is RT.TOPIC
    assert indefinite_field(exact_filter(acl("t"))) is None
    assert indefinite_field(AclBindingFilter(RT.TOPIC, "t", PT.MATCH)) == "Resource pattern type is MATCH."


# ---------------------------------------------------------------------- properties

NAMES = ["a", "ab", "abc", "b", "ba", WILDCARD]
QUERY_NAMES = [*NAMES, "abd", "", "c", "*x"]
PRINCIPALS = [ALICE, BOB, "User:*", "Group:alice"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
CONCRETE_OPS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]
TYPES = [RT.TOPIC, RT.GROUP]

bindings_st = st.builds(
    AclBinding,
    resource_type=st.sampled_from(TYPES),
    resource_name=st.sampled_from(NAMES),
    pattern_type=st.sampled_from([PT.LITERAL, PT.PREFIXED]),
    principal=st.sampled_from(PRINCIPALS),
    host=st.sampled_from(HOSTS),
    operation=st.sampled_from(CONCRETE_OPS),
    permission=st.sampled_from([Perm.ALLOW, Perm.DENY]),
).filter(lambda b: validate_binding(b) is None)

filters_st = st.builds(
    AclBindingFilter,
    resource_type=st.sampled_from([RT.ANY, *TYPES]),
    resource_name=st.none() | st.sampled_from(QUERY_NAMES),
    pattern_type=st.sampled_from([PT.ANY, PT.MATCH, PT.LITERAL, PT.PREFIXED]),
    principal=st.none() | st.sampled_from(PRINCIPALS),
    host=st.none() | st.sampled_from(HOSTS),
    operation=st.sampled_from([Op.ANY, *CONCRETE_OPS]),
    permission=st.sampled_from([Perm.ANY, Perm.ALLOW, Perm.DENY]),
)


def reference_applies(b: AclBinding, resource_type: ResourceType, name: str) -> bool:
    if b.resource_type != resource_type:
        return False
    if b.pattern_type == PT.PREFIXED:
        return name.startswith(b.resource_name)
    return b.resource_name in (name, WILDCARD)


def reference_operation(b: AclBinding, op: AclOperation) -> bool:
    if b.operation == Op.ALL:
        return True
    if b.permission == Perm.DENY:
        return b.operation == op
    implied = {
        Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
        Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
    }
    return b.operation in implied.get(op, {op})


def reference_authorize(
    acls: list[AclBinding],
    supers: frozenset[str],
    everyone: bool,
    principal: str,
    host: str,
    op: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    if principal in supers:
        return True
    applying = [b for b in acls if reference_applies(b, resource_type, name)]
    matching = [
        b
        for b in applying
        if b.principal in (principal, "User:*") and b.host in (host, "*") and reference_operation(b, op)
    ]
    if any(b.permission == Perm.DENY for b in matching):
        return False
    if matching:
        return True
    return not applying and everyone


def reference_filter(f: AclBindingFilter, b: AclBinding) -> bool:
    if f.resource_type != RT.ANY and f.resource_type != b.resource_type:
        return False
    if f.resource_name is None:
        if f.pattern_type not in (PT.ANY, PT.MATCH) and f.pattern_type != b.pattern_type:
            return False
    elif f.pattern_type == PT.MATCH:
        literal = b.pattern_type == PT.LITERAL and b.resource_name in (f.resource_name, WILDCARD)
        prefixed = b.pattern_type == PT.PREFIXED and f.resource_name.startswith(b.resource_name)
        if not (literal or prefixed):
            return False
    elif f.pattern_type == PT.ANY:
        if b.resource_name != f.resource_name:
            return False
    elif (f.pattern_type, f.resource_name) != (b.pattern_type, b.resource_name):
        return False
    return (
        f.principal in (None, b.principal)
        and f.host in (None, b.host)
        and f.operation in (Op.ANY, b.operation)
        and f.permission in (Perm.ANY, b.permission)
    )


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(bindings_st, max_size=25),
    removals=st.lists(filters_st, max_size=2),
    supers=st.frozensets(st.sampled_from([ALICE, "User:carol"]), max_size=1),
    everyone=st.booleans(),
)
def test_authorize_matches_reference(
    acls: list[AclBinding], removals: list[AclBindingFilter], supers: frozenset[str], everyone: bool
) -> None:
    a = Authorizer(supers, everyone)

    def check(current: list[AclBinding]) -> None:
        assert a.bindings() == current
        for resource_type in TYPES:
            for name in QUERY_NAMES:
                for principal in [ALICE, BOB, "User:carol", "Group:alice"]:
                    for host in HOSTS[1:]:
                        for op in CONCRETE_OPS:
                            expected = reference_authorize(
                                current, supers, everyone, principal, host, op, resource_type, name
                            )
                            got = a.authorize(principal, host, op, resource_type, name)
                            assert got == expected, (principal, host, op, resource_type, name)

    check([])  # decisions remembered before any ACL exists must not outlive the ACLs' changes
    a.add(acls)
    current = list(dict.fromkeys(acls))
    check(current)
    for f in removals:  # the index, and the decisions remembered, must stay right after removals too
        a.remove(f)
        current = [b for b in current if not reference_filter(f, b)]
        check(current)


@settings(max_examples=300, deadline=None)
@given(acls=st.lists(bindings_st, max_size=25), acl_filter=filters_st)
def test_describe_and_remove_match_reference(acls: list[AclBinding], acl_filter: AclBindingFilter) -> None:
    a = authorizer(*acls)
    everything = list(dict.fromkeys(acls))
    expected = [b for b in everything if reference_filter(acl_filter, b)]
    assert [b for b in everything if filter_matches(acl_filter, b)] == expected
    assert a.describe(acl_filter) == expected
    assert a.remove(acl_filter) == expected
    assert a.bindings() == [b for b in everything if b not in expected]
    assert a.describe(acl_filter) == []
