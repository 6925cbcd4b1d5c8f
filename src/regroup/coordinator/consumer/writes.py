"""Writing consumer-group records: each helper builds a record (``records.builders``), applies it to the
in-memory group (so the live state is, by construction, what replaying the records gives) and emits it on
the context, with the events it makes happen (``events.py``): a member joined or left (or moved between the
protocols), a new target, a member's new current assignment and the partitions it now holds or no longer holds,
the group deleted."""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterable
from itertools import repeat
from typing import Any, Final

from regroup.coordinator.consumer.group import (
    EMPTY,
    TOPIC_ORDER,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    Partitions,
    to_tuple,
)
from regroup.coordinator.consumer.replay import replay
from regroup.coordinator.consumer.report import state_changed
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import (
    GroupDeleted,
    LeaveReason,
    MemberAssignmentChanged,
    MemberJoined,
    MemberLeft,
    MemberProtocolsChanged,
    PartitionsAssigned,
    PartitionsRevoked,
    TargetComputed,
)
from regroup.coordinator.groups import Groups
from regroup.model.errors import CoordinatorBug
from regroup.records.builders import (
    new_consumer_group_current_assignment_record,
    new_consumer_group_current_assignment_tombstone,
    new_consumer_group_epoch_record,
    new_consumer_group_epoch_tombstone,
    new_consumer_group_member_metadata_record,
    new_consumer_group_member_metadata_tombstone,
    new_consumer_group_regex_record,
    new_consumer_group_regex_tombstone,
    new_consumer_group_subscription_metadata_record,
    new_consumer_group_subscription_metadata_tombstone,
    new_consumer_group_target_assignment_epoch_record,
    new_consumer_group_target_assignment_epoch_tombstone,
    new_consumer_group_target_assignment_record,
    new_consumer_group_target_assignment_tombstone,
)
from regroup.records.consumer import PartitionSet, SubscribedTopic
from regroup.records.model import Record

_client_id: Final[operator.attrgetter[Any]] = operator.attrgetter("client_id")


class ConsumerWrites:
    def __init__(self, ctx: Ctx, groups: Groups) -> None:
        self.ctx = ctx
        self.groups = groups

    def _existing(self, group_id: str) -> ConsumerGroup:
        group = self.groups.typed(group_id, ConsumerGroup)
        if group is None:
            raise CoordinatorBug(f"no consumer group {group_id}")
        return group

    def _write(self, record: Record) -> None:
        replay(self.groups, record, self.ctx.journal)
        self.ctx.emit(record)

    def group_epoch(self, group_id: str, epoch: int) -> None:
        self._write(new_consumer_group_epoch_record(group_id, epoch))

    def subscription_metadata(self, group_id: str, topics: Iterable[SubscribedTopic]) -> None:
        self._write(new_consumer_group_subscription_metadata_record(group_id, topics))

    def member_metadata(self, group_id: str, m: ConsumerGroupMember) -> None:
        group = self.groups.typed(group_id, ConsumerGroup)
        old = group.members.get(m.member_id) if group is not None else None
        self._write(new_consumer_group_member_metadata_record(group_id, m.member_id, m.metadata_value()))
        if old is None:
            epoch = self._existing(group_id).group_epoch
            protocols = m.classic_protocol_names()
            self.ctx.event(MemberJoined(group_id, "consumer", m.member_id, m.client_id, epoch, protocols))
        elif old.classic is not m.classic:
            protocols = m.classic_protocol_names()
            if protocols != old.classic_protocol_names():
                self.ctx.event(MemberProtocolsChanged(group_id, "consumer", m.member_id, protocols))

    def regex(self, group_id: str, regex: str, topics: tuple[str, ...]) -> None:
        """What ``regex`` resolved to, now."""
        self._write(new_consumer_group_regex_record(group_id, regex, topics, self.ctx.now_ms))

    def regex_tombstone(self, group_id: str, regex: str) -> None:
        self._write(new_consumer_group_regex_tombstone(group_id, regex))

    def target(self, group_id: str, member_id: str, partitions: Partitions) -> None:
        self._write(new_consumer_group_target_assignment_record(group_id, member_id, to_tuple(partitions)))

    def target_epoch(self, group_id: str, epoch: int, assignor: str) -> None:
        """The new target is complete: its epoch, computed by ``assignor`` (Kafka's name)."""
        # (its time kept only while the group has an assignment interval: the next computation waits for it)
        at_ms = self.ctx.now_ms if self.ctx.consumer_assignment_interval_ms(group_id) > 0 else 0
        self._write(new_consumer_group_target_assignment_epoch_record(group_id, epoch, at_ms))
        group = self._existing(group_id)
        members = group.members
        # (member id, client id, ``group.target_of(member id)``) per member, the tuples built by C-level
        # iterators rather than one Python call per member
        client_ids = map(_client_id, members.values())
        targets = tuple(zip(members, client_ids, map(group.targets.get, members, repeat(EMPTY)), strict=True))
        self.ctx.event(TargetComputed(group_id, epoch, assignor, targets))

    def current_assignment(self, group_id: str, m: ConsumerGroupMember) -> None:
        group = self.groups.typed(group_id, ConsumerGroup)
        old = group.members.get(m.member_id) if group is not None else None
        self._held_changes(group_id, old, m)
        state, assigned, pending = m.state.value, to_tuple(m.assigned), to_tuple(m.pending_revocation)
        self._write(
            new_consumer_group_current_assignment_record(
                group_id,
                m.member_id,
                member_epoch=m.member_epoch,
                previous_member_epoch=m.previous_member_epoch,
                state=state,
                assigned=assigned,
                pending_revocation=pending,
            )
        )
        self.ctx.event(
            MemberAssignmentChanged(group_id, m.member_id, m.client_id, m.member_epoch, state, assigned, pending)
        )

    def _held_changes(self, group_id: str, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        """The events of a member's new current assignment: what it holds now (assigned or pending
        revocation) and did not before, and the reverse."""
        if old is not None and old.assigned == new.assigned and old.pending_revocation == new.pending_revocation:
            return
        before = _held(old.assigned, old.pending_revocation) if old is not None else EMPTY
        after = _held(new.assigned, new.pending_revocation)
        revoked = _minus(before, after)
        if revoked:
            self.ctx.event(PartitionsRevoked(group_id, new.member_id, new.client_id, new.member_epoch, revoked))
        assigned = _minus(after, before)
        if assigned:
            self.ctx.event(PartitionsAssigned(group_id, new.member_id, new.client_id, new.member_epoch, assigned))

    def remove_member(self, group_id: str, member_id: str, reason: LeaveReason) -> None:
        """Kafka's order: current assignment, target assignment, then the member's metadata."""
        group = self._existing(group_id)
        member = group.members.get(member_id)
        if member is not None:
            held = to_tuple(_held(member.assigned, member.pending_revocation))
            if held:
                self.ctx.event(PartitionsRevoked(group_id, member_id, member.client_id, member.member_epoch, held))
        self._write(new_consumer_group_current_assignment_tombstone(group_id, member_id))
        self._write(new_consumer_group_target_assignment_tombstone(group_id, member_id))
        self._write(new_consumer_group_member_metadata_tombstone(group_id, member_id))
        if member is not None:
            self.ctx.event(MemberLeft(group_id, "consumer", member_id, member.client_id, group.group_epoch, reason))

    def delete_group(
        self,
        group: ConsumerGroup,
        reason: LeaveReason = "group deleted",
        leaving: tuple[str, LeaveReason] | None = None,
    ) -> None:
        """Tombstone every record of the group (members first, the epoch record last); its members leave
        for ``reason``, but ``leaving``'s member for its own."""
        group_id = group.group_id
        dead = state_changed(group, ConsumerGroupState.DEAD, self.ctx.config.consumer_group_assignors[0])
        for member_id in list(group.members):
            why = leaving[1] if leaving is not None and leaving[0] == member_id else reason
            self.remove_member(group_id, member_id, why)
        self.ctx.event(dead)
        for regex in sorted(group.resolved_regexes):
            self._write(new_consumer_group_regex_tombstone(group_id, regex))
        for member_id in list(group.targets):
            self._write(new_consumer_group_target_assignment_tombstone(group_id, member_id))
        self._write(new_consumer_group_target_assignment_epoch_tombstone(group_id))
        self._write(new_consumer_group_subscription_metadata_tombstone(group_id))
        self._write(new_consumer_group_epoch_tombstone(group_id))
        self.ctx.event(GroupDeleted(group_id, "consumer"))


def _held(assigned: Partitions, pending: Partitions) -> Partitions:
    if not pending:
        return assigned
    if not assigned:
        return pending
    out = dict(assigned)
    for topic_id, ps in pending.items():
        out[topic_id] = out.get(topic_id, frozenset()) | ps
    return out


def _minus(a: Partitions, b: Partitions) -> PartitionSet:
    """The partitions of ``a`` not in ``b``, sorted."""
    out: list[tuple[uuid.UUID, tuple[int, ...]]] = []
    for topic_id in sorted(a, key=TOPIC_ORDER):
        left = a[topic_id] - b.get(topic_id, frozenset())
        if left:
            out.append((topic_id, tuple(sorted(left))))
    return tuple(out)
