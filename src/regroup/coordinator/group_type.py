"""``GroupType``: the one interface every group type implements, and what the coordinator's facade, offsets
and inspection ask of a group without knowing its type.

A group type is a class of group (``group_class``, kept in the one namespace of ``groups.py``) plus this
object: its name as ListGroups reports it, the record keys it owns and their replay at load, what it does once
loaded (restart its members' timers) and after a write to one of its groups (say what changed), how a changed
cluster image reaches its groups, its state, the validation of offset commits, fetches and deletes
against it, the topics its members subscribe to, when its offsets may expire, its ListGroups and
DescribeGroups views, how it is deleted, and how it serves the classic protocol's requests (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup: a classic group natively, a consumer group for its members that still
use the classic protocol). Every type is registered once in ``group_types.py``; nothing else dispatches on
a group's type. Validation methods raise ``ApiError`` with Kafka's code; they change nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.coordinator.context import Ctx
    from regroup.coordinator.events import Event
    from regroup.coordinator.groups import Groups
    from regroup.coordinator.result import RequestKey
    from regroup.model.cluster import ClusterImage
    from regroup.protocol.admin import DescribedGroup, ListedGroup
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


G = TypeVar("G")


class GroupType(Protocol[G]):
    """One group type, over its class of group ``G`` (``group_class``): every ``group`` argument is a ``G``."""

    @property
    def name(self) -> str:
        """The type's name in ListGroups and events ("classic", "consumer")."""

    @property
    def group_class(self) -> type[G]: ...

    # ------------------------------------------------------------------------------- records and loading
    @property
    def record_keys(self) -> tuple[type, ...]:
        """The record key types of its groups (the facade routes them here; the classic group's own record is
        the facade's, kept with the offsets it shares a key space with)."""

    def replay(self, groups: Groups, record: Record) -> None:
        """Apply one of its records on the load path (live writes apply their records as they write them)."""

    def loaded(self, ctx: Ctx, groups: Groups, group: G) -> None:
        """The coordinator was rebuilt from its records: restart the group's timers (its members' sessions),
        take its state as known, and say on ``ctx`` how it stands (its members joined, its state, what it
        assigned): the facade keeps those events as ``loaded_events`` for shells that start from them."""

    def written(self, config: CoordinatorConfig, group: G, events: list[Event]) -> None:
        """A write (a request, a timer) wrote records of the group: say what changed about it, once per write."""

    def topics_changed(self, group: G, changed: frozenset[str]) -> None:
        """These topics were created, deleted or grown: a group subscribed to one looks again at its next
        heartbeat."""

    # ------------------------------------------------------------------------------------------ state
    def state_name(self, group: G) -> str:
        """The state as ListGroups and DescribeGroups spell it ("Stable", "Empty", ...)."""

    def is_empty(self, group: G) -> bool:
        """No members: the group may be deleted (DeleteGroups, offsets expiry)."""

    # ---------------------------------------------------------------------------------------- offsets
    def validate_offset_commit(self, ctx: Ctx, group: G, req: OffsetCommitRequest) -> None:
        """May this request commit offsets for the group (its member and generation or member epoch)? In the
        classic protocol an accepted commit also keeps the member's session alive, as in Kafka."""

    def validate_offset_fetch(self, group: G, req: OffsetFetchRequest) -> None:
        """May this request read the group's offsets? GROUP_ID_NOT_FOUND: the group has none to show."""

    def validate_offset_delete(self, group: G) -> None:
        """May offsets be deleted from the group at all (OffsetDelete)?"""

    def subscribed_topics(self, group: G, image: ClusterImage) -> frozenset[str] | None:
        """The topics the group's members subscribe to; None when they are not known, and then every topic
        counts as subscribed (its offsets are neither deleted nor expired)."""

    def offset_expiry_base(self, group: G, value: OffsetCommitValue) -> int | None:
        """When an offset of the group starts ageing towards ``offsets.retention.ms``; None: the group's
        offsets do not expire while it is as it is (an offset with its own expiry time still does not)."""

    # ------------------------------------------------------------------------------------- inspection
    def listed(self, group: G) -> ListedGroup: ...

    def described(self, group: G) -> DescribedGroup | None:
        """DescribeGroups' view; None for a type DescribeGroups does not describe (Kafka: only classic)."""

    # ---------------------------------------------------------------------------------------- removal
    def validate_delete(self, group: G) -> None:
        """May DeleteGroups delete the group (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND)?"""

    def delete(self, ctx: Ctx, groups: Groups, group: G) -> None:
        """Write the records that delete the group (its offsets are the caller's) and take it out of
        ``groups``."""

    # --------------------------------------------------------------------- the classic protocol's requests
    def join_group(
        self, ctx: Ctx, groups: Groups, group: G, req: JoinGroupRequest, key: RequestKey
    ) -> JoinGroupResponse | None:
        """A JoinGroup for this group (None: the response comes later, completed for ``key``)."""

    def sync_group(
        self, ctx: Ctx, groups: Groups, group: G, req: SyncGroupRequest, key: RequestKey
    ) -> SyncGroupResponse | None: ...

    def heartbeat(self, ctx: Ctx, groups: Groups, group: G, req: HeartbeatRequest) -> HeartbeatResponse: ...

    def leave_group(self, ctx: Ctx, groups: Groups, group: G, req: LeaveGroupRequest) -> LeaveGroupResponse: ...
