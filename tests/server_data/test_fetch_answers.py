"""The Fetch answer encoded by hand (``server/fetch_answers.py``) is byte for byte kio's encoding of the
straightforward entity, for every served version (4-18) and random contents (error codes, offsets, aborted
transactions absent, empty or listed, records of any length, topics by name or by id, layouts over ``CHUNK``
partitions so the paused path runs); and the Fetch handler reading many partitions gives the loop turns while
it reads, with every partition's records in its answer."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.network.codec import response_class
from regroup.server.api import RequestContext
from regroup.server.entities import build
from regroup.server.fetch_answers import FETCH_TOPIC_ID_FROM, FetchPartition, fetch_answer
from regroup.server.handlers import data
from regroup.server.handlers.topics import build as build_versioned
from regroup.server.offset_answers import CHUNK
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch
from tests.server_data.helpers import FakeBroker, _ms, counting_turns, request_module, wire
from tests.server_data.test_offset_answers import ERRORS, INT64, NAMES, encode

FETCH = 1
ABORTED = st.none() | st.lists(st.tuples(INT64, INT64), max_size=3)
RECORDS = st.sampled_from([b"", b"x"]) | st.binary(max_size=300)


@st.composite
def fetch_layouts(draw: st.DrawFn) -> list[tuple[Any, list[FetchPartition]]]:
    topics = draw(st.lists(NAMES, max_size=3, unique=True))
    out: list[tuple[Any, list[FetchPartition]]] = []
    for t in topics:
        n = draw(st.sampled_from([0, 1, 3, CHUNK + 1]))
        small = n <= 3
        rows: list[FetchPartition] = [
            (
                i,
                draw(ERRORS),
                draw(INT64) if small else i,
                draw(INT64) if small else i,
                draw(INT64) if small else 0,
                draw(ABORTED) if small else None,
                draw(RECORDS) if small else b"",
            )
            for i in range(n)
        ]
        out.append((t, rows))
    return out


@settings(max_examples=80, deadline=None)
@given(fetch_layouts(), st.integers(4, 18), st.data())
def test_fetch_answer_is_kios_encoding(
    topics: list[tuple[Any, list[FetchPartition]]], version: int, data_: st.DataObject
) -> None:
    if version >= FETCH_TOPIC_ID_FROM:
        topics = [(data_.draw(st.uuids()), rows) for _, rows in topics]
    cls = response_class(FETCH, version)
    key = "topic_id" if version >= FETCH_TOPIC_ID_FROM else "topic"
    session = data_.draw(st.integers(0, 5))
    expected = build(
        cls,
        throttle_time=0,
        error_code=0,
        session_id=session,
        responses=[
            {
                key: t,
                "partitions": [
                    {
                        "partition_index": i,
                        "error_code": e,
                        "high_watermark": high,
                        "last_stable_offset": stable,
                        "log_start_offset": start,
                        "aborted_transactions": (
                            None if aborted is None else [{"producer_id": p, "first_offset": f} for p, f in aborted]
                        ),
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                    for i, e, high, stable, start, aborted, records in rows
                ],
            }
            for t, rows in topics
        ],
    )
    empty = build(cls, throttle_time=0, error_code=0, session_id=session, responses=[])
    answer = asyncio.run(fetch_answer(empty, topics, version))
    assert answer.body == encode(expected)
    assert sorted(answer.error_codes) == sorted(e for _, rows in topics for _, e, *_ in rows if e)


def _fetch_request(version: int, partitions: int, max_wait_ms: int, topic_id: Any = None) -> Any:
    """Fetch of partitions 0..``partitions`` of topic ``t`` (or ``topic_id``) from offset 0, no fetch session."""
    mod = request_module("fetch", version)
    fetched = tuple(
        build_versioned(
            mod,
            "FetchPartition",
            partition=p,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for p in range(partitions)
    )
    topic = build_versioned(mod, "FetchTopic", topic="t", topic_id=topic_id, partitions=fetched)
    return build_versioned(
        mod,
        "FetchRequest",
        replica_id=-1,
        max_wait=_ms(max_wait_ms),
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(topic,),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_a_fetch_of_many_partitions_reads_them_in_slices(monkeypatch: Any) -> None:
    """Every partition read and answered (its record there), the loop given turns while it reads."""
    monkeypatch.setattr(data, "FETCH_SLICE_S", 0.0)  # (a turn before every partition)
    partitions = 300
    with tempfile.TemporaryDirectory() as tmp, TopicStore.open(Path(tmp), fsync=FsyncPolicy.NEVER) as store:
        store.create_topic("t", partitions)
        for p in range(partitions):
            plog = store.partition("t", p)
            assert plog is not None
            plog.append(make_batch([b"v%d" % p]), sync=False)
        info = store.topic("t")
        assert info is not None
        for version in (4, 12, 13, 18):
            request = _fetch_request(version, partitions, 0, info.topic_id)
            ctx = RequestContext(FETCH, version, 1, "test", "127.0.0.1", 1)
            answer, turns = asyncio.run(counting_turns(data.handle_fetch(FakeBroker(store), ctx, wire(request))))
            assert turns >= partitions
            (got,) = wire(answer).responses
            assert (got.topic_id if version >= FETCH_TOPIC_ID_FROM else got.topic) == (
                info.topic_id if version >= FETCH_TOPIC_ID_FROM else "t"
            )
            assert [p.partition_index for p in got.partitions] == list(range(partitions))
            for p in got.partitions:
                assert p.error_code == 0 and p.high_watermark == 1 and p.records
                assert (b"v%d" % p.partition_index) in bytes(p.records)


def test_an_append_to_a_partition_read_earlier_in_the_pass_wakes_the_long_poll(monkeypatch: Any) -> None:
    """The read pass gives the loop turns: an append made then to a partition it read already (empty) ends the
    long poll at once, not at ``max_wait``."""
    monkeypatch.setattr(data, "FETCH_SLICE_S", 0.0)
    partitions = 50
    with tempfile.TemporaryDirectory() as tmp, TopicStore.open(Path(tmp), fsync=FsyncPolicy.NEVER) as store:
        store.create_topic("t", partitions)
        ctx = RequestContext(FETCH, 12, 1, "test", "127.0.0.1", 1)

        async def main() -> tuple[Any, float]:
            loop = asyncio.get_running_loop()
            started = loop.time()
            fetch = loop.create_task(
                data.handle_fetch(FakeBroker(store), ctx, wire(_fetch_request(12, partitions, 20_000)))
            )
            for _ in range(partitions // 2):  # (into the pass: partition 0 read, empty)
                await asyncio.sleep(0)
            assert not fetch.done()
            plog = store.partition("t", 0)
            assert plog is not None
            plog.append(make_batch([b"late"]), sync=False)
            answer = await asyncio.wait_for(fetch, 15)
            return answer, loop.time() - started

        answer, took = asyncio.run(main())
        assert took < 10  # (not the 20 s long poll)
        (got,) = wire(answer).responses
        first = got.partitions[0]
        assert first.partition_index == 0 and first.records and b"late" in bytes(first.records)
