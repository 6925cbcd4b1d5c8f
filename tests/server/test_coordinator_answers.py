"""Batched FindCoordinator answers encoded by hand (``server/coordinator_answers.py``) are byte for byte kio's
encoding of the straightforward entity, for random keys, errors, hosts and ports, over ``CHUNK`` keys (the
paused path); and the handler answers many keys in several turns of the loop."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from regroup.network.codec import response_class
from regroup.server.api import RequestContext
from regroup.server.coordinator_answers import coordinators_answer
from regroup.server.encoded import PreEncoded
from regroup.server.entities import build
from regroup.server.handlers import meta
from regroup.server.offset_answers import CHUNK
from tests.server_data.helpers import counting_turns, request_module

FIND_COORDINATOR = 10
KEYS = st.text(max_size=6)
NODES = st.sampled_from([(0, 0, "127.0.0.1", 9092), (0, 0, "é.example", 1), (15, -1, "", -1), (53, -1, "", -1)])


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(KEYS, NODES), max_size=6), st.sampled_from([0, 1, CHUNK + 2]))
def test_coordinators_answer_is_kios_encoding(keys: list[Any], more: int) -> None:
    found = [(key, code, node, host, port) for key, (code, node, host, port) in keys]
    found += [(f"g{i}", 0, 0, "h", 1) for i in range(more)]
    cls = response_class(FIND_COORDINATOR, 4)
    rows = [
        {"key": k, "error_code": ErrorCode(c), "error_message": None, "node_id": n, "host": h, "port": p}
        for k, c, n, h, p in found
    ]
    answer = asyncio.run(coordinators_answer(build(cls, throttle_time=0, coordinators=[]), found))
    assert answer.body == encode(build(cls, throttle_time=0, coordinators=rows))
    assert list(answer.error_codes) == [c for _, c, _, _, _ in found if c]


class Broker:
    authorizer = None

    def endpoint(self, listener: str) -> tuple[str, int]:
        return "127.0.0.1", 9092


def test_many_keys_are_answered_over_several_turns() -> None:
    n = 3 * CHUNK + 1
    mod = request_module("find_coordinator", 4)
    request = mod.FindCoordinatorRequest(key_type=0, coordinator_keys=tuple(f"group-{i}" for i in range(n)))
    ctx = RequestContext(FIND_COORDINATOR, 4, 1, "test", "127.0.0.1", 1)
    response, turns = asyncio.run(counting_turns(meta.find_coordinator(Broker(), ctx, request)))  # type: ignore[arg-type]
    assert isinstance(response, PreEncoded)
    assert turns >= 3
    answered = response.decode().coordinators
    assert [c.key for c in answered] == [f"group-{i}" for i in range(n)]
    assert {(c.node_id, c.host, c.port, c.error_code) for c in answered} == {(0, "127.0.0.1", 9092, ErrorCode.none)}
