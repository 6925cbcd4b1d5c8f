"""``GroupCoordinator``: the facade the shells drive. Every operation takes the request, a request key
chosen by the caller and ``now_ms``; it first fires the timers due by ``now_ms``, then runs the handler,
and returns a ``Result`` (records produced, responses completed). Nothing here reads a clock, opens a
socket or sleeps. ``from_records`` rebuilds a coordinator by replaying records (the load path).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from regroup.coordinator.classic import rebalance
from regroup.coordinator.classic.group import ClassicGroup, GroupState
from regroup.coordinator.classic.join import join_group
from regroup.coordinator.classic.sync import heartbeat, leave_group, sync_group
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.context import Ctx
from regroup.coordinator.ids import CountingIds, IdSource
from regroup.coordinator.inspect import delete_groups, describe_group, list_groups
from regroup.coordinator.offsets import OffsetStore, expired_offset_records, offset_commit, offset_fetch
from regroup.coordinator.result import RequestKey, Result
from regroup.coordinator.timers import Timers
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.admin import DescribedGroup, ListGroupsRequest, ListGroupsResponse
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
from regroup.protocol.offsets import OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse
from regroup.records.builders import new_group_metadata_record, new_offset_commit_record
from regroup.records.model import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, Record

OFFSETS_EXPIRY_KEY = ("offsets-expiry",)


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig | None = None, ids: IdSource | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.ids: IdSource = ids or CountingIds()
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self.timers = Timers()
        self.persisted: dict[str, GroupMetadataValue] = {}  # hard state of each group as its records say

    # ----------------------------------------------------------------------------------------- plumbing
    def _run(
        self, now_ms: int, key: RequestKey | None, handler: Callable[[Ctx], Any], on_error: Callable[[ErrorCode], Any]
    ) -> Result:
        ctx = self._ctx(now_ms)
        self._fire_due(ctx)  # applied already: the request sees the state the timers left
        fired = len(ctx.result.records)
        try:
            response = handler(ctx)
        except ApiError as exc:
            ctx.complete(key, on_error(exc.code))
        else:
            if response is not None:
                ctx.complete(key, response)
        self._apply_live(ctx.result.records[fired:])
        return ctx.result

    def _ctx(self, now_ms: int) -> Ctx:
        if OFFSETS_EXPIRY_KEY not in self.timers:
            self.timers.schedule(OFFSETS_EXPIRY_KEY, now_ms + self.config.offsets_retention_check_interval_ms)
        return Ctx(config=self.config, timers=self.timers, ids=self.ids, now_ms=now_ms)

    def _fire_due(self, ctx: Ctx) -> None:
        """Fire the timers due by ``ctx.now_ms`` in deadline order. Each expiry is a write of its own (as in
        Kafka): its records are applied before the next timer fires and before any request runs, so e.g.
        a group deleted by the offsets cleanup is gone for a JoinGroup arriving at the same instant."""
        while (key := self.timers.pop_due(ctx.now_ms)) is not None:
            applied = len(ctx.result.records)
            self._fire(ctx, key)
            self._apply_live(ctx.result.records[applied:])

    def _fire(self, ctx: Ctx, key: object) -> None:
        assert isinstance(key, tuple)
        kind = key[0]
        if kind == "offsets-expiry":
            records = expired_offset_records(self.groups, self.offsets, ctx.now_ms, self.config.offsets_retention_ms)
            for record in records:
                ctx.emit(record)
            self.timers.schedule(OFFSETS_EXPIRY_KEY, ctx.now_ms + self.config.offsets_retention_check_interval_ms)
            return
        group = self.groups.get(key[1])
        if group is None or group.is_in(GroupState.DEAD):
            return
        if kind == "session":
            rebalance.on_session_timer(ctx, group, key[2])
        elif kind == "join":
            rebalance.on_join_timer(ctx, group)
        elif kind == "sync":
            rebalance.on_sync_timer(ctx, group)

    def _apply_live(self, records: Iterable[Record]) -> None:
        for record in records:
            self._apply(record, loading=False)

    def _apply(self, record: Record, *, loading: bool) -> None:
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offsets.apply(key, value)
            if loading and value is not None and key.group_id not in self.groups:
                self.groups[key.group_id] = ClassicGroup(group_id=key.group_id)  # a simple group
            return
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            self.persisted.pop(key.group_id, None)
            group = self.groups.pop(key.group_id, None)
            if group is not None:
                group.transition(GroupState.DEAD, group.state_timestamp_ms)
            return
        assert isinstance(value, GroupMetadataValue)
        self.persisted[key.group_id] = value
        if loading:
            self.groups[key.group_id] = ClassicGroup.from_record(key.group_id, value)

    # ------------------------------------------------------------------------------------------ loading
    @classmethod
    def from_records(
        cls,
        records: Iterable[Record],
        now_ms: int,
        config: CoordinatorConfig | None = None,
        ids: IdSource | None = None,
    ) -> GroupCoordinator:
        """Rebuild a coordinator from its records: groups with members come back Stable (their session
        timers restarted at ``now_ms``), groups without members Empty, offsets as last committed. A group
        with more members than ``group_max_size`` (the setting was lowered) starts a rebalance at once."""
        coordinator = cls(config, ids)
        for record in records:
            coordinator._apply(record, loading=True)
        ctx = Ctx(config=coordinator.config, timers=coordinator.timers, ids=coordinator.ids, now_ms=now_ms)
        for group in coordinator.groups.values():
            for member in group.members.values():
                coordinator.timers.schedule(
                    ("session", group.group_id, member.member_id), now_ms + member.session_timeout_ms
                )
            if len(group.members) > coordinator.config.group_max_size:
                rebalance.prepare_rebalance(ctx, group)
        coordinator._apply_live(ctx.result.records)
        return coordinator

    def replay(self, record: Record) -> None:
        """Apply one record as the load path does."""
        self._apply(record, loading=True)

    def snapshot_records(self) -> list[Record]:
        """The fewest records that rebuild the current hard state (what a log snapshot stores)."""
        records = [new_group_metadata_record(g, v) for g, v in sorted(self.persisted.items())]
        for group_id, offsets in sorted(self.offsets.offsets.items()):
            for (topic, partition), value in sorted(offsets.items()):
                records.append(new_offset_commit_record(group_id, topic, partition, value))
        return records

    def hard_state(self) -> dict[str, Any]:
        """What the records say: equal for a live coordinator and one rebuilt from its records."""
        return {
            "groups": dict(sorted(self.persisted.items())),
            "offsets": {g: dict(sorted(o.items())) for g, o in sorted(self.offsets.offsets.items())},
        }

    # ------------------------------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def advance(self, now_ms: int) -> Result:
        """Fire every timer due by ``now_ms`` (session expiry, join/sync phase timeouts, offset expiry)."""
        ctx = self._ctx(now_ms)
        self._fire_due(ctx)
        return ctx.result

    # ------------------------------------------------------------------------------------- the requests
    def join_group(self, req: JoinGroupRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: join_group(ctx, self.groups, req, key),
            lambda code: JoinGroupResponse(error=code, member_id=req.member_id),
        )

    def sync_group(self, req: SyncGroupRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms, key, lambda ctx: sync_group(ctx, self.groups, req, key), lambda c: SyncGroupResponse(error=c)
        )

    def heartbeat(self, req: HeartbeatRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms, key, lambda ctx: heartbeat(ctx, self.groups, req), lambda c: HeartbeatResponse(error=c)
        )

    def leave_group(self, req: LeaveGroupRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms, key, lambda ctx: leave_group(ctx, self.groups, req), lambda c: LeaveGroupResponse(error=c)
        )

    def offset_commit(self, req: OffsetCommitRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(now_ms, key, lambda ctx: offset_commit(ctx, self.groups, req), lambda c: None)

    def offset_fetch(self, req: OffsetFetchRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: offset_fetch(self.groups, self.offsets, req),
            lambda c: OffsetFetchResponse(group_id=req.group_id, error=c),
        )

    def describe_groups(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: tuple(describe_group(self.groups, g) for g in group_ids),
            lambda c: tuple(DescribedGroup(group_id=g, error=c, state="") for g in group_ids),
        )

    def list_groups(self, req: ListGroupsRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(now_ms, key, lambda ctx: list_groups(self.groups, req), lambda c: ListGroupsResponse(error=c))

    def delete_groups(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms, key, lambda ctx: delete_groups(ctx, self.groups, self.offsets, group_ids), lambda c: None
        )
