"""ConsumerGroupHeartbeat and ShareGroupHeartbeat answers are written field by field
(``handlers/consumer.plain_answer``): their bytes must be kio's encoding of the same response entity, for every
version, error, message, member id, epoch and interval, with no assignment or any assignment (topics with no,
one or many partitions)."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from regroup.model.errors import ErrorCode
from regroup.network.codec import encode_response, frame_response, response_class
from regroup.protocol.consumer import ConsumerGroupHeartbeatResponse
from regroup.protocol.share import ShareGroupHeartbeatResponse
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded, entity_bytes
from regroup.server.entities import build
from regroup.server.handlers import share_groups
from regroup.server.handlers._common import DEFAULT_MESSAGES, assignment_class
from regroup.server.handlers.consumer import CONSUMER_GROUP_HEARTBEAT, _heartbeat_response, plain_layout

SHARE_GROUP_HEARTBEAT = 76
VERSIONS = (0, 1)
SHARE_VERSIONS = (1,)
i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
texts = st.one_of(st.none(), st.text(max_size=300))


def _ctx(version: int, api_key: int = CONSUMER_GROUP_HEARTBEAT) -> RequestContext:
    return RequestContext(api_key, version, 1, "client", "127.0.0.1", 1)


def _kio_bytes(
    version: int,
    resp: ConsumerGroupHeartbeatResponse | ShareGroupHeartbeatResponse,
    message: str | None,
    api_key: int = CONSUMER_GROUP_HEARTBEAT,
) -> bytes:
    cls = response_class(api_key, version)
    assignment = None
    if resp.assignment is not None:
        assignment = build(
            assignment_class(api_key, version),
            topic_partitions=[{"topic_id": t, "partitions": ps} for t, ps in resp.assignment],
        )
    return entity_bytes(
        build(
            cls,
            throttle_time=0,
            error_code=resp.error,
            error_message=message,
            member_id=resp.member_id,
            member_epoch=resp.member_epoch,
            heartbeat_interval=resp.heartbeat_interval_ms,
            assignment=assignment,
        )
    )


#: (API key, version) of every answer ``plain_answer`` writes: ConsumerGroupHeartbeat's and ShareGroupHeartbeat's
ANSWERS = [(CONSUMER_GROUP_HEARTBEAT, v) for v in VERSIONS] + [(SHARE_GROUP_HEARTBEAT, v) for v in SHARE_VERSIONS]
#: each API's core response and handler answer
KINDS: dict[int, tuple[Any, Any]] = {
    CONSUMER_GROUP_HEARTBEAT: (ConsumerGroupHeartbeatResponse, _heartbeat_response),
    SHARE_GROUP_HEARTBEAT: (ShareGroupHeartbeatResponse, share_groups._heartbeat_response),
}


@given(
    answered=st.sampled_from(ANSWERS),
    code=st.sampled_from(list(ErrorCode)),
    message=texts,
    member_id=texts,
    epoch=i32,
    interval=i32,
    correlation_id=i32,
    assignment=st.none() | st.lists(st.tuples(st.uuids(), st.lists(i32, max_size=5).map(tuple)), max_size=4).map(tuple),
)
def test_an_answer_is_kios_encoding(
    answered: tuple[int, int],
    code: ErrorCode,
    message: str | None,
    member_id: str | None,
    epoch: int,
    interval: int,
    correlation_id: int,
    assignment: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None,
) -> None:
    api_key, version = answered
    assert plain_layout(api_key, version)
    response_type, handler_answer = KINDS[api_key]
    resp = response_type(
        error=code,
        error_message=message,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=interval,
        assignment=assignment,
    )
    answer = handler_answer(_ctx(version, api_key), resp)
    assert isinstance(answer, PreEncoded)
    assert answer.response_class is response_class(api_key, version)
    expected_message = message if message is not None or code is ErrorCode.NONE else DEFAULT_MESSAGES.get(code)
    assert answer.body == _kio_bytes(version, resp, expected_message, api_key)
    assert answer.error_codes == (() if code is ErrorCode.NONE else (int(code),))
    framed = frame_response(correlation_id, answer.response_class, answer.body)
    assert framed == encode_response(correlation_id, answer.decode())


def test_a_large_assignment_is_kios_encoding() -> None:
    """10,000 topics of one partition, and one topic of 10,000 partitions (array lengths past one varint byte)."""
    for assignment in (
        tuple((uuid.UUID(int=i + 1), (i % 7,)) for i in range(10_000)),
        ((uuid.uuid4(), tuple(range(10_000))),),
    ):
        resp = ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=3, assignment=assignment)
        answer = _heartbeat_response(_ctx(1), resp)
        assert isinstance(answer, PreEncoded)
        assert answer.body == _kio_bytes(1, resp, None)
        decoded = answer.decode()
        assert [(t.topic_id, tuple(t.partitions)) for t in decoded.assignment.topic_partitions] == list(assignment)


def test_a_share_member_of_10000_partitions() -> None:
    assignment = ((uuid.uuid4(), tuple(range(10_000))),)
    resp = ShareGroupHeartbeatResponse(member_id="m", member_epoch=3, assignment=assignment)
    answer = share_groups._heartbeat_response(_ctx(1, SHARE_GROUP_HEARTBEAT), resp)
    assert isinstance(answer, PreEncoded)
    assert answer.body == _kio_bytes(1, resp, None, SHARE_GROUP_HEARTBEAT)
