"""The coordinator's groups of one type, as plain dicts (group id -> group), for assertions."""

from __future__ import annotations

from regroup.coordinator.classic.group import ClassicGroup
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.share.group import ShareGroup


def classic_groups(coordinator: GroupCoordinator) -> dict[str, ClassicGroup]:
    return {g.group_id: g for g in coordinator.groups.of_type(ClassicGroup)}


def consumer_groups(coordinator: GroupCoordinator) -> dict[str, ConsumerGroup]:
    return {g.group_id: g for g in coordinator.groups.of_type(ConsumerGroup)}


def share_groups(coordinator: GroupCoordinator) -> dict[str, ShareGroup]:
    return {g.group_id: g for g in coordinator.groups.of_type(ShareGroup)}
