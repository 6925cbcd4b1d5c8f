"""The value classes built on every run are plain dataclasses, not frozen at run time (their constructors are
compiled in the compiled build: ``tests/unit/test_constructors.py``): the immutable ones keep a frozen
dataclass's field-based hash, and a mutable default is a new object for every instance."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from regroup.assignors.base import MetadataInput
from regroup.assignors.consumer_protocol_types import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.client.config import MemberConfig
from regroup.client.types import CallbackEvent, MemberNote, OutgoingRequest
from regroup.coordinator.classic.group import ClassicGroupMember
from regroup.model.cluster import ClusterImage, TopicImage
from regroup.protocol.classic import (
    ClientInfo,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
)
from regroup.protocol.offsets import OffsetCommitRequest, OffsetCommitResponse, PartitionCommit
from regroup.records.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from regroup.sim.scenario import LinkSpec, Scenario, ScenarioEvent

#: immutable values (``Final`` fields): hashed by their fields, as a frozen dataclass is
IMMUTABLE: list[type[Any]] = [
    GroupMetadataKey,
    MemberMetadata,
    GroupMetadataValue,
    Record,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionCommit,
    OffsetCommitRequest,
    OffsetCommitResponse,
    MemberSubscription,
    GroupSpec,
    MetadataInput,
    ClientInfo,
    LeavingMember,
    LeaveGroupRequest,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    MemberConfig,
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
    LinkSpec,
    ScenarioEvent,
    Scenario,
    TopicImage,
    ClusterImage,
    CallbackEvent,
    OutgoingRequest,
    MemberNote,
]
#: mutable state, compared by its fields and not hashable (a plain dataclass)
MUTABLE: list[type[Any]] = [ClassicGroupMember]


@pytest.mark.parametrize("cls", IMMUTABLE, ids=lambda cls: cls.__name__)
def test_immutable_values_keep_a_field_based_hash(cls: type[Any]) -> None:
    assert cls.__dataclass_params__.eq and cls.__dataclass_params__.unsafe_hash
    assert vars(cls)["__hash__"] is not None


def test_mutable_state_is_not_hashable() -> None:
    assert ClassicGroupMember.__hash__ is None


def test_hash_and_equality_follow_the_fields() -> None:
    a = LeavingMember(member_id="m", reason="r")
    b = LeavingMember(member_id="m", reason="r")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != LeavingMember(member_id="m")
    assert repr(a) == "LeavingMember(member_id='m', group_instance_id=None, reason='r')"
    assert dataclasses.replace(a, reason=None) == LeavingMember(member_id="m")


@pytest.mark.parametrize(
    ("cls", "required", "name"),
    [
        (MemberSubscription, {"topics": ()}, "owned"),
        (GroupSpec, {"topics": {}, "members": {}}, "options"),
        (MetadataInput, {"topics": ()}, "owned"),
        (MemberConfig, {"group_id": "g", "client_id": "c", "topics": ()}, "options"),
        (ConsumerProtocolSubscription, {"topics": ()}, "owned"),
        (ScenarioEvent, {"at_ms": 0, "action": "join"}, "link"),
        (Scenario, {"name": "s", "duration_ms": 1, "topics": {}, "members": (), "events": ()}, "coordinator"),
        (ClusterImage, {}, "by_name"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_a_mutable_default_is_a_new_object_per_instance(cls: type[Any], required: dict[str, Any], name: str) -> None:
    first, second = cls(**required), cls(**required)
    assert getattr(first, name) == getattr(second, name)
    assert getattr(first, name) is not getattr(second, name)
