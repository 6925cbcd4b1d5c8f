"""``GroupCoordinator``: the facade the shells drive. Every operation takes the request, a request key
chosen by the caller and ``now_ms``; it first fires the timers due by ``now_ms``, then runs the handler,
and returns a ``Result`` (records produced, responses completed). Nothing here reads a clock, opens a
socket or sleeps. ``from_records`` rebuilds a coordinator by replaying records (the load path).

A refused request changes nothing: a handler that raises (``ApiError``: the request is refused with its
code; anything else is a bug, re-raised) has its records and responses dropped and its changes rolled
back through the operation's journal (``journal.py``) before the error response is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from regroup.coordinator.classic import rebalance
from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupState
from regroup.coordinator.classic.join import join_group
from regroup.coordinator.classic.rebalance import classic_state_changed
from regroup.coordinator.classic.sync import heartbeat, leave_group, sync_group
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer import classic_members
from regroup.coordinator.consumer.describe import describe_consumer_group
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMemberState
from regroup.coordinator.consumer.heartbeat import consumer_group_heartbeat
from regroup.coordinator.consumer.migration import drop_empty_consumer_group
from regroup.coordinator.consumer.replay import replay as replay_consumer
from regroup.coordinator.consumer.report import report_state
from regroup.coordinator.consumer.subscriptions import member_topics
from regroup.coordinator.consumer.timers import MemberSessionTimer, RevocationTimer
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import GroupDeleted
from regroup.coordinator.groups import Groups
from regroup.coordinator.ids import CountingIds, IdSource
from regroup.coordinator.inspect import delete_groups, describe_group, list_groups
from regroup.coordinator.journal import Journal
from regroup.coordinator.offsets import OffsetStore, expired_offset_records, offset_commit, offset_fetch
from regroup.coordinator.result import RequestKey, Result
from regroup.coordinator.timers import Timers
from regroup.model.cluster import ClusterImage
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
from regroup.protocol.consumer import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
)
from regroup.protocol.offsets import OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse
from regroup.records.builders import new_consumer_group_record, new_group_metadata_record, new_offset_commit_record
from regroup.records.consumer import CONSUMER_KEY_TYPES, ConsumerRecordKey, ConsumerRecordValue
from regroup.records.model import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, Record


@dataclass(frozen=True, slots=True)
class OffsetsExpiry:
    """The periodic removal of committed offsets past their retention (``offsets.retention.check.interval.ms``)."""

    coordinator: GroupCoordinator

    @property
    def key(self) -> tuple[str]:
        return ("offsets-expiry",)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        coordinator = self.coordinator
        coordinator._expire_offsets(ctx)
        coordinator.timers.schedule(self, ctx.now_ms + coordinator.config.offsets_retention_check_interval_ms)


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig | None = None, ids: IdSource | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.ids: IdSource = ids or CountingIds()
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.image = ClusterImage()
        self.offsets = OffsetStore()
        self.timers = Timers()
        self.persisted: dict[str, GroupMetadataValue] = {}  # hard state of each group as its records say
        self.persisted_consumer: dict[ConsumerRecordKey, ConsumerRecordValue] = {}  # consumer groups' records
        self.journal = Journal()  # the running operation's changes, taken back if it is refused
        self._offsets_expiry = OffsetsExpiry(self)
        self.timers.journal = self.journal

    @property
    def view(self) -> Groups:
        return Groups(classic=self.groups, consumer=self.consumer_groups, image=self.image)

    # ----------------------------------------------------------------------------------------- plumbing
    def _run(
        self, now_ms: int, key: RequestKey | None, handler: Callable[[Ctx], Any], on_error: Callable[[ApiError], Any]
    ) -> Result:
        ctx = self._ctx(now_ms)
        self._fire_due(ctx)  # applied already: the request sees the state the timers left
        result = ctx.result
        fired, completed, dropped = len(result.records), len(result.completions), len(result.dropped)
        happened = len(result.events)
        journal = self.journal
        journal.begin()
        try:
            response = handler(ctx)
        except ApiError as exc:
            self._roll_back(result, fired, completed, dropped, happened)
            result.refused = exc.code
            ctx.complete(key, on_error(exc))
            return result
        except BaseException:
            self._roll_back(result, fired, completed, dropped, happened)
            raise
        journal.commit()
        if response is not None:
            ctx.complete(key, response)
        if len(result.records) > fired:
            self._apply_live(result.records[fired:], result)
        return result

    def _roll_back(self, result: Result, records: int, completions: int, dropped: int, events: int) -> None:
        """Take back everything the running handler did: its records, responses, events and changes."""
        self.journal.rollback()
        del result.records[records:]
        del result.completions[completions:]
        del result.dropped[dropped:]
        del result.events[events:]

    def _ctx(self, now_ms: int) -> Ctx:
        if self._offsets_expiry.key not in self.timers:
            self.timers.schedule(self._offsets_expiry, now_ms + self.config.offsets_retention_check_interval_ms)
        return Ctx(config=self.config, timers=self.timers, ids=self.ids, now_ms=now_ms, journal=self.journal)

    def _fire_due(self, ctx: Ctx) -> None:
        """Fire the timers due by ``ctx.now_ms`` in deadline order. Each expiry is a write of its own (as in
        Kafka): its records are applied before the next timer fires and before any request runs, so e.g.
        a group deleted by the offsets cleanup is gone for a JoinGroup arriving at the same instant."""
        while (timer := self.timers.pop_due(ctx.now_ms)) is not None:
            applied = len(ctx.result.records)
            timer.fire(ctx, self.view)
            if len(ctx.result.records) > applied:
                self._apply_live(ctx.result.records[applied:], ctx.result)

    def _expire_offsets(self, ctx: Ctx) -> None:
        image = self.image
        topics = {
            gid: {t for m in g.members.values() for t in member_topics(m, image)}
            for gid, g in self.consumer_groups.items()
        }
        records = expired_offset_records(
            self.groups, self.offsets, ctx.now_ms, self.config.offsets_retention_ms, self.consumer_groups, topics
        )
        for record in records:
            ctx.emit(record)
        expired = {
            (r.key.group_id, r.key.topic, r.key.partition) for r in records if isinstance(r.key, OffsetCommitKey)
        }
        for gid, group in list(self.consumer_groups.items()):
            left = [k for k in self.offsets.of(gid) if (gid, *k) not in expired]
            if not group.members and not left:
                ConsumerWrites(ctx, self.consumer_groups).delete_group(group)

    def _apply_live(self, records: list[Record], result: Result | None) -> None:
        """Apply the records of one write (a request or a timer firing) to the persisted state; then report
        the consumer groups it wrote to whose state or epochs changed (``result``: where to say so)."""
        touched: list[str] = []
        for record in records:
            if self._apply(record, loading=False, result=result) and record.key.group_id not in touched:
                touched.append(record.key.group_id)
        if result is not None:
            for group_id in touched:
                group = self.consumer_groups.get(group_id)
                if group is not None:
                    report_state(group, self.config.consumer_group_assignors[0], result.events)

    def _apply(self, record: Record, *, loading: bool, result: Result | None = None) -> bool:
        """Apply one record; True for a consumer group's record."""
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offsets.apply(key, value)
            if loading and value is not None and key.group_id not in self.groups:
                self.groups[key.group_id] = ClassicGroup(group_id=key.group_id)  # a simple group
            return False
        if isinstance(key, CONSUMER_KEY_TYPES):
            if loading:
                replay_consumer(self.consumer_groups, record)
            if value is None:
                self.persisted_consumer.pop(key, None)
            else:
                self.persisted_consumer[key] = value  # type: ignore[assignment]
            return True
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            self.persisted.pop(key.group_id, None)
            group = self.groups.pop(key.group_id, None)
            if group is not None:  # deleted (DeleteGroups, offsets expiry): its members went before it
                group.transition(ClassicGroupState.DEAD, group.state_timestamp_ms)
                if result is not None:
                    result.events.append(classic_state_changed(group))
                    result.events.append(GroupDeleted(key.group_id, "classic"))
            return False
        assert isinstance(value, GroupMetadataValue)
        self.persisted[key.group_id] = value
        if loading:
            self.groups[key.group_id] = ClassicGroup.from_record(key.group_id, value)
        return False

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
                    rebalance.SessionTimer(group.group_id, member.member_id), now_ms + member.session_timeout_ms
                )
            if len(group.members) > coordinator.config.group_max_size:
                rebalance.prepare_rebalance(ctx, group)
        for cgroup in coordinator.consumer_groups.values():
            for cmember in cgroup.members.values():
                timeout = (
                    cmember.classic.session_timeout_ms
                    if cmember.classic is not None
                    else coordinator.config.consumer_group_session_timeout_ms
                )
                coordinator.timers.schedule(MemberSessionTimer(cgroup.group_id, cmember.member_id), now_ms + timeout)
                if cmember.classic is None and cmember.state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS:
                    coordinator.timers.schedule(
                        RevocationTimer(cgroup.group_id, cmember.member_id, cmember.member_epoch),
                        now_ms + max(cmember.rebalance_timeout_ms, 0),
                    )
        coordinator._apply_live(ctx.result.records, None)
        for cgroup in coordinator.consumer_groups.values():  # loaded: what is known is no news
            report_state(cgroup, coordinator.config.consumer_group_assignors[0], [])
        return coordinator

    def replay(self, record: Record) -> None:
        """Apply one record as the load path does."""
        self._apply(record, loading=True)

    def snapshot_records(self) -> list[Record]:
        """The fewest records that rebuild the current hard state (what a log snapshot stores)."""
        records = [new_group_metadata_record(g, v) for g, v in sorted(self.persisted.items())]
        records.extend(new_consumer_group_record(k, v) for k, v in self.persisted_consumer.items())
        for group_id, offsets in sorted(self.offsets.offsets.items()):
            for (topic, partition), value in sorted(offsets.items()):
                records.append(new_offset_commit_record(group_id, topic, partition, value))
        return records

    def hard_state(self) -> dict[str, Any]:
        """What the records say: equal for a live coordinator and one rebuilt from its records."""
        return {
            "groups": dict(sorted(self.persisted.items())),
            "consumer_groups": dict(self.persisted_consumer),
            "offsets": {g: dict(sorted(o.items())) for g, o in sorted(self.offsets.offsets.items())},
        }

    # ------------------------------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        """When to call ``advance`` next: at or before the earliest timer (a session extended since its
        timer was queued can make it early: ``advance`` then fires nothing). None: no timers."""
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
            lambda ctx: self._join_group(ctx, req, key),
            lambda exc: JoinGroupResponse(error=exc.code, member_id=req.member_id),
        )

    def _join_group(self, ctx: Ctx, req: JoinGroupRequest, key: RequestKey) -> JoinGroupResponse | None:
        cgroup = self.consumer_groups.get(req.group_id)
        if cgroup is not None:
            cfg = ctx.config
            if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
                raise ApiError(ErrorCode.INVALID_SESSION_TIMEOUT)
            if cgroup.members:
                return classic_members.join_group(ctx, self.view, cgroup, req)
            drop_empty_consumer_group(ctx, self.view, cgroup)
        join_group(ctx, self.groups, req, key)
        return None

    def sync_group(self, req: SyncGroupRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> SyncGroupResponse | None:
            cgroup = self.consumer_groups.get(req.group_id)
            if cgroup is not None:
                return classic_members.sync_group(ctx, self.view, cgroup, req)
            sync_group(ctx, self.groups, req, key)
            return None

        return self._run(now_ms, key, handle, lambda exc: SyncGroupResponse(error=exc.code))

    def heartbeat(self, req: HeartbeatRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> HeartbeatResponse:
            cgroup = self.consumer_groups.get(req.group_id)
            if cgroup is not None:
                return classic_members.heartbeat(ctx, cgroup, req)
            return heartbeat(ctx, self.groups, req)

        return self._run(now_ms, key, handle, lambda exc: HeartbeatResponse(error=exc.code))

    def leave_group(self, req: LeaveGroupRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> LeaveGroupResponse:
            cgroup = self.consumer_groups.get(req.group_id)
            if cgroup is not None:
                return classic_members.leave_group(ctx, self.view, cgroup, req)
            return leave_group(ctx, self.groups, req)

        return self._run(now_ms, key, handle, lambda exc: LeaveGroupResponse(error=exc.code))

    def offset_commit(self, req: OffsetCommitRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms, key, lambda ctx: offset_commit(ctx, self.groups, req, self.consumer_groups), lambda exc: None
        )

    def offset_fetch(self, req: OffsetFetchRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: offset_fetch(self.groups, self.offsets, req, self.consumer_groups),
            lambda exc: OffsetFetchResponse(group_id=req.group_id, error=exc.code),
        )

    # ------------------------------------------------------------------------------- KIP-848 consumer groups
    def update_metadata(self, image: ClusterImage, now_ms: int) -> Result:
        """A new cluster image (topics created, deleted or grown): consumer groups subscribed to a changed
        topic, or with regex subscriptions, refresh their subscription metadata on their next heartbeat."""
        old = self.image
        self.image = image
        changed = {
            name for name in set(old.by_name) | set(image.by_name) if old.by_name.get(name) != image.by_name.get(name)
        }
        for group in self.consumer_groups.values():
            if any(m.subscribed_topic_regex for m in group.members.values()) or any(
                set(m.subscribed_topic_names) & changed for m in group.members.values()
            ):
                group.metadata_refresh_needed = True
        return self.advance(now_ms)

    def consumer_group_heartbeat(self, req: ConsumerGroupHeartbeatRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> ConsumerGroupHeartbeatResponse:
            try:
                return consumer_group_heartbeat(ctx, self.view, req)
            except ApiError as exc:  # this API's errors carry Kafka's message
                message = str(exc) if str(exc) != exc.code.name else None
                return ConsumerGroupHeartbeatResponse(error=exc.code, error_message=message)

        return self._run(now_ms, key, handle, lambda exc: ConsumerGroupHeartbeatResponse(error=exc.code))

    def consumer_group_describe(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: tuple(describe_consumer_group(self.config, self.view, g) for g in group_ids),
            lambda exc: tuple(DescribedConsumerGroup(group_id=g, error=exc.code) for g in group_ids),
        )

    def describe_groups(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: tuple(describe_group(self.groups, g) for g in group_ids),
            lambda exc: tuple(DescribedGroup(group_id=g, error=exc.code, state="") for g in group_ids),
        )

    def list_groups(self, req: ListGroupsRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: list_groups(self.groups, req, self.consumer_groups),
            lambda exc: ListGroupsResponse(error=exc.code),
        )

    def delete_groups(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: delete_groups(ctx, self.groups, self.offsets, group_ids, self.consumer_groups),
            lambda exc: None,
        )
