"""The coordinator's side of the simulated network: hands each arriving request to the real
``GroupCoordinator`` under a fresh request key, fires its timers, routes the completed responses back to
the member that sent them, and observes the group after every operation (group state and generation
changes, the stored assignment of each Stable generation, the outcome of every offset commit) for the
event log and the safety checker.

Reading ``coordinator.groups`` here is observation only (the sim is a shell and may look inside the core);
nothing is changed except through the coordinator's operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regroup.client import OutgoingRequest
from regroup.client.types import TopicPartition, api_name
from regroup.coordinator.classic.group import GroupState
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from regroup.protocol.offsets import OffsetCommitRequest, OffsetCommitResponse
from regroup.sim.checks import SafetyChecker
from regroup.sim.describe import assigned_partitions, response_detail
from regroup.sim.eventlog import EventLog


@dataclass(frozen=True, slots=True)
class Routed:
    """A response on its way back to the member (process incarnation) that sent the request."""

    member: str
    incarnation: int
    request_id: int
    api: str
    response: Any


class CoordinatorEndpoint:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        group_id: str,
        log: EventLog,
        checker: SafetyChecker,
        names_by_id: dict[str, str],
    ) -> None:
        self.coordinator = coordinator
        self.group_id = group_id
        self.log = log
        self.checker = checker
        self.names_by_id = names_by_id
        self._keys: dict[int, tuple[str, int, int, str]] = {}
        self._next_key = 1
        self._group_view: tuple[str, int] = ("", -1)

    def handle(self, member: str, incarnation: int, out: OutgoingRequest, now: int) -> list[Routed]:
        """One request arrives at ``now``: run it and return the responses it completed."""
        key = self._next_key
        self._next_key += 1
        self._keys[key] = (member, incarnation, out.request_id, out.api)
        self.log.emit(now, "request_received", member=member, api=out.api, request_id=out.request_id)
        req, c = out.request, self.coordinator
        if isinstance(req, JoinGroupRequest):
            result = c.join_group(req, key, now)
        elif isinstance(req, SyncGroupRequest):
            result = c.sync_group(req, key, now)
        elif isinstance(req, HeartbeatRequest):
            result = c.heartbeat(req, key, now)
        elif isinstance(req, LeaveGroupRequest):
            result = c.leave_group(req, key, now)
        else:
            assert isinstance(req, OffsetCommitRequest)
            fenced = self._fenced_reason(req)
            result = c.offset_commit(req, key, now)
            self._commit_outcome(now, member, req, result.response_for(key), fenced)
        return self._route(result, now)

    def advance(self, now: int) -> list[Routed]:
        """Fire the coordinator's due timers (session expiry, join and sync phase timeouts)."""
        return self._route(self.coordinator.advance(now), now)

    def next_deadline(self) -> int | None:
        return self.coordinator.next_deadline()

    # ------------------------------------------------------------------------------------- internals
    def _route(self, result: Result, now: int) -> list[Routed]:
        self._observe_group(now)
        routed: list[Routed] = []
        for completion in result.completions:
            assert isinstance(completion.key, int)
            target = self._keys.pop(completion.key, None)
            if target is None:
                continue
            member, incarnation, request_id, api = target
            response = completion.response
            error = getattr(response, "error", None)
            self.log.emit(
                now,
                "response_sent",
                member=member,
                api=api,
                request_id=request_id,
                generation=getattr(response, "generation_id", None),
                member_id=getattr(response, "member_id", None) or None,
                error=error.name if error is not None else None,
                detail=response_detail(response),
            )
            routed.append(Routed(member, incarnation, request_id, api_name(response), response))
        return routed

    def _fenced_reason(self, req: OffsetCommitRequest) -> str | None:
        """Why the committing member is fenced right now (None when it is a member of the current
        generation): computed from the group before the coordinator handles the commit."""
        group = self.coordinator.groups.get(req.group_id)
        if group is None or req.member_id not in group.members:
            return f"member id {req.member_id!r} is not in the group"
        if req.generation_id != group.generation:
            return f"generation {req.generation_id} is not the group's {group.generation}"
        return None

    def _commit_outcome(
        self, now: int, member: str, req: OffsetCommitRequest, resp: object, fenced: str | None
    ) -> None:
        if not isinstance(resp, OffsetCommitResponse):
            return
        offsets = {(t, p.partition): p.offset for t, parts in req.topics for p in parts}
        accepted: list[TopicPartition] = []
        for topic, results in resp.topics:
            for partition, code in results:
                self.log.emit(
                    now,
                    "offset_commit",
                    member=member,
                    member_id=req.member_id,
                    generation=req.generation_id,
                    topic=topic,
                    partition=partition,
                    value=offsets.get((topic, partition)),
                    error=code.name,
                )
                if code is ErrorCode.NONE:
                    accepted.append((topic, partition))
        self.checker.commit(now, member, fenced, accepted)

    def _observe_group(self, now: int) -> None:
        group = self.coordinator.groups.get(self.group_id)
        view = ("Dead", self._group_view[1]) if group is None else (group.state.value, group.generation)
        if view == self._group_view:
            return
        self._group_view = view
        self.checker.group_generation(now, view[1])
        detail = None
        if group is not None and group.protocol_name:
            leader = self.names_by_id.get(group.leader_id or "", group.leader_id)
            detail = f"protocol={group.protocol_name} leader={leader}"
        self.log.emit(now, "group_state", state=view[0], generation=view[1], detail=detail)
        if group is None or group.state is not GroupState.STABLE:
            return
        for member_id, member in group.members.items():
            name = self.names_by_id.get(member_id, member_id)
            for tp in sorted(assigned_partitions(member.assignment)):
                self.log.emit(
                    now,
                    "group_assignment",
                    member=name,
                    member_id=member_id,
                    generation=group.generation,
                    topic=tp[0],
                    partition=tp[1],
                )
