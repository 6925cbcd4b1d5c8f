"""Reconciliation of one member towards its target assignment (Kafka's CurrentAssignmentBuilder).

A member first gives up what others need, staying on its epoch while it does; it is handed a partition
only once no other member holds it (assigned or pending revocation); its epoch advances to the target
epoch once it holds nothing it must give up. Pure: returns the next member, never mutates."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from regroup.coordinator.consumer.group import ConsumerGroupMember, ConsumerGroupMemberState, Partitions
from regroup.model.errors import ApiError, ErrorCode

#: what the member reported owning in this request (None = not reported: assume it still owns everything)
Owned = Mapping[uuid.UUID, frozenset[int]] | None


def _owns_any(owned: Owned, partitions: Partitions) -> bool:
    if owned is None:
        return True
    return any(owned.get(topic_id, frozenset()) & ps for topic_id, ps in partitions.items())


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    is_held: Callable[[uuid.UUID, int], bool],
    owned: Owned,
) -> ConsumerGroupMember:
    """The member's next state. ``is_held(topic, p)``: does some member hold the partition right now."""
    state = member.state
    if state is ConsumerGroupMemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, is_held, owned)
        return member
    if state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, is_held, owned)
    if state is ConsumerGroupMemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, is_held, owned)
    # UNKNOWN: written by a newer version; the member must start from scratch
    if owned is None or any(owned.values()):
        raise ApiError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
        )
    return _next(member, target_epoch, target_epoch, target, is_held, owned)


def _next(
    member: ConsumerGroupMember,
    epoch_for_revocation: int,
    target_epoch: int,
    target: Partitions,
    is_held: Callable[[uuid.UUID, int], bool],
    owned: Owned,
) -> ConsumerGroupMember:
    unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    adding: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        revoke = current - keep
        pending = wanted - keep
        free = frozenset(p for p in pending if not is_held(topic_id, p))
        if len(free) != len(pending):
            unreleased = True
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if free:
            adding[topic_id] = free
    nxt = member.copy()
    if revoking and _owns_any(owned, revoking):
        nxt.state = ConsumerGroupMemberState.UNREVOKED_PARTITIONS
        _set_epoch(nxt, epoch_for_revocation)
        nxt.assigned = assigned
        nxt.pending_revocation = revoking
        return nxt
    for topic_id, ps in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    nxt.state = ConsumerGroupMemberState.UNRELEASED_PARTITIONS if unreleased else ConsumerGroupMemberState.STABLE
    _set_epoch(nxt, target_epoch)
    nxt.assigned = assigned
    nxt.pending_revocation = {}
    return nxt


def _set_epoch(member: ConsumerGroupMember, epoch: int) -> None:
    """Kafka's ``updateMemberEpoch``: the previous epoch is the one the member had before this change."""
    member.previous_member_epoch = member.member_epoch
    member.member_epoch = epoch
