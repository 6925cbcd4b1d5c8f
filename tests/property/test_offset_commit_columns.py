"""The OffsetCommit handler's columns against the straightforward split.

``handlers/offsets.commit_partitions`` turns a decoded request's topics into the core's ``PartitionCommits``
(a ``map`` per column, partition numbers checked by their least and greatest) and the refused partitions. For
random topics (unknown ones, partitions out of range, topics the principal may not read, versions with and
without a leader epoch) it is held to the plain per-partition split: ``_split_refused`` and a ``PartitionCommit``
per partition it keeps, with and without the request planned ahead (``_plan_commit``): a topic keeps its plan,
its columns are the plan's, and a plan narrowed to the partitions in range (``narrow_plan``) is the plan of the
narrowed columns.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.offsets import PlannedTopic, plan_topic
from regroup.protocol.offsets import NO_LEADER_EPOCH, PartitionCommit, PartitionCommits
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import RequestContext, TopicInfo
from regroup.server.handlers.offsets import _plan_commit, _split_refused, commit_partitions

KNOWN = {"a": 3, "b": 1, "empty": 0}  # topic -> partitions; "c" is unknown


@dataclass(frozen=True)
class Partition:  # as kio decodes version 6+
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None


@dataclass(frozen=True)
class OldPartition:  # as kio decodes versions 2-5: no leader epoch
    partition_index: int
    committed_offset: int
    committed_metadata: str | None


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: tuple[Any, ...]


class Store:
    def topics(self) -> dict[str, TopicInfo]:
        return {
            name: TopicInfo(name=name, topic_id=uuid.UUID(int=i), partitions=n)
            for i, (name, n) in enumerate(KNOWN.items())
        }


class Denying:
    def __init__(self, denied: frozenset[str]) -> None:
        self.denied = denied

    def authorize(self, principal: str, host: str, operation: AclOperation, kind: ResourceType, name: str) -> bool:
        return not (kind is ResourceType.TOPIC and name in self.denied)


class Planner:
    def plan_offset_commit(
        self, group_id: str, topic: str, columns: PartitionCommits, retention_ms: int
    ) -> PlannedTopic:
        return plan_topic(group_id, topic, columns, 1_000, None, 4096)


class Broker:
    def __init__(self, denied: frozenset[str] | None) -> None:
        self.topic_store = Store()
        self.authorizer = None if denied is None else Denying(denied)
        self.coordinator = Planner()


@dataclass(frozen=True)
class Request:
    group_id: str
    topics: tuple[Topic, ...]


CTX = RequestContext(api_key=8, api_version=9, correlation_id=1, client_id="c", client_host="h", connection_id=1)
NAMES = st.sampled_from(["a", "b", "c", "empty"])
INDEX = st.integers(-2, 4)
METADATA = st.one_of(st.none(), st.text(max_size=3))


@st.composite
def topics(draw: st.DrawFn) -> tuple[Topic, ...]:
    with_epoch = draw(st.booleans())  # one version per request
    out = []
    for name in draw(st.lists(NAMES, max_size=4)):
        if with_epoch:
            part = st.builds(Partition, INDEX, st.integers(0, 9), st.integers(-1, 5), METADATA)
        else:
            part = st.builds(OldPartition, INDEX, st.integers(0, 9), METADATA)
        out.append(Topic(name, tuple(draw(st.lists(part, max_size=6)))))
    return tuple(out)


@settings(max_examples=300, deadline=None)
@given(request_topics=topics(), denied=st.one_of(st.none(), st.frozensets(NAMES)), ahead=st.booleans())
def test_columns_are_the_split_partitions(
    request_topics: tuple[Topic, ...], denied: frozenset[str] | None, ahead: bool
) -> None:
    broker: Any = Broker(denied)
    plan = _plan_commit(broker, 9, Request("g", request_topics)) if ahead else None
    ctx = RequestContext(
        api_key=8, api_version=9, correlation_id=1, client_id="c", client_host="h", connection_id=1, plan=plan
    )
    valid, planned, refused = commit_partitions(broker, ctx, request_topics)
    expected_valid, expected_refused = _split_refused(broker, CTX, request_topics)
    assert refused == expected_refused
    assert list(refused) == list(expected_refused)  # in the same order
    expected = [
        (
            name,
            tuple(
                PartitionCommit(
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", NO_LEADER_EPOCH),
                    metadata=p.committed_metadata,
                )
                for p in partitions
            ),
        )
        for name, partitions in expected_valid
    ]
    assert [(name, columns.rows()) for name, columns in valid] == expected
    assert len(planned) == len(valid)
    # per request topic that keeps some partition: whether it keeps every one (then it keeps its plan)
    kept_whole = []
    for topic in request_topics:
        if denied is not None and topic.name in denied:
            continue
        count = KNOWN.get(topic.name, 0)
        inside = [p for p in topic.partitions if 0 <= p.partition_index < count]
        if inside:
            kept_whole.append(len(inside) == len(topic.partitions))
    assert len(kept_whole) == len(valid)
    for (name, columns), topic_plan, whole in zip(valid, planned, kept_whole, strict=True):
        if not ahead:
            assert topic_plan is None
            continue
        # the topic keeps its plan, narrowed to its partitions in range when some are not: then it is what
        # planning the narrowed columns gives
        assert topic_plan is not None and topic_plan.columns is columns and topic_plan.topic == name
        if not whole:
            assert topic_plan == plan_topic("g", name, columns, 1_000, None, 4096)
