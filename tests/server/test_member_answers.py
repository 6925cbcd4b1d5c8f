"""The classic group's answers encoded by hand (``server/member_answers.py``) are byte for byte kio's encoding of
the straightforward entities: the leader's JoinGroup answer (``handlers/groups._join_entity``) and a batched
LeaveGroup's answer (the LeaveGroup entity with every member) for every version (JoinGroup 0-9, LeaveGroup 3-5)
and random members (ids, instance ids or none, metadata, error codes, layouts over ``CHUNK`` members so the paused
path runs), giving the loop a turn between chunks; every other JoinGroup answer and every SyncGroup answer
(JoinGroup 0-9, SyncGroup 0-5) over random fields."""

from __future__ import annotations

import asyncio
import dataclasses
import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupMember, JoinGroupResponse, LeaveGroupMemberResponse, SyncGroupResponse
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.handlers._common import respond
from regroup.server.handlers.groups import JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP, _join_entity, _join_response
from regroup.server.member_answers import SYNC_PROTOCOL_FIELDS_FROM, join_members, leave_members, sync_answer
from regroup.server.offset_answers import CHUNK
from tests.server_data.helpers import counting_turns

TEXT = st.text(alphabet="ab-é0", max_size=6)
MEMBERS = st.builds(
    JoinGroupMember,
    member_id=TEXT,
    group_instance_id=st.none() | TEXT,
    metadata=st.binary(max_size=8),
)


def _encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@st.composite
def answers(draw: st.DrawFn) -> JoinGroupResponse:
    count = draw(st.sampled_from([1, 2, 5, CHUNK, CHUNK + 1, 2 * CHUNK + 3]))
    one = draw(MEMBERS)
    few = draw(st.lists(MEMBERS, min_size=1, max_size=5))
    members = tuple(few[i % len(few)] if i % 7 else one for i in range(count))
    return JoinGroupResponse(
        error=draw(st.sampled_from([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED])),
        generation_id=draw(st.integers(-1, 2**31 - 1)),
        protocol_type=draw(st.none() | st.just("consumer")),
        protocol_name=draw(st.none() | st.sampled_from(["range", "cooperative-sticky", ""])),
        leader=draw(TEXT),
        skip_assignment=draw(st.booleans()),
        member_id=draw(TEXT),
        members=members,
    )


@settings(max_examples=80, deadline=None)
@given(answers(), st.integers(0, 9))
def test_the_leaders_answer_is_kios_encoding(resp: JoinGroupResponse, version: int) -> None:
    ctx = RequestContext(JOIN_GROUP, version, 1, "test", "127.0.0.1", 1)
    if version < 5:  # (no instance ids before v5: kio's entity has no such field to carry them)
        resp.members = tuple(
            JoinGroupMember(member_id=m.member_id, group_instance_id=None, metadata=m.metadata) for m in resp.members
        )
    straightforward = _join_entity(ctx, resp)
    empty = _join_entity(ctx, dataclasses.replace(resp, members=()))
    got = asyncio.run(join_members(empty, resp.members, version, int(resp.error)))
    assert isinstance(got, PreEncoded)
    assert got.body == _encode(straightforward)
    assert got.response_class is type(straightforward)
    assert got.error_codes == ((int(resp.error),) if resp.error else ())


@settings(max_examples=150, deadline=None)
@given(answers(), st.integers(0, 9))
def test_a_join_answer_without_members_is_kios_encoding(resp: JoinGroupResponse, version: int) -> None:
    """Every answer but the leader's: the two phases of a join, errors, followers (the handler's own path)."""
    resp.members = ()
    ctx = RequestContext(JOIN_GROUP, version, 1, "test", "127.0.0.1", 1)
    straightforward = _join_entity(ctx, resp)
    got = _join_response(ctx, resp)
    assert isinstance(got, PreEncoded)
    assert got.body == _encode(straightforward)
    assert got.response_class is type(straightforward)
    assert got.decode() == straightforward
    assert got.error_codes == ((int(resp.error),) if resp.error else ())


@settings(max_examples=150, deadline=None)
@given(
    st.builds(
        SyncGroupResponse,
        error=st.sampled_from([ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID]),
        protocol_type=st.none() | st.sampled_from(["consumer", "connect", ""]),
        protocol_name=st.none() | TEXT,
        assignment=st.binary(max_size=300),
    ),
    st.integers(0, 5),
)
def test_a_sync_answer_is_kios_encoding(resp: SyncGroupResponse, version: int) -> None:
    ctx = RequestContext(SYNC_GROUP, version, 1, "test", "127.0.0.1", 1)
    fields: dict[str, Any] = {"error_code": resp.error, "assignment": resp.assignment}
    if version >= SYNC_PROTOCOL_FIELDS_FROM:
        fields.update(protocol_type=resp.protocol_type, protocol_name=resp.protocol_name)
    straightforward = respond(ctx, **fields)
    got = sync_answer(version, resp)
    assert got.body == _encode(straightforward)
    assert got.response_class is type(straightforward)
    assert got.decode() == straightforward
    assert got.error_codes == ((int(resp.error),) if resp.error else ())


def test_the_loop_has_turns_between_chunks() -> None:
    members = tuple(
        JoinGroupMember(member_id=f"m-{i}", group_instance_id=None, metadata=b"x") for i in range(3 * CHUNK)
    )
    ctx = RequestContext(JOIN_GROUP, 9, 1, "test", "127.0.0.1", 1)
    empty = _join_entity(ctx, JoinGroupResponse(leader="m-0", member_id="m-0"))

    async def run() -> int:
        _, turns = await counting_turns(join_members(empty, members, 9, 0))
        return turns

    assert asyncio.run(run()) >= 2  # a 3,000-member answer yields after each 1,000


LEFT = st.builds(
    LeaveGroupMemberResponse,
    member_id=TEXT,
    group_instance_id=st.none() | TEXT,
    error=st.sampled_from([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID]),
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([0, 1, 4, CHUNK, CHUNK + 1, 2 * CHUNK + 3]),
    st.lists(LEFT, min_size=1, max_size=4),
    st.sampled_from([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE]),
    st.integers(3, 5),
)
def test_a_batched_leave_answer_is_kios_encoding(
    count: int, few: list[LeaveGroupMemberResponse], error: ErrorCode, version: int
) -> None:
    members = [few[i % len(few)] for i in range(count)]
    ctx = RequestContext(LEAVE_GROUP, version, 1, "test", "127.0.0.1", 1)
    straightforward = respond(
        ctx,
        error_code=error,
        members=[
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": m.error} for m in members
        ],
    )
    got = asyncio.run(leave_members(respond(ctx, error_code=error, members=[]), members, int(error)))
    assert got.body == _encode(straightforward)
    assert got.response_class is type(straightforward)
    assert sorted(got.error_codes) == sorted([int(error)] * bool(error) + [int(m.error) for m in members if m.error])
