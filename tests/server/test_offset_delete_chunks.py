"""An OffsetDelete of more partitions than ``OFFSET_DELETE_CHUNK`` (``handlers/offsets.py``): the core is asked a
chunk at a time, and the outcome is the one a single call gives (a property over random partition lists, topics
split across chunks, unknown and subscribed topics, partitions named twice, against one core call on a twin
coordinator: the same answers, the same tombstones, the same offsets left); a group error is the answer alone;
and the hand-encoded answer is kio's encoding of the straightforward entity."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import RequestKey, Result
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import OffsetDeleteRequest
from regroup.server.api import RequestContext
from regroup.server.encoded import entity_bytes
from regroup.server.handlers._common import respond
from regroup.server.handlers.offsets import OFFSET_DELETE, OFFSET_DELETE_CHUNK, _delete_offsets, _offset_chunks
from regroup.server.offset_answers import commit_topics
from tests.coordinator.consumer_harness import ConsumerHarness

SIZE = OFFSET_DELETE_CHUNK + 300


class CoreRuntime:
    """Stands in for the coordinator runtime: each core call run at once on ``core``, its partitions noted."""

    def __init__(self, core: GroupCoordinator, now_ms: int) -> None:
        self.core = core
        self.now_ms = now_ms
        self.calls: list[int] = []

    async def call(
        self,
        op: Callable[[GroupCoordinator, RequestKey, int], Result],
        *,
        may_park: bool = False,
        group_id: str | None = None,
    ) -> Any:
        request = getattr(op, "args", (None,))[0]
        assert isinstance(request, OffsetDeleteRequest)
        self.calls.append(sum(len(partitions) for _, partitions in request.topics))
        return op(self.core, len(self.calls), self.now_ms).response_for(len(self.calls))


def _harness() -> ConsumerHarness:
    h = ConsumerHarness()
    h.topics(big=SIZE, small=3)
    h.commit("", -1, {("big", p): p for p in range(0, SIZE, 2)} | {("small", 0): 1})
    return h


@st.composite
def requests(draw: st.DrawFn) -> list[tuple[str, tuple[int, ...]]]:
    """Topics (big, small, one the cluster lacks; a topic may come twice or with no partitions) and partitions
    (in range or not, repeated), as many as chunks need."""
    topics = draw(st.lists(st.sampled_from(["big", "small", "nope"]), max_size=4))
    out = []
    for name in topics:
        count = draw(st.sampled_from([0, 1, 5, OFFSET_DELETE_CHUNK, OFFSET_DELETE_CHUNK + 1]))
        out.append((name, tuple(draw(st.lists(st.integers(-1, SIZE + 2), min_size=count, max_size=count)))))
    return out


@settings(max_examples=12, deadline=None)
@given(requests())
def test_the_chunked_delete_answers_as_one_core_call(topics: list[tuple[str, tuple[int, ...]]]) -> None:
    chunked, one_call = _harness(), _harness()
    runtime = CoreRuntime(chunked.coordinator, chunked.now_ms)
    error, answered = asyncio.run(_delete_offsets(SimpleNamespace(coordinator=runtime), "group", topics))  # type: ignore[arg-type]
    request = OffsetDeleteRequest(group_id="group", topics=tuple(topics))
    once = one_call.coordinator.offset_delete(request, 0, one_call.now_ms)
    response = once.response_for(0)
    assert error is response.error is ErrorCode.NONE
    assert _merged(answered) == _merged(list(response.topics))
    assert all(0 <= n <= OFFSET_DELETE_CHUNK for n in runtime.calls)
    total = sum(len(p) for _, p in topics)
    assert len(runtime.calls) == max(1, -(-total // OFFSET_DELETE_CHUNK))
    assert _left(chunked) == _left(one_call)


def _merged(topics: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]]) -> dict[str, list[tuple[int, ErrorCode]]]:
    rows: dict[str, list[tuple[int, ErrorCode]]] = {}
    for name, partitions in topics:
        rows.setdefault(name, []).extend(partitions)
    return rows


def _left(h: ConsumerHarness) -> list[tuple[str, int]]:
    fetched = h.fetch({"big": list(range(SIZE)), "small": [0, 1, 2]})
    return [(name, row.partition) for name, rows in fetched.topics for row in rows if row.offset >= 0]


def test_a_group_error_is_the_answer_alone() -> None:
    h = _harness()
    runtime = CoreRuntime(h.coordinator, h.now_ms)
    topics = [("big", tuple(range(OFFSET_DELETE_CHUNK + 5)))]
    error, answered = asyncio.run(_delete_offsets(SimpleNamespace(coordinator=runtime), "no-such-group", topics))  # type: ignore[arg-type]
    assert (error, answered) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    assert runtime.calls == [OFFSET_DELETE_CHUNK]  # no second call once the first was refused


def test_chunks_keep_the_order_and_empty_topics() -> None:
    topics = [("a", (1, 2, 3)), ("b", ()), ("c", (4, 5, 6, 7)), ("d", ())]
    assert list(_offset_chunks(topics, 2)) == [
        [("a", (1, 2))],
        [("a", (3,)), ("b", ()), ("c", (4,))],
        [("c", (5, 6))],
        [("c", (7,)), ("d", ())],
    ]
    assert list(_offset_chunks([], 2)) == [[]]
    assert list(_offset_chunks([("a", (1, 2))], 2)) == [[("a", (1, 2))]]  # (full at the end: no empty chunk)
    # a topic named with no partitions after a full chunk goes with it (no call of its own)
    assert list(_offset_chunks([("a", (1, 2)), ("b", ()), ("c", (3,))], 2)) == [
        [("a", (1, 2)), ("b", ())],
        [("c", (3,))],
    ]
    assert list(_offset_chunks([("a", ()), ("a", (1, 2)), ("b", ())], 2)) == [[("a", ()), ("a", (1, 2)), ("b", ())]]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(max_size=4),
            st.lists(st.tuples(st.integers(0, 2**31 - 1), st.sampled_from(list(ErrorCode)[:6])), max_size=1_100),
        ),
        max_size=3,
    )
)
def test_the_answer_is_kios_encoding(rows: list[tuple[str, list[tuple[int, ErrorCode]]]]) -> None:
    ctx = RequestContext(OFFSET_DELETE, 0, 1, "test", "127.0.0.1", 1)
    straightforward = respond(
        ctx,
        error_code=ErrorCode.NONE,
        topics=[
            {"name": name, "partitions": [{"partition_index": p, "error_code": code} for p, code in partitions]}
            for name, partitions in rows
        ],
    )
    got = asyncio.run(commit_topics(respond(ctx, error_code=ErrorCode.NONE, topics=[]), rows))
    assert got.body == entity_bytes(straightforward)
