"""The share group (KIP-932) as a ``GroupType`` (``coordinator/group_type.py``): ListGroups lists it as type
"share"; it has no committed offsets (its progress is its share partitions' state), so offset commits, fetches
and deletes name no group of theirs; DescribeGroups does not describe it (ShareGroupDescribe does); DeleteGroups
deletes it once empty, with its share partitions' state; the classic protocol's requests cannot join it."""

from __future__ import annotations

from typing import Final, NoReturn

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import Event, MemberJoined
from regroup.coordinator.group_type import GroupType
from regroup.coordinator.groups import Groups
from regroup.coordinator.result import RequestKey
from regroup.coordinator.share.group import ShareGroup
from regroup.coordinator.share.replay import replay as replay_share
from regroup.coordinator.share.timers import ShareSessionTimer
from regroup.coordinator.share.writes import ShareWrites, report_state
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.admin import ListedGroup
from regroup.protocol.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from regroup.protocol.offsets import OffsetCommitRequest, OffsetFetchRequest
from regroup.records.model import OffsetCommitValue, Record
from regroup.records.share import SHARE_KEY_TYPES


def _not_a_consumer_group(group: ShareGroup) -> NoReturn:
    raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a consumer group.")


def _other_protocol() -> NoReturn:
    raise ApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)


class ShareGroupType:
    __slots__ = ()

    @property
    def name(self) -> str:
        return "share"

    @property
    def group_class(self) -> type[ShareGroup]:
        return ShareGroup

    # ------------------------------------------------------------------------------- records and loading
    @property
    def record_keys(self) -> tuple[type, ...]:
        return SHARE_KEY_TYPES

    def replay(self, groups: Groups, record: Record) -> None:
        replay_share(groups, record)

    def loaded(self, ctx: Ctx, groups: Groups, group: ShareGroup) -> None:
        """Members' sessions restart (acquisition locks are not durable: nothing is acquired after a load);
        its state is known."""
        for member_id, member in group.members.items():
            ctx.event(MemberJoined(group.group_id, "share", member_id, member.client_id, group.group_epoch))
        report_state(group, ctx)
        session_ms = ctx.share_session_timeout_ms(group.group_id)
        for member_id in group.members:
            ctx.timers.schedule(ShareSessionTimer(group.group_id, member_id), ctx.now_ms + session_ms)

    def written(self, config: CoordinatorConfig, group: ShareGroup, events: list[Event]) -> None:
        """(A share group says what changed as each write happens: ``writes.report_state``.)"""

    def topics_changed(self, group: ShareGroup, changed: frozenset[str]) -> None:
        """(Each heartbeat compares the subscribed topics with those the target was computed against.)"""

    def state_name(self, group: ShareGroup) -> str:
        return group.state().value

    def is_empty(self, group: ShareGroup) -> bool:
        return not group.members

    # ---------------------------------------------------------------------------------------- offsets
    def validate_offset_commit(self, ctx: Ctx, group: ShareGroup, req: OffsetCommitRequest) -> None:
        _not_a_consumer_group(group)

    def validate_offset_fetch(self, group: ShareGroup, req: OffsetFetchRequest) -> None:
        _not_a_consumer_group(group)

    def validate_offset_delete(self, group: ShareGroup) -> None:
        _not_a_consumer_group(group)

    def subscribed_topics(self, group: ShareGroup, image: ClusterImage) -> frozenset[str]:
        return group.subscribed_topic_names()

    def offset_expiry_base(self, group: ShareGroup, value: OffsetCommitValue) -> None:
        return None

    # ------------------------------------------------------------------------------------- inspection
    def listed(self, group: ShareGroup) -> ListedGroup:
        return ListedGroup(
            group_id=group.group_id, protocol_type="share", state=group.state().value, group_type="share"
        )

    def described(self, group: ShareGroup) -> None:
        return None

    # ---------------------------------------------------------------------------------------- removal
    def validate_delete(self, group: ShareGroup) -> None:
        if group.members:
            raise ApiError(ErrorCode.NON_EMPTY_GROUP)

    def delete(self, ctx: Ctx, groups: Groups, group: ShareGroup) -> None:
        ShareWrites(ctx, groups).delete_group(group)

    # --------------------------------------------------------------------- the classic protocol's requests
    def join_group(
        self, ctx: Ctx, groups: Groups, group: ShareGroup, req: JoinGroupRequest, key: RequestKey
    ) -> JoinGroupResponse | None:
        _other_protocol()

    def sync_group(
        self, ctx: Ctx, groups: Groups, group: ShareGroup, req: SyncGroupRequest, key: RequestKey
    ) -> SyncGroupResponse | None:
        _other_protocol()

    def heartbeat(self, ctx: Ctx, groups: Groups, group: ShareGroup, req: HeartbeatRequest) -> HeartbeatResponse:
        _other_protocol()

    def leave_group(self, ctx: Ctx, groups: Groups, group: ShareGroup, req: LeaveGroupRequest) -> LeaveGroupResponse:
        _other_protocol()


SHARE: Final[GroupType[ShareGroup]] = ShareGroupType()  # (mypy checks the type against the interface)
