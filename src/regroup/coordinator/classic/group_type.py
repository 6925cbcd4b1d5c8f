"""The classic group as a ``GroupType`` (``coordinator/group_type.py``): its offset rules, subscribed topics,
offset expiry, ListGroups and DescribeGroups views and deletion, and its own JoinGroup, SyncGroup,
Heartbeat and LeaveGroup handlers (``join.py``, ``sync.py``)."""

from __future__ import annotations

from typing import Final

from regroup.assignors.consumer_protocol import ProtocolDecodeError, decode_subscription
from regroup.coordinator.classic import join, rebalance, sync
from regroup.coordinator.classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicGroupState, ClassicStates
from regroup.coordinator.classic.join import check_identity
from regroup.coordinator.classic.rebalance import schedule_session
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import Event
from regroup.coordinator.group_type import GroupType
from regroup.coordinator.groups import Groups
from regroup.coordinator.result import RequestKey
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.admin import DescribedGroup, DescribedMember, ListedGroup
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
from regroup.records.builders import new_group_tombstone
from regroup.records.model import OffsetCommitValue, Record


class ClassicGroupType:
    __slots__ = ()

    @property
    def name(self) -> str:
        return "classic"

    @property
    def group_class(self) -> type[ClassicGroup]:
        return ClassicGroup

    # ------------------------------------------------------------------------------- records and loading
    @property
    def record_keys(self) -> tuple[type, ...]:
        return ()  # its GroupMetadata record is the facade's (it shares a key space with the offsets)

    def replay(self, groups: Groups, record: Record) -> None:
        """(None of its records come here.)"""

    def loaded(self, ctx: Ctx, groups: Groups, group: ClassicGroup) -> None:
        """Members' sessions restart; a group over ``group.max.size`` (the setting was lowered) rebalances. The
        count of the members' protocols a JoinGroup checks is built now, with the load, rather than by the first
        JoinGroup after it (8 ms at 10,000 members)."""
        for member in group.members.values():
            rebalance.member_joined(ctx, group, member)
        ctx.event(rebalance.classic_state_changed(group))
        if group.state is ClassicGroupState.STABLE:
            ctx.event(rebalance.assignment_stored(group, group.record_entries()))
        now_ms = ctx.now_ms
        ctx.timers.schedule_all(
            (rebalance.SessionTimer(group.group_id, member.member_id), now_ms + member.session_timeout_ms)
            for member in group.members.values()
        )
        group.candidate_protocols()
        if len(group.members) > ctx.config.group_max_size:
            rebalance.prepare_rebalance(ctx, group)

    def written(self, config: CoordinatorConfig, group: ClassicGroup, events: list[Event]) -> None:
        """(A classic group says what changed as each transition happens.)"""

    def topics_changed(self, group: ClassicGroup, changed: frozenset[str]) -> None:
        """(The leader's assignor reads the topics at each rebalance.)"""

    # ------------------------------------------------------------------------------------------ state
    def state_name(self, group: ClassicGroup) -> str:
        return group.state.value

    def is_empty(self, group: ClassicGroup) -> bool:
        return group.is_in(ClassicStates.EMPTY)

    # ---------------------------------------------------------------------------------------- offsets
    def validate_offset_commit(self, ctx: Ctx, group: ClassicGroup, req: OffsetCommitRequest) -> None:
        if group.is_in(ClassicStates.DEAD):
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if req.generation_id < 0 and group.is_in(ClassicStates.EMPTY):
            return  # a commit from outside the group (an admin client, a simple consumer)
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            check_identity(group, req.member_id, req.group_instance_id)
            if req.generation_id != group.generation:
                raise ApiError(ErrorCode.ILLEGAL_GENERATION)
        elif not req.transactional and not group.is_in(ClassicStates.EMPTY):
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        if req.transactional:
            return  # a transaction's commit: no rebalance check, and it does not keep a session alive
        if group.is_in(ClassicStates.COMPLETING_REBALANCE):
            raise ApiError(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members.get(req.member_id)
        if member is not None and group.is_in(ClassicStates.STABLE, ClassicStates.PREPARING_REBALANCE):
            schedule_session(ctx, group, member.member_id, member.session_timeout_ms)

    def validate_offset_fetch(self, group: ClassicGroup, req: OffsetFetchRequest) -> None:
        if group.is_in(ClassicStates.DEAD):
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND)

    def validate_offset_delete(self, group: ClassicGroup) -> None:
        if group.is_in(ClassicStates.DEAD):
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND)
        if not group.is_in(ClassicStates.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise ApiError(ErrorCode.NON_EMPTY_GROUP)  # members whose subscriptions cannot be read

    def subscribed_topics(self, group: ClassicGroup, image: ClusterImage) -> frozenset[str] | None:
        """Decoded from the members' subscriptions when the protocol type is "consumer" (none for other
        protocol types and for an empty group); not known (every topic counts) while no protocol is chosen
        or a subscription cannot be decoded (Kafka's ``ClassicGroup.isSubscribedToTopic``)."""
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE or not group.members:
            return frozenset()
        if group.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in group.members.values():
            try:
                topics.update(decode_subscription(member.metadata(group.protocol_name)).topics)
            except ProtocolDecodeError:
                return None
        return frozenset(topics)

    def offset_expiry_base(self, group: ClassicGroup, value: OffsetCommitValue) -> int | None:
        """Kafka's rule: an empty group's offsets age from when it became empty (commit time for a simple
        group, which never had members); a stable group of consumers ages the offsets of topics it no
        longer subscribes to from their commit; other groups' offsets do not expire."""
        if group.is_in(ClassicStates.EMPTY):
            return group.state_timestamp_ms if group.protocol_type is not None else value.commit_timestamp_ms
        if group.protocol_type is None:
            return value.commit_timestamp_ms
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.is_in(ClassicStates.STABLE):
            return value.commit_timestamp_ms
        return None

    # ------------------------------------------------------------------------------------- inspection
    def listed(self, group: ClassicGroup) -> ListedGroup:
        return ListedGroup(
            group_id=group.group_id,
            protocol_type=group.protocol_type or "",
            state=group.state.value,
            group_type="classic",
        )

    def described(self, group: ClassicGroup) -> DescribedGroup:
        if group.is_in(ClassicStates.DEAD):
            return DescribedGroup(group_id=group.group_id, state="Dead")
        stable = group.is_in(ClassicStates.STABLE)
        return DescribedGroup(
            group_id=group.group_id,
            state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "",
            members=tuple(
                DescribedMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata(group.protocol_name) if stable else b"",
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ),
        )

    # ---------------------------------------------------------------------------------------- removal
    def validate_delete(self, group: ClassicGroup) -> None:
        if group.is_in(ClassicStates.DEAD):
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND)
        if not group.is_in(ClassicStates.EMPTY):
            raise ApiError(ErrorCode.NON_EMPTY_GROUP)

    def delete(self, ctx: Ctx, groups: Groups, group: ClassicGroup) -> None:
        """The group's tombstone: applying it takes the group out of the namespace (it turns Dead)."""
        ctx.emit(new_group_tombstone(group.group_id))

    # --------------------------------------------------------------------- the classic protocol's requests
    def join_group(
        self, ctx: Ctx, groups: Groups, group: ClassicGroup | None, req: JoinGroupRequest, key: RequestKey
    ) -> JoinGroupResponse | None:
        join.join_group(ctx, groups, group, req, key)
        return None

    def sync_group(
        self, ctx: Ctx, groups: Groups, group: ClassicGroup | None, req: SyncGroupRequest, key: RequestKey
    ) -> SyncGroupResponse | None:
        sync.sync_group(ctx, group, req, key)
        return None

    def heartbeat(
        self, ctx: Ctx, groups: Groups, group: ClassicGroup | None, req: HeartbeatRequest
    ) -> HeartbeatResponse:
        return sync.heartbeat(ctx, group, req)

    def leave_group(
        self, ctx: Ctx, groups: Groups, group: ClassicGroup | None, req: LeaveGroupRequest
    ) -> LeaveGroupResponse:
        return sync.leave_group(ctx, group, req)


CLASSIC: Final[GroupType[ClassicGroup]] = ClassicGroupType()  # (mypy checks the type against the interface)
