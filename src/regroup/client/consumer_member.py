"""``ConsumerClientMember``: a sans-IO consumer group member for the KIP-848 protocol (ConsumerGroupHeartbeat and
OffsetCommit), driven like ``ClassicClientMember``::

    for out in member.poll(now_ms): send(out.request)           # requests due now
    member.on_response(out.request_id, response, now_ms)         # when an answer arrives
    wake up again at member.next_deadline()

Nothing here reads a clock, sleeps or touches a socket. Behaviour follows Kafka's new consumer (KIP-848;
``ConsumerMembershipManager``, ``ConsumerHeartbeatRequestManager``):

* join with epoch 0 and a full request (rebalance timeout, subscription, assignor, empty owned set);
  heartbeat every interval the coordinator returns, one heartbeat in flight at a time, sending only the
  fields that changed since the last request (a full request again after any error or timeout);
* a response with an assignment is a new target: after ``callback_delay_ms`` (the application's next
  poll) the member commits (auto-commit) and revokes what is no longer assigned (``onPartitionsRevoked``),
  adds the new partitions (``onPartitionsAssigned``) and reports its owned set in a heartbeat sent at once
  (the acknowledgement) — for every new target, even one that leaves the owned set as it was, as Kafka's
  client does (its local assignment epoch moves);
* FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: ``onPartitionsLost``, rejoin with epoch 0 keeping the member
  id; fatal errors (INVALID_REQUEST, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, ...) stop the member;
  coordinator errors are retried after the backoff;
* leave: commit, ``onPartitionsRevoked``, then a heartbeat with epoch -1 (static members: -2).

The application around the member (``client.app``): the callbacks of a new assignment, and the
acknowledgement that follows them, wait for the application's next poll (and ``callback_delay_ms`` more); a
revocation callback that commits waits for the commit's answer, and user work in a callback takes its time.
A poll later than ``max.poll.interval.ms`` after the previous one makes the member leave the group (a
heartbeat with epoch -1) and rejoin from its next poll.

Processing model and session lease as in ``classic_member``: owned partitions are being processed at one
record per millisecond, and a member only keeps processing while it is sure the coordinator cannot have
fenced it. A NONE answer to a heartbeat sent at time s, after which the member has no revocation pending,
proves the coordinator held the member with its session timer restarted at or after s and no revocation
timer running, so it cannot be fenced before s + min(session timeout, rebalance timeout) (a revocation
timer armed later runs for the rebalance timeout). Past that without new proof the member declares its
partitions lost and rejoins with epoch 0.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from typing import Final

from regroup.client.app import INSTANT_APP, AppModel, AppThread, Draws
from regroup.client.config import ConsumerConfig
from regroup.client.embedded import by_topic
from regroup.client.ownership import OwnedPartitions
from regroup.client.types import (
    CallbackEvent,
    CallbackKind,
    ClientStateError,
    Inflight,
    MemberNote,
    OutgoingRequest,
    Request,
    TopicPartition,
    api_name,
)
from regroup.model.errors import ErrorCode
from regroup.protocol.consumer import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from regroup.protocol.offsets import OffsetCommitRequest, OffsetCommitResponse, PartitionCommit

E = ErrorCode

#: Errors that end the consumer (``ConsumerHeartbeatRequestManager`` treats them as fatal).
FATAL: Final = frozenset(
    {
        E.INVALID_REQUEST,
        E.GROUP_MAX_SIZE_REACHED,
        E.UNSUPPORTED_ASSIGNOR,
        E.UNSUPPORTED_VERSION,
        E.GROUP_AUTHORIZATION_FAILED,
        E.GROUP_ID_NOT_FOUND,
        E.FENCED_INSTANCE_ID,
        E.UNRELEASED_INSTANCE_ID,
        E.INVALID_REGULAR_EXPRESSION,
    }
)
FENCED: Final = frozenset({E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID})


class ConsumerClientState(enum.Enum):
    """Where a KIP-848 member is (a condensed form of Kafka's client-side ``MemberState``)."""

    UNJOINED = "Unjoined"  # no join in flight (before the first, after being fenced, or backing off)
    JOINING = "Joining"  # the epoch-0 heartbeat is in flight
    RECONCILING = "Reconciling"  # applying an assignment, or its acknowledgement is not answered yet
    STABLE = "Stable"  # owns exactly its assignment and the coordinator knows it
    LEFT = "Left"
    CRASHED = "Crashed"
    FAILED = "Failed"

    @property
    def running(self) -> bool:
        return self not in (ConsumerClientState.LEFT, ConsumerClientState.CRASHED, ConsumerClientState.FAILED)


_ENDS: Final = (ConsumerClientState.LEFT, ConsumerClientState.CRASHED, ConsumerClientState.FAILED)
#: the KIP-848 member's transitions: where each state may go (the stopped states go nowhere; the running ones
#: may also close, crash or fail)
CONSUMER_CLIENT_TRANSITIONS: Final[dict[ConsumerClientState, frozenset[ConsumerClientState]]] = {
    ConsumerClientState.UNJOINED: frozenset((ConsumerClientState.JOINING, *_ENDS)),  # the epoch-0 heartbeat
    ConsumerClientState.JOINING: frozenset(
        (ConsumerClientState.RECONCILING, ConsumerClientState.UNJOINED, *_ENDS)  # joined / refused, backing off
    ),
    ConsumerClientState.RECONCILING: frozenset(
        (ConsumerClientState.RECONCILING, ConsumerClientState.STABLE, ConsumerClientState.UNJOINED, *_ENDS)
    ),
    ConsumerClientState.STABLE: frozenset(
        (ConsumerClientState.STABLE, ConsumerClientState.RECONCILING, ConsumerClientState.UNJOINED, *_ENDS)
    ),
    ConsumerClientState.LEFT: frozenset(),
    ConsumerClientState.CRASHED: frozenset(),
    ConsumerClientState.FAILED: frozenset(),
}


class ConsumerClientMember(OwnedPartitions):
    """One consumer of a KIP-848 consumer group. See the module docstring for the driving loop.

    ``topic_ids``: topic name -> topic id for the topics the client knows (its metadata); assignments name
    topics by id and partitions of unknown ids are ignored until ``update_metadata`` makes them known.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        topic_ids: Mapping[str, uuid.UUID],
        now_ms: int = 0,
        app: AppModel = INSTANT_APP,
        draws: Draws | None = None,
    ) -> None:
        self.config = config
        self.app = AppThread(app, draws)
        #: callbacks of the assignment in progress: 0 none, 1 revocation running, 2 onPartitionsAssigned running
        self.reconcile_step = 0
        self.reconcile_added: frozenset[TopicPartition] = frozenset()
        self._checks_poll_interval = self.app.loop.can_outlast(config.rebalance_timeout_ms)
        self.topic_ids = dict(topic_ids)
        self.state = ConsumerClientState.UNJOINED
        self.member_id = config.member_id
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval_ms = config.heartbeat_interval_ms
        self.owned: frozenset[TopicPartition] = frozenset()
        #: the last assignment the coordinator sent, by topic id (None: none since joining)
        self.assignment_ids: dict[uuid.UUID, frozenset[int]] | None = None
        self.reconcile_at_ms: int | None = None  # when the pending assignment's callbacks run
        self.ack_needed = False  # the owned set changed and must be reported at once
        self.full_needed = True
        self.reported: frozenset[TopicPartition] | None = None  # owned set the coordinator last heard of
        self.sent_topics: tuple[str, ...] | None = None
        self.callbacks: list[CallbackEvent] = []
        self.notes: list[MemberNote] = []
        self.inflight: dict[int, Inflight] = {}
        self.close_commit_id: int | None = None
        self.close_leave_at_ms: int | None = None
        self.close_leave_id: int | None = None
        self.resolved_topic_ids: set[uuid.UUID] = set()  # librdkafka: topic ids its metadata knows
        self.resolved_at_ms = 0  # ... and when the latest lookup is answered
        self.heartbeat_id: int | None = None
        self.rejoin_at_ms = now_ms + self.app.startup_ms()
        self.next_heartbeat_ms: int | None = None
        self.next_commit_ms: int | None = None
        self.lease_ms: int | None = None
        self._pending_report: frozenset[TopicPartition] | None = None  # what the heartbeat in flight reports
        self._next_request_id = 1
        self._outbox: list[OutgoingRequest] = []
        self._now = now_ms
        self._assignment_names: (
            tuple[dict[uuid.UUID, frozenset[int]] | None, dict[str, uuid.UUID], frozenset[TopicPartition] | None] | None
        ) = None

    # ------------------------------------------------------------------------------------- observing
    @property
    def generation(self) -> int:
        """The member epoch (the name the simulator's log uses for both protocols)."""
        return self.member_epoch

    @property
    def assignment(self) -> frozenset[TopicPartition] | None:
        """The last assignment received, as (topic name, partition) pairs (unknown topic ids left out).
        Cached while neither the assignment nor the topic metadata is replaced (both are replaced, never
        changed in place)."""
        ids, known = self.assignment_ids, self.topic_ids
        cached = self._assignment_names
        if cached is not None and cached[0] is ids and cached[1] is known:
            return cached[2]
        value = None
        if ids is not None:
            names = {v: k for k, v in known.items()}
            value = frozenset((names[t], p) for t, ps in ids.items() if t in names for p in ps)
        self._assignment_names = (ids, known, value)
        return value

    def revocation_pending(self) -> bool:
        target = self.assignment
        return target is not None and bool(self.owned - target)

    def settled(self) -> bool:
        """Owns exactly its last assignment, the coordinator knows it, and nothing is pending."""
        return (
            self.state is ConsumerClientState.STABLE
            and self.reconcile_at_ms is None
            and self.reconcile_step == 0
            and not self.ack_needed
            and self.assignment == self.owned
            and self.reported == self.owned
        )

    def owned_by_topic(self) -> dict[str, tuple[int, ...]]:
        return by_topic(self.owned)

    def move(self, to: ConsumerClientState) -> None:
        """The member's state changes only here, as ``CONSUMER_CLIENT_TRANSITIONS`` allows."""
        if to not in CONSUMER_CLIENT_TRANSITIONS[self.state]:
            raise ClientStateError(f"{self.config.client_id}: {self.state.value} -> {to.value} is not a transition")
        self.state = to

    # ---------------------------------------------------------------------------------------- driving
    def poll(self, now_ms: int) -> list[OutgoingRequest]:
        """Handle what is due at ``now_ms`` (timeouts, lease, callbacks, heartbeat, auto-commit) and return
        the requests to send now, in order."""
        self._now = max(self._now, now_ms)
        if self.state.running:
            self._expire_inflight(now_ms)
            self._check_lease(now_ms)
            if self._checks_poll_interval:
                self._check_poll_interval(now_ms)
            self._run_app(now_ms)
            if self.state is ConsumerClientState.UNJOINED and self.heartbeat_id is None and now_ms >= self.rejoin_at_ms:
                self._send_heartbeat(now_ms, joining=True)
            elif self._heartbeat_due(now_ms):
                self._send_heartbeat(now_ms, joining=False)
            if self._committing() and self.next_commit_ms is not None and now_ms >= self.next_commit_ms:
                self.commit(self.owned, now_ms)
                self.next_commit_ms = now_ms + self.config.auto_commit_interval_ms
        elif self.closing:
            self.close_step(now_ms)
        out, self._outbox = self._outbox, []
        return out

    def next_deadline(self) -> int | None:
        """The earliest time ``poll`` has something to do, or None."""
        if self._outbox:
            return self._now
        if not self.state.running:
            return self.close_deadline()
        candidates = [inf.deadline_ms for inf in self.inflight.values()]
        if self.owned and self.lease_ms is not None:
            candidates.append(self.lease_ms)
        if self.reconcile_step or self.reconcile_at_ms is not None:
            ready = self.app.next_ready(self._now)
            if ready is not None:
                candidates.append(ready if self.reconcile_at_ms is None else max(ready, self.reconcile_at_ms))
        elif self.app.in_poll:
            ready = self.app.next_ready(self._now)  # (the poll returns once its callback is done)
            if ready is not None:
                candidates.append(ready)
        if self._checks_poll_interval and self.app.loop.running:
            candidates.append(self.app.loop.last_poll + self.config.rebalance_timeout_ms)
        if self.heartbeat_id is None:
            if self.state is ConsumerClientState.UNJOINED:
                candidates.append(self.rejoin_at_ms)
            elif self._in_group():
                if self.ack_needed:
                    candidates.append(self._now)
                elif self.next_heartbeat_ms is not None:
                    candidates.append(self.next_heartbeat_ms)
        if self._committing() and self.next_commit_ms is not None:
            candidates.append(self.next_commit_ms)
        return min(candidates) if candidates else None

    def on_response(self, request_id: int, response: object, now_ms: int) -> None:
        """Feed the coordinator's answer to request ``request_id``; answers nobody waits for are ignored."""
        self._now = max(self._now, now_ms)
        inflight = self.inflight.pop(request_id, None)
        if inflight is None:
            return
        self.app.answered(request_id, now_ms)
        if isinstance(response, OffsetCommitResponse):
            self._on_commit(inflight, response, now_ms)
        elif isinstance(response, ConsumerGroupHeartbeatResponse) and request_id == self.heartbeat_id:
            self.heartbeat_id = None
            if self.state.running:
                self._on_heartbeat(inflight, response, now_ms)

    def leave(self, now_ms: int) -> None:
        """Close the consumer: revoke what it owns, committing it synchronously when the application or
        auto-commit does, then a heartbeat with epoch -1 (-2 static) once that commit is answered and the
        callback's work is done."""
        if not self.state.running:
            return
        self._now = max(self._now, now_ms)
        commit_id: int | None = None
        if self.owned:
            if self.member_epoch > 0:
                commit_id = self.revoke_on_close(self.owned, now_ms)
            else:
                self.lose(now_ms, "consumer closed while not in the group")
        leaves = bool(self.member_id) and (self.member_epoch > 0 or self.state is ConsumerClientState.JOINING)
        self.move(ConsumerClientState.LEFT)
        self.reconcile_at_ms = None
        self._drop_app_work()
        self.heartbeat_id = None
        self.inflight = {
            k: v
            for k, v in self.inflight.items()
            if v.api == "OffsetCommit"
            or (isinstance(v.request, ConsumerGroupHeartbeatRequest) and v.request.member_epoch < 0)
        }
        if leaves:
            self.leave_after(commit_id, now_ms)

    def send_leave(self, now_ms: int) -> None:
        static = self.config.group_instance_id is not None
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.config.group_id,
            member_id=self.member_id,
            member_epoch=STATIC_LEAVE_EPOCH if static else LEAVE_EPOCH,
            instance_id=self.config.group_instance_id,
        )
        self.close_leave_id = self._send(request, now_ms)

    @property
    def revoke_work_ms(self) -> int:
        return self.app.app.revoke_ms

    def crash(self) -> None:
        """The process dies: no callback, no commit, no leave; processing stops."""
        self.move(ConsumerClientState.CRASHED)
        self.owned = frozenset()
        self.reconcile_at_ms = None
        self._drop_app_work()
        self.inflight.clear()
        self._outbox.clear()

    def update_metadata(self, topic_ids: Mapping[str, uuid.UUID], now_ms: int) -> None:
        """New topic metadata (name -> id). Partitions of an assignment whose topic was unknown are picked
        up by a reconciliation."""
        self._now = max(self._now, now_ms)
        before = self.assignment
        self.topic_ids = dict(topic_ids)
        if self.assignment != before and self.assignment != self.owned:
            self._schedule_reconcile(now_ms)

    # -------------------------------------------------------------------------- callbacks and commits
    @property
    def callback_generation(self) -> int:
        return self.member_epoch

    @property
    def auto_commit(self) -> bool:
        return self.config.auto_commit

    @property
    def commit_on_revoke(self) -> bool:
        return self.app.app.commit_on_revoke

    def lose(self, now_ms: int, reason: str) -> None:
        """``onPartitionsLost``; processing of the batch in hand stops with it."""
        if self.owned:
            self.app.loop.stop(now_ms)
        super().lose(now_ms, reason)

    def commit(self, partitions: frozenset[TopicPartition], now_ms: int) -> int | None:
        """OffsetCommit of ``partitions`` at their processed position (``now_ms``), with the member epoch."""
        if not partitions or self.member_epoch <= 0 or not self.member_id:
            return None
        topics = tuple(
            (topic, tuple(PartitionCommit(partition=p, offset=now_ms) for p in ps))
            for topic, ps in by_topic(partitions).items()
        )
        request = OffsetCommitRequest(
            group_id=self.config.group_id,
            generation_id=self.member_epoch,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            topics=topics,
        )
        return self._send(request, now_ms)

    # -------------------------------------------------------------------------------------- internals
    def _in_group(self) -> bool:
        return self.state in (ConsumerClientState.RECONCILING, ConsumerClientState.STABLE) and self.member_epoch > 0

    def _committing(self) -> bool:
        return self.config.auto_commit and self._in_group() and bool(self.owned)

    def _heartbeat_due(self, now_ms: int) -> bool:
        if self.heartbeat_id is not None or not self._in_group():
            return False
        if self.ack_needed:
            return True
        return self.next_heartbeat_ms is not None and now_ms >= self.next_heartbeat_ms

    def _ids(self, partitions: frozenset[TopicPartition]) -> TopicPartitions:
        out: list[tuple[uuid.UUID, tuple[int, ...]]] = []
        for topic, ps in by_topic(partitions).items():
            topic_id = self.topic_ids.get(topic)
            if topic_id is not None:
                out.append((topic_id, ps))
        return tuple(sorted(out, key=lambda item: str(item[0])))

    def _send_heartbeat(self, now_ms: int, *, joining: bool) -> None:
        config = self.config
        topics = tuple(sorted(set(config.topics)))
        if joining:
            self.member_epoch = JOIN_EPOCH
            self.full_needed = True
            self.move(ConsumerClientState.JOINING)
        full = self.full_needed
        report = self.owned
        request = ConsumerGroupHeartbeatRequest(
            group_id=config.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=config.group_instance_id,
            rack_id=config.rack if full else None,
            rebalance_timeout_ms=config.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=topics if full or topics != self.sent_topics else None,
            server_assignor=config.server_assignor if full else None,
            topic_partitions=self._ids(report) if full or self.ack_needed or report != self.reported else None,
        )
        self.sent_topics = topics
        self._pending_report = report
        self.ack_needed = False
        self.heartbeat_id = self._send(request, now_ms)

    def _on_heartbeat(self, inflight: Inflight, resp: ConsumerGroupHeartbeatResponse, now_ms: int) -> None:
        error = resp.error
        request = inflight.request
        assert isinstance(request, ConsumerGroupHeartbeatRequest)
        if error is E.NONE:
            self.full_needed = False
            if resp.member_id:
                self.member_id = resp.member_id
            self.member_epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            self.next_heartbeat_ms = max(now_ms, inflight.sent_ms + self.heartbeat_interval_ms)
            self.reported = self._pending_report
            if self.state is ConsumerClientState.JOINING:
                self.move(ConsumerClientState.RECONCILING)
                self.next_commit_ms = now_ms + self.config.auto_commit_interval_ms
            if resp.assignment is not None:
                target = {t: frozenset(ps) for t, ps in resp.assignment if ps}
                self._resolve_topic_ids(target, now_ms - inflight.sent_ms, now_ms)
                self._new_target(target, now_ms)
            if not self.revocation_pending():
                self._extend_lease(inflight.sent_ms)
            self._update_state()
            return
        self.full_needed = True
        self.reported = None
        unchanged = request.member_epoch == self.member_epoch and request.member_id == self.member_id
        if error in FENCED:
            if unchanged:
                self._fenced(now_ms, f"ConsumerGroupHeartbeat: {error.name}")
        elif error in FATAL:
            self._fail(now_ms, f"ConsumerGroupHeartbeat: {error.name}")
        else:  # coordinator moving or loading, unknown server error: back off and retry
            self.note(now_ms, "retry", f"ConsumerGroupHeartbeat: {error.name}")
            if self.state is ConsumerClientState.JOINING:
                self.move(ConsumerClientState.UNJOINED)
                self.rejoin_at_ms = now_ms + self.config.retry_backoff_ms
            else:
                self.next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    def _on_commit(self, inflight: Inflight, resp: OffsetCommitResponse, now_ms: int) -> None:
        errors: set[str] = set()
        for _, results in resp.topics:
            for _, code in results:
                if code is not E.NONE:
                    errors.add(code.name)
        if errors:  # the heartbeat learns about fencing; a stale epoch only loses this commit
            self.note(now_ms, "commit_failed", f"OffsetCommit: {', '.join(sorted(errors))}")

    def _resolve_topic_ids(self, target: dict[uuid.UUID, frozenset[int]], round_trip_ms: int, now_ms: int) -> None:
        """librdkafka resolves topic ids it has not seen with a Metadata request before it can apply an
        assignment naming them: the callbacks wait one more round trip (measured against ``regroup serve``:
        a new process's first assignment reaches its callback one round trip later than later ones)."""
        if not self.app.app.librdkafka:
            return
        unknown = target.keys() - self.resolved_topic_ids
        if unknown:
            self.resolved_topic_ids |= unknown
            self.resolved_at_ms = max(self.resolved_at_ms, now_ms + round_trip_ms)

    def _new_target(self, assignment: dict[uuid.UUID, frozenset[int]], now_ms: int) -> None:
        """An assignment in a heartbeat answer. A different one is a new target (Kafka's client bumps its local
        assignment epoch) and is acknowledged with the owned set once reconciled, even when that set is what
        the member reported before: the coordinator may be waiting for the member to confirm it gave up
        partitions it was handed at an earlier epoch but never took (their callbacks had not run yet)."""
        if assignment == self.assignment_ids:  # the same target again (an answer to a full request)
            if self.assignment != self.owned:
                self._schedule_reconcile(now_ms)
            return
        self.assignment_ids = assignment
        if self.assignment != self.owned:
            self._schedule_reconcile(now_ms)
        elif self.reconcile_at_ms is None and self.reconcile_step == 0:
            self.ack_needed = True  # nothing to change: acknowledge at once, without callbacks
        # else the callbacks already scheduled reconcile towards this target, then acknowledge it

    def _schedule_reconcile(self, now_ms: int) -> None:
        """The callbacks of the latest assignment run at the application's first poll from ``callback_delay_ms``
        on (if callbacks are running, they reconcile towards it once they are done)."""
        if self.reconcile_at_ms is None and self.reconcile_step == 0:
            self.reconcile_at_ms = max(now_ms + self.config.callback_delay_ms, self.resolved_at_ms)
        self.move(ConsumerClientState.RECONCILING)

    def _run_app(self, now_ms: int) -> None:
        """Run the callbacks waiting for the application, as far as its poll loop and callbacks allow: revoke
        first (waiting for the commit and the user work), then assign (its user work), then acknowledge."""
        app = self.app
        while True:
            step = self.reconcile_step
            if step == 0:
                due = self.reconcile_at_ms
                if due is None or now_ms < due or not app.at_poll(now_ms):
                    break
                app.in_poll = True
                self.reconcile_at_ms = None
                target = self.assignment
                if target is None:
                    continue
                revoked = self.owned - target
                self.reconcile_step = 1
                if revoked:
                    commit = self.revoke_in_poll(revoked, now_ms, "not in the new assignment")
                    app.callback(commit, now_ms, app.app.revoke_ms)
            elif not app.free(now_ms):
                break
            elif step == 1:
                target = self.assignment
                self.reconcile_added = frozenset() if target is None else target - self.owned
                self.reconcile_step = 2
                app.callback(None, now_ms, app.app.assign_ms)
            else:
                self.reconcile_step = 0
                target = self.assignment
                added = self.reconcile_added if target is None else self.reconcile_added & target
                self.reconcile_added = frozenset()
                self.owned = self.owned | added
                self.callback(CallbackKind.ASSIGNED, added, now_ms, "new assignment")
                self.ack_needed = True  # every reconciled target is acknowledged, changed owned set or not
                if target is not None and target != self.owned:
                    self._schedule_reconcile(now_ms)  # a newer target arrived meanwhile
                    self.reconcile_at_ms = now_ms
                self._update_state()
        due = self.reconcile_at_ms
        if self.reconcile_step == 0 and app.in_poll and app.free(now_ms) and (due is None or due > now_ms):
            app.leave_poll(now_ms, bool(self.owned))

    def _drop_app_work(self) -> None:
        self.reconcile_step = 0
        self.reconcile_added = frozenset()
        self.app.reset()
        self.app.loop.idle()

    def _check_poll_interval(self, now_ms: int) -> None:
        """``max.poll.interval.ms``: a batch that outlasts it makes the member leave the group (epoch -1) and
        lose its partitions; it rejoins with epoch 0 from its next poll."""
        if not self.app.loop.overran(now_ms, self.config.rebalance_timeout_ms):
            return
        if not self._in_group():
            return
        reason = "consumer poll timeout has expired"
        self.note(now_ms, "reset", reason)
        self.lose(now_ms, reason)
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.config.group_id,
            member_id=self.member_id,
            member_epoch=LEAVE_EPOCH,
            instance_id=self.config.group_instance_id,
        )
        self._start_over(now_ms)
        self._send(request, now_ms)
        self.rejoin_at_ms = self.app.loop.next_poll(now_ms)

    def _update_state(self) -> None:
        if self.state is ConsumerClientState.RECONCILING or self.state is ConsumerClientState.STABLE:
            done = (
                self.reconcile_at_ms is None
                and self.reconcile_step == 0
                and self.assignment == self.owned
                and self.reported == self.owned
            )
            self.move(ConsumerClientState.STABLE if done and not self.ack_needed else ConsumerClientState.RECONCILING)

    def _fenced(self, now_ms: int, reason: str) -> None:
        """Kafka's ``transitionToFenced``: lose everything, rejoin with epoch 0 keeping the member id."""
        self.note(now_ms, "reset", reason)
        self.lose(now_ms, reason)
        self._start_over(now_ms)

    def _start_over(self, now_ms: int) -> None:
        self.member_epoch = JOIN_EPOCH
        self.assignment_ids = None
        self.reconcile_at_ms = None
        self.reconcile_step = 0
        self.reconcile_added = frozenset()
        self.ack_needed = False
        self.reported = None
        self.full_needed = True
        self.lease_ms = None
        self.next_heartbeat_ms = None
        if self.heartbeat_id is not None:
            self.inflight.pop(self.heartbeat_id, None)
            self.heartbeat_id = None
        self.move(ConsumerClientState.UNJOINED)
        self.rejoin_at_ms = now_ms
        self.note(now_ms, "rejoin", "rejoining with epoch 0")

    def _fail(self, now_ms: int, reason: str) -> None:
        self.note(now_ms, "fatal", reason)
        self.lose(now_ms, reason)
        self.move(ConsumerClientState.FAILED)
        self.reconcile_at_ms = None
        self._drop_app_work()
        self.inflight.clear()

    def _extend_lease(self, sent_ms: int) -> None:
        bound = sent_ms + min(self.config.session_timeout_ms, self.config.rebalance_timeout_ms)
        self.lease_ms = bound if self.lease_ms is None else max(self.lease_ms, bound)

    def _check_lease(self, now_ms: int) -> None:
        if self.owned and (self.lease_ms is None or now_ms >= self.lease_ms):
            self.note(now_ms, "reset", "session lease expired: the coordinator may have fenced this member")
            self.lose(now_ms, "session lease expired: the coordinator may have fenced this member")
            self._start_over(now_ms)

    def _expire_inflight(self, now_ms: int) -> None:
        for request_id in sorted(self.inflight):
            inflight = self.inflight[request_id]
            if inflight.deadline_ms > now_ms:
                continue
            del self.inflight[request_id]
            self.note(now_ms, "timeout", f"{inflight.api} request {request_id} timed out")
            self.app.answered(request_id, now_ms)
            if request_id == self.heartbeat_id:
                self.heartbeat_id = None
                self.full_needed = True
                self.reported = None
                if self.state is ConsumerClientState.JOINING:
                    self.move(ConsumerClientState.UNJOINED)
                    self.rejoin_at_ms = now_ms + self.config.retry_backoff_ms
                else:
                    self.next_heartbeat_ms = now_ms + self.config.retry_backoff_ms
                    self._update_state()

    def _inflight_of(self, request: Request, now_ms: int) -> Inflight:
        return Inflight(
            api=api_name(request),
            request=request,
            sent_ms=now_ms,
            deadline_ms=now_ms + self.config.request_timeout_ms,
            generation=self.member_epoch,
            member_id=self.member_id,
        )

    def _send(self, request: Request, now_ms: int) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        self.inflight[request_id] = self._inflight_of(request, now_ms)
        self._outbox.append(OutgoingRequest(request_id=request_id, request=request))
        return request_id
