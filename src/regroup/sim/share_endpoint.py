"""The coordinator's side of the share members' requests, as ``regroup serve`` answers them, against the
coordinator facade's share operations and the simulated log (``share_log``):

* ShareGroupHeartbeat goes to the coordinator; partitions it assigned that have no share-partition state yet
  start where ``share.auto_offset_reset`` says (``earliest``: offset 0, ``latest``: the log end now) at the
  same instant, as the server's handler starts them before its answer leaves;
* ShareFetch applies its acknowledgements, then acquires up to MaxRecords records from the partitions it names
  (for each, from the first record the group would hand out up to the log end); when there is nothing to
  acquire it waits, up to its MaxWaitMs, and looks again after every later operation (an acknowledgement or a
  lapsed lock may have released records) and whenever a record is produced;
* ShareAcknowledge applies its acknowledgements; closing the share session then releases everything the member
  still holds (and answers its waiting fetch, empty);
* a connection dropping (``disconnect``: a crashed process) releases what the member held, and its waiting
  fetch is never answered.

Every outcome goes to the ledger (``share_ledger``: the record-by-record event rows and the checks). The share
group's changes (state, epochs, members joining and leaving) are read from the core's events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from regroup.client import OutgoingRequest
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import GroupStateChanged, MemberJoined, MemberLeft
from regroup.coordinator.result import Result
from regroup.coordinator.share.partition import AckBatch
from regroup.model.errors import ErrorCode
from regroup.protocol.share import ShareAcquisition, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from regroup.protocol.share_fetch import (
    AckRanges,
    AcquiredRuns,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    SharePartitionId,
)
from regroup.sim.eventlog import EventLog
from regroup.sim.queue import ToMember
from regroup.sim.scenario import ShareSpec
from regroup.sim.share_ledger import ShareLedger
from regroup.sim.share_log import ShareLog

if TYPE_CHECKING:
    from regroup.sim.endpoint import CoordinatorEndpoint

ShareRequest = ShareGroupHeartbeatRequest | ShareFetchRequest | ShareAcknowledgeRequest
Acks = tuple[tuple[SharePartitionId, AckRanges], ...]


@dataclass(slots=True)
class ParkedFetch:
    """A ShareFetch that found nothing, waiting for records until ``deadline``."""

    key: int
    member_id: str
    request: ShareFetchRequest
    deadline: int
    acknowledge_errors: tuple[tuple[SharePartitionId, ErrorCode], ...]


class ShareEndpoint:
    def __init__(self, host: CoordinatorEndpoint, spec: ShareSpec, group_id: str, topics: Mapping[str, int]) -> None:
        self.host = host
        self.coordinator: GroupCoordinator = host.coordinator
        self.log: EventLog = host.log
        self.spec = spec
        self.group_id = group_id
        self.records = ShareLog(spec, topics)
        self.ledger = ShareLedger(
            host.log,
            host.checker,
            self.coordinator.config.share_group_delivery_count_limit,
            lambda member_id: host.names_by_id.get(member_id, member_id),
        )
        self.parked: list[ParkedFetch] = []
        self._state: tuple[str, int, int] | None = None
        self._now = 0

    # ------------------------------------------------------------------------------------- requests
    def handle(self, key: int, out: OutgoingRequest, now: int) -> list[ToMember]:
        """One share request arrives at ``now`` (``key``: its request key, registered with the host)."""
        routed = self.tick(now)
        req = out.request
        if isinstance(req, ShareGroupHeartbeatRequest):
            routed += self._heartbeat(req, key, now)
        elif isinstance(req, ShareFetchRequest):
            routed += self._fetch(req, key, now)
        else:
            assert isinstance(req, ShareAcknowledgeRequest)
            routed += self._acknowledge_alone(req, key, now)
        return routed + self._retry(now)

    def _heartbeat(self, req: ShareGroupHeartbeatRequest, key: int, now: int) -> list[ToMember]:
        result = self.coordinator.share_group_heartbeat(req, key, now)
        resp = result.response_for(key)
        routed = self.host.route(result, now)
        if isinstance(resp, ShareGroupHeartbeatResponse) and resp.error is ErrorCode.NONE and resp.uninitialized:
            routed += self._initialize([(t, p) for t, ps in resp.uninitialized for p in ps], now)
        return routed

    def _initialize(self, partitions: list[SharePartitionId], now: int) -> list[ToMember]:
        """Start share partitions without state where ``auto_offset_reset`` says."""
        names = self.host.topic_names()
        starts: dict[SharePartitionId, int] = {}
        for tp in partitions:
            name = names.get(tp[0])
            if name is not None:
                starts[tp] = 0 if self.spec.auto_offset_reset == "earliest" else self.records.end(name, tp[1], now)
        if not starts:
            return []
        routed = self.host.route(self.coordinator.initialize_share_partitions(self.group_id, starts, None, now), now)
        for tp in sorted(starts):
            self.ledger.started(now, (names[tp[0]], tp[1]), starts[tp], self.spec.auto_offset_reset)
        return routed

    def _fetch(self, req: ShareFetchRequest, key: int, now: int) -> list[ToMember]:
        routed, errors = self._apply_acks(req.member_id, req.acknowledgements, now)
        missing = self.coordinator.share_uninitialized(self.group_id, req.partitions)
        if missing:  # (a fetch ahead of the heartbeat that assigned them)
            routed += self._initialize(missing, now)
        parked = ParkedFetch(key, req.member_id, req, now + req.max_wait_ms, errors)
        more, answered = self._attempt(parked, now)
        if not answered:
            self.parked.append(parked)
        return routed + more

    def _acknowledge_alone(self, req: ShareAcknowledgeRequest, key: int, now: int) -> list[ToMember]:
        routed, errors = self._apply_acks(req.member_id, req.acknowledgements, now)
        if req.close_session:
            routed += self._answer_parked(req.member_id, now)
            routed += self._release(req.member_id, now, "close")
        done = self.host.complete(key, ShareAcknowledgeResponse(acknowledge_errors=errors), now)
        return routed + ([done] if done is not None else [])

    def disconnect(self, member_id: str, now: int) -> list[ToMember]:
        """The member's connection dropped: its waiting fetch is gone and what it held goes back."""
        routed = self.tick(now)
        for parked in [p for p in self.parked if p.member_id == member_id]:
            self.parked.remove(parked)
            self.host.forget(parked.key)
        routed += self._release(member_id, now, "disconnect")
        return routed + self._retry(now)

    def _release(self, member_id: str, now: int, why: str) -> list[ToMember]:
        routed = self.host.route(self.coordinator.share_release_member(self.group_id, member_id, now), now)
        released = self.ledger.released_member(now, member_id, why)
        name = self.host.names_by_id.get(member_id, member_id)
        self.log.emit(now, "share_member", member=name, member_id=member_id, state=why, value=released)
        return routed

    # ---------------------------------------------------------------------------------- internals
    def _apply_acks(
        self, member_id: str, acks: Acks, now: int
    ) -> tuple[list[ToMember], tuple[tuple[SharePartitionId, ErrorCode], ...]]:
        """Acknowledge, and tell the ledger each partition's outcome."""
        if not acks:
            return [], ()
        batches = {
            tp: tuple(AckBatch(first, last, (ack_type,)) for first, last, ack_type in ranges) for tp, ranges in acks
        }
        key = self.host.new_key()
        result = self.coordinator.share_acknowledge(self.group_id, member_id, batches, key, now)
        outcome: Any = result.response_for(key)
        routed = self.host.route(result, now)
        names = self.host.topic_names()
        errors: list[tuple[SharePartitionId, ErrorCode]] = []
        for tp, ranges in acks:
            code = _error_of(outcome.get(tp, ErrorCode.NONE) if isinstance(outcome, dict) else outcome)
            errors.append((tp, code))
            name = names.get(tp[0])
            if name is not None:
                self.ledger.acknowledged(now, member_id, (name, tp[1]), ranges, code.name)
        return routed, tuple(errors)

    def _attempt(self, parked: ParkedFetch, now: int) -> tuple[list[ToMember], bool]:
        """Acquire for a fetch: what to route, and whether the fetch was answered (False: it found nothing and
        may wait longer)."""
        req = parked.request
        names = self.host.topic_names()
        wanted: dict[SharePartitionId, tuple[int, int]] = {}
        ends: dict[SharePartitionId, int] = {}
        for tp in req.partitions:
            name = names.get(tp[0])
            if name is None:
                continue
            end = self.records.end(name, tp[1], now)
            first = self.coordinator.share_next_available(self.group_id, tp, end)
            if first is not None:
                wanted[tp] = (first, end)
                ends[tp] = end
        routed: list[ToMember] = []
        acquired: tuple[tuple[SharePartitionId, AcquiredRuns], ...] = ()
        lock_ms = 0
        error = ErrorCode.NONE
        if wanted:
            key = self.host.new_key()
            result = self.coordinator.share_acquire(self.group_id, parked.member_id, wanted, req.max_records, key, now)
            outcome = result.response_for(key)
            routed = self.host.route(result, now)
            if isinstance(outcome, ShareAcquisition):
                lock_ms = outcome.lock_ms
                acquired = tuple((tp, runs) for tp, runs in outcome.acquired.items() if runs)
                for tp, runs in acquired:
                    topic = (names[tp[0]], tp[1])
                    self.ledger.acquired(now, parked.member_id, topic, runs, now + lock_ms, ends[tp])
            else:
                error = _error_of(outcome)
        if not acquired and error is ErrorCode.NONE and now < parked.deadline:
            return routed, False
        response = ShareFetchResponse(
            error=error, acquired=acquired, lock_ms=lock_ms, acknowledge_errors=parked.acknowledge_errors
        )
        done = self.host.complete(parked.key, response, now)
        return routed + ([done] if done is not None else []), True

    def _retry(self, now: int) -> list[ToMember]:
        """Look again for every waiting fetch (in the order they arrived): records may have come back or been
        produced, or its wait is over."""
        routed: list[ToMember] = []
        waiting: list[ParkedFetch] = []
        for parked in self.parked:
            more, answered = self._attempt(parked, now)
            routed += more
            if not answered:
                waiting.append(parked)
        self.parked = waiting
        return routed

    def _answer_parked(self, member_id: str, now: int) -> list[ToMember]:
        """The member's waiting fetch is answered at once, empty (its share session is closing)."""
        routed: list[ToMember] = []
        for parked in [p for p in self.parked if p.member_id == member_id]:
            self.parked.remove(parked)
            response = ShareFetchResponse(acknowledge_errors=parked.acknowledge_errors)
            done = self.host.complete(parked.key, response, now)
            if done is not None:
                routed.append(done)
        return routed

    # -------------------------------------------------------------------------------------- time
    def tick(self, now: int) -> list[ToMember]:
        """Before anything at ``now``: the coordinator's due timers fire (lapsed locks among them) and the
        ledger's locks lapse with them."""
        self._now = now
        routed = self.host.route(self.coordinator.advance(now), now)
        self.ledger.expire(now)
        return routed

    def advance(self, now: int) -> list[ToMember]:
        """A wake-up at ``now``: due timers, then every waiting fetch looks again."""
        return self.tick(now) + self._retry(now)

    def next_deadline(self) -> int | None:
        """When a waiting fetch's wait ends or a record it could take is produced."""
        candidates: list[int] = []
        names = self.host.topic_names()
        for parked in self.parked:
            candidates.append(parked.deadline)
            for topic_id, partition in parked.request.partitions:
                name = names.get(topic_id)
                if name is not None:
                    at = self.records.next_record_ms(name, partition, self._now)
                    if at is not None:
                        candidates.append(at)
        return min(candidates) if candidates else None

    def topics_changed(self, topics: Mapping[str, int], now: int) -> None:
        self.records.grow(topics, now)

    # ---------------------------------------------------------------------------------- observing
    def observe(self, now: int, result: Result) -> None:
        """The share group's state and epochs, and its members joining and leaving, as the core's events say."""
        for event in result.events:
            if isinstance(event, GroupStateChanged):
                if event.group_type != "share" or event.group_id != self.group_id:
                    continue
                epoch = event.assignment_epoch or 0
                view = (event.state, event.generation, epoch)
                if view == self._state:
                    continue
                self._state = view
                detail = f"group={self.group_id} assignment_epoch={epoch}"
                self.log.emit(
                    now, "share_group_state", state=event.state, generation=event.generation, value=event.members,
                    detail=detail,
                )  # fmt: skip
            elif isinstance(event, MemberJoined | MemberLeft):
                if event.group_type != "share" or event.group_id != self.group_id:
                    continue
                joined = isinstance(event, MemberJoined)
                self.log.emit(
                    now,
                    "share_member",
                    member=self.host.names_by_id.get(event.member_id, event.member_id),
                    member_id=event.member_id,
                    generation=event.generation,
                    state="joined" if joined else "left",
                    detail=None if isinstance(event, MemberJoined) else event.reason,
                )

    # ------------------------------------------------------------------------------------- the end
    def finish(self, now: int, subscribed: Mapping[str, int]) -> None:
        """The end of the run: each share partition's log end, and, when the run is to end quietly, whether every
        record from each partition's start was accepted or archived."""
        for topic in sorted(subscribed):
            for partition in range(subscribed[topic]):
                tp = (topic, partition)
                end = self.records.end(topic, partition, now)
                started = tp in self.ledger.partitions
                if started:
                    undone, first = self.ledger.undone(tp, end)
                else:
                    undone = end if self.spec.auto_offset_reset == "earliest" else 0
                    first = 0 if undone else None
                self.log.emit(
                    now, "share_partition", topic=topic, partition=partition, state="final", value=end,
                    detail=f"undone={undone}" + ("" if started else " never started"),
                )  # fmt: skip
                if self.spec.expect_drained and undone:
                    self.host.checker.violation(
                        now,
                        ("share-undone", tp),
                        f"{undone} records of {topic}-{partition} neither acknowledged nor archived at the end "
                        f"(the first: offset {first})",
                    )


def _error_of(value: object) -> ErrorCode:
    """A facade answer's error code (a ``ShareError`` or an ``ErrorCode``; anything else: an unknown error)."""
    return ErrorCode(int(value)) if isinstance(value, int) else ErrorCode.UNKNOWN_SERVER_ERROR
