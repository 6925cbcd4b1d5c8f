"""Scenarios D01-D04 and D06 of docs/protocol.md: DescribeGroups and ListGroups on classic groups, plus
DeleteGroups. D05 (a consumer group in ListGroups) is in test_consumer_group.py."""

from __future__ import annotations

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.model.errors import ErrorCode
from regroup.protocol.admin import DescribedGroup, DescribedMember, ListedGroup
from regroup.protocol.offsets import FetchedOffset
from regroup.records.model import GroupMetadataKey, OffsetCommitKey, Record
from tests.coordinator.harness import CLIENT_HOST, GroupHarness

E = ErrorCode


def test_D01_describe_stable_group() -> None:
    """Given a Stable classic group of 2 members using consumer/range;
    when it is described;
    then ErrorCode 0, state "Stable", ProtocolType "consumer", ProtocolData "range" (the selected protocol)
    and every member with client id/host, its metadata for "range" and its current assignment."""
    h = GroupHarness()
    formed = h.form_group(2)
    assert h.describe() == (
        DescribedGroup(
            group_id="group",
            error=E.NONE,
            state="Stable",
            protocol_type="consumer",
            protocol_data="range",
            members=tuple(
                DescribedMember(
                    member_id=m,
                    group_instance_id=None,
                    client_id=f"client-{i}",
                    client_host=CLIENT_HOST,
                    metadata=f"metadata-{i}".encode(),
                    assignment=f"assignment-{i}".encode(),
                )
                for i, m in enumerate(formed.members)
            ),
        ),
    )


def test_D02_describe_rebalancing_group() -> None:
    """Given a classic group in PreparingRebalance (the leader rejoined after a Stable generation);
    when it is described;
    then state "PreparingRebalance", ProtocolData "", members listed with empty MemberMetadata but their
    current (previous generation's) assignment."""
    h = GroupHarness()
    formed = h.form_group(2, instance_ids=["I0", None])
    h.join(formed.leader)
    (described,) = h.describe()
    assert described == DescribedGroup(
        group_id="group",
        state="PreparingRebalance",
        protocol_type="consumer",
        protocol_data="",
        members=(
            DescribedMember(
                member_id=formed.members[0],
                group_instance_id="I0",
                client_id="client-0",
                client_host=CLIENT_HOST,
                metadata=b"",
                assignment=b"assignment-0",
            ),
            DescribedMember(
                member_id=formed.members[1],
                group_instance_id=None,
                client_id="client-1",
                client_host=CLIENT_HOST,
                metadata=b"",
                assignment=b"assignment-1",
            ),
        ),
    )


def test_D03_describe_unknown_group() -> None:
    """Given no group "nope";
    when it is described (together with an existing group);
    then its entry has ErrorCode 0, state "Dead", no protocol type/data and no members; nothing is created."""
    h = GroupHarness()
    h.form_group(1)
    unknown, known = h.describe("nope", "group")
    assert unknown == DescribedGroup(
        group_id="nope", error=E.NONE, state="Dead", protocol_type="", protocol_data="", members=()
    )
    assert known.state == "Stable"
    assert not h.has_group("nope")


def _stable_and_empty(h: GroupHarness) -> None:
    h.form_group(1, group_id="stable-group")
    formed = h.form_group(1, group_id="empty-group")
    h.leave(formed.leader, group_id="empty-group")
    assert h.group("stable-group").state is ClassicGroupState.STABLE
    assert h.group("empty-group").state is ClassicGroupState.EMPTY


def test_D04_list_groups_state_filter_is_case_and_space_insensitive() -> None:
    """Given a Stable and an Empty classic group;
    when ListGroups (v4) filters on states ["STABLE "];
    then only the Stable group is listed (type "classic", protocol type "consumer"); ["empty", "Stable"]
    lists both, no filter lists both, ["dead"] lists none."""
    h = GroupHarness()
    _stable_and_empty(h)
    stable = ListedGroup(group_id="stable-group", protocol_type="consumer", state="Stable", group_type="classic")
    empty = ListedGroup(group_id="empty-group", protocol_type="consumer", state="Empty", group_type="classic")
    response = h.list_groups(states=["STABLE "])
    assert response.error is E.NONE
    assert response.groups == (stable,)
    assert set(h.list_groups(states=["empty", "Stable"]).groups) == {stable, empty}
    assert set(h.list_groups().groups) == {stable, empty}
    assert h.list_groups(states=["dead"]).groups == ()


def test_D06_list_groups_unknown_type_matches_nothing() -> None:
    """Given classic groups;
    when ListGroups (v5) filters on types ["bogus"];
    then an empty list and no error. Types are matched case-insensitively (["CLASSIC"] lists them) but,
    unlike states, not trimmed (Kafka's GroupType.parse only lower-cases), so [" classic"] matches nothing;
    a state filter and a type filter must both match."""
    h = GroupHarness()
    _stable_and_empty(h)
    response = h.list_groups(types=["bogus"])
    assert response.error is E.NONE
    assert response.groups == ()
    assert len(h.list_groups(types=["CLASSIC"]).groups) == 2
    assert h.list_groups(types=[" classic"]).groups == ()
    assert [g.group_id for g in h.list_groups(states=["stable"], types=["classic"]).groups] == ["stable-group"]
    assert h.list_groups(states=["stable"], types=["consumer"]).groups == ()


def test_delete_empty_group_tombstones_offsets_and_group() -> None:
    """Given an Empty classic group (its member left) holding offsets for t-0 and t-1;
    when DeleteGroups names it;
    then NONE; tombstones are written for both offsets and then for the group; the group is gone
    (described as Dead, not listed) and its offsets read back as -1."""
    h = GroupHarness()
    formed = h.form_group(1)
    h.commit(formed.leader, formed.generation, {("t", 0): 5, ("t", 1): 6})
    h.leave(formed.leader)
    assert h.state is ClassicGroupState.EMPTY
    mark = h.mark()
    assert h.delete_groups("group").results == (("group", E.NONE),)
    assert h.records_since(mark) == [
        Record(OffsetCommitKey(group_id="group", topic="t", partition=0), None),
        Record(OffsetCommitKey(group_id="group", topic="t", partition=1), None),
        Record(GroupMetadataKey(group_id="group"), None),
    ]
    assert not h.has_group()
    assert "group" not in h.coordinator.persisted
    assert h.describe()[0].state == "Dead"
    assert h.list_groups().groups == ()
    assert h.fetch({"t": [0, 1]}).topics == (("t", (FetchedOffset(partition=0), FetchedOffset(partition=1))),)


def test_delete_non_empty_group_is_refused() -> None:
    """Given a Stable classic group with offsets;
    when DeleteGroups names it;
    then NON_EMPTY_GROUP and nothing is written; the group and its offsets remain."""
    h = GroupHarness()
    formed = h.form_group(1)
    h.commit(formed.leader, formed.generation, {("t", 0): 5})
    mark = h.mark()
    assert h.delete_groups("group").results == (("group", E.NON_EMPTY_GROUP),)
    assert h.records_since(mark) == []
    assert h.state is ClassicGroupState.STABLE
    assert h.fetch({"t": [0]}).topics == (("t", (FetchedOffset(partition=0, offset=5),)),)


def test_delete_unknown_group() -> None:
    """Given no group "nope" (and in the same request an Empty simple group and a Stable group);
    when DeleteGroups names all three;
    then GROUP_ID_NOT_FOUND for "nope", NONE for the Empty one, NON_EMPTY_GROUP for the Stable one, each
    in request order."""
    h = GroupHarness()
    h.form_group(1)
    h.commit("", -1, {("t", 0): 1}, group_id="simple")
    response = h.delete_groups("nope", "simple", "group")
    assert response.results == (("nope", E.GROUP_ID_NOT_FOUND), ("simple", E.NONE), ("group", E.NON_EMPTY_GROUP))
    assert not h.has_group("simple")
    assert not h.has_group("nope")
