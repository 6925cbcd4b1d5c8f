"""DescribeProducers answers encoded by hand (``server/producer_answers.py``) are byte for byte kio's encoding of
the straightforward entity for random topics, partitions, producers, errors and messages (over ``CHUNK``
partitions, so the paused path runs); and the handler, which answers partitions never opened without opening
them, answers as the straightforward handler (every log opened) over random layouts of idempotent writes."""

from __future__ import annotations

import asyncio
import io
import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from regroup.network.codec import response_class
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.entities import build
from regroup.server.handlers import transactions
from regroup.server.offset_answers import CHUNK
from regroup.server.producer_answers import describe_producers_answer
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch
from tests.server_data.helpers import counting_turns

DESCRIBE_PRODUCERS = 61
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
PRODUCER = st.tuples(INT64, INT32, INT32, INT64, INT32, INT64)


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def straightforward(topics: list[tuple[str, list[tuple[int, int, str | None, list[Any]]]]]) -> bytes:
    cls = response_class(DESCRIBE_PRODUCERS, 0)
    keys = ("producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch")
    return encode(
        build(
            cls,
            throttle_time=0,
            topics=[
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "error_code": ErrorCode(code),
                            "error_message": message,
                            "active_producers": [
                                {**dict(zip(keys, producer, strict=False)), "current_txn_start_offset": producer[5]}
                                for producer in producers
                            ],
                        }
                        for p, code, message, producers in partitions
                    ],
                }
                for name, partitions in topics
            ],
        )
    )


@st.composite
def layouts(draw: st.DrawFn) -> list[tuple[str, list[tuple[int, int, str | None, list[Any]]]]]:
    names = draw(st.lists(st.text(alphabet="ab._-é", max_size=4), max_size=3, unique=True))
    out = []
    for name in names:
        count = draw(st.sampled_from([0, 1, 3, CHUNK + 1]))
        partitions = []
        for p in range(count):
            code = draw(st.sampled_from([0, 0, 3, 29]))
            message = draw(st.none() | st.sampled_from(["Topic authorization failed.", "é"]))
            producers = draw(st.lists(PRODUCER, max_size=2)) if p < 5 else []
            partitions.append((p, code, message, producers))
        out.append((name, partitions))
    return out


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_describe_producers_answer_is_kios_encoding(topics: Any) -> None:
    empty = build(response_class(DESCRIBE_PRODUCERS, 0), throttle_time=0, topics=[])
    answer = asyncio.run(describe_producers_answer(empty, topics))
    assert answer.body == straightforward(topics)
    assert list(answer.error_codes) == [code for _, ps in topics for _, code, _, _ in ps if code]


class Broker:
    authorizer = None

    def __init__(self, store: TopicStore) -> None:
        self.topic_store = store


def reference(store: TopicStore, request: list[tuple[str, list[int]]]) -> bytes:
    """The straightforward answer: every named partition's log opened and asked."""
    topics = []
    for name, indexes in request:
        partitions = []
        for p in indexes:
            plog = store.partition(name, p)
            if plog is None:
                partitions.append((p, int(ErrorCode.unknown_topic_or_partition), None, []))
                continue
            sequences = plog.producers.last_sequences()
            producers = [(pid, *sequences[pid], -1, -1, -1) for pid in sorted(sequences)]
            partitions.append((p, 0, None, producers))
        topics.append((name, partitions))
    return straightforward(topics)


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, int], dict[tuple[str, int], list[int]], list[tuple[str, list[int]]]]:
    layout = {f"t{i}": draw(st.integers(1, 6)) for i in range(draw(st.integers(1, 3)))}
    cells = [(t, p) for t, n in layout.items() for p in range(n)]
    written = {
        cell: draw(st.lists(st.integers(1000, 1003), min_size=1, max_size=3, unique=True))
        for cell in draw(st.lists(st.sampled_from(cells), max_size=4, unique=True))
    }
    request = [(t, draw(st.lists(st.integers(-1, 7), max_size=6))) for t in [*layout, "missing"] if draw(st.booleans())]
    return layout, written, request


def _request(topics: list[tuple[str, list[int]]]) -> Any:
    from tests.server_data.helpers import request_module

    mod = request_module("describe_producers", 0)
    return mod.DescribeProducersRequest(
        topics=tuple(mod.TopicRequest(name=n, partition_indexes=tuple(ps)) for n, ps in topics)  # type: ignore[arg-type]
    )


def _answer(store: TopicStore, topics: list[tuple[str, list[int]]]) -> PreEncoded:
    ctx = RequestContext(DESCRIBE_PRODUCERS, 0, 1, "test", "127.0.0.1", 1)
    response = asyncio.run(transactions.describe_producers(Broker(store), ctx, _request(topics)))
    assert isinstance(response, PreEncoded)
    return response


@settings(max_examples=40, deadline=None)
@given(cases())
def test_describe_producers_equals_the_straightforward_answer(case: Any) -> None:
    layout, written, request = case
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            for name, n in layout.items():
                store.create_topic(name, n)
            for (name, p), producers in written.items():
                plog = store.partition(name, p)
                assert plog is not None
                for pid in producers:
                    plog.append(make_batch([b"v"], producer_id=pid, producer_epoch=2, base_sequence=0))
            optimized = _answer(store, request).body  # before the reference opens every log
            assert optimized == reference(store, request)
        finally:
            store.close()


def test_many_partitions_are_answered_without_opening_their_logs_and_pause() -> None:
    n = 3 * CHUNK + 5
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            store.create_topic("big", n)
            plog = store.partition("big", 7)
            assert plog is not None
            plog.append(make_batch([b"v"], producer_id=42, producer_epoch=1, base_sequence=0))
            ctx = RequestContext(DESCRIBE_PRODUCERS, 0, 1, "test", "127.0.0.1", 1)
            request = _request([("big", list(range(n)))])
            response, turns = asyncio.run(counting_turns(transactions.describe_producers(Broker(store), ctx, request)))
            assert turns >= 3
            assert [p for p in range(n) if store.opened_partition("big", p) is not True] == [7]
            assert isinstance(response, PreEncoded)
            answered = response.decode().topics[0].partitions
            assert [(a.producer_id, a.producer_epoch) for a in answered[7].active_producers] == [(42, 1)]
            assert all(not p.active_producers for i, p in enumerate(answered) if i != 7)
        finally:
            store.close()
