"""``GroupCoordinator``: the facade the shells drive. Every operation takes the request, a request key
chosen by the caller and ``now_ms``; it first fires the timers due by ``now_ms``, then runs the handler,
and returns a ``Result`` (records produced, responses completed). Nothing here reads a clock, opens a
socket or sleeps. ``from_records`` rebuilds a coordinator by replaying records (the load path).

A refused request changes nothing: a handler that raises (``ApiError``: the request is refused with its
code; anything else is a bug, re-raised) has its records and responses dropped and its changes rolled
back through the operation's journal (``journal.py``) before the error response is built.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from regroup.coordinator.asides import Aside
from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupState
from regroup.coordinator.classic.group_type import CLASSIC
from regroup.coordinator.classic.rebalance import classic_state_changed
from regroup.coordinator.classic.sync import heartbeat_at_once
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.consumer.describe import describe_consumer_group
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.consumer.heartbeat import consumer_group_heartbeat
from regroup.coordinator.consumer.heartbeat import heartbeat_at_once as consumer_heartbeat_at_once
from regroup.coordinator.consumer.report import ConsumerGroupSummary
from regroup.coordinator.consumer.report import summary as consumer_summary
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import Event, GroupDeleted
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.group_type import GroupType
from regroup.coordinator.group_types import GROUP_TYPES, RECORD_OWNERS, type_of
from regroup.coordinator.groups import Group, Groups
from regroup.coordinator.ids import CountingIds, IdSource
from regroup.coordinator.inspect import delete_groups, describe_group, group_counts, list_groups
from regroup.coordinator.journal import Journal
from regroup.coordinator.offsets import (
    OffsetStore,
    PlannedTopic,
    complete_transaction,
    expire_offsets,
    offset_commit,
    offset_delete,
    offset_fetch,
    txn_offset_commit,
)
from regroup.coordinator.result import RequestKey, Result
from regroup.coordinator.share import offsets as share_offsets
from regroup.coordinator.share import operations as share_operations
from regroup.coordinator.share.describe import describe_share_group
from regroup.coordinator.share.group import ShareGroup, TopicPartition
from regroup.coordinator.share.membership import share_group_heartbeat
from regroup.coordinator.share.partition import AckBatch, ShareError
from regroup.coordinator.timers import Timers
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.admin import DescribedGroup, ListGroupsRequest, ListGroupsResponse
from regroup.protocol.classic import (
    ClientInfo,
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
from regroup.protocol.offsets import (
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
)
from regroup.protocol.share import (
    DescribedShareGroup,
    ShareAcquisition,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareRead,
)
from regroup.records.builders import new_group_metadata_record
from regroup.records.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PendingOffsetCommitKey,
    Record,
    TxnMarkerKey,
    TxnMarkerValue,
)

OFFSETS_EXPIRY_KEY: Final = ("offsets-expiry",)


@dataclass(frozen=True, slots=True)
class OffsetsExpiry:
    """The periodic removal of committed offsets past their retention (``offsets.retention.check.interval.ms``)."""

    coordinator: GroupCoordinator

    @property
    def key(self) -> tuple[str]:
        return OFFSETS_EXPIRY_KEY

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        coordinator = self.coordinator
        expire_offsets(ctx, groups, coordinator.offsets, coordinator.config.offsets_retention_ms)
        coordinator.timers.schedule(self, ctx.now_ms + coordinator.config.offsets_retention_check_interval_ms)


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig | None = None, ids: IdSource | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.ids: IdSource = ids or CountingIds()
        self.groups = Groups()  # one namespace: every group, of whatever type
        self.offsets = OffsetStore()
        self.timers = Timers()
        self.persisted: dict[str, GroupMetadataValue] = {}  # hard state of each group as its records say
        #: the records of the group types that own theirs (consumer and share groups), as the log says: key -> value
        self.persisted_groups: dict[Any, Any] = {}
        self.journal = Journal()  # the running operation's changes, taken back if it is refused
        #: how the groups stood when the coordinator was rebuilt from its records, as events (``from_records``):
        #: each member joined (a consumer group's with its current assignment), each group's state, each stable
        #: classic group's assignments
        self.loaded_events: list[Event] = []
        #: the groups' own settings (``group_config.py``), as the shell last set them
        self.group_configs: dict[str, GroupConfig] = {}
        self._offsets_expiry = OffsetsExpiry(self)
        self.timers.journal = self.journal

    @property
    def image(self) -> ClusterImage:
        """The cluster as the coordinator last heard of it (``update_metadata``)."""
        return self.groups.image

    # ----------------------------------------------------------------------------------------- plumbing
    def _run(
        self, now_ms: int, key: RequestKey | None, handler: Callable[[Ctx], Any], on_error: Callable[[ApiError], Any]
    ) -> Result:
        ctx = self._ctx(now_ms)
        self._fire_due(ctx, paced=False)  # applied already: the request sees the state the timers left
        result = ctx.result
        fired, completed, dropped = len(result.records), len(result.completions), len(result.dropped)
        happened, handed = len(result.events), len(result.asides)
        journal = self.journal
        journal.begin()
        try:
            response = handler(ctx)
        except ApiError as exc:
            self._roll_back(result, fired, completed, dropped, happened, handed)
            result.refused = exc.code
            ctx.complete(key, on_error(exc))
            return result
        except BaseException:
            self._roll_back(result, fired, completed, dropped, happened, handed)
            raise
        journal.commit()
        if response is not None:
            ctx.complete(key, response)
        if len(result.records) > fired:
            self._apply_live(result.records[fired:], result)
        return result

    def _roll_back(
        self, result: Result, records: int, completions: int, dropped: int, events: int, asides: int
    ) -> None:
        """Take back everything the running handler did: its records, responses, events, work handed out and
        changes."""
        self.journal.rollback()
        del result.records[records:]
        del result.completions[completions:]
        del result.dropped[dropped:]
        del result.events[events:]
        del result.asides[asides:]

    def _ctx(self, now_ms: int) -> Ctx:
        if OFFSETS_EXPIRY_KEY not in self.timers:
            self.timers.schedule(self._offsets_expiry, now_ms + self.config.offsets_retention_check_interval_ms)
        return Ctx(
            config=self.config,
            timers=self.timers,
            ids=self.ids,
            now_ms=now_ms,
            journal=self.journal,
            group_configs=self.group_configs,
        )

    def _fire_due(self, ctx: Ctx, *, paced: bool = True) -> None:
        """Fire the timers due by ``ctx.now_ms`` in deadline order. Each expiry is a write of its own (as in
        Kafka): its records are applied before the next timer fires and before any request runs, so e.g.
        a group deleted by the offsets cleanup is gone for a JoinGroup arriving at the same instant. ``paced``
        False: not the chunks of work cut into chunks (``timers.is_paced``), which only ``advance`` fires."""
        while (timer := self.timers.pop_due(ctx.now_ms, paced=paced)) is not None:
            applied = len(ctx.result.records)
            timer.fire(ctx, self.groups)
            if len(ctx.result.records) > applied:
                self._apply_live(ctx.result.records[applied:], ctx.result)

    def _apply_live(self, records: list[Record], result: Result | None) -> None:
        """Apply the records of one write (a request or a timer firing) to the persisted state; then each group
        the write touched says what changed about it (``result``: where to say so)."""
        touched: dict[str, None] = {}  # (in order; a dict: a write may touch thousands of groups)
        apply_commits, apply_pendings = self.offsets.apply_commits, self.offsets.apply_pendings
        i, end = 0, len(records)
        while i < end:
            # the common records, by far: each run of committed (or pending) offsets is applied in the store's own
            # loop
            ran = apply_pendings(records, apply_commits(records, i))
            if ran > i:
                i = ran
                continue
            record = records[i]
            i += 1
            if self._apply(record, loading=False, result=result):
                touched[record.key.group_id] = None
        if result is not None:
            for group_id in touched:
                group = self.groups.get(group_id)
                if group is not None:
                    type_of(group).written(self.config, group, result.events)

    def _apply(self, record: Record, *, loading: bool, result: Result | None = None) -> bool:
        """Apply one record; True for a record of a group type that owns its records (``RECORD_OWNERS``)."""
        key, value = record.key, record.value
        if isinstance(key, (OffsetCommitKey, PendingOffsetCommitKey)):
            assert value is None or isinstance(value, OffsetCommitValue)
            if isinstance(key, OffsetCommitKey):
                self.offsets.apply(key, value)
            else:
                self.offsets.apply_pending(key, value)
            if loading and value is not None and key.group_id not in self.groups:
                self.groups.add(self.journal, ClassicGroup(group_id=key.group_id))  # a simple group
            return False
        if isinstance(key, TxnMarkerKey):
            assert isinstance(value, TxnMarkerValue)
            materialised = self.offsets.apply_marker(key.producer_id, key.group_id, value.committed)
            if loading and materialised and key.group_id not in self.groups:
                self.groups.add(self.journal, ClassicGroup(group_id=key.group_id))
            return False
        owner = RECORD_OWNERS.get(type(key))
        if owner is not None:
            if loading:
                owner.replay(self.groups, record)
            if value is None:
                self.persisted_groups.pop(key, None)
            else:
                self.persisted_groups[key] = value
            return True
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            self.persisted.pop(key.group_id, None)
            group = self.groups.typed(key.group_id, ClassicGroup)
            if group is not None:  # deleted (DeleteGroups, offsets expiry): its members went before it
                self.groups.remove(self.journal, key.group_id)
                group.transition(ClassicGroupState.DEAD, group.state_timestamp_ms)
                if result is not None:
                    result.events.append(classic_state_changed(group))
                    result.events.append(GroupDeleted(key.group_id, "classic"))
            return False
        assert isinstance(value, GroupMetadataValue)
        self.persisted[key.group_id] = value
        if loading:
            self.groups.add(self.journal, ClassicGroup.from_record(key.group_id, value))
        return False

    # ------------------------------------------------------------------------------------------ loading
    @classmethod
    def from_records(
        cls,
        records: Iterable[Record],
        now_ms: int,
        config: CoordinatorConfig | None = None,
        ids: IdSource | None = None,
        group_configs: Mapping[str, GroupConfig] | None = None,
    ) -> GroupCoordinator:
        """Rebuild a coordinator from its records: groups with members come back Stable (their session
        timers restarted at ``now_ms``, with the groups' own session timeouts in ``group_configs``), groups
        without members Empty, offsets as last committed. A group with more members than ``group_max_size``
        (the setting was lowered) starts a rebalance at once."""
        coordinator = cls(config, ids)
        coordinator.group_configs.update(group_configs or {})
        for record in records:
            coordinator._apply(record, loading=True)
        ctx = Ctx(
            config=coordinator.config,
            timers=coordinator.timers,
            ids=coordinator.ids,
            now_ms=now_ms,
            group_configs=coordinator.group_configs,
        )
        for group in list(coordinator.groups.values()):
            type_of(group).loaded(ctx, coordinator.groups, group)
        coordinator.loaded_events = list(ctx.result.events)
        coordinator._apply_live(ctx.result.records, None)
        return coordinator

    def replay(self, record: Record) -> None:
        """Apply one record as the load path does."""
        self._apply(record, loading=True)

    def snapshot_records(self) -> list[Record]:
        """The fewest records that rebuild the current hard state (what a log snapshot stores)."""
        return self.snapshot_records_later()()

    def snapshot_records_later(self) -> Callable[[], list[Record]]:
        """``snapshot_records`` as of now, built by the function returned, on any thread: the groups' records
        are taken now, the offsets' tables copied now and their records built by the function
        (``OffsetStore.records_later``)."""
        records = [new_group_metadata_record(g, v) for g, v in sorted(self.persisted.items())]
        records.extend(Record(k, v) for k, v in self.persisted_groups.items())
        offsets = self.offsets.records_later()

        def build() -> list[Record]:
            return records + offsets()

        return build

    def hard_state(self) -> dict[str, Any]:
        """What the records say: equal for a live coordinator and one rebuilt from its records."""
        return {
            "groups": dict(sorted(self.persisted.items())),
            "group_records": dict(self.persisted_groups),
            "offsets": {g: dict(sorted(o.items())) for g, o in sorted(self.offsets.offsets.items())},
            "pending_offsets": {
                p: {g: dict(sorted(o.items())) for g, o in sorted(by_group.items())}
                for p, by_group in sorted(self.offsets.pending.items())
            },
        }

    # --------------------------------------------------------------------------------- read-only views
    # (What the events do not say, or not cheaply, in plain values: nothing a shell could change a group through.)
    def consumer_group_summary(self, group_id: str) -> ConsumerGroupSummary | None:
        """A read-only view: the consumer group ``group_id`` as it stands now (None: no consumer group has the
        id), with the assignor its members prefer and how many of them speak the classic protocol."""
        group = self.groups.typed(group_id, ConsumerGroup)
        return None if group is None else consumer_summary(group, self.config.consumer_group_assignors[0])

    def awaits_metadata_refresh(self, group_id: str) -> bool:
        """A read-only view: whether the consumer group ``group_id`` refreshes its subscription metadata at its
        next heartbeat (a topic it subscribes to changed since it last did): soft state that ``update_metadata``
        sets without a write, so no event says it."""
        group = self.groups.typed(group_id, ConsumerGroup)
        return group is not None and group.metadata_refresh_needed

    def group_counts(self) -> Counter[tuple[str, str, str]]:
        """A read-only view for metrics: groups by (state, group type, protocol type), as ListGroups lists them."""
        return group_counts(self.groups)

    def share_group_ids(self) -> list[str]:
        """A read-only view for metrics: the share groups' ids, in order."""
        return sorted(group.group_id for group in self.groups.of_type(ShareGroup))

    def members_by_type(self) -> dict[str, int]:
        """A read-only view for metrics: members of groups, by group type (every registered type, 0 included)."""
        counts = {kind.name: 0 for kind in GROUP_TYPES.values()}
        for group in self.groups.values():
            counts[type_of(group).name] += len(group.members)
        return counts

    # ------------------------------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        """When to call ``advance`` next: at or before the earliest timer (a session extended since its
        timer was queued can make it early: ``advance`` then fires nothing). None: no timers."""
        return self.timers.next_deadline()

    def advance(self, now_ms: int, *, paced: bool = True) -> Result:
        """Fire every timer due by ``now_ms`` (session expiry, join/sync phase timeouts, offset expiry) and the next
        chunk of any work cut into chunks that is due (``timers.is_paced``: each schedules the next one a
        millisecond on, so one call does one chunk of each); ``paced`` False: not those chunks (what a request's
        own call fires first)."""
        ctx = self._ctx(now_ms)
        self._fire_due(ctx, paced=paced)
        return ctx.result

    def land(self, aside: Aside, outcome: object, now_ms: int) -> Result:
        """Apply the outcome of work this coordinator handed out (``Result.asides``; ``outcome``: what its
        ``run`` returned or raised), a write of its own after the timers due (``asides.py``)."""

        def handle(ctx: Ctx) -> None:
            aside.land(ctx, self.groups, outcome)

        return self._run(now_ms, None, handle, lambda _: None)

    # ------------------------------------------------------------------------------------- the requests
    def _classic_protocol(self, group_id: str) -> tuple[GroupType[Any], Group | None]:
        """Who serves a classic-protocol request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for
        ``group_id``: the type of the group it names; with no group, the classic type (a JoinGroup creates
        a classic group)."""
        group = self.groups.get(group_id)
        return (CLASSIC if group is None else type_of(group)), group

    def join_group(self, req: JoinGroupRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> JoinGroupResponse | None:
            kind, group = self._classic_protocol(req.group_id)
            return kind.join_group(ctx, self.groups, group, req, key)

        return self._run(now_ms, key, handle, lambda exc: JoinGroupResponse(error=exc.code, member_id=req.member_id))

    def sync_group(self, req: SyncGroupRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> SyncGroupResponse | None:
            kind, group = self._classic_protocol(req.group_id)
            return kind.sync_group(ctx, self.groups, group, req, key)

        return self._run(now_ms, key, handle, lambda exc: SyncGroupResponse(error=exc.code))

    def heartbeat(self, req: HeartbeatRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> HeartbeatResponse:
            kind, group = self._classic_protocol(req.group_id)
            return kind.heartbeat(ctx, self.groups, group, req)

        return self._run(now_ms, key, handle, lambda exc: HeartbeatResponse(error=exc.code))

    def heartbeat_at_once(self, req: HeartbeatRequest, now_ms: int) -> HeartbeatResponse | None:
        """The answer ``heartbeat`` would give when all it would do is move a classic member's session deadline
        (a known member at its group's generation, no timer due): that done, and nothing else. None, with
        nothing changed, for every other request: ``heartbeat`` is for those. A steady group's heartbeats are
        most of a coordinator's requests; they need none of an operation's plumbing (no records, events or
        completions to collect, nothing to take back)."""
        group = self._at_once_group(req.group_id, now_ms)
        if type(group) is not ClassicGroup:
            return None
        return heartbeat_at_once(self.timers, group, req, now_ms)

    def leave_group(self, req: LeaveGroupRequest, key: RequestKey, now_ms: int) -> Result:
        def handle(ctx: Ctx) -> LeaveGroupResponse:
            kind, group = self._classic_protocol(req.group_id)
            return kind.leave_group(ctx, self.groups, group, req)

        return self._run(now_ms, key, handle, lambda exc: LeaveGroupResponse(error=exc.code))

    def offset_commit(
        self, req: OffsetCommitRequest, key: RequestKey, now_ms: int, planned: Sequence[PlannedTopic | None] = ()
    ) -> Result:
        """``planned``: topics worked out ahead (``offsets.plan_topic``), by position in ``req.topics``."""
        return self._run(
            now_ms, key, lambda ctx: offset_commit(ctx, self.groups, req, self.offsets, planned), lambda exc: None
        )

    def offset_fetch(self, req: OffsetFetchRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: offset_fetch(self.groups, self.offsets, req),
            lambda exc: OffsetFetchResponse(group_id=req.group_id, error=exc.code),
        )

    def txn_offset_commit(
        self,
        req: TxnOffsetCommitRequest,
        key: RequestKey,
        now_ms: int,
        planned: Sequence[PlannedTopic | None] = (),
    ) -> Result:
        """TxnOffsetCommit: offsets committed inside ``req.producer_id``'s transaction, pending until
        ``complete_transaction``; a fetch asking for stable offsets gets UNSTABLE_OFFSET_COMMIT meanwhile.
        ``planned``: topics worked out ahead (``offsets.plan_topic`` with the producer), by position."""
        return self._run(now_ms, key, lambda ctx: txn_offset_commit(ctx, self.groups, req, planned), lambda exc: None)

    def complete_transaction(self, producer_id: int, committed: bool, now_ms: int) -> Result:
        """The transaction coordinator's marker for ``producer_id``: its pending offsets are materialised
        (``committed``) or dropped. Idempotent: a producer with nothing pending writes nothing."""

        def handle(ctx: Ctx) -> None:
            complete_transaction(ctx, self.offsets, producer_id, committed)

        return self._run(now_ms, None, handle, lambda exc: None)

    def offset_delete(self, req: OffsetDeleteRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: offset_delete(ctx, self.groups, self.offsets, req),
            lambda exc: OffsetDeleteResponse(error=exc.code),
        )

    # ------------------------------------------------------------------------------- KIP-848 consumer groups
    def set_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        """The group's own settings changed (None or an empty config: back to the broker's). Nothing is written
        and no timer moves: as in Kafka, the new values apply from each member's next heartbeat."""
        if config is None or config.is_empty():
            self.group_configs.pop(group_id, None)
        else:
            self.group_configs[group_id] = config

    def update_metadata(self, image: ClusterImage, now_ms: int) -> Result:
        """A new cluster image (topics created, deleted or grown): consumer groups subscribed to a changed
        topic, or with regex subscriptions, refresh their subscription metadata on their next heartbeat."""
        old = self.groups.image
        self.groups.image = image
        before, after = old.by_name, image.by_name
        # (a topic image the shell kept from the last image is the same object: no field-by-field comparison)
        changed = {name for name in after if (was := before.get(name)) is not (now := after[name]) and was != now}
        changed.update(name for name in before if name not in after)
        frozen = frozenset(changed)
        for group in self.groups.values():
            type_of(group).topics_changed(group, frozen)
        return self.advance(now_ms)

    def consumer_group_heartbeat(self, req: ConsumerGroupHeartbeatRequest, key: RequestKey, now_ms: int) -> Result:
        def refused(exc: ApiError) -> ConsumerGroupHeartbeatResponse:  # this API's errors carry Kafka's message
            message = str(exc) if str(exc) != exc.code.name else None
            return ConsumerGroupHeartbeatResponse(error=exc.code, error_message=message)

        return self._run(now_ms, key, lambda ctx: consumer_group_heartbeat(ctx, self.groups, req), refused)

    def consumer_group_heartbeat_at_once(
        self, req: ConsumerGroupHeartbeatRequest, client: ClientInfo, now_ms: int
    ) -> ConsumerGroupHeartbeatResponse | None:
        """The answer ``consumer_group_heartbeat`` would give (``client`` in place of ``req.client``) when all it
        would do is move a steady member's session deadline (``consumer/heartbeat.heartbeat_at_once``), no
        timer due: that done, and nothing else. None, with nothing changed, for every other request."""
        group = self._at_once_group(req.group_id, now_ms)
        if type(group) is not ConsumerGroup:
            return None
        return consumer_heartbeat_at_once(self.config, self.group_configs, self.timers, group, req, client, now_ms)

    def _at_once_group(self, group_id: str, now_ms: int) -> Group | None:
        """The group an answer at once is about, or None when no request may be answered at once now: a timer
        is due, or the offsets expiry check is not scheduled yet (``_run`` fires or schedules those first)."""
        timers = self.timers
        due = timers.next_deadline()
        if (due is not None and due <= now_ms) or OFFSETS_EXPIRY_KEY not in timers:
            return None
        return self.groups.by_id.get(group_id)

    def consumer_group_describe(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: tuple(describe_consumer_group(self.config, self.groups, g) for g in group_ids),
            lambda exc: tuple(DescribedConsumerGroup(group_id=g, error=exc.code) for g in group_ids),
        )

    def describe_groups(self, group_ids: list[str], key: RequestKey, now_ms: int, version: int = 5) -> Result:
        """DescribeGroups at ``version`` (from 6 a group that is not classic is an error)."""
        return self._run(
            now_ms,
            key,
            lambda ctx: tuple(describe_group(self.groups, g, version) for g in group_ids),
            lambda exc: tuple(DescribedGroup(group_id=g, error=exc.code, state="") for g in group_ids),
        )

    def list_groups(self, req: ListGroupsRequest, key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms, key, lambda ctx: list_groups(self.groups, req), lambda exc: ListGroupsResponse(error=exc.code)
        )

    def delete_groups(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms, key, lambda ctx: delete_groups(ctx, self.groups, self.offsets, group_ids), lambda exc: None
        )

    # ------------------------------------------------------------------------------- KIP-932 share groups
    def share_group_heartbeat(self, req: ShareGroupHeartbeatRequest, key: RequestKey, now_ms: int) -> Result:
        def refused(exc: ApiError) -> ShareGroupHeartbeatResponse:  # this API's errors carry Kafka's message
            message = str(exc) if str(exc) != exc.code.name else None
            return ShareGroupHeartbeatResponse(error=exc.code, error_message=message)

        return self._run(now_ms, key, lambda ctx: share_group_heartbeat(ctx, self.groups, req), refused)

    def share_group_describe(self, group_ids: list[str], key: RequestKey, now_ms: int) -> Result:
        return self._run(
            now_ms,
            key,
            lambda ctx: tuple(describe_share_group(self.groups, g) for g in group_ids),
            lambda exc: tuple(DescribedShareGroup(group_id=g, error=exc.code) for g in group_ids),
        )

    def initialize_share_partitions(
        self, group_id: str, start_offsets: Mapping[TopicPartition, int], key: RequestKey | None, now_ms: int
    ) -> Result:
        """Share partitions of ``group_id`` without state start at the given offsets (the shell resolves
        ``share.auto.offset.reset`` against its logs); a group that is gone is ignored."""

        def handle(ctx: Ctx) -> None:
            share_operations.initialize(ctx, self.groups, group_id, start_offsets)

        return self._run(now_ms, key, handle, lambda exc: None)

    def share_next_available(self, group_id: str, tp: TopicPartition, log_end: int) -> int | None:
        """A read-only view for ShareFetch: the first offset below ``log_end`` the group's share partition would
        hand out now (None: nothing, or no state for the partition yet), where the shell starts reading."""
        return share_operations.next_available(self.groups, group_id, tp, log_end)

    def share_acquire(
        self,
        group_id: str,
        member_id: str,
        wanted: Mapping[TopicPartition, tuple[int, int] | ShareRead],
        max_records: int,
        key: RequestKey | None,
        now_ms: int,
    ) -> Result:
        """ShareFetch's acquisition: for each partition in order, ``(first offset, end offset)`` or a
        ``ShareRead`` (which also names the aborted transactions' batches read, archived instead of delivered)
        -> the records of ``[first, end)`` acquired for the member, at most ``max_records`` in all (the response: a
        ``ShareAcquisition``; a partition the group has no state for gets none). Writes no record. As in Kafka,
        the member id is not checked against the group."""

        def handle(ctx: Ctx) -> ShareAcquisition:
            return share_operations.acquire(ctx, self.groups, group_id, member_id, wanted, max_records)

        return self._run(now_ms, key, handle, lambda exc: exc.code)

    def share_uninitialized(self, group_id: str, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """A read-only view: the partitions of ``tps`` an existing share group has no state for."""
        return share_operations.uninitialized(self.groups, group_id, tps)

    def share_release_member(
        self, group_id: str, member_id: str, now_ms: int, partitions: Iterable[TopicPartition] | None = None
    ) -> Result:
        """The member's share session closed (or its connection dropped): every record it holds in the group
        goes back, available again or archived at the delivery limit; only in ``partitions``, when given (a
        shell releasing a group of many partitions a few hundred at a time)."""

        def handle(ctx: Ctx) -> None:
            share_operations.release(ctx, self.groups, group_id, member_id, partitions)

        return self._run(now_ms, None, handle, lambda exc: None)

    def describe_share_group_offsets(
        self, group_id: str, log_ends: Mapping[TopicPartition, int], key: RequestKey, now_ms: int
    ) -> Result:
        """DescribeShareGroupOffsets: the response is (start offset, lag) per partition of ``log_ends`` (its log
        end offset) the group has state for; a group that does not exist has none (as in Kafka)."""
        return self._run(
            now_ms, key, lambda ctx: share_offsets.describe(self.groups, group_id, log_ends), lambda exc: exc.code
        )

    def share_partitions(self, group_id: str) -> tuple[TopicPartition, ...]:
        """A read-only view: every partition the share group has state for."""
        return share_offsets.initialized(self.groups, group_id)

    def alter_share_group_offsets(
        self, group_id: str, start_offsets: Mapping[TopicPartition, int], key: RequestKey, now_ms: int
    ) -> Result:
        """AlterShareGroupOffsets: the response is None, or the refusal's error code."""

        def handle(ctx: Ctx) -> ErrorCode:
            share_offsets.alter(ctx, self.groups, group_id, start_offsets)
            return ErrorCode.NONE

        return self._run(now_ms, key, handle, lambda exc: exc.code)

    def delete_share_group_offsets(
        self,
        group_id: str,
        topic_ids: list[uuid.UUID],
        key: RequestKey,
        now_ms: int,
        partitions: Iterable[TopicPartition] | None = None,
    ) -> Result:
        """DeleteShareGroupOffsets: the response is a dict of the topics' error codes (whether the group had state
        for each), or the refusal's code. With ``partitions``, only those of the topics' partitions are deleted (a
        shell deleting many a few hundred a call)."""
        return self._run(
            now_ms,
            key,
            lambda ctx: share_offsets.delete(ctx, self.groups, group_id, topic_ids, partitions),
            lambda exc: exc.code,
        )

    def share_acknowledge(
        self,
        group_id: str,
        member_id: str,
        acknowledgements: Mapping[TopicPartition, tuple[AckBatch, ...]],
        key: RequestKey | None,
        now_ms: int,
    ) -> Result:
        """Acknowledgements of records the member acquired, per partition -> the error of each partition
        (the response: a dict by partition). A partition's acknowledgement is all or nothing."""

        def handle(ctx: Ctx) -> dict[TopicPartition, ShareError]:
            return share_operations.acknowledge(ctx, self.groups, group_id, member_id, acknowledgements)

        return self._run(now_ms, key, handle, lambda exc: exc.code)
