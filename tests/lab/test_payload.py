"""The lab's payload sizes are computed field by field; they must equal the real encodings (the consumer
protocol's ConsumerProtocolSubscription and ConsumerProtocolAssignment, and the fields of ConsumerGroupHeartbeat v1)."""

from __future__ import annotations

import datetime
import io

from hypothesis import given
from hypothesis import strategies as st
from kio.schema.consumer_group_heartbeat.v1 import request as hb_request
from kio.schema.consumer_group_heartbeat.v1 import response as hb_response
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32, i32Timedelta

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    encode_assignment,
    encode_subscription,
)
from regroup.lab import payload
from regroup.model.cluster import topic_id_for

topic = st.text(min_size=1, max_size=12)
partitions = st.lists(st.integers(min_value=0, max_value=2**31 - 1), max_size=20, unique=True)
per_topic = st.dictionaries(topic, partitions, max_size=6)


@given(topics=st.lists(topic, max_size=8, unique=True), owned=per_topic, generation=st.integers(-1, 2**31 - 1))
def test_subscription_size_is_the_encoded_size(topics: list[str], owned: dict[str, list[int]], generation: int) -> None:
    sub = ConsumerProtocolSubscription(
        topics=tuple(sorted(topics)),
        owned={t: tuple(sorted(ps)) for t, ps in sorted(owned.items())},
        generation=generation,
    )
    assert payload.subscription_bytes(topics, owned, generation) == len(encode_subscription(sub))


@given(parts=per_topic)
def test_assignment_size_is_the_encoded_size(parts: dict[str, list[int]]) -> None:
    encoded = encode_assignment(
        ConsumerProtocolAssignment(partitions={t: tuple(ps) for t, ps in sorted(parts.items())})
    )
    assert payload.assignment_bytes(parts) == len(encoded)


def test_leader_only_against_everyone_receives_everything() -> None:
    # 100 members x 100 KB of metadata: the leader receives 10 MB, everyone-receives-everything 1 GB
    assert payload.join_bytes([100_000] * 100) == (10_000_000, 1_000_000_000)
    assert payload.sync_bytes([10, 20]) == 60


# ConsumerGroupHeartbeat v1: a field's size is what it adds to a message that has it null
def _request_bytes(topics: list[str] | None, owned: dict[str, list[int]] | None) -> int:
    parts = None
    if owned is not None:
        parts = tuple(
            hb_request.TopicPartitions(topic_id=topic_id_for(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in owned.items()
        )
    request = hb_request.ConsumerGroupHeartbeatRequest(
        group_id=GroupId("g"),
        member_id="m",
        member_epoch=i32(3),
        subscribed_topic_names=None if topics is None else tuple(TopicName(t) for t in topics),
        topic_partitions=parts,
    )
    buffer = io.BytesIO()
    entity_writer(hb_request.ConsumerGroupHeartbeatRequest)(buffer, request)
    return len(buffer.getvalue())


def _response_bytes(assigned: dict[str, list[int]] | None) -> int:
    assignment = None
    if assigned is not None:
        assignment = hb_response.Assignment(
            topic_partitions=tuple(
                hb_response.TopicPartitions(topic_id=topic_id_for(t), partitions=tuple(i32(p) for p in ps))
                for t, ps in assigned.items()
            )
        )
    response = hb_response.ConsumerGroupHeartbeatResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        member_id="m",
        member_epoch=i32(3),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        assignment=assignment,
    )
    buffer = io.BytesIO()
    entity_writer(hb_response.ConsumerGroupHeartbeatResponse)(buffer, response)
    return len(buffer.getvalue())


many_partitions = st.lists(st.integers(min_value=0, max_value=2**31 - 1), max_size=200, unique=True)


@given(topics=st.lists(st.text(min_size=1, max_size=200), max_size=140, unique=True))
def test_heartbeat_topic_names_size(topics: list[str]) -> None:
    assert payload.heartbeat_topics_bytes(topics) == _request_bytes(topics, None) - _request_bytes(None, None)


@given(owned=st.dictionaries(topic, many_partitions, max_size=6))
def test_heartbeat_owned_partitions_size(owned: dict[str, list[int]]) -> None:
    assert payload.heartbeat_owned_bytes(owned) == _request_bytes(None, owned) - _request_bytes(None, None)


@given(assigned=st.dictionaries(topic, many_partitions, max_size=6))
def test_heartbeat_assignment_size(assigned: dict[str, list[int]]) -> None:
    assert payload.heartbeat_assignment_bytes(assigned) == _response_bytes(assigned) - _response_bytes(None)
