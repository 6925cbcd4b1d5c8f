"""``GroupHarness``: drives a ``GroupCoordinator`` the way the conformance scenarios are written.

It keeps the clock (``now_ms``; ``sleep`` advances it and fires due timers), hands out request keys,
collects every record and every completed response (a request answered twice fails the test), and offers
shorthands for the requests (``join``, ``sync``, ``heartbeat``, ``leave``, ``commit``, ...). A request that
may wait (JoinGroup, SyncGroup) returns a ``Call`` whose ``response`` is available once some later
operation released it.

Defaults are those docs/protocol.md's scenarios assume: JoinGroup v9, session and rebalance timeouts 10 s,
``group.initial.rebalance.delay.ms`` = 0 unless a test sets it. Ids are deterministic (``CountingIds``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from regroup.coordinator.classic.rebalance import join_phase_key
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import Event
from regroup.coordinator.ids import CountingIds
from regroup.coordinator.result import Result
from regroup.model.errors import ErrorCode
from regroup.protocol.admin import DeleteGroupsResponse, DescribedGroup, ListGroupsRequest, ListGroupsResponse
from regroup.protocol.classic import (
    ClientInfo,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from regroup.protocol.offsets import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from regroup.records.model import Record
from tests.group_views import classic_groups

Protocols = tuple[tuple[str, bytes], ...]

GROUP = "group"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 10_000
DEFAULT_PROTOCOLS: Protocols = (("range", b"range-metadata"),)
CLIENT_HOST = "/127.0.0.1"


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()  # "take it from the existing member" (so that None can still be passed explicitly)


def member_protocols(i: int) -> Protocols:
    """The protocols ``form_group`` gives member ``i``: "range" with member-specific metadata."""
    return (("range", f"metadata-{i}".encode()),)


@dataclass(frozen=True)
class Call:
    """A submitted request; ``response`` is there once the coordinator completed it."""

    harness: GroupHarness
    key: int

    @property
    def done(self) -> bool:
        """Answered, or dropped because a newer request from the same member superseded it."""
        return self.key in self.harness.responses or self.key in self.harness.dropped

    @property
    def dropped(self) -> bool:
        return self.key in self.harness.dropped

    @property
    def response(self) -> Any:
        assert self.done, f"request {self.key} is still waiting"
        return self.harness.responses[self.key]


@dataclass(frozen=True)
class Formed:
    """What ``form_group`` built: the members in group order, the leader, the generation, the assignment."""

    members: list[str]
    leader: str
    generation: int
    assignments: dict[str, bytes]
    join_responses: dict[str, JoinGroupResponse]

    @property
    def followers(self) -> list[str]:
        return [m for m in self.members if m != self.leader]


class GroupHarness:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        group_id: str = GROUP,
        now_ms: int = 0,
        **overrides: Any,
    ) -> None:
        if config is None:
            config = CoordinatorConfig(**{"group_initial_rebalance_delay_ms": 0, **overrides})
        elif overrides:
            config = dataclasses.replace(config, **overrides)
        self.config = config
        self.group_id = group_id
        self.now_ms = now_ms
        self.coordinator = GroupCoordinator(config, CountingIds())
        self.records: list[Record] = []
        self.responses: dict[int, Any] = {}
        self.dropped: set[int | str] = set()
        self.events: list[Event] = []  # every event of every result, in order
        self.last = Result()
        self._keys = itertools.count(1)
        self._reloads = 0

    # ------------------------------------------------------------------------------------------ plumbing
    def _gid(self, group_id: str | None) -> str:
        return self.group_id if group_id is None else group_id

    def _collect(self, result: Result) -> Result:
        self.last = result
        self.records.extend(result.records)
        self.events.extend(result.events)
        for completion in result.completions:
            assert completion.key not in self.responses, f"request {completion.key} answered twice"
            self.responses[completion.key] = completion.response
        for key in result.dropped:
            assert key not in self.responses, f"request {key} dropped after it was answered"
            self.dropped.add(key)
        return result

    def _submit(self, op: Any, request: Any) -> Call:
        key = next(self._keys)
        self._collect(op(request, key, self.now_ms))
        return Call(self, key)

    def _existing(self, group_id: str, member_id: str) -> ClassicGroupMember | None:
        group = classic_groups(self.coordinator).get(group_id)
        return None if group is None else group.members.get(member_id)

    def mark(self) -> int:
        """A position in ``records``, for ``records_since``."""
        return len(self.records)

    def records_since(self, mark: int) -> list[Record]:
        return self.records[mark:]

    # -------------------------------------------------------------------------------------- time, state
    def sleep(self, ms: int) -> Result:
        """Advance the clock by ``ms`` and fire every timer due by then."""
        self.now_ms += ms
        return self._collect(self.coordinator.advance(self.now_ms))

    def sleep_until(self, t_ms: int) -> Result:
        assert t_ms >= self.now_ms
        return self.sleep(t_ms - self.now_ms)

    def group(self, group_id: str | None = None) -> ClassicGroup:
        return classic_groups(self.coordinator)[self._gid(group_id)]

    def has_group(self, group_id: str | None = None) -> bool:
        """A classic group has the id."""
        return self._gid(group_id) in classic_groups(self.coordinator)

    @property
    def state(self) -> ClassicGroupState:
        return self.group().state

    def member(self, member_id: str, group_id: str | None = None) -> ClassicGroupMember:
        return self.group(group_id).members[member_id]

    def reload(self, **overrides: Any) -> None:
        """Replace the coordinator by one rebuilt from every record so far (optionally with other settings),
        as a new coordinator taking over the partition would."""
        if overrides:
            self.config = dataclasses.replace(self.config, **overrides)
        self._reloads += 1  # each coordinator generation draws ids from its own range
        ids = CountingIds(1_000_000 * self._reloads + 1)
        self.coordinator = GroupCoordinator.from_records(self.records, self.now_ms, self.config, ids)

    # --------------------------------------------------------------------------------------- requests
    def join(
        self,
        member_id: str = "",
        *,
        group_id: str | None = None,
        instance_id: Any = UNSET,
        protocols: Protocols | None = None,
        protocol_type: str = "consumer",
        session_timeout_ms: int | None = None,
        rebalance_timeout_ms: int | None = None,
        version: int = 9,
        client_id: str = "client",
        client_host: str = CLIENT_HOST,
    ) -> Call:
        """JoinGroup. For an existing member, unspecified fields are copied from it (a plain re-join)."""
        gid = self._gid(group_id)
        existing = self._existing(gid, member_id) if member_id else None
        if instance_id is UNSET:
            instance_id = existing.group_instance_id if existing is not None else None
        if protocols is None:
            protocols = existing.protocols if existing is not None else DEFAULT_PROTOCOLS
        if session_timeout_ms is None:
            session_timeout_ms = existing.session_timeout_ms if existing is not None else SESSION_TIMEOUT_MS
        if rebalance_timeout_ms is None:
            rebalance_timeout_ms = existing.rebalance_timeout_ms if existing is not None else REBALANCE_TIMEOUT_MS
        request = JoinGroupRequest(
            group_id=gid,
            member_id=member_id,
            group_instance_id=instance_id,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
            version=version,
            client=ClientInfo(client_id=client_id, client_host=client_host),
        )
        return self._submit(self.coordinator.join_group, request)

    def new_member_id(self, **join_args: Any) -> str:
        """First round of a v4+ dynamic join: the coordinator answers MEMBER_ID_REQUIRED with an id."""
        response = self.join("", **join_args).response
        assert response.error is ErrorCode.MEMBER_ID_REQUIRED, response
        assert response.member_id
        return str(response.member_id)

    def join_new(self, *, instance_id: str | None = None, version: int = 9, **join_args: Any) -> Call:
        """A new member joins: dynamic v4+ members first fetch their member id (MEMBER_ID_REQUIRED)."""
        if instance_id is None and version >= 4:
            member_id = self.new_member_id(version=version, **join_args)
            return self.join(member_id, instance_id=None, version=version, **join_args)
        return self.join("", instance_id=instance_id, version=version, **join_args)

    def sync(
        self,
        member_id: str,
        generation: int | None = None,
        assignments: Mapping[str, bytes] | None = None,
        *,
        group_id: str | None = None,
        instance_id: Any = UNSET,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Call:
        gid = self._gid(group_id)
        existing = self._existing(gid, member_id)
        if instance_id is UNSET:
            instance_id = existing.group_instance_id if existing is not None else None
        if generation is None:
            generation = self.group(gid).generation
        request = SyncGroupRequest(
            group_id=gid,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=tuple((assignments or {}).items()),
        )
        return self._submit(self.coordinator.sync_group, request)

    def heartbeat(
        self,
        member_id: str,
        generation: int | None = None,
        *,
        group_id: str | None = None,
        instance_id: Any = UNSET,
    ) -> ErrorCode:
        gid = self._gid(group_id)
        existing = self._existing(gid, member_id)
        if instance_id is UNSET:
            instance_id = existing.group_instance_id if existing is not None else None
        if generation is None:
            generation = self.group(gid).generation
        request = HeartbeatRequest(
            group_id=gid, generation_id=generation, member_id=member_id, group_instance_id=instance_id
        )
        response = self._submit(self.coordinator.heartbeat, request).response
        assert isinstance(response, HeartbeatResponse)
        return response.error

    def leave(self, *members: str | LeavingMember, group_id: str | None = None) -> LeaveGroupResponse:
        """LeaveGroup (v3+ batch). A plain member id leaves with that member's own instance id."""
        gid = self._gid(group_id)
        leaving = []
        for m in members:
            if isinstance(m, str):
                existing = self._existing(gid, m)
                m = LeavingMember(member_id=m, group_instance_id=existing.group_instance_id if existing else None)
            leaving.append(m)
        response = self._submit(
            self.coordinator.leave_group, LeaveGroupRequest(group_id=gid, members=tuple(leaving))
        ).response
        assert isinstance(response, LeaveGroupResponse)
        return response

    def commit(
        self,
        member_id: str = "",
        generation: int = -1,
        offsets: Mapping[tuple[str, int], int | PartitionCommit] | None = None,
        *,
        group_id: str | None = None,
        instance_id: str | None = None,
        version: int = 9,
        retention_ms: int = -1,
    ) -> OffsetCommitResponse:
        """OffsetCommit of ``{(topic, partition): offset or PartitionCommit}`` (default ``topic-0`` at 42)."""
        if offsets is None:
            offsets = {("topic", 0): 42}
        by_topic: dict[str, list[PartitionCommit]] = {}
        for (topic, partition), value in offsets.items():
            commit = value if isinstance(value, PartitionCommit) else PartitionCommit(partition=partition, offset=value)
            by_topic.setdefault(topic, []).append(commit)
        request = OffsetCommitRequest(
            group_id=self._gid(group_id),
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_ms=retention_ms,
            topics=tuple((t, tuple(ps)) for t, ps in by_topic.items()),
            version=version,
        )
        response = self._submit(self.coordinator.offset_commit, request).response
        assert isinstance(response, OffsetCommitResponse)
        return response

    def fetch(
        self,
        topics: Mapping[str, Sequence[int]] | None = None,
        *,
        group_id: str | None = None,
        require_stable: bool = False,
    ) -> OffsetFetchResponse:
        request = OffsetFetchRequest(
            group_id=self._gid(group_id),
            topics=None if topics is None else tuple((t, tuple(ps)) for t, ps in topics.items()),
            require_stable=require_stable,
        )
        response = self._submit(self.coordinator.offset_fetch, request).response
        assert isinstance(response, OffsetFetchResponse)
        return response

    def txn_commit(
        self,
        producer_id: int,
        offsets: Mapping[tuple[str, int], int],
        *,
        member_id: str = "",
        generation: int = -1,
        group_id: str | None = None,
    ) -> OffsetCommitResponse:
        """TxnOffsetCommit of ``{(topic, partition): offset}`` inside ``producer_id``'s transaction."""
        by_topic: dict[str, list[PartitionCommit]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(PartitionCommit(partition=partition, offset=offset))
        request = TxnOffsetCommitRequest(
            transactional_id=f"txn-{producer_id}",
            group_id=self._gid(group_id),
            producer_id=producer_id,
            producer_epoch=0,
            generation_id=generation,
            member_id=member_id,
            topics=tuple((t, tuple(ps)) for t, ps in by_topic.items()),
        )
        response = self._submit(self.coordinator.txn_offset_commit, request).response
        assert isinstance(response, OffsetCommitResponse)
        return response

    def end_txn(self, producer_id: int, committed: bool) -> Result:
        """The transaction's marker reaches the group coordinator."""
        return self._collect(self.coordinator.complete_transaction(producer_id, committed, self.now_ms))

    def delete_offsets(
        self, partitions: Mapping[str, Sequence[int]], *, group_id: str | None = None
    ) -> OffsetDeleteResponse:
        request = OffsetDeleteRequest(
            group_id=self._gid(group_id), topics=tuple((t, tuple(ps)) for t, ps in partitions.items())
        )
        response = self._submit(self.coordinator.offset_delete, request).response
        assert isinstance(response, OffsetDeleteResponse)
        return response

    def describe(self, *group_ids: str, version: int = 5) -> tuple[DescribedGroup, ...]:
        key = next(self._keys)
        self._collect(self.coordinator.describe_groups(list(group_ids or [self.group_id]), key, self.now_ms, version))
        response = Call(self, key).response
        assert isinstance(response, tuple)
        return response

    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = ()) -> ListGroupsResponse:
        response = self._submit(
            self.coordinator.list_groups, ListGroupsRequest(states=tuple(states), types=tuple(types))
        ).response
        assert isinstance(response, ListGroupsResponse)
        return response

    def delete_groups(self, *group_ids: str) -> DeleteGroupsResponse:
        response = self._submit(self.coordinator.delete_groups, list(group_ids)).response
        assert isinstance(response, DeleteGroupsResponse)
        return response

    # ------------------------------------------------------------------------------------ conveniences
    def form_group(
        self,
        n: int,
        *,
        group_id: str | None = None,
        instance_ids: Sequence[str | None] | None = None,
        protocols: Sequence[Protocols] | None = None,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
        assignments: Mapping[str, bytes] | None = None,
    ) -> Formed:
        """A Stable group of ``n`` members (``client-0`` ... ``client-{n-1}``; member 0 leads), every
        member synced. With a zero initial delay the first member completes generation 1 alone and the
        others join in a second rebalance, so the generation is 1 for n=1 and 2 otherwise; with a delay
        the clock is advanced through it and the generation is 1."""
        gid = self._gid(group_id)
        calls = []
        for i in range(n):
            call = self.join_new(
                group_id=gid,
                instance_id=instance_ids[i] if instance_ids else None,
                protocols=protocols[i] if protocols else member_protocols(i),
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                client_id=f"client-{i}",
            )
            calls.append(call)
        group = self.group(gid)
        for _ in range(100):
            if group.state is not ClassicGroupState.PREPARING_REBALANCE:
                break
            answered = [m.member_id for m in group.members.values() if m.awaiting_join_key is None]
            for member_id in answered:  # answered in an earlier generation: rejoin
                calls.append(self.join(member_id, group_id=gid))
            if not answered:  # everybody waits for the (initial-delay) join timer
                deadline = self.coordinator.timers.deadline(join_phase_key(gid))
                assert deadline is not None
                self.sleep_until(deadline)
        assert group.state is ClassicGroupState.COMPLETING_REBALANCE, group.state
        assert len(group.members) == n
        members = list(group.members)
        assert group.leader_id is not None
        if assignments is None:
            assignments = {m: f"assignment-{i}".encode() for i, m in enumerate(members)}
        generation = group.generation
        join_responses = {}
        for call in calls:
            if call.done and call.response.generation_id == generation:
                join_responses[call.response.member_id] = call.response
        assert set(join_responses) == set(members)
        self.sync_all(group_id=gid, assignments=assignments)
        assert group.state is ClassicGroupState.STABLE, group.state
        return Formed(
            members=members,
            leader=group.leader_id,
            generation=generation,
            assignments=dict(assignments),
            join_responses=join_responses,
        )

    def rejoin_all(self, *, group_id: str | None = None) -> dict[str, JoinGroupResponse]:
        """Every member re-sends its JoinGroup unchanged, leader first (which starts the rebalance in a
        Stable group); returns the responses of the completed join phase."""
        group = self.group(group_id)
        assert group.state in (ClassicGroupState.STABLE, ClassicGroupState.PREPARING_REBALANCE), group.state
        leader = group.leader_id
        order = [m for m in group.members if m == leader] + [m for m in group.members if m != leader]
        calls = {m: self.join(m, group_id=group_id) for m in order}
        return {m: call.response for m, call in calls.items()}

    def sync_all(
        self,
        *,
        group_id: str | None = None,
        generation: int | None = None,
        assignments: Mapping[str, bytes] | None = None,
    ) -> dict[str, SyncGroupResponse]:
        """Followers send SyncGroup, then the leader with ``assignments`` (default ``assignment-<i>``)."""
        group = self.group(group_id)
        if generation is None:
            generation = group.generation
        if assignments is None:
            assignments = {m: f"assignment-{i}".encode() for i, m in enumerate(group.members)}
        leader = group.leader_id
        assert leader is not None
        calls = {m: self.sync(m, generation, group_id=group_id) for m in group.members if m != leader}
        calls[leader] = self.sync(leader, generation, assignments, group_id=group_id)
        return {m: call.response for m, call in calls.items()}
