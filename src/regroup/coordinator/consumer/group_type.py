"""The KIP-848 consumer group as a ``GroupType`` (``coordinator/group_type.py``): member epochs fence its
offset commits and fetches, its subscribed topics protect their offsets, ListGroups lists it (DescribeGroups
does not describe it: ConsumerGroupDescribe does), and its classic-protocol members' JoinGroup, SyncGroup,
Heartbeat and LeaveGroup go to ``classic_members.py``."""

from __future__ import annotations

from typing import Final

from regroup.coordinator.classic import join
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer import classic_members
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMemberState, to_tuple
from regroup.coordinator.consumer.kept_target import keep_loaded_target
from regroup.coordinator.consumer.migration import drop_empty_consumer_group
from regroup.coordinator.consumer.ops import session_timeout_ms
from regroup.coordinator.consumer.replay import replay as replay_consumer
from regroup.coordinator.consumer.report import report_state
from regroup.coordinator.consumer.subscriptions import subscribed_names
from regroup.coordinator.consumer.timers import MemberSessionTimer, RevocationTimer
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import Event, MemberAssignmentChanged, MemberJoined
from regroup.coordinator.group_type import GroupType
from regroup.coordinator.groups import Groups
from regroup.coordinator.result import RequestKey
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
from regroup.records.consumer import CONSUMER_KEY_TYPES
from regroup.records.model import OffsetCommitValue, Record


def _check_member_epoch(group: ConsumerGroup, member_id: str, epoch: int) -> None:
    """The member must exist and send its current epoch (a classic-protocol member's generation)."""
    member = group.members.get(member_id)
    if member is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    if epoch != member.member_epoch:
        raise ApiError(ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH)


class ConsumerGroupType:
    __slots__ = ()

    @property
    def name(self) -> str:
        return "consumer"

    @property
    def group_class(self) -> type[ConsumerGroup]:
        return ConsumerGroup

    # ------------------------------------------------------------------------------- records and loading
    @property
    def record_keys(self) -> tuple[type, ...]:
        return CONSUMER_KEY_TYPES

    def replay(self, groups: Groups, record: Record) -> None:
        replay_consumer(groups, record)

    def loaded(self, ctx: Ctx, groups: Groups, group: ConsumerGroup) -> None:
        """Members' sessions restart, and the revocation timeouts of members still revoking; its state is known,
        and said: each member joined with its current assignment, then the group's state."""
        for member in group.members.values():
            timeout = session_timeout_ms(ctx, group.group_id, member)
            ctx.timers.schedule(MemberSessionTimer(group.group_id, member.member_id), ctx.now_ms + timeout)
            if member.classic is None and member.state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS:
                ctx.timers.schedule(
                    RevocationTimer(group.group_id, member.member_id, member.member_epoch),
                    ctx.now_ms + max(member.rebalance_timeout_ms, 0),
                )
        gid = group.group_id
        for member_id, member in group.members.items():
            protocols = member.classic_protocol_names()
            ctx.event(MemberJoined(gid, "consumer", member_id, member.client_id, group.group_epoch, protocols))
            epoch, state = member.member_epoch, member.state.value
            assigned, pending = to_tuple(member.assigned), to_tuple(member.pending_revocation)
            ctx.event(MemberAssignmentChanged(gid, member_id, member.client_id, epoch, state, assigned, pending))
        report_state(group, ctx.config.consumer_group_assignors[0], ctx.result.events)
        keep_loaded_target(group, group.preferred_assignor(ctx.config.consumer_group_assignors[0]))

    def written(self, config: CoordinatorConfig, group: ConsumerGroup, events: list[Event]) -> None:
        report_state(group, config.consumer_group_assignors[0], events)

    def topics_changed(self, group: ConsumerGroup, changed: frozenset[str]) -> None:
        """Groups subscribed to a changed topic, or with regex subscriptions, refresh their subscription
        metadata at their next heartbeat."""
        if any(regex for _, regex in group.subscriptions) or any(
            set(names) & changed for names, _ in group.subscriptions
        ):
            group.metadata_refresh_needed = True

    # ------------------------------------------------------------------------------------------ state
    def state_name(self, group: ConsumerGroup) -> str:
        return group.state().value

    def is_empty(self, group: ConsumerGroup) -> bool:
        return not group.members

    # ---------------------------------------------------------------------------------------- offsets
    def validate_offset_commit(self, ctx: Ctx, group: ConsumerGroup, req: OffsetCommitRequest) -> None:
        """The member's epoch, not a generation, fences commits; a commit from outside an empty group (an
        admin client) is allowed. A consumer-protocol member commits with OffsetCommit v9 or later (any
        TxnOffsetCommit version)."""
        if req.generation_id < 0 and not group.members:
            return
        member = group.members.get(req.member_id)
        if member is not None and member.classic is None and req.version < 9 and not req.transactional:
            raise ApiError(ErrorCode.UNSUPPORTED_VERSION)
        _check_member_epoch(group, req.member_id, req.generation_id)

    def validate_offset_fetch(self, group: ConsumerGroup, req: OffsetFetchRequest) -> None:
        if req.member_id is not None or req.member_epoch >= 0:
            _check_member_epoch(group, req.member_id or "", req.member_epoch)

    def validate_offset_delete(self, group: ConsumerGroup) -> None:
        """Always allowed: offsets of the topics it subscribes to are refused one by one."""

    def subscribed_topics(self, group: ConsumerGroup, image: ClusterImage) -> frozenset[str]:
        return frozenset(subscribed_names(group))

    def offset_expiry_base(self, group: ConsumerGroup, value: OffsetCommitValue) -> int:
        return value.commit_timestamp_ms

    # ------------------------------------------------------------------------------------- inspection
    def listed(self, group: ConsumerGroup) -> ListedGroup:
        return ListedGroup(
            group_id=group.group_id, protocol_type="consumer", state=group.state().value, group_type="consumer"
        )

    def described(self, group: ConsumerGroup) -> None:
        return None

    # ---------------------------------------------------------------------------------------- removal
    def validate_delete(self, group: ConsumerGroup) -> None:
        if group.members:
            raise ApiError(ErrorCode.NON_EMPTY_GROUP)

    def delete(self, ctx: Ctx, groups: Groups, group: ConsumerGroup) -> None:
        ConsumerWrites(ctx, groups).delete_group(group)

    # --------------------------------------------------------------------- the classic protocol's requests
    def join_group(
        self, ctx: Ctx, groups: Groups, group: ConsumerGroup, req: JoinGroupRequest, key: RequestKey
    ) -> JoinGroupResponse | None:
        """A member joins through the classic protocol; an empty consumer group gives way to a classic one."""
        cfg = ctx.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
            raise ApiError(ErrorCode.INVALID_SESSION_TIMEOUT)
        if group.members:
            return classic_members.join_group(ctx, groups, group, req)
        drop_empty_consumer_group(ctx, groups, group)
        join.join_group(ctx, groups, None, req, key)
        return None

    def sync_group(
        self, ctx: Ctx, groups: Groups, group: ConsumerGroup, req: SyncGroupRequest, key: RequestKey
    ) -> SyncGroupResponse | None:
        return classic_members.sync_group(ctx, groups, group, req)

    def heartbeat(self, ctx: Ctx, groups: Groups, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResponse:
        return classic_members.heartbeat(ctx, group, req)

    def leave_group(self, ctx: Ctx, groups: Groups, group: ConsumerGroup, req: LeaveGroupRequest) -> LeaveGroupResponse:
        return classic_members.leave_group(ctx, groups, group, req)


CONSUMER: Final[GroupType[ConsumerGroup]] = ConsumerGroupType()  # (mypy checks the type against the interface)
