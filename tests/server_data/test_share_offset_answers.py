"""DescribeShareGroupOffsets answers encoded by hand (``server/share_offset_answers.py``) are byte for byte kio's
encoding of the straightforward entity, for both versions and random groups, topics (with and without an id),
partitions, offsets, lags and errors, over ``CHUNK`` partitions (the paused path)."""

from __future__ import annotations

import asyncio
import io
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from regroup.network.codec import response_class
from regroup.server.entities import build
from regroup.server.offset_answers import CHUNK
from regroup.server.share_offset_answers import share_offsets_answer

DESCRIBE_SHARE_GROUP_OFFSETS = 90
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
CODES = st.sampled_from([0, 0, 3, 29, 30, 35])


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@st.composite
def layouts(draw: st.DrawFn) -> list[Any]:
    groups = []
    for group_id in draw(st.lists(st.text(max_size=4), max_size=3)):
        topics = []
        for name in draw(st.lists(st.text(alphabet="ab.é", max_size=4), max_size=3)):
            topic_id = draw(st.none() | st.uuids())
            count = draw(st.sampled_from([0, 1, 4, CHUNK + 1]))
            rows = [(p, draw(INT64), draw(INT32), draw(INT64), draw(CODES)) for p in range(min(count, 4))]
            rows += [(p, p, 0, -1, 0) for p in range(len(rows), count)]
            topics.append((name, topic_id, rows))
        groups.append((group_id, topics, draw(CODES)))
    return groups


@settings(max_examples=60, deadline=None)
@given(layouts(), st.sampled_from([0, 1]))
def test_share_offsets_answer_is_kios_encoding(groups: list[Any], version: int) -> None:
    cls = response_class(DESCRIBE_SHARE_GROUP_OFFSETS, version)
    expected = build(
        cls,
        throttle_time=0,
        groups=[
            {
                "group_id": group_id,
                "error_code": ErrorCode(code),
                "error_message": None,
                "topics": [
                    {
                        "topic_name": name,
                        "topic_id": topic_id if topic_id is not None else uuid.UUID(int=0),
                        "partitions": [
                            {"partition_index": p, "start_offset": start, "leader_epoch": epoch, "lag": lag,
                             "error_code": ErrorCode(c), "error_message": None}
                            for p, start, epoch, lag, c in rows
                        ],
                    }
                    for name, topic_id, rows in topics
                ],
            }
            for group_id, topics, code in groups
        ],
    )  # fmt: skip
    answer = asyncio.run(share_offsets_answer(build(cls, throttle_time=0, groups=[]), groups, version))
    assert answer.body == encode(expected)
