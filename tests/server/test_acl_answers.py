"""DescribeAcls answers encoded by hand (``server/acl_answers.py``) are byte for byte kio's encoding of the
straightforward entity (``handlers/acls._describe_response``), for every served version and random ACLs (types,
names, pattern types, principals, hosts, operations, permissions; over ``CHUNK`` ACLs, so the paused path
runs), grouped by resource pattern in the order of their first ACL."""

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
