"""The ShareFetch and ShareAcknowledge answers' partition entries packed by hand (``server/share_answers.py``) are
byte for byte kio's encoding of the same partitions, in both versions served (1 and 2), over random rows: error
codes and messages (absent, null or text), leaders, records (empty or bytes) and acquired batches; whole
answers through ``topics_answer`` likewise; a partition class with other fields is left to kio."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.fetch.v12.response import PartitionData as FetchPartition

from regroup.network.codec import response_class
from regroup.server.encoded import PreEncoded, entity_bytes
from regroup.server.entities import build
from regroup.server.inspection_answers import element_class, topics_answer
from regroup.server.share_answers import ACKNOWLEDGE_FIELDS, FETCH_FIELDS, writer_for

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
VERSIONS = (1, 2)
INT16 = st.integers(-(2**15), 2**15 - 1)
#: the error codes Kafka defines (kio checks an ``error_code`` field against them)
CODE = st.sampled_from([int(code) for code in KioErrorCode])
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
MESSAGE = st.none() | st.text(alphabet="ab é\n0", max_size=8)
LEADER = st.fixed_dictionaries({"leader_id": INT32, "leader_epoch": INT32})
ACQUIRED = st.fixed_dictionaries({"first_offset": INT64, "last_offset": INT64, "delivery_count": INT16})


def _messages(names: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """Each message field absent (the row leaves it out: null) or given (null or text)."""
    return st.fixed_dictionaries({}, optional={name: MESSAGE for name in names})


FETCH_ROWS = st.tuples(
    st.fixed_dictionaries(
        {
            "partition_index": INT32,
            "error_code": CODE,
            "acknowledge_error_code": INT16,
            "current_leader": LEADER,
            "records": st.binary(max_size=40),
            "acquired_records": st.lists(ACQUIRED, max_size=4),
        }
    ),
    _messages(("error_message", "acknowledge_error_message")),
).map(lambda parts: {**parts[0], **parts[1]})
ACK_ROWS = st.tuples(
    st.fixed_dictionaries({"partition_index": INT32, "error_code": CODE, "current_leader": LEADER}),
    _messages(("error_message",)),
).map(lambda parts: {**parts[0], **parts[1]})


def partition_class(api_key: int, version: int) -> type[Any]:
    return element_class(element_class(response_class(api_key, version), "responses"), "partitions")


def kio_bytes(cls: type[Any], row: dict[str, Any]) -> bytes:
    return entity_bytes(build(cls, **row))


@settings(max_examples=300, deadline=None)
@given(row=FETCH_ROWS, version=st.sampled_from(VERSIONS))
def test_a_share_fetch_partition_packed_is_kios(row: dict[str, Any], version: int) -> None:
    cls = partition_class(SHARE_FETCH, version)
    packed = writer_for(cls)
    assert packed is not None and packed(row) == kio_bytes(cls, row)


@settings(max_examples=300, deadline=None)
@given(row=ACK_ROWS, version=st.sampled_from(VERSIONS))
def test_a_share_acknowledge_partition_packed_is_kios(row: dict[str, Any], version: int) -> None:
    cls = partition_class(SHARE_ACKNOWLEDGE, version)
    packed = writer_for(cls)
    assert packed is not None and packed(row) == kio_bytes(cls, row)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(FETCH_ROWS, min_size=1, max_size=2_500),
    topics=st.integers(1, 3),
    version=st.sampled_from(VERSIONS),
)
def test_a_whole_share_fetch_answer_is_kios(rows: list[dict[str, Any]], topics: int, version: int) -> None:
    """Thousands of partitions (more than a chunk, so the answer pauses between chunks) over several topics."""
    cls = response_class(SHARE_FETCH, version)
    ids = [uuid.UUID(int=i + 1) for i in range(topics)]
    layout = [{"topic_id": t, "partitions": rows[i::topics]} for i, t in enumerate(ids) if rows[i::topics]]
    empty = build(cls, error_code=0, error_message=None, acquisition_lock_timeout=30_000, responses=[],
                  node_endpoints=[], throttle_time=0)  # fmt: skip
    answer = asyncio.run(topics_answer(empty, layout, 2))
    assert isinstance(answer, PreEncoded)
    whole = dataclasses.replace(empty, responses=tuple(build(element_class(cls, "responses"), **t) for t in layout))
    assert answer.body == entity_bytes(whole)


def test_the_fields_packed_are_kios_and_another_class_is_left_to_kio() -> None:
    for version in VERSIONS:
        assert tuple(f.name for f in dataclasses.fields(partition_class(SHARE_FETCH, version))) == FETCH_FIELDS
        assert tuple(f.name for f in dataclasses.fields(partition_class(SHARE_ACKNOWLEDGE, version))) == (
            ACKNOWLEDGE_FIELDS
        )
    assert writer_for(FetchPartition) is None
