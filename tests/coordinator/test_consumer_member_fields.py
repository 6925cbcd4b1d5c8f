"""A consumer-group member's fields: ``copy`` keeps every one, and its metadata fields, declared once by the
member-metadata record (``MEMBER_METADATA_FIELDS``), are exactly what the member writes, replays and compares."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupMemberState
from regroup.coordinator.consumer.replay import replay
from regroup.coordinator.groups import Groups
from regroup.records.builders import new_consumer_group_member_metadata_record
from regroup.records.consumer import (
    MEMBER_METADATA_FIELDS,
    ClassicProtocolMetadata,
)

MEMBER_FIELDS = tuple(f.name for f in dataclasses.fields(ConsumerGroupMember))


def every_field_set() -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member_id="m",
        instance_id="i",
        rack_id="r",
        client_id="c",
        client_host="/10.0.0.1",
        subscribed_topic_names=("a", "b"),
        subscribed_topic_regex="x.*",
        server_assignor="range",
        rebalance_timeout_ms=7,
        classic=ClassicProtocolMetadata(session_timeout_ms=9, protocols=(("range", b"\x01"),)),
        member_epoch=5,
        previous_member_epoch=4,
        state=ConsumerGroupMemberState.UNREVOKED_PARTITIONS,
        assigned={uuid.UUID(int=1): frozenset({0})},
        pending_revocation={uuid.UUID(int=2): frozenset({1})},
    )


def test_the_fixture_sets_every_field_away_from_its_default() -> None:
    member, default = every_field_set(), ConsumerGroupMember(member_id="")
    for name in MEMBER_FIELDS:
        assert getattr(member, name) != getattr(default, name), f"every_field_set() leaves {name} at its default"


def test_copy_keeps_every_field() -> None:
    member = every_field_set()
    copy = member.copy()
    assert copy is not member
    for name in MEMBER_FIELDS:
        assert getattr(copy, name) == getattr(member, name), name


def test_the_metadata_fields_are_the_records_and_the_members() -> None:
    assert set(MEMBER_METADATA_FIELDS) <= set(MEMBER_FIELDS)


def test_a_written_metadata_record_replays_to_the_same_metadata() -> None:
    member = every_field_set()
    groups = Groups()
    replay(groups, new_consumer_group_member_metadata_record("g", "m", member.metadata_value()))
    group = groups.typed("g", ConsumerGroup)
    assert group is not None
    replayed = group.members["m"]
    for name in MEMBER_METADATA_FIELDS:
        assert getattr(replayed, name) == getattr(member, name), name
    assert not replayed.metadata_differs(member)


@pytest.mark.parametrize("name", MEMBER_METADATA_FIELDS)
def test_each_metadata_field_is_compared(name: str) -> None:
    member = every_field_set()
    other = member.copy()
    setattr(other, name, getattr(ConsumerGroupMember(member_id="m"), name))
    assert member.metadata_differs(other)
    assert member.metadata_value() != other.metadata_value()


@pytest.mark.parametrize("name", [n for n in MEMBER_FIELDS if n not in MEMBER_METADATA_FIELDS])
def test_other_fields_are_not_metadata(name: str) -> None:
    member = every_field_set()
    other = member.copy()
    setattr(other, name, getattr(ConsumerGroupMember(member_id=""), name))
    assert not member.metadata_differs(other)
