"""Scenarios O01-O05, O08, O09 and O11 of docs/protocol.md: OffsetCommit / OffsetFetch against classic
groups. O06, O07 and O10 concern consumer (KIP-848) groups: test_consumer_group.py covers them."""

from __future__ import annotations

import pytest

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.model.errors import ErrorCode
from regroup.protocol.admin import ListedGroup
from regroup.protocol.offsets import FetchedOffset, OffsetFetchResponse, PartitionCommit
from regroup.records.model import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from tests.coordinator.harness import GroupHarness

E = ErrorCode


def test_O01_simple_commit_creates_simple_group() -> None:
    """Given no group;
    when OffsetCommit v8 arrives with generation -1 and MemberId "";
    then it is accepted: a simple classic group (Empty, no protocol type) exists and is listed with
    ProtocolType ""; only the offset is written (no group-metadata record); the offset can be fetched."""
    h = GroupHarness(now_ms=1_000)
    response = h.commit("", -1, {("t", 0): 10}, version=8, group_id="simple")
    assert response.topics == (("t", ((0, E.NONE),)),)
    group = h.group("simple")
    assert group.state is ClassicGroupState.EMPTY
    assert group.protocol_type is None
    assert h.records == [
        Record(
            OffsetCommitKey(group_id="simple", topic="t", partition=0),
            OffsetCommitValue(
                offset=10, leader_epoch=-1, metadata="", commit_timestamp_ms=1_000, expire_timestamp_ms=None
            ),
        )
    ]
    assert h.list_groups().groups == (
        ListedGroup(group_id="simple", protocol_type="", state="Empty", group_type="classic"),
    )
    assert h.fetch({"t": [0]}, group_id="simple").topics == (("t", (FetchedOffset(partition=0, offset=10),)),)


@pytest.mark.parametrize(("version", "error"), [(9, E.GROUP_ID_NOT_FOUND), (8, E.ILLEGAL_GENERATION)])
def test_O02_member_commit_to_unknown_group(version: int, error: ErrorCode) -> None:
    """Given no group;
    when OffsetCommit arrives with generation 1;
    then v9 sets GROUP_ID_NOT_FOUND on every partition, v8 ILLEGAL_GENERATION; no group is created and
    nothing is written."""
    h = GroupHarness()
    response = h.commit("member", 1, {("t", 0): 1, ("t", 1): 2, ("u", 0): 3}, version=version)
    assert response.topics == (("t", ((0, error), (1, error))), ("u", ((0, error),)))
    assert not h.has_group()
    assert h.records == []


def test_O03_commit_during_completing_rebalance() -> None:
    """Given a classic group in CompletingRebalance;
    when a member commits with the new generation (from its JoinGroup response);
    then REBALANCE_IN_PROGRESS on every partition and nothing is written."""
    h = GroupHarness()
    formed = h.form_group(2)
    h.rejoin_all()
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    mark = h.mark()
    response = h.commit(formed.followers[0], formed.generation + 1, {("t", 0): 5, ("t", 1): 6})
    assert response.topics == (("t", ((0, E.REBALANCE_IN_PROGRESS), (1, E.REBALANCE_IN_PROGRESS))),)
    assert h.records_since(mark) == []


def test_O04_commit_during_preparing_rebalance_is_accepted() -> None:
    """Given a classic group in PreparingRebalance (the leader rejoined; generation unchanged);
    when a follower commits with the current generation (as eager clients do before rejoining);
    then it is accepted and written."""
    h = GroupHarness()
    formed = h.form_group(2)
    h.join(formed.leader)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    mark = h.mark()
    response = h.commit(formed.followers[0], formed.generation, {("t", 0): 7})
    assert response.topics == (("t", ((0, E.NONE),)),)
    assert [r.key for r in h.records_since(mark)] == [OffsetCommitKey(group_id="group", topic="t", partition=0)]
    assert h.fetch({"t": [0]}).topics == (("t", (FetchedOffset(partition=0, offset=7),)),)


def test_O05_anonymous_commit_to_active_group() -> None:
    """Given a Stable classic group;
    when OffsetCommit arrives with generation -1 and MemberId "";
    then UNKNOWN_MEMBER_ID and nothing is written."""
    h = GroupHarness()
    h.form_group(1)
    mark = h.mark()
    assert h.commit("", -1, {("t", 0): 1}).topics == (("t", ((0, E.UNKNOWN_MEMBER_ID),)),)
    assert h.records_since(mark) == []


def test_O08_metadata_too_large_fails_only_that_partition() -> None:
    """Given offset.metadata.max.bytes 4096 (Kafka compares the Java string length, i.e. UTF-16 units);
    when one commit carries metadata of 4096 chars, 4097 chars, 4096 two-byte-UTF-8 chars, 2048 and 2049
    astral-plane chars (2 UTF-16 units each);
    then the 4097-char and the 2049-astral-char partitions get OFFSET_METADATA_TOO_LARGE and are not
    written; the others succeed and are stored."""
    h = GroupHarness()
    metadata = {0: "x" * 4096, 1: "x" * 4097, 2: "é" * 4096, 3: "😀" * 2048, 4: "😀" * 2049}
    offsets = {("t", p): PartitionCommit(partition=p, offset=100 + p, metadata=m) for p, m in metadata.items()}
    response = h.commit("", -1, offsets)
    assert response.topics == (
        (
            "t",
            (
                (0, E.NONE),
                (1, E.OFFSET_METADATA_TOO_LARGE),
                (2, E.NONE),
                (3, E.NONE),
                (4, E.OFFSET_METADATA_TOO_LARGE),
            ),
        ),
    )
    assert [r.key.partition for r in h.records if isinstance(r.key, OffsetCommitKey)] == [0, 2, 3]
    fetched = h.fetch({"t": [0, 1, 2, 3, 4]}).topics
    assert fetched == (
        (
            "t",
            (
                FetchedOffset(partition=0, offset=100, metadata=metadata[0]),
                FetchedOffset(partition=1),
                FetchedOffset(partition=2, offset=102, metadata=metadata[2]),
                FetchedOffset(partition=3, offset=103, metadata=metadata[3]),
                FetchedOffset(partition=4),
            ),
        ),
    )


def test_O09_fetch_from_unknown_group() -> None:
    """Given no group;
    when OffsetFetch asks for t-0 (and, separately, for all topics);
    then no error: t-0 has offset -1, leader epoch -1, metadata ""; "all topics" is an empty list; no
    group is created."""
    h = GroupHarness()
    assert h.fetch({"t": [0]}) == OffsetFetchResponse(
        group_id="group",
        error=E.NONE,
        topics=(("t", (FetchedOffset(partition=0, offset=-1, leader_epoch=-1, metadata="", error=E.NONE),)),),
    )
    assert h.fetch(None) == OffsetFetchResponse(group_id="group", topics=())
    assert not h.has_group()


def test_O11_require_stable_is_accepted() -> None:
    """Given committed offsets (there are no transactions in this core, so none is ever pending);
    when OffsetFetch is sent with RequireStable=true;
    then it is accepted and returns the committed offsets without error."""
    h = GroupHarness()
    formed = h.form_group(1)
    h.commit(formed.leader, formed.generation, {("t", 0): 3, ("t", 1): 4})
    response = h.fetch({"t": [0, 1]}, require_stable=True)
    assert response.error is E.NONE
    assert response.topics == (("t", (FetchedOffset(partition=0, offset=3), FetchedOffset(partition=1, offset=4))),)
    assert h.fetch(None, require_stable=True).topics == response.topics


def test_expiry_writes_are_visible_to_the_request_that_triggered_them() -> None:
    """Given offset retention 10 s checked every 60 s, a simple group with an offset committed at t=0, and
    (separately) an Empty group without offsets;
    when the first request after the check is due arrives at t=60 s (the cleanup runs first, as its own
    write, like Kafka's timer-driven cleanup);
    then a fetch no longer sees the expired offset (the simple group is deleted), and a JoinGroup to the
    deleted Empty group creates a fresh group, persisted again, whose join phase completes normally."""
    h = GroupHarness(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=60_000)
    h.commit("", -1, {("t", 0): 42}, group_id="simple")
    h.now_ms = 60_000  # no advance(): the fetch below is the first operation at 60 s
    mark = h.mark()
    assert h.fetch({"t": [0]}, group_id="simple").topics == (("t", (FetchedOffset(partition=0),)),)
    assert not h.has_group("simple")
    assert h.records_since(mark) == [
        Record(OffsetCommitKey(group_id="simple", topic="t", partition=0), None),
        Record(GroupMetadataKey(group_id="simple"), None),
    ]

    h = GroupHarness(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=60_000)
    h.new_member_id()  # creates the Empty group
    h.now_ms = 60_000
    mark = h.mark()
    call = h.join("", version=3)
    assert [r.key for r in h.records_since(mark)] == [GroupMetadataKey(group_id="group")] * 2
    assert h.records_since(mark)[0].value is None
    assert h.has_group()
    assert h.coordinator.persisted["group"].generation == 0
    h.sleep(0)
    assert call.response.generation_id == 1
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
