"""OffsetCommit (and TxnOffsetCommit, AddPartitionsToTxn), DeleteRecords, OffsetFetch, ListOffsets
(``server/offset_answers.py``) and Produce
(``server/produce_answers.py``) answers encoded by hand are byte for byte kio's encoding of the straightforward
entities, for every served version and random contents (names, metadata strings, error codes, layouts over
``CHUNK`` partitions, so the paused paths run); and the ListOffsets handler, which answers partitions never opened
without opening them, answers as the straightforward handler (every log opened) over random topic layouts, data,
targets, isolation levels and versions."""

from __future__ import annotations

import asyncio
import datetime
import tempfile
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from regroup.model.errors import ErrorCode as CoreErrorCode
from regroup.network.codec import response_class
from regroup.server import offset_answers
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.entities import build
from regroup.server.handlers import data
from regroup.server.handlers import offsets as offsets_handler
from regroup.server.handlers.topics import NO_THROTTLE, response_module
from regroup.server.handlers.topics import build as build_versioned
from regroup.server.offset_answers import (
    CHUNK,
    FETCHED_GROUP_WEIGHT,
    commit_topics,
    delete_records_topics,
    fetch_groups,
    fetch_topics,
)
from regroup.server.produce_answers import PRODUCE_TOPIC_ID_FROM, ProducePartition, produce_answer
from regroup.server.topics import TopicStore
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import BASE_TS, make_batch
from tests.server_data.helpers import _ms, counting_turns, request_module

T = TypeVar("T")
PRODUCE, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, DELETE_RECORDS = 0, 2, 8, 9, 21
ADD_PARTITIONS_TO_TXN, TXN_OFFSET_COMMIT = 24, 28
NAMES = st.text(alphabet="ab._-é", min_size=0, max_size=4)
METADATA = st.none() | st.sampled_from(["", "m"]) | st.text(max_size=5)
ERRORS = st.sampled_from([0, 0, 0, 3, 29, 16, 87])
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def encode(entity: Any) -> bytes:
    import io

    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def ctx(api_key: int, version: int) -> RequestContext:
    return RequestContext(api_key, version, 1, "test", "127.0.0.1", 1)


def sizes(draw: st.DrawFn) -> int:
    return draw(st.sampled_from([0, 1, 3, CHUNK, CHUNK + 1, 2 * CHUNK + 7]))


# ---------------------------------------------------------------------------------------- OffsetCommit
@st.composite
def commit_layouts(draw: st.DrawFn) -> list[tuple[str, list[tuple[int, int]]]]:
    topics = draw(st.lists(NAMES, max_size=3, unique=True))
    return [(t, [(i, draw(ERRORS)) for i in range(sizes(draw))]) for t in topics]


@settings(max_examples=60, deadline=None)
@given(commit_layouts(), st.integers(2, 9))
def test_commit_answer_is_kios_encoding(topics: list[tuple[str, list[tuple[int, int]]]], version: int) -> None:
    cls = response_class(OFFSET_COMMIT, version)
    expected = build(
        cls,
        throttle_time=0,
        topics=[
            {"name": t, "partitions": [{"partition_index": p, "error_code": e} for p, e in ps]} for t, ps in topics
        ],
    )
    answer = run(commit_topics(build(cls, throttle_time=0, topics=[]), topics))
    assert answer.body == encode(expected)
    assert sorted(answer.error_codes) == sorted(e for _, ps in topics for _, e in ps if e)


#: error codes the core answers a commit's partitions with
CORE_ERRORS = st.sampled_from([0, 0, 0, 3, 12, 16, 22, 25, 27, 29])
ROWS = st.lists(st.tuples(st.integers(0, 70), CORE_ERRORS), max_size=40)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(NAMES, ROWS), max_size=3), st.integers(2, 9))
def test_a_kept_commit_answer_is_the_answer_encoded_again(rows: list[Any], version: int) -> None:
    """``_commit_answer`` (the answer of an OffsetCommit answered at once) keeps small answers by version and
    rows: asked again with equal rows it is the same bytes as the answer written out (a topic named twice
    answered once, its rows merged), and the kept one is handed back."""
    topics = tuple((name, tuple((p, CoreErrorCode(e)) for p, e in ps)) for name, ps in rows)
    first = offsets_handler._commit_answer(version, topics)
    again = offsets_handler._commit_answer(version, tuple((n, tuple(ps)) for n, ps in topics))
    merged: dict[str, list[tuple[int, int]]] = {}
    for name, ps in rows:
        merged.setdefault(name, []).extend(ps)
    cls = response_class(OFFSET_COMMIT, version)
    fresh = run(commit_topics(build(cls, throttle_time=0, topics=[]), list(merged.items())))
    assert first.body == again.body == fresh.body
    assert sorted(again.error_codes) == sorted(fresh.error_codes)
    small = sum(len(ps) for _, ps in rows) <= offsets_handler.COMMIT_ANSWER_ROWS_KEPT
    assert (again is first) == small


def test_kept_commit_answers_are_by_version_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offsets_handler, "COMMIT_ANSWERS_KEPT", 3)
    monkeypatch.setattr(offsets_handler, "_commit_answers", {})
    rows = (("t", ((0, CoreErrorCode(0)), (1, CoreErrorCode(0)))),)
    old, new = offsets_handler._commit_answer(2, rows), offsets_handler._commit_answer(9, rows)
    assert old.body != new.body and old.response_class is response_class(OFFSET_COMMIT, 2)
    for partition in range(5):
        offsets_handler._commit_answer(9, (("t", ((partition, CoreErrorCode(0)),)),))
        assert len(offsets_handler._commit_answers) <= 3


@settings(max_examples=40, deadline=None)
@given(commit_layouts(), st.integers(0, 4))
def test_txn_offset_commit_answer_is_kios_encoding(
    topics: list[tuple[str, list[tuple[int, int]]]], version: int
) -> None:
    cls = response_class(TXN_OFFSET_COMMIT, version)
    expected = build(
        cls,
        throttle_time=0,
        topics=[
            {"name": t, "partitions": [{"partition_index": p, "error_code": e} for p, e in ps]} for t, ps in topics
        ],
    )
    assert run(commit_topics(build(cls, throttle_time=0, topics=[]), topics)).body == encode(expected)


@settings(max_examples=40, deadline=None)
@given(commit_layouts(), st.integers(0, 3))
def test_add_partitions_answer_is_kios_encoding(topics: list[tuple[str, list[tuple[int, int]]]], version: int) -> None:
    cls = response_class(ADD_PARTITIONS_TO_TXN, version)
    field = "results_by_topic_v3_and_below"
    expected = build(
        cls,
        throttle_time=0,
        **{
            field: [
                {
                    "name": t,
                    "results_by_partition": [{"partition_index": p, "partition_error_code": e} for p, e in ps],
                }
                for t, ps in topics
            ]
        },
    )
    answer = run(commit_topics(build(cls, throttle_time=0, **{field: []}), topics, field))
    assert answer.body == encode(expected)
    assert sorted(answer.error_codes) == sorted(e for _, ps in topics for _, e in ps if e)


# ---------------------------------------------------------------------------------------- DeleteRecords
@st.composite
def deleted_layouts(draw: st.DrawFn) -> list[tuple[str, list[tuple[int, int, int]]]]:
    topics = draw(st.lists(NAMES, max_size=3, unique=True))
    return [(t, [(i, draw(ERRORS), draw(INT64)) for i in range(sizes(draw))]) for t in topics]


@settings(max_examples=60, deadline=None)
@given(deleted_layouts(), st.integers(0, 2))
def test_delete_records_answer_is_kios_encoding(
    topics: list[tuple[str, list[tuple[int, int, int]]]], version: int
) -> None:
    cls = response_class(DELETE_RECORDS, version)
    expected = build(
        cls,
        throttle_time=0,
        topics=[
            {
                "name": t,
                "partitions": [
                    {"partition_index": p, "low_watermark": low, "error_code": e} for p, e, low in partitions
                ],
            }
            for t, partitions in topics
        ],
    )
    rows = [(t, [(p, low, e) for p, e, low in partitions]) for t, partitions in topics]
    answer = run(delete_records_topics(build(cls, throttle_time=0, topics=[]), rows))
    assert answer.body == encode(expected)
    assert sorted(answer.error_codes) == sorted(e for _, ps in topics for _, e, _ in ps if e)


# ---------------------------------------------------------------------------------------- OffsetFetch
@st.composite
def fetch_layouts(draw: st.DrawFn) -> list[tuple[str, list[tuple[int, int, int, str | None, int]]]]:
    topics = draw(st.lists(NAMES, max_size=3, unique=True))
    out = []
    for t in topics:
        n = sizes(draw)
        small = n <= 3
        rows = [
            (
                i,
                draw(INT64) if small else i * 7,
                draw(INT32) if small else -1,
                draw(METADATA) if small else ("" if i % 3 else None),
                draw(ERRORS) if small else 0,
            )
            for i in range(n)
        ]
        out.append((t, rows))
    return out


def fetch_entity_topics(topics: list[tuple[str, list[tuple[int, int, int, str | None, int]]]]) -> list[Any]:
    return [
        {
            "name": t,
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": o,
                    "committed_leader_epoch": le,
                    "metadata": m,
                    "error_code": e,
                }
                for p, o, le, m, e in ps
            ],
        }
        for t, ps in topics
    ]


@settings(max_examples=60, deadline=None)
@given(fetch_layouts(), st.integers(1, 7), ERRORS)
def test_fetch_answer_is_kios_encoding(
    topics: list[tuple[str, list[tuple[int, int, int, str | None, int]]]], version: int, top: int
) -> None:
    cls = response_class(OFFSET_FETCH, version)
    expected = build(cls, throttle_time=0, error_code=top, topics=fetch_entity_topics(topics))
    answer = run(fetch_topics(build(cls, throttle_time=0, error_code=top, topics=[]), topics, version))
    assert answer.body == encode(expected)
    if version >= 2:
        assert answer.error_codes.count(top) >= (1 if top else 0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(NAMES, fetch_layouts(), ERRORS), max_size=3), st.integers(8, 9))
def test_batched_fetch_answer_is_kios_encoding(groups: list[Any], version: int) -> None:
    cls = response_class(OFFSET_FETCH, version)
    expected = build(
        cls,
        throttle_time=0,
        groups=[{"group_id": g, "topics": fetch_entity_topics(ts), "error_code": e} for g, ts, e in groups],
    )
    answer = run(fetch_groups(build(cls, throttle_time=0, groups=[]), groups))
    assert answer.body == encode(expected)


def test_a_batched_fetch_of_many_groups_yields_between_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of one partition each count ``FETCHED_GROUP_WEIGHT`` units apiece: an answer for many of them gives
    the loop turns, and is still kio's encoding."""
    pauses: list[int] = []
    real = offset_answers.pause

    async def counted() -> None:
        pauses.append(1)
        await real()

    monkeypatch.setattr(offset_answers, "pause", counted)
    groups = [(f"g-{i:04d}", [("t", [(0, i, -1, "", 0)])], 0) for i in range(3 * CHUNK // FETCHED_GROUP_WEIGHT)]
    cls = response_class(OFFSET_FETCH, 9)
    answer = run(fetch_groups(build(cls, throttle_time=0, groups=[]), groups))
    expected = build(
        cls,
        throttle_time=0,
        groups=[{"group_id": g, "topics": fetch_entity_topics(ts), "error_code": e} for g, ts, e in groups],
    )
    assert answer.body == encode(expected)
    assert len(pauses) >= 2


# ---------------------------------------------------------------------------------------- ListOffsets
class Broker:
    auto_create_topics, default_partitions, host, port, rack, authorizer = False, 1, "127.0.0.1", 9092, None, None

    def __init__(self, store: TopicStore) -> None:
        self.topic_store = store

    def endpoint(self, listener: str) -> tuple[str, int]:
        return self.host, self.port


def reference_list_offsets(store: TopicStore, request: Any, version: int) -> Any:
    """The straightforward answer: one kio entity per partition, every log opened (no authorizer)."""
    mod = response_module(request)
    committed_only = getattr(request, "isolation_level", 0) == 1
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            plog: PartitionLog | None = store.partition(topic.name, p.partition_index)
            code, found = (
                (data.UNKNOWN_TOPIC, (-1, -1))
                if plog is None
                else (ErrorCode.none, data._offset_for(plog, p.timestamp, committed_only))
            )
            partitions.append(
                build_versioned(
                    mod,
                    "ListOffsetsPartitionResponse",
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=found[0],
                    offset=found[1],
                    leader_epoch=-1,
                )
            )
        topics.append(build_versioned(mod, "ListOffsetsTopicResponse", name=topic.name, partitions=tuple(partitions)))
    return build_versioned(mod, "ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


TARGETS = st.sampled_from([-1, -2, -3, -4, -5, -6, 0, BASE_TS, BASE_TS + 1, BASE_TS + 5, BASE_TS + 100])


@st.composite
def list_cases(draw: st.DrawFn) -> tuple[dict[str, int], dict[tuple[str, int], list[int]], list[Any], int, int]:
    layout = {name: draw(st.integers(1, 4)) for name in draw(st.lists(st.sampled_from("abc"), max_size=3, unique=True))}
    written = {
        (t, p): draw(st.lists(st.integers(0, 6), min_size=1, max_size=3))
        for t, n in layout.items()
        for p in range(n)
        if draw(st.booleans())
    }
    names = [*layout, "missing"]
    requested = [
        (name, [(p, draw(TARGETS)) for p in draw(st.lists(st.integers(-1, 5), max_size=5))])
        for name in draw(st.lists(st.sampled_from(names), max_size=4))
    ]
    return layout, written, requested, draw(st.integers(1, 11)), draw(st.sampled_from([0, 1]))


def list_request(version: int, isolation: int, requested: list[Any]) -> Any:
    mod = request_module("list_offsets", version)
    topics = tuple(
        build_versioned(
            mod,
            "ListOffsetsTopic",
            name=name,
            partitions=tuple(
                build_versioned(
                    mod,
                    "ListOffsetsPartition",
                    partition_index=p,
                    current_leader_epoch=-1,
                    timestamp=ts,
                    max_num_offsets=1,
                )
                for p, ts in partitions
            ),
        )
        for name, partitions in requested
    )
    return build_versioned(
        mod, "ListOffsetsRequest", replica_id=-1, isolation_level=isolation, topics=topics, timeout=_ms(0)
    )


def answer_list_offsets(store: TopicStore, request: Any, version: int) -> bytes:
    response = run(data.handle_list_offsets(Broker(store), ctx(LIST_OFFSETS, version), request))
    assert isinstance(response, PreEncoded)
    return response.body


@settings(max_examples=60, deadline=None)
@given(list_cases())
def test_list_offsets_equals_the_straightforward_answer(case: Any) -> None:
    layout, written, requested, version, isolation = case
    request = list_request(version, isolation, requested)
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            for name, n in layout.items():
                store.create_topic(name, n)
            for (name, p), deltas in written.items():
                plog = store.partition(name, p)
                assert plog is not None
                plog.append(make_batch([b"v"] * len(deltas), timestamps=[BASE_TS + d for d in deltas]))
            optimized = answer_list_offsets(store, request, version)  # before the reference opens every log
            assert optimized == encode(reference_list_offsets(store, request, version))
        finally:
            store.close()


def test_list_offsets_of_many_partitions_opens_no_log_and_pauses() -> None:
    n = 3 * CHUNK + 5
    request = list_request(8, 0, [("big", [(p, -1 if p % 2 else -2) for p in range(n)])])
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            store.create_topic("big", n)
            plog = store.partition("big", 7)
            assert plog is not None
            plog.append(make_batch([b"v"] * 3))

            async def answer_counting_turns() -> tuple[bytes, int]:
                response, turns = await counting_turns(
                    data.handle_list_offsets(Broker(store), ctx(LIST_OFFSETS, 8), request)
                )
                return response.body, turns

            body, turns = run(answer_counting_turns())
            assert turns >= 3  # the loop ran between chunks
            assert sum(1 for _ in store.loaded_partitions()) == 1
            assert body == encode(reference_list_offsets(store, request, 8))
        finally:
            store.close()


class _Session:
    """What a handler asks of its connection's session: the holds on its later requests."""

    def __init__(self) -> None:
        self.holds = 0
        self.most = 0

    def hold(self) -> None:
        self.holds += 1
        self.most = max(self.most, self.holds)

    def release(self) -> None:
        self.holds -= 1


def test_list_offsets_by_timestamp_reads_in_slices_holding_the_connection(monkeypatch: Any) -> None:
    """Lookups by timestamp read a batch each: with the slice at 0 every partition is read in a turn of its own,
    the connection's later requests held from the first turn until the answer, which is the straightforward one."""
    monkeypatch.setattr(data, "PRODUCE_SLICE_S", 0.0)
    n = 40
    request = list_request(8, 0, [("t", [(p, BASE_TS + 1) for p in range(n)]), ("u", [(0, -3), (1, -3)])])
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER)
        try:
            store.create_topic("t", n)
            store.create_topic("u", 2)
            for p in range(n):
                plog = store.partition("t", p)
                assert plog is not None
                plog.append(make_batch([b"a", b"b", b"c"], timestamps=[BASE_TS, BASE_TS + p % 3, BASE_TS + 2]))
            session = _Session()
            context = ctx(LIST_OFFSETS, 8)
            context.session = session
            response, turns = run(counting_turns(data.handle_list_offsets(Broker(store), context, request)))
            assert turns >= n
            assert session.most == 1 and session.holds == 0
            assert response.body == encode(reference_list_offsets(store, request, 8))
        finally:
            store.close()


# ---------------------------------------------------------------------------------------- Produce
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
APPEND_MS = st.sampled_from([-1, -1, 0, 1_700_000_000_123]) | st.integers(0, 2**42)
MESSAGES = st.none() | st.text(max_size=6)


@st.composite
def produce_layouts(draw: st.DrawFn) -> list[tuple[Any, list[ProducePartition]]]:
    topics = draw(st.lists(NAMES, max_size=3, unique=True))
    out: list[tuple[Any, list[ProducePartition]]] = []
    for t in topics:
        n = sizes(draw)
        small = n <= 3
        rows = [
            (
                i,
                draw(ERRORS),
                draw(INT64) if small else i,
                draw(APPEND_MS) if small else -1,
                draw(INT64) if small else 0,
                draw(MESSAGES) if small else None,
            )
            for i in range(n)
        ]
        out.append((t, rows))
    return out


@settings(max_examples=80, deadline=None)
@given(produce_layouts(), st.integers(3, 13), st.data())
def test_produce_answer_is_kios_encoding(
    topics: list[tuple[Any, list[ProducePartition]]], version: int, data_: st.DataObject
) -> None:
    """Every served version, random partitions (errors, messages, append times) and topics by name (v3-12)
    or by id (v13)."""
    if version >= PRODUCE_TOPIC_ID_FROM:
        topics = [(data_.draw(st.uuids()), rows) for _, rows in topics]
    cls = response_class(PRODUCE, version)
    key = "topic_id" if version >= PRODUCE_TOPIC_ID_FROM else "name"
    expected = build(
        cls,
        throttle_time=0,
        responses=[
            {
                key: t,
                "partition_responses": [
                    {
                        "index": i,
                        "error_code": e,
                        "base_offset": base,
                        "log_append_time": None if ms < 0 else EPOCH + datetime.timedelta(milliseconds=ms),
                        "log_start_offset": start,
                        "record_errors": [],
                        "error_message": message,
                    }
                    for i, e, base, ms, start, message in rows
                ],
            }
            for t, rows in topics
        ],
    )
    answer = run(produce_answer(build(cls, throttle_time=0, responses=[]), topics, version))
    assert answer.body == encode(expected)
    assert sorted(answer.error_codes) == sorted(e for _, rows in topics for _, e, *_ in rows if e)
