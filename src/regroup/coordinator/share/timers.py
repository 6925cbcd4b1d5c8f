"""A share group's timers: a member's session (no heartbeat within ``share.session.timeout.ms`` fences it)
and, per share partition, the earliest acquisition lock (when it lapses, the records it held are released:
available again, or archived at the delivery limit)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final

from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups
from regroup.coordinator.share.group import ShareGroup


def member_session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("share-session", group_id, member_id)


def locks_key(group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[str, str, uuid.UUID, int]:
    return ("share-locks", group_id, topic_id, partition)


@dataclass(slots=True, eq=False)
class ShareSessionTimer:
    """The member sent no ShareGroupHeartbeat within its session timeout."""

    group_id: Final[str]
    member_id: Final[str]

    @property
    def key(self) -> tuple[str, str, str]:
        return member_session_key(self.group_id, self.member_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        from regroup.coordinator.share.membership import fence_member  # (fencing cancels timers)

        group = groups.typed(self.group_id, ShareGroup)
        if group is not None and self.member_id in group.members:
            fence_member(ctx, groups, group, self.member_id, "session timeout")


@dataclass(slots=True, eq=False)
class ShareLocksTimer:
    """The earliest acquisition lock of one share partition lapsed."""

    group_id: Final[str]
    topic_id: Final[uuid.UUID]
    partition: Final[int]

    @property
    def key(self) -> tuple[str, str, uuid.UUID, int]:
        return locks_key(self.group_id, self.topic_id, self.partition)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        from regroup.coordinator.share.delivery import expire_locks

        group = groups.typed(self.group_id, ShareGroup)
        if group is not None:
            expire_locks(ctx, groups, group, (self.topic_id, self.partition))
