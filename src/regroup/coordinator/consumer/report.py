"""Saying what happened to a consumer group (``events.py``): its state and epochs after a write, once per
write that changed them (its state is derived from its members, so it is reported when a write ends, not per
record)."""

from __future__ import annotations

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from regroup.coordinator.events import Event, GroupStateChanged


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
