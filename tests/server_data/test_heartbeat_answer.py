"""Heartbeat answers are encoded once per version and error code (``handlers/groups._heartbeat_answer``): the
framed bytes must be the ones kio writes for the straightforward response entity, for every version and code."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.model.errors import ErrorCode
from regroup.network.codec import encode_response, frame_response, response_class
from regroup.server.entities import build
from regroup.server.handlers.groups import HEARTBEAT, _heartbeat_answer

VERSIONS = range(0, 5)


@given(
    version=st.sampled_from(VERSIONS),
    code=st.sampled_from(list(ErrorCode)),
    correlation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1),
)
def test_the_encoded_answer_is_kios_encoding_of_the_response(
    version: int, code: ErrorCode, correlation_id: int
) -> None:
    cls = response_class(HEARTBEAT, version)
    values: dict[str, object] = {"error_code": code}
    if "throttle_time" in cls.__dataclass_fields__:
        values["throttle_time"] = 0
    expected = encode_response(correlation_id, build(cls, **values))
    answer = _heartbeat_answer(version, code)
    assert answer.response_class is cls
    assert frame_response(correlation_id, answer.response_class, answer.body) == expected
    assert answer.error_codes == (() if code is ErrorCode.NONE else (int(code),))
    assert int(answer.decode().error_code) == int(code)
