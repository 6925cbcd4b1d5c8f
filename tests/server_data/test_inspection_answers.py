"""The group-inspection answers read as rows and encoded a chunk at a time (``coordinator/inspect.py``'s rows,
``coordinator/consumer/describe.py``'s ``consumer_group_rows``, ``server/inspection_answers.py``) are the
straightforward ones: over random group layouts (classic groups Stable, Empty or rebalancing, with or without
instance ids; consumer groups with random assignments and targets, some members on the classic protocol's
metadata; share groups) the core's rows make the same ``ListedGroup``s, ``DescribedGroup``s and
``DescribedConsumerGroup``s as the code before them (restated here), and the handlers' bytes are kio's encoding of
the straightforward response entity, for every served version (sizes over a chunk, so the paused paths run)."""

from __future__ import annotations

import asyncio
import io
import itertools
import unittest.mock
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer.describe import describe_consumer_group
from regroup.coordinator.consumer.group import ConsumerGroup, Partitions
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.group_types import type_of
from regroup.coordinator.groups import Groups
from regroup.coordinator.inspect import describe_group, described_group, described_rows, list_groups, listed_rows
from regroup.coordinator.share.describe import describe_share_group
from regroup.coordinator.share.group import ShareGroup
from regroup.coordinator.share.writes import SIMPLE_ASSIGNOR
from regroup.model.cluster import ClusterImage, TopicImage
from regroup.model.errors import ErrorCode
from regroup.network.codec import response_class
from regroup.protocol.admin import ListedGroup, ListGroupsRequest, ListGroupsResponse
from regroup.protocol.classic import ClientInfo, JoinGroupRequest
from regroup.protocol.consumer import (
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from regroup.protocol.offsets import OffsetCommitRequest, PartitionCommit
from regroup.protocol.share import (
    DescribedShareGroup,
    DescribedShareMember,
    DescribedSharePartitions,
    ShareGroupHeartbeatRequest,
)
from regroup.records.builders import (
    new_consumer_group_current_assignment_record,
    new_consumer_group_epoch_record,
    new_consumer_group_member_metadata_record,
    new_consumer_group_subscription_metadata_record,
    new_consumer_group_target_assignment_epoch_record,
    new_consumer_group_target_assignment_record,
    new_group_metadata_record,
)
from regroup.records.consumer import ConsumerGroupMemberMetadataValue, SubscribedTopic
from regroup.records.model import GroupMetadataValue, MemberMetadata, Record
from regroup.server import inspection_answers
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.entities import build
from regroup.server.handlers import admin, consumer, described_groups, offsets, share_groups
from regroup.server.handlers._common import assignment_class
from regroup.server.inspection_answers import (
    consumer_member,
    consumer_member_layout,
    element_class,
    share_member,
    share_member_layout,
)
from regroup.server.offset_answers import CHUNK

T = TypeVar("T")
DESCRIBE_GROUPS, LIST_GROUPS, CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE = 15, 16, 69, 77
OFFSET_FETCH, DELETE_GROUPS = 9, 42
NAMES = st.text(alphabet="ab._-é", min_size=1, max_size=4)
TEXT = st.text(alphabet="xyé ", max_size=4)
TOPICS = {name: (uuid.uuid5(uuid.NAMESPACE_URL, name), n) for name, n in {"t-a": 7, "t-b": 3, "t-c": 5}.items()}
LONG_MS = 3_600_000


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------- layouts
@st.composite
def classic_records(draw: st.DrawFn, group_id: str, max_members: int) -> list[Record]:
    count = draw(st.integers(0, max_members))
    protocol = draw(st.sampled_from(["range", "roundrobin", "cooperative-sticky"]))
    members = tuple(
        MemberMetadata(
            member_id=f"m-{i}",
            group_instance_id=draw(st.none() | st.just(f"i-{i}")),
            client_id=draw(TEXT),
            client_host=draw(TEXT),
            rebalance_timeout_ms=LONG_MS,
            session_timeout_ms=LONG_MS,
            subscription=draw(st.binary(max_size=6)),
            assignment=draw(st.binary(max_size=6)),
        )
        for i in range(count)
    )
    value = GroupMetadataValue(
        protocol_type=draw(st.sampled_from(["consumer", "connect", ""])),
        generation=1 if members else draw(st.integers(0, 2)),
        protocol_name=protocol if members else None,
        leader=members[0].member_id if members else None,
        current_state_timestamp_ms=0,
        members=members,
    )
    return [new_group_metadata_record(group_id, value)]


def _parts(draw: st.DrawFn, free: dict[str, set[int]] | None = None) -> tuple[tuple[uuid.UUID, tuple[int, ...]], ...]:
    """Partitions of the cluster's topics (from ``free``, taking them, when given: members hold disjoint ones)."""
    out = []
    for name in sorted(TOPICS, key=lambda n: TOPICS[n][0].int):
        pool = sorted(free[name]) if free is not None else list(range(TOPICS[name][1]))
        ps = draw(st.lists(st.sampled_from(pool), unique=True, max_size=3)) if pool else []
        if free is not None:
            free[name].difference_update(ps)
        if ps:
            out.append((TOPICS[name][0], tuple(sorted(ps))))
    if free is None and draw(st.booleans()):  # a topic the cluster does not know (no name)
        out.append((uuid.UUID(int=7), (0,)))
    return tuple(out)


@st.composite
def consumer_records(draw: st.DrawFn, group_id: str, max_members: int) -> list[Record]:
    epoch = draw(st.integers(2, 5))
    records = [
        new_consumer_group_epoch_record(group_id, epoch),
        new_consumer_group_subscription_metadata_record(
            group_id, [SubscribedTopic(topic_id=t, name=n, partitions=p) for n, (t, p) in TOPICS.items()]
        ),
    ]
    count = draw(st.integers(0, max_members))
    for i in range(count):
        member_id = f"c-{i}"
        value = ConsumerGroupMemberMetadataValue(
            instance_id=draw(st.none() | st.just(f"i-{i}")),
            rack_id=draw(st.none() | st.sampled_from(["r1", "r2"])),
            client_id=draw(TEXT),
            client_host=draw(TEXT),
            subscribed_topic_names=tuple(draw(st.lists(st.sampled_from(sorted(TOPICS)), unique=True, max_size=3))),
            subscribed_topic_regex=draw(st.none() | st.just("t-.*")),
            server_assignor=draw(st.none() | st.sampled_from(["uniform", "range"])),
            rebalance_timeout_ms=LONG_MS,
        )
        records.append(new_consumer_group_member_metadata_record(group_id, member_id, value))
        if draw(st.booleans()):
            records.append(new_consumer_group_target_assignment_record(group_id, member_id, _parts(draw)))
    records.append(new_consumer_group_target_assignment_epoch_record(group_id, epoch - draw(st.integers(0, 1))))
    free = {name: set(range(n)) for name, (_, n) in TOPICS.items()}
    for i in range(count):
        records.append(
            new_consumer_group_current_assignment_record(
                group_id,
                f"c-{i}",
                member_epoch=epoch - draw(st.integers(0, 1)),
                previous_member_epoch=epoch - 2,
                state=draw(st.sampled_from(["stable", "unrevoked_partitions"])),
                assigned=_parts(draw, free),
                pending_revocation=(),
            )
        )
    return records


def image() -> ClusterImage:
    return ClusterImage.of(TopicImage(topic_id=t, name=name, partitions=n) for name, (t, n) in TOPICS.items())


@st.composite
def coordinators(draw: st.DrawFn, max_groups: int = 6, max_members: int = 5) -> GroupCoordinator:
    ids = draw(st.lists(NAMES, unique=True, max_size=max_groups))
    records: list[Record] = []
    kinds: dict[str, str] = {}
    for group_id in ids:
        kinds[group_id] = draw(st.sampled_from(["classic", "consumer", "share"]))
        if kinds[group_id] == "classic":
            records += draw(classic_records(group_id, max_members))
        elif kinds[group_id] == "consumer":
            records += draw(consumer_records(group_id, max_members))
    c = GroupCoordinator.from_records(records, 0, CoordinatorConfig(consumer_group_session_timeout_ms=LONG_MS))
    c.update_metadata(image(), 0)
    for key, (group_id, kind) in enumerate(kinds.items()):
        if kind == "share":
            for i in range(draw(st.integers(0, 2))):
                req = ShareGroupHeartbeatRequest(
                    group_id=group_id, member_id=str(uuid.UUID(int=i + 1)), subscribed_topic_names=("t-a",)
                )
                c.share_group_heartbeat(req, key, 0)
        elif kind == "classic" and draw(st.booleans()):  # a new member starts a rebalance (or forms the group)
            join = JoinGroupRequest(
                group_id=group_id,
                member_id="",
                session_timeout_ms=30_000,
                rebalance_timeout_ms=30_000,
                protocol_type="consumer",
                protocols=(("range", b"x"), ("roundrobin", b"y")),
                version=3,
                client=ClientInfo(client_id="new", client_host="/h"),
            )
            c.join_group(join, key, 0)
    return c


# ---------------------------------------------------------------------------------- the straightforward ones
def reference_list(groups: Groups, req: ListGroupsRequest) -> ListGroupsResponse:
    states = {s.strip().lower() for s in req.states}
    types = {t.lower() for t in req.types}
    rows: list[ListedGroup] = [type_of(group).listed(group) for group in groups.values()]
    listed = [
        row
        for row in sorted(rows, key=lambda r: r.group_id)
        if (not states or row.state.lower() in states) and (not types or row.group_type in types)
    ]
    return ListGroupsResponse(groups=tuple(listed))


def _reference_parts(parts: Partitions, img: ClusterImage) -> tuple[DescribedTopicPartitions, ...]:
    index = img.id_index()
    out = []
    for topic_id in sorted(parts, key=str):
        topic = index.get(topic_id)
        out.append(
            DescribedTopicPartitions(
                topic_id=topic_id, topic_name=topic.name if topic else "", partitions=tuple(sorted(parts[topic_id]))
            )
        )
    return tuple(out)


def reference_consumer_describe(config: CoordinatorConfig, groups: Groups, group_id: str) -> DescribedConsumerGroup:
    if not group_id:
        return DescribedConsumerGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID)
    group = groups.typed(group_id, ConsumerGroup)
    if group is None:
        why = "is not a consumer group" if group_id in groups else "not found"
        return DescribedConsumerGroup(
            group_id=group_id, error=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} {why}."
        )
    return DescribedConsumerGroup(
        group_id=group_id,
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor(config.consumer_group_assignors[0]),
        members=tuple(
            DescribedConsumerMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_reference_parts(m.assigned, groups.image),
                target_assignment=_reference_parts(group.target_of(m.member_id), groups.image),
                uses_classic_protocol=m.classic is not None,
            )
            for m in group.members.values()
        ),
    )


def reference_share_describe(groups: Groups, group_id: str) -> DescribedShareGroup:
    if not group_id:
        return DescribedShareGroup(group_id=group_id, error=ErrorCode.INVALID_GROUP_ID)
    group = groups.typed(group_id, ShareGroup)
    if group is None:
        why = "is not a share group" if group_id in groups else "not found"
        return DescribedShareGroup(
            group_id=group_id, error=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} {why}."
        )
    return DescribedShareGroup(
        group_id=group_id,
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR,
        members=tuple(
            DescribedShareMember(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                assignment=tuple(
                    DescribedSharePartitions(topic_id=p.topic_id, topic_name=p.topic_name, partitions=p.partitions)
                    for p in _reference_parts(m.assigned, groups.image)
                ),
            )
            for m in group.members.values()
        ),
    )


# ---------------------------------------------------------------------------------------------- the core
STATES = st.lists(st.sampled_from(["stable", " Empty", "PREPARINGREBALANCE", "Reconciling", "assigning", "x"]))
TYPES = st.lists(st.sampled_from(["classic", "consumer", "share", "Consumer", "x"]))


@settings(max_examples=80, deadline=None)
@given(coordinators(), STATES, TYPES)
def test_listed_rows_are_the_listed_groups(c: GroupCoordinator, states: list[str], types: list[str]) -> None:
    req = ListGroupsRequest(states=tuple(states), types=tuple(types))
    assert list_groups(c.groups, req) == reference_list(c.groups, req)
    assert [
        ListedGroup(group_id=g, protocol_type=p, state=s, group_type=t) for g, p, s, t in listed_rows(c.groups, req)
    ] == list(reference_list(c.groups, req).groups)


@settings(max_examples=80, deadline=None)
@given(coordinators(), st.lists(NAMES | st.just(""), max_size=5), st.integers(0, 6))
def test_described_rows_are_the_described_groups(c: GroupCoordinator, extra: list[str], version: int) -> None:
    ids = [*c.groups, *extra]
    rows = described_rows(c.groups, ids, version)
    assert [described_group(row) for row in rows] == [describe_group(c.groups, g, version) for g in ids]


@settings(max_examples=80, deadline=None)
@given(coordinators(), st.lists(NAMES | st.just(""), max_size=3))
def test_consumer_group_rows_are_the_described_group(c: GroupCoordinator, extra: list[str]) -> None:
    for group_id in [*c.groups, *extra]:
        assert describe_consumer_group(c.config, c.groups, group_id) == reference_consumer_describe(
            c.config, c.groups, group_id
        )


@settings(max_examples=60, deadline=None)
@given(coordinators(), st.lists(NAMES | st.just(""), max_size=3))
def test_share_group_rows_are_the_described_group(c: GroupCoordinator, extra: list[str]) -> None:
    for group_id in [*c.groups, *extra]:
        assert describe_share_group(c.groups, group_id) == reference_share_describe(c.groups, group_id)


# ------------------------------------------------------------------------------------------ the handlers
class _Runtime:
    def __init__(self, c: GroupCoordinator) -> None:
        self.c = c
        self.key = 0

    async def call(self, op: Any, *, may_park: bool = False, group_id: str | None = None) -> Any:
        self.key += 1
        result = op(self.c, self.key, 0)
        return next(comp.response for comp in result.completions if comp.key == self.key)


class _Broker:
    def __init__(self, c: GroupCoordinator) -> None:
        self.coordinator = _Runtime(c)


def _ctx(api_key: int, version: int) -> RequestContext:
    return RequestContext(api_key, version, 1, "test", "127.0.0.1", 1)


def _body(answer: Any) -> bytes:
    assert isinstance(answer, PreEncoded)
    assert type(answer.decode()) is answer.response_class
    return answer.body


def check_list(c: GroupCoordinator, states: list[str], types: list[str], version: int) -> None:
    ctx = _ctx(LIST_GROUPS, version)
    req = ListGroupsRequest(states=tuple(states), types=tuple(types))
    kio_request = type("Request", (), {"states_filter": req.states, "types_filter": req.types})()
    expected = build(
        response_class(LIST_GROUPS, version),
        throttle_time=0,
        error_code=0,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in reference_list(c.groups, req).groups
        ],
    )
    assert _body(run(admin.list_groups(_Broker(c), ctx, kio_request))) == encode(expected)


@settings(max_examples=60, deadline=None)
@given(coordinators(), STATES, TYPES, st.integers(0, 5))
def test_list_groups_answer_is_kios_encoding(
    c: GroupCoordinator, states: list[str], types: list[str], version: int
) -> None:
    check_list(c, states, types, version)


@settings(max_examples=40, deadline=None)
@given(coordinators(), STATES, TYPES, st.integers(0, 5), st.integers(1, 3))
def test_list_groups_answer_is_the_same_listed_a_slice_at_a_time(
    c: GroupCoordinator, states: list[str], types: list[str], version: int, chunk: int
) -> None:
    """ListGroups asks the core ``LIST_GROUPS_CHUNK`` groups at a time (11,000 in one call held the loop for
    15-35 ms): slices of 1 to 3 groups give the same answer."""
    with unittest.mock.patch.object(admin, "LIST_GROUPS_CHUNK", chunk):
        check_list(c, states, types, version)


def _reference_described_groups(c: GroupCoordinator, ids: list[str], version: int) -> Any:
    return build(
        response_class(DESCRIBE_GROUPS, version),
        throttle_time=0,
        groups=[admin._described(describe_group(c.groups, g, version), admin.OPERATIONS_NOT_REQUESTED) for g in ids],
    )


def check_describe(c: GroupCoordinator, extra: list[str], version: int) -> None:
    ids = [*c.groups, *extra]
    request = type("Request", (), {"groups": ids, "include_authorized_operations": False})()
    answer = run(admin.describe_groups(_Broker(c), _ctx(DESCRIBE_GROUPS, version), request))
    assert _body(answer) == encode(_reference_described_groups(c, ids, version))


@settings(max_examples=60, deadline=None)
@given(coordinators(), st.lists(NAMES | st.just(""), max_size=3), st.integers(0, 6))
def test_describe_groups_answer_is_kios_encoding(c: GroupCoordinator, extra: list[str], version: int) -> None:
    check_describe(c, extra, version)


def _reference_consumer_answer(c: GroupCoordinator, ids: list[str], version: int) -> Any:
    ctx = _ctx(CONSUMER_GROUP_DESCRIBE, version)
    groups = [reference_consumer_describe(c.config, c.groups, g) for g in ids]
    return build(
        response_class(CONSUMER_GROUP_DESCRIBE, version),
        throttle_time=0,
        groups=[consumer._described(ctx, g, consumer.OPERATIONS_NOT_REQUESTED) for g in groups],
    )


@settings(max_examples=60, deadline=None)
@given(coordinators(), st.lists(NAMES | st.just(""), max_size=3), st.integers(0, 1))
def test_consumer_group_describe_answer_is_kios_encoding(c: GroupCoordinator, extra: list[str], version: int) -> None:
    check_consumer_describe(c, extra, version)


def check_consumer_describe(c: GroupCoordinator, extra: list[str], version: int) -> None:
    ids = [*c.groups, *extra]
    request = type("Request", (), {"group_ids": ids, "include_authorized_operations": False})()
    answer = run(consumer.consumer_group_describe(_Broker(c), _ctx(CONSUMER_GROUP_DESCRIBE, version), request))
    assert _body(answer) == encode(_reference_consumer_answer(c, ids, version))


def check_share_describe(c: GroupCoordinator, extra: list[str]) -> None:
    ids = [*c.groups, *extra]
    ctx = _ctx(SHARE_GROUP_DESCRIBE, 1)
    request = type("Request", (), {"group_ids": ids, "include_authorized_operations": False})()
    answer = run(share_groups.share_group_describe(_Broker(c), ctx, request))
    groups = [reference_share_describe(c.groups, g) for g in ids]
    expected = build(
        response_class(SHARE_GROUP_DESCRIBE, 1),
        throttle_time=0,
        groups=[share_groups._described(ctx, g, share_groups.OPERATIONS_NOT_REQUESTED) for g in groups],
    )
    assert _body(answer) == encode(expected)


@settings(max_examples=60, deadline=None)
@given(coordinators(), st.lists(NAMES | st.just(""), max_size=3))
def test_share_group_describe_answer_is_kios_encoding(c: GroupCoordinator, extra: list[str]) -> None:
    check_share_describe(c, extra)


@pytest.mark.parametrize("size", [CHUNK // 2 + 3, 2 * CHUNK + 1])
def test_big_answers_pause_and_stay_kios_encoding(size: int) -> None:
    """Answers of more than a chunk (groups, classic members, consumer members) take the paused paths."""
    records: list[Record] = []
    for i in range(size):
        value = GroupMetadataValue(
            protocol_type="consumer",
            generation=0,
            protocol_name=None,
            leader=None,
            current_state_timestamp_ms=0,
            members=(),
        )
        records.append(new_group_metadata_record(f"g-{i:05d}", value))
    big_classic = [
        MemberMetadata(
            member_id=f"m-{i}",
            group_instance_id=None,
            client_id="c",
            client_host="/h",
            rebalance_timeout_ms=LONG_MS,
            session_timeout_ms=LONG_MS,
            subscription=b"s",
            assignment=bytes([i % 256]),
        )
        for i in range(size)
    ]
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=1,
        protocol_name="range",
        leader="m-0",
        current_state_timestamp_ms=0,
        members=tuple(big_classic),
    )
    records.append(new_group_metadata_record("big", value))
    records.append(new_consumer_group_epoch_record("cbig", 3))
    for i in range(size):
        member = ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id=None,
            client_id="c",
            client_host="/h",
            subscribed_topic_names=("t-a",),
            subscribed_topic_regex=None,
            server_assignor=None,
            rebalance_timeout_ms=LONG_MS,
        )
        records.append(new_consumer_group_member_metadata_record("cbig", f"c-{i}", member))
        records.append(new_consumer_group_target_assignment_record("cbig", f"c-{i}", ((TOPICS["t-a"][0], (i % 7,)),)))
    records.append(new_consumer_group_target_assignment_epoch_record("cbig", 3))
    big = GroupCoordinator.from_records(records, 0, CoordinatorConfig(consumer_group_session_timeout_ms=LONG_MS))
    big.update_metadata(image(), 0)
    for i in range(150):  # a share group near its default maximum size (200)
        req = ShareGroupHeartbeatRequest(
            group_id="sbig", member_id=str(uuid.UUID(int=i + 1)), subscribed_topic_names=tuple(TOPICS)
        )
        big.share_group_heartbeat(req, i, 0)
    check_list(big, [], [], 5)
    check_list(big, ["empty"], ["classic"], 4)
    check_describe(big, [], 5)
    check_describe(big, [], 0)
    for version in (0, 1):
        check_consumer_describe(big, [], version)
    check_share_describe(big, [])


def _count_pauses(monkeypatch: pytest.MonkeyPatch, *modules: Any) -> list[int]:
    """Every ``pause`` the ``modules`` ask for, counted."""
    pauses: list[int] = []
    for module in modules:
        real = module.pause

        async def counted(real: Any = real) -> None:
            pauses.append(1)
            await real()

        monkeypatch.setattr(module, "pause", counted)
    return pauses


@pytest.mark.parametrize("kind", ["consumer", "share"])
def test_many_groups_without_members_are_described_between_yields(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """A ConsumerGroupDescribe or ShareGroupDescribe of many groups (none of them of its type: no members) gives
    the loop a turn every ``GROUP_WEIGHT``-th of a chunk of groups, and is still kio's encoding."""
    c = GroupCoordinator()
    c.update_metadata(image(), 0)
    extra = [f"none-{i:04d}" for i in range(10 * CHUNK // described_groups.GROUP_WEIGHT)]
    pauses = _count_pauses(monkeypatch, described_groups, inspection_answers)
    if kind == "consumer":
        check_consumer_describe(c, extra, 1)
    else:
        check_share_describe(c, extra)
    assert len(pauses) >= 9


def test_a_large_delete_groups_answer_is_kios_encoding_between_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeleteGroups of thousands of groups (most unknown) is encoded a chunk at a time, as kio encodes it."""
    c = GroupCoordinator()
    ids = [f"g-{i:05d}" for i in range(3 * CHUNK)]
    for group_id in ids[:10]:
        c.offset_commit(OffsetCommitRequest(group_id=group_id, topics=(("t-a", (PartitionCommit(0, 1),)),)), 0, 0)
    pauses = _count_pauses(monkeypatch, inspection_answers)
    request = type("Request", (), {"groups_names": [*ids, ids[0]]})()
    answer = run(admin.delete_groups(_Broker(c), _ctx(DELETE_GROUPS, 2), request))
    results = [{"group_id": g, "error_code": 0 if g in ids[:10] else 69} for g in ids]
    results.append({"group_id": ids[0], "error_code": 0})  # (named twice: answered alike)
    expected = build(response_class(DELETE_GROUPS, 2), throttle_time=0, results=results)
    assert _body(answer) == encode(expected)
    assert answer.error_codes == (69,) * (len(ids) - 10)
    assert len(pauses) >= 2


def test_a_batched_offset_fetch_reads_its_groups_a_chunk_at_a_time() -> None:
    """An OffsetFetch of many groups asks the coordinator ``FETCH_GROUPS_CHUNK`` groups per turn of the loop,
    and answers every group."""
    c = GroupCoordinator()
    ids = [f"g-{i:04d}" for i in range(2 * offsets.FETCH_GROUPS_CHUNK + 5)]
    for n, group_id in enumerate(ids):
        c.offset_commit(OffsetCommitRequest(group_id=group_id, topics=(("t-a", (PartitionCommit(0, n),)),)), n, 0)
    broker = _Broker(c)
    turns: list[int] = []

    async def main() -> Any:
        calls = broker.coordinator

        async def watch() -> None:
            while True:
                turns.append(calls.key)
                await asyncio.sleep(0)

        watcher = asyncio.get_running_loop().create_task(watch())
        request = type(
            "Request",
            (),
            {
                "groups": [type("G", (), {"group_id": g, "topics": None, "member_id": None, "member_epoch": -1})()
                           for g in ids],
                "require_stable": False,
            },
        )()  # fmt: skip
        try:
            return await offsets.offset_fetch(broker, _ctx(OFFSET_FETCH, 9), request)
        finally:
            watcher.cancel()

    answer = run(main())
    decoded = answer.decode()
    assert [(g.group_id, g.topics[0].partitions[0].committed_offset) for g in decoded.groups] == [
        (g, n) for n, g in enumerate(ids)
    ]
    seen = sorted(set(turns))  # the calls made by each turn the watcher saw: never more than a chunk apart
    assert max(b - a for a, b in itertools.pairwise(seen)) <= offsets.FETCH_GROUPS_CHUNK
    assert seen[-1] - seen[0] >= 2 * offsets.FETCH_GROUPS_CHUNK


# ---------------------------------------------------------------------------------------- the item writers
MEMBERS = st.builds(
    DescribedConsumerMember,
    member_id=TEXT,
    instance_id=st.none() | TEXT,
    rack_id=st.none() | TEXT,
    member_epoch=st.integers(-(2**31), 2**31 - 1),
    client_id=TEXT,
    client_host=TEXT,
    subscribed_topic_names=st.lists(TEXT, max_size=3).map(tuple),
    subscribed_topic_regex=st.none() | TEXT,
    assignment=st.lists(
        st.builds(
            DescribedTopicPartitions,
            topic_id=st.uuids(),
            topic_name=TEXT,
            partitions=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4).map(tuple),
        ),
        max_size=3,
    ).map(tuple),
    target_assignment=st.just(()),
    uses_classic_protocol=st.booleans(),
)


@settings(max_examples=100, deadline=None)
@given(MEMBERS, st.integers(0, 1))
def test_consumer_member_is_kios_encoding(member: DescribedConsumerMember, version: int) -> None:
    group_class = element_class(response_class(CONSUMER_GROUP_DESCRIBE, version), "groups")
    member_class = element_class(group_class, "members")
    with_type = consumer_member_layout(member_class)
    assert with_type is (version >= 1)
    ctx = _ctx(CONSUMER_GROUP_DESCRIBE, version)
    entity = build(member_class, **consumer._member(member, assignment_class(ctx.api_key, ctx.api_version)))
    member_type = (1 if not member.uses_classic_protocol else 0) if with_type else None
    assert consumer_member(member, member_type) == encode(entity)


SHARE_MEMBERS = st.builds(
    DescribedShareMember,
    member_id=TEXT,
    rack_id=st.none() | TEXT,
    member_epoch=st.integers(-(2**31), 2**31 - 1),
    client_id=TEXT,
    client_host=TEXT,
    subscribed_topic_names=st.lists(TEXT, max_size=3).map(tuple),
    assignment=st.lists(
        st.builds(
            DescribedSharePartitions,
            topic_id=st.uuids(),
            topic_name=TEXT,
            partitions=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4).map(tuple),
        ),
        max_size=3,
    ).map(tuple),
)


@settings(max_examples=100, deadline=None)
@given(SHARE_MEMBERS)
def test_share_member_is_kios_encoding(member: DescribedShareMember) -> None:
    member_class = element_class(element_class(response_class(SHARE_GROUP_DESCRIBE, 1), "groups"), "members")
    assert share_member_layout(member_class)
    ctx = _ctx(SHARE_GROUP_DESCRIBE, 1)
    entity = build(member_class, **share_groups._member(member, assignment_class(ctx.api_key, ctx.api_version)))
    assert share_member(member) == encode(entity)
