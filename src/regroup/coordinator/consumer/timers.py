"""A consumer group's timers: a member's session, the revocation timeout of a member told to give up
partitions (armed at a member epoch, and void once the member moved past it), and the join and sync
timeouts of the classic-protocol members of a consumer group. Each fences its member when it fires, if the
member is still there (and, for a revocation timeout, still at the epoch it was armed at)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupMemberState
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import LeaveReason
from regroup.coordinator.groups import Groups

TimerKey = tuple[str, str, str]


def member_session_key(group_id: str, member_id: str) -> TimerKey:
    return ("consumer-session", group_id, member_id)


def revocation_key(group_id: str, member_id: str) -> TimerKey:
    return ("consumer-revocation", group_id, member_id)


def classic_member_join_key(group_id: str, member_id: str) -> TimerKey:
    return ("consumer-classic-join", group_id, member_id)


def classic_member_sync_key(group_id: str, member_id: str) -> TimerKey:
    return ("consumer-classic-sync", group_id, member_id)


#: every timer key of one member (what fencing or a downgrade cancels)
MEMBER_TIMER_KEYS = (member_session_key, revocation_key, classic_member_join_key, classic_member_sync_key)


def _member(groups: Groups, group_id: str, member_id: str) -> tuple[ConsumerGroup, ConsumerGroupMember] | None:
    group = groups.typed(group_id, ConsumerGroup)
    member = group.members.get(member_id) if group is not None else None
    return None if group is None or member is None else (group, member)


def _fence(ctx: Ctx, groups: Groups, group: ConsumerGroup, member_id: str, reason: LeaveReason) -> None:
    from regroup.coordinator.consumer.fence import fence_member  # (fencing schedules and cancels timers)

    fence_member(ctx, groups, group, member_id, reason)


@dataclass(slots=True, eq=False)
class _FencingTimer:
    """A timer that fences its member when it fires, if the member is still there: what the session, join
    and sync timeouts share (each says its key and its reason)."""

    group_id: Final[str]
    member_id: Final[str]

    @property
    def key(self) -> TimerKey:
        raise NotImplementedError

    def reason(self) -> LeaveReason:
        raise NotImplementedError

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        found = _member(groups, self.group_id, self.member_id)
        if found is not None:
            _fence(ctx, groups, found[0], self.member_id, self.reason())


class MemberSessionTimer(_FencingTimer):
    """The member sent no heartbeat within its session timeout."""

    __slots__ = ()

    @property
    def key(self) -> TimerKey:
        return member_session_key(self.group_id, self.member_id)

    def reason(self) -> LeaveReason:
        return "session timeout"


class ClassicMemberJoinTimer(_FencingTimer):
    """A classic-protocol member told to rejoin did not send JoinGroup within its rebalance timeout."""

    __slots__ = ()

    @property
    def key(self) -> TimerKey:
        return classic_member_join_key(self.group_id, self.member_id)

    def reason(self) -> LeaveReason:
        return "join timeout"


class ClassicMemberSyncTimer(_FencingTimer):
    """A classic-protocol member that joined did not send SyncGroup within its rebalance timeout."""

    __slots__ = ()

    @property
    def key(self) -> TimerKey:
        return classic_member_sync_key(self.group_id, self.member_id)

    def reason(self) -> LeaveReason:
        return "sync timeout"


@dataclass(slots=True, eq=False)
class RevocationTimer:
    """The member, at ``member_epoch``, did not revoke what it was told to within its rebalance timeout."""

    group_id: Final[str]
    member_id: Final[str]
    member_epoch: Final[int]

    @property
    def key(self) -> TimerKey:
        return revocation_key(self.group_id, self.member_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        found = _member(groups, self.group_id, self.member_id)
        if found is None:
            return
        group, member = found
        if member.state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS and member.member_epoch == self.member_epoch:
            _fence(ctx, groups, group, self.member_id, "revocation timeout")
