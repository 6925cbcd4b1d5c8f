"""DescribeTopicPartitions paging (KIP-966) over a real TopicStore: following ``next_cursor`` from the first
page describes every partition of every existing requested topic exactly once, in Kafka's order (topics by
name as Java compares strings, partitions ascending), no page holds more partitions than its clamped limit,
and every requested topic that does not exist is reported exactly once with its error and no topic id."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from regroup.server.handlers.authorized import TOPIC_OPERATIONS
from regroup.server.handlers.cluster import handle_describe_topic_partitions, java_order
from regroup.server.topics import InvalidTopicError, TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.helpers import FakeBroker, call

legal_names = st.text(alphabet="ab.-_Z9", min_size=1, max_size=4)
names = st.text(alphabet="ab.-_Z9é", min_size=1, max_size=4)
#: names Kafka refuses (so never created): reported INVALID_TOPIC_EXCEPTION when asked for
illegal_names = st.sampled_from(["", ".", "..", "a b", "x" * 250, "ü"])


def describe(broker: FakeBroker, topics: list[str] | None, limit: int, cursor: tuple[str, int] | None) -> Any:
    request = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=TopicName(n)) for n in topics or ()),
        response_partition_limit=i32(limit),
        cursor=None if cursor is None else Cursor(topic_name=TopicName(cursor[0]), partition_index=i32(cursor[1])),
    )
    return call(handle_describe_topic_partitions, broker, "describe_topic_partitions", request)


@settings(max_examples=150, deadline=None)
@given(
    existing=st.dictionaries(legal_names, st.integers(1, 7), max_size=6),
    asked=st.none() | st.lists(names | illegal_names, max_size=8),
    also_existing=st.booleans(),
    limit=st.integers(-3, 12) | st.sampled_from([2000, 2001, 2**31 - 1]),
)
def test_paging_describes_everything_once(
    existing: dict[str, int], asked: list[str] | None, also_existing: bool, limit: int
) -> None:
    if asked is not None and also_existing:
        asked = asked + sorted(existing)[:3]  # make sure some asked-for topics exist
    with tempfile.TemporaryDirectory() as tmp, TopicStore.open(Path(tmp), fsync=FsyncPolicy.NEVER) as store:
        for name, count in list(existing.items()):
            try:
                store.create_topic(name, count)
            except InvalidTopicError:  # ".", "..", or colliding with another once '.' and '_' are alike
                del existing[name]
        broker = FakeBroker(topic_store=store)
        wanted = sorted(set(asked or existing), key=java_order)  # none asked for: all
        expected = [(n, p) for n in wanted if n in existing for p in range(existing[n])]
        page_limit = max(1, min(limit, 2000))
        described: list[tuple[str, int]] = []
        unknown: list[tuple[str, ErrorCode]] = []
        order: list[str] = []
        cursor: tuple[str, int] | None = None
        for _ in range(len(expected) + len(wanted) + 2):
            response = describe(broker, asked, limit, cursor)
            assert sum(len(t.partitions) for t in response.topics) <= page_limit
            for topic in response.topics:
                order.append(topic.name)
                assert topic.topic_authorized_operations == TOPIC_OPERATIONS and not topic.is_internal
                if topic.name in existing:
                    info = store.topic(topic.name)
                    assert info is not None and topic.error_code == ErrorCode.none and topic.topic_id == info.topic_id
                    for partition in topic.partitions:
                        assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (0, (0,), (0,))
                        assert partition.eligible_leader_replicas == () and partition.offline_replicas == ()
                        described.append((topic.name, partition.partition_index))
                else:
                    assert topic.partitions == () and topic.topic_id in (None, uuid.UUID(int=0))
                    unknown.append((topic.name, topic.error_code))
            if response.next_cursor is None:
                break
            cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
        else:
            raise AssertionError("paging did not end")
        assert described == expected
        legal = {n for n in wanted if n not in existing and 0 < len(n) <= 249 and n not in (".", "..")}
        legal = {n for n in legal if all(c.isascii() and (c.isalnum() or c in "._-") for c in n)}
        assert sorted(unknown) == sorted(
            (n, ErrorCode.unknown_topic_or_partition if n in legal else ErrorCode.invalid_topic_exception)
            for n in wanted
            if n not in existing
        )
        assert sorted(order, key=java_order) == order  # name order, a topic split over pages repeated in place
