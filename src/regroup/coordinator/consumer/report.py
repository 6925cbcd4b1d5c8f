"""Saying what happened to a consumer group (``events.py``): its state and epochs after a write, once per
write that changed them (its state is derived from its members, so it is reported when a write ends, not per
record); and the group as it stands, as a read-only summary for shells (``ConsumerGroupSummary``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from regroup.coordinator.events import Event, GroupStateChanged


@dataclass(slots=True, unsafe_hash=True)
class ConsumerGroupSummary:
    """A consumer group as it stands, in plain values (``GroupCoordinator.consumer_group_summary``): what its
    events say of it (state, epochs, members) and what they do not say as it is now: the assignor its members
    prefer (Kafka's name) and how many of its members speak the classic protocol."""

    group_id: Final[str]
    state: Final[str]
    group_epoch: Final[int]
    assignment_epoch: Final[int]
    assignor: Final[str]
    members: Final[int]
    classic_members: Final[int]


def summary(group: ConsumerGroup, default_assignor: str) -> ConsumerGroupSummary:
    return ConsumerGroupSummary(
        group_id=group.group_id,
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.preferred_assignor(default_assignor),
        members=len(group.members),
        classic_members=group.classic_member_count(),
    )


def state_changed(group: ConsumerGroup, state: ConsumerGroupState, default_assignor: str) -> GroupStateChanged:
    return GroupStateChanged(
        group_id=group.group_id,
        group_type="consumer",
        state=state.value,
        generation=group.group_epoch,
        protocol=group.preferred_assignor(default_assignor),
        protocol_type=None,
        leader=None,
        assignment_epoch=group.assignment_epoch,
        members=len(group.members),
    )


def report_state(group: ConsumerGroup, default_assignor: str, events: list[Event]) -> None:
    """After a write to the group: a ``GroupStateChanged`` when its state or an epoch changed since the last
    report (``group.reported``, soft state set only once the write is final)."""
    state = group.state()
    mark = (state, group.group_epoch, group.assignment_epoch)
    if mark != group.reported:
        group.reported = mark
        events.append(state_changed(group, state, default_assignor))
