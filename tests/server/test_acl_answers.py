"""DescribeAcls and DeleteAcls answers encoded by hand (``server/acl_answers.py``) are byte for byte kio's encoding
of the straightforward entity (``handlers/acls._describe_response``, ``handlers/acls._filter_result``), for every
served version and random ACLs (types, names, pattern types, principals, hosts, operations, permissions; over
``CHUNK`` ACLs, so the paused path runs): DescribeAcls grouped by resource pattern in the order of their first ACL,
DeleteAcls one result per filter, refusals with their messages among them."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from regroup.model.errors import ErrorCode
from regroup.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.bindings import AclBinding
from regroup.server import acl_answers
from regroup.server.acl_answers import described_acls_answer
from regroup.server.api import RequestContext
from regroup.server.handlers import acls
from regroup.server.handlers._common import respond
from regroup.server.offset_answers import CHUNK

DESCRIBE_ACLS = 29
NAMES = st.sampled_from(["t", "topic-é", "*", "pre", ""]) | st.text(max_size=4)
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*", "User:é"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "::1"])
BINDINGS = st.builds(
    AclBinding,
    resource_type=st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER]),
    resource_name=NAMES,
    pattern_type=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principal=PRINCIPALS,
    host=HOSTS,
    operation=st.sampled_from([AclOperation.READ, AclOperation.WRITE, AclOperation.ALL, AclOperation.DESCRIBE]),
    permission=st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@settings(max_examples=80, deadline=None)
@given(st.lists(BINDINGS, max_size=12), st.integers(1, 3), st.booleans())
def test_described_acls_answer_is_kios_encoding(bindings: list[AclBinding], version: int, many: bool) -> None:
    if many:  # over a chunk: the answer pauses
        bindings = bindings + [
            AclBinding(ResourceType.TOPIC, f"t{i % 7}", PatternType.LITERAL, "User:u", "*", AclOperation.READ,
                       AclPermissionType.ALLOW)
            for i in range(CHUNK + 3)
        ]  # fmt: skip
    ctx = RequestContext(DESCRIBE_ACLS, version, 1, "test", "127.0.0.1", 1)
    empty = respond(ctx, error_code=ErrorCode.NONE, error_message=None, resources=[])
    answer = asyncio.run(described_acls_answer(empty, bindings, ()))
    assert answer.body == encode(acls._describe_response(ctx, ErrorCode.NONE, None, bindings))


DELETE_ACLS = 31


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.one_of(st.lists(BINDINGS, max_size=6), st.text(max_size=5)), max_size=4),
    st.integers(1, 3),
    st.booleans(),
)
def test_deleted_acls_answer_is_kios_encoding(filters: list[Any], version: int, many: bool) -> None:
    """Each filter's result (the ACLs it deleted, or a refusal with its message) as kio writes the
    straightforward entity (``handlers/acls._filter_result``)."""
    results: list[acl_answers.FilterResult] = [
        (ErrorCode.NONE, None, f) if isinstance(f, list) else (ErrorCode.INVALID_REQUEST, f, []) for f in filters
    ]
    if many:  # over a chunk: the answer pauses
        results.append(
            (
                ErrorCode.NONE,
                None,
                [
                    AclBinding(ResourceType.TOPIC, f"t{i}", PatternType.PREFIXED, "User:u", "10.0.0.1",
                               AclOperation.WRITE, AclPermissionType.DENY)
                    for i in range(CHUNK + 3)
                ],
            )
        )  # fmt: skip
    ctx = RequestContext(DELETE_ACLS, version, 1, "test", "127.0.0.1", 1)
    codes = tuple(int(code) for code, _, _ in results if code)
    answer = asyncio.run(acl_answers.deleted_acls_answer(respond(ctx, filter_results=[]), results, codes))
    expected = respond(ctx, filter_results=[acls._filter_result(code, message, b) for code, message, b in results])
    assert answer.body == encode(expected)
    assert answer.error_codes == codes
