"""``ClassicClientMember``: a sans-IO consumer group member for the classic protocol (JoinGroup / SyncGroup /
Heartbeat / LeaveGroup / OffsetCommit), eager or cooperative (KIP-429).

The driver (the simulator, a test harness, a real client shell) runs the loop::

    for out in member.poll(now_ms): send(out.request)           # requests due now
    member.on_response(out.request_id, response, now_ms)         # when an answer arrives
    wake up again at member.next_deadline()

Nothing here reads a clock, sleeps or touches a socket. Client behaviour follows the Java consumer
(``AbstractCoordinator`` / ``ConsumerCoordinator``; KIP-429 for the cooperative protocol):

* eager: before every JoinGroup, commit and revoke everything (``onPartitionsRevoked``, even if empty);
  the subscription carries no owned partitions. ``onPartitionsAssigned`` after SyncGroup.
* cooperative: keep partitions; JoinGroup carries owned partitions and their generation; after SyncGroup
  revoke owned - assigned and, if anything was revoked, rejoin; assigned - owned are added.
* MEMBER_ID_REQUIRED: adopt the id and rejoin at once. UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION (for the
  generation the request was sent in): reset, ``onPartitionsLost``, rejoin. REBALANCE_IN_PROGRESS on a
  heartbeat: rejoin. Fatal errors (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, ...) stop the member.

Processing model: a partition in ``owned`` is being processed; records arrive at one per millisecond, so
the position of a processed partition at time t is t, and commits (periodic auto-commit, and before a
revocation or a clean leave) carry that position.

The application around the member (``client.app``): its rebalance work waits for its next ``poll()``, as
in Kafka's client. Heartbeats come from a background thread; the JoinGroup (after an eager member's
revocation), the reading of the JoinGroup answer when the application was busy (Java) and the callbacks of
a SyncGroup assignment run at the application's next poll; a callback that commits waits for the commit's
answer, and user work in a callback takes its time. With ``client="librdkafka"`` the library's own thread
sends the JoinGroup (after the eager revocation callback) and the SyncGroup, and only callbacks wait for a
poll. A poll that comes later than ``max.poll.interval.ms`` (the rebalance timeout) after the previous one
makes the member leave the group, as Kafka's heartbeat thread does; it rejoins at its next poll.

One deliberate addition to the Java client, the *session lease*: a member only keeps processing while it
is sure the coordinator cannot have handed its partitions to someone else. A successful SyncGroup, or a
NONE heartbeat while stable, for a request sent at time s proves the member is in a Stable generation with
its session timer restarted at or after s, so it cannot be removed before s + min(session timeout,
rebalance timeout) (session expiry, or the join timer of a rebalance that starts later). Past that
without new proof the member declares its partitions lost and rejoins. A JoinGroup answer proves nothing
(an immediate answer restarts no timer). Without the lease a member cut off from the coordinator keeps
processing partitions the group already gave away (the classic zombie).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from regroup.assignors import registry
from regroup.assignors.spec import RebalanceProtocol
from regroup.client import responses
from regroup.client.app import INSTANT_APP, AppModel, AppThread, Draws
from regroup.client.config import MemberConfig, rebalance_protocol
from regroup.client.embedded import JoinProtocols, SubscriptionState, by_topic
from regroup.client.ownership import OwnedPartitions
from regroup.client.requests import commit_request, heartbeat_request, join_request, leave_request, sync_request
from regroup.client.types import (
    CLASSIC_CLIENT_TRANSITIONS,
    STOPPED,
    CallbackEvent,
    CallbackKind,
    ClassicClientState,
    ClientStateError,
    Inflight,
    MemberNote,
    OutgoingRequest,
    Request,
    TopicPartition,
    api_name,
)
from regroup.protocol.classic import NO_GENERATION

#: states read on every poll, as module constants (the compiled build reads them without a class lookup)
_UNJOINED: Final = ClassicClientState.UNJOINED
_STABLE: Final = ClassicClientState.STABLE
_HEARTBEATING: Final = (ClassicClientState.COMPLETING_REBALANCE, ClassicClientState.STABLE)
#: later than any deadline (``next_deadline``'s starting point)
_NEVER: Final = 2**62

#: librdkafka's ``rkcg_join_intvl``: a JoinGroup at most once a second on the rejoins below, and on a
#: cooperative member's "group is rebalancing" (after a revocation, an unassignment or a new member id it
#: rejoins at once)
LIBRDKAFKA_JOIN_INTERVAL_MS: Final = 1_000
_PACED_REJOINS: Final = frozenset(
    {
        "SyncGroup: REBALANCE_IN_PROGRESS",
        "JoinGroup: REBALANCE_IN_PROGRESS",
        "OffsetCommit: REBALANCE_IN_PROGRESS",
    }
)

# Work that waits for the application's poll (``ClassicClientMember.app_steps``), in the order it is queued.
#: onJoinPrepare (an eager member's revocation) and the JoinGroup
STEP_JOIN: Final = 1
#: the JoinGroup, after the revocation callback of onJoinPrepare finished
STEP_SEND_JOIN: Final = 2
#: (Java) the JoinGroup answer, read by the poll after it arrived when the application was busy
STEP_JOIN_RESPONSE: Final = 3
#: the SyncGroup assignment's callbacks: revoke what is no longer assigned
STEP_CALLBACKS: Final = 4
#: then onPartitionsAssigned (its user work) ...
STEP_ASSIGN: Final = 5
#: ... after which the new partitions are processed
STEP_ASSIGNED: Final = 6


class ClassicClientMember(OwnedPartitions):
    """One consumer of a classic group. See the module docstring for the driving loop."""

    def __init__(
        self,
        config: MemberConfig,
        partition_counts: Mapping[str, int],
        now_ms: int = 0,
        app: AppModel = INSTANT_APP,
        draws: Draws | None = None,
    ) -> None:
        self.config = config
        self.app = AppThread(app, draws)
        self.app_steps: list[int] = []
        self.join_scheduled = False  # a STEP_JOIN is queued
        self.stashed_join: tuple[Inflight, object] | None = None  # (Java) a JoinGroup answer read at the next poll
        self.pending_assignment: frozenset[TopicPartition] | None = None  # SyncGroup's, until its callbacks run
        self.pending_generation = NO_GENERATION
        self.pending_added: frozenset[TopicPartition] = frozenset()
        self.pending_revoked = False
        #: the rejoin after a poll timeout waits for the application's next poll
        self.poll_timed_out = False
        self.last_join_ms: int | None = None  # when the last JoinGroup was sent
        self._checks_poll_interval = self.app.loop.can_outlast(config.rebalance_timeout_ms)
        self.assignors = tuple(registry.get(name) for name in config.strategies)
        self.rebalance_protocol = rebalance_protocol(config.strategies)
        self.partition_counts = dict(partition_counts)
        self.state = ClassicClientState.UNJOINED
        self.member_id = ""
        self.generation = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.owned: frozenset[TopicPartition] = frozenset()
        self.owned_generation = NO_GENERATION
        self.previous: frozenset[TopicPartition] = frozenset()  # last assignment (sticky user data)
        self.previous_generation = NO_GENERATION
        self.callbacks: list[CallbackEvent] = []
        self.notes: list[MemberNote] = []
        self.join_claimed: frozenset[TopicPartition] = frozenset()  # owned partitions the last JoinGroup listed
        self.join_protocols = JoinProtocols()  # builds each JoinGroup's protocols from what changed since the last
        self.metadata_snapshot: dict[str, int] | None = None  # leader: partition counts it assigned with
        self.inflight: dict[int, Inflight] = {}
        self.close_commit_id: int | None = None
        self.close_leave_at_ms: int | None = None
        self.close_leave_id: int | None = None
        self.join_id: int | None = None
        self.sync_id: int | None = None
        self.heartbeat_id: int | None = None
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self.needs_join_prepare = True
        self.rejoin_at_ms = now_ms + self.app.startup_ms()
        self.next_heartbeat_ms: int | None = None
        self.next_commit_ms: int | None = None
        self.lease_ms: int | None = None
        self._next_request_id = 1
        self._outbox: list[OutgoingRequest] = []
        self._now = now_ms

    # ------------------------------------------------------------------------------------- observing
    @property
    def cooperative(self) -> bool:
        return self.rebalance_protocol is RebalanceProtocol.COOPERATIVE

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    def owned_by_topic(self) -> dict[str, tuple[int, ...]]:
        return by_topic(self.owned)

    def settled(self) -> bool:
        """Stable in its generation with nothing pending: no rejoin wanted, no JoinGroup or SyncGroup in
        flight, no callbacks waiting for the application."""
        return (
            self.state is _STABLE
            and not self.rejoin_needed
            and self.join_id is None
            and self.sync_id is None
            and not self.app_steps
            and self.app.free(self._now)
        )

    def move(self, to: ClassicClientState) -> None:
        """The member's state changes only here, as ``CLASSIC_CLIENT_TRANSITIONS`` allows."""
        if to not in CLASSIC_CLIENT_TRANSITIONS[self.state]:
            raise ClientStateError(f"{self.config.client_id}: {self.state.value} -> {to.value} is not a transition")
        self.state = to

    # ---------------------------------------------------------------------------------------- driving
    def poll(self, now_ms: int) -> list[OutgoingRequest]:
        """Handle what is due at ``now_ms`` (timeouts, lease, heartbeat, auto-commit, rejoin) and return
        the requests to send now, in order."""
        self._now = max(self._now, now_ms)
        if self.state not in STOPPED:
            self._expire_inflight(now_ms)
            self._check_lease(now_ms)
            if self._checks_poll_interval:
                self._check_poll_interval(now_ms)
            self._maybe_join(now_ms)
            self._run_app(now_ms)
            if self._heartbeating() and self.next_heartbeat_ms is not None and now_ms >= self.next_heartbeat_ms:
                self.heartbeat_id = self._send(
                    heartbeat_request(self.config, self.generation, self.member_id),
                    now_ms,
                    self.config.request_timeout_ms,
                )
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
        if self.state in STOPPED:
            return self.close_deadline()
        # (the earliest candidate kept as a plain int: asked after every step of the member)
        earliest = _NEVER
        for inf in self.inflight.values():
            if inf.deadline_ms < earliest:
                earliest = inf.deadline_ms
        if self.owned and self.lease_ms is not None and self.lease_ms < earliest:
            earliest = self.lease_ms
        if self._wants_join() and not self.join_scheduled and self.rejoin_at_ms < earliest:
            earliest = self.rejoin_at_ms
        if self.app_steps:
            ready = self.app.next_ready(self._now)
            if ready is not None and ready < earliest:
                earliest = ready
        elif self.app.in_poll and self.app.free(self._now):
            earliest = self._now  # (the poll returns now)
        elif self.app.in_poll and self.app.ready_ms > self._now and self.app.ready_ms < earliest:
            earliest = self.app.ready_ms
        if self._checks_poll_interval and self.app.loop.running:
            check = self.app.loop.last_poll + self.config.rebalance_timeout_ms
            if check < earliest:
                earliest = check
        if self._heartbeating() and self.next_heartbeat_ms is not None and self.next_heartbeat_ms < earliest:
            earliest = self.next_heartbeat_ms
        if self._committing() and self.next_commit_ms is not None and self.next_commit_ms < earliest:
            earliest = self.next_commit_ms
        return None if earliest == _NEVER else earliest

    def on_response(self, request_id: int, response: object, now_ms: int) -> None:
        """Feed the coordinator's answer to request ``request_id``. Answers to requests the member no
        longer waits for (timed out, superseded, duplicated) are ignored."""
        self._now = max(self._now, now_ms)
        inflight = self.inflight.pop(request_id, None)
        if inflight is None or self.state in STOPPED:
            return
        responses.dispatch(self, request_id, inflight, response, now_ms)
        self.app.answered(request_id, now_ms)

    def leave(self, now_ms: int) -> None:
        """Close the consumer: revoke (or lose, mid-rebalance) what it owns, committing it synchronously
        when the application or auto-commit does, then LeaveGroup once that commit is answered and the
        callback's work is done (static members send none, KIP-345)."""
        if self.state in STOPPED:
            return
        self._now = max(self._now, now_ms)
        commit_id: int | None = None
        if self.owned:
            if self.state is _STABLE and self.generation >= 0:
                commit_id = self.revoke_on_close(self.owned, now_ms)
            else:
                self.lose(now_ms, "consumer closed during a rebalance")
        self.move(ClassicClientState.LEFT)
        self._drop_app_work()
        self.inflight = {k: v for k, v in self.inflight.items() if v.api in ("OffsetCommit", "LeaveGroup")}
        if self.member_id and self.config.group_instance_id is None:
            self.leave_after(commit_id, now_ms)

    def send_leave(self, now_ms: int) -> None:
        self.close_leave_id = self._send(
            leave_request(self.config, self.member_id), now_ms, self.config.request_timeout_ms
        )

    @property
    def revoke_work_ms(self) -> int:
        return self.app.app.revoke_ms

    def crash(self) -> None:
        """The process dies: no callback, no commit, no LeaveGroup; processing stops."""
        self.move(ClassicClientState.CRASHED)
        self.owned = frozenset()
        self.inflight.clear()
        self._outbox.clear()
        self._drop_app_work()

    def update_metadata(self, partition_counts: Mapping[str, int], now_ms: int) -> None:
        """New topic metadata. The leader rejoins when a topic the group subscribes to changed."""
        self._now = max(self._now, now_ms)
        self.partition_counts = dict(partition_counts)
        self.check_metadata(now_ms)

    def request_rejoin(self, now_ms: int, reason: str, delay_ms: int = 0) -> None:
        if not self.rejoin_needed:
            self.note(now_ms, "rejoin", reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason
        self.rejoin_at_ms = now_ms + delay_ms
        paced = reason in _PACED_REJOINS or (self.cooperative and reason == "Heartbeat: REBALANCE_IN_PROGRESS")
        if paced and self.app.app.librdkafka and self.last_join_ms is not None:
            # librdkafka sends at most one JoinGroup a second, except after a revocation or a new member id
            self.rejoin_at_ms = max(self.rejoin_at_ms, self.last_join_ms + LIBRDKAFKA_JOIN_INTERVAL_MS)

    # ------------------------------------------------------------------ helpers used by ``responses``
    @property
    def callback_generation(self) -> int:
        return self.generation

    @property
    def auto_commit(self) -> bool:
        return self.config.auto_commit

    @property
    def commit_on_revoke(self) -> bool:
        return self.app.app.commit_on_revoke

    def commit(self, partitions: frozenset[TopicPartition], now_ms: int) -> int | None:
        """OffsetCommit of ``partitions`` at their processed position (``now_ms``)."""
        if not partitions or self.generation < 0 or not self.member_id:
            return None
        request = commit_request(self.config, self.generation, self.member_id, partitions, now_ms)
        return self._send(request, now_ms, self.config.request_timeout_ms)

    def lose(self, now_ms: int, reason: str) -> None:
        """``onPartitionsLost``; processing of the batch in hand stops with it (the member no longer owns the
        partitions), and the application waits in poll once that batch is done."""
        if self.owned:
            self.app.loop.stop(now_ms)
        super().lose(now_ms, reason)

    def reset(self, now_ms: int, reason: str, *, member_id_too: bool) -> None:
        """Kafka's ``resetStateAndRejoin``: forget the generation (and the member id), lose what is owned,
        abandon the rebalance in flight and rejoin at once."""
        self.note(now_ms, "reset", reason)
        self.lose(now_ms, reason)
        self.generation = NO_GENERATION
        self.protocol_name = None
        if member_id_too:
            self.member_id = ""
        for request_id in (self.join_id, self.sync_id):
            if request_id is not None:
                self.inflight.pop(request_id, None)
        self.join_id = self.sync_id = None
        self.move(ClassicClientState.UNJOINED)
        self.needs_join_prepare = True
        self._drop_rebalance_steps()
        self.request_rejoin(now_ms, reason)

    def fail(self, now_ms: int, reason: str) -> None:
        """A fatal error: the consumer stops (its partitions are lost)."""
        self.note(now_ms, "fatal", reason)
        self.lose(now_ms, reason)
        self.move(ClassicClientState.FAILED)
        self.inflight.clear()
        self._drop_app_work()

    def extend_lease(self, sent_ms: int) -> None:
        bound = sent_ms + min(self.config.session_timeout_ms, self.config.rebalance_timeout_ms)
        self.lease_ms = bound if self.lease_ms is None else max(self.lease_ms, bound)

    def check_metadata(self, now_ms: int) -> None:
        if self.state is not _STABLE or not self.is_leader or self.metadata_snapshot is None:
            return
        current = {t: self.partition_counts.get(t, 0) for t in self.metadata_snapshot}
        if current != self.metadata_snapshot:
            self.request_rejoin(now_ms, "topic metadata changed")

    def heartbeat_due_after(self, sent_ms: int, now_ms: int) -> None:
        """Schedule the next heartbeat after one sent at ``sent_ms`` was answered."""
        self.next_heartbeat_ms = max(now_ms, sent_ms + self.config.heartbeat_interval_ms) + self.app.late_ms()

    def heartbeat_after_join(self, now_ms: int) -> None:
        """The JoinGroup answer was read: Java's heartbeat thread restarts its timer (and so do aligned
        members); librdkafka keeps its phase and sends its first heartbeat once the member is Stable."""
        if self.app.app.librdkafka and not self.app.app.aligned:
            if self.next_heartbeat_ms is None:
                self.next_heartbeat_ms = now_ms
        else:
            self.next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms + self.app.late_ms()

    def reads_join_response_later(self, now_ms: int) -> bool:
        """(Java) A JoinGroup answer that arrives while the application is busy is read by its next poll (the
        heartbeat thread does not read the network while the member is joining)."""
        return not self.app.app.librdkafka and not self.app.at_poll(now_ms)

    def stash_join_response(self, inflight: Inflight, response: object) -> None:
        self.stashed_join = (inflight, response)
        self.app_steps.append(STEP_JOIN_RESPONSE)

    def assignment_received(self, assigned: frozenset[TopicPartition]) -> None:
        """A SyncGroup assignment: its callbacks run at the application's next poll."""
        self.pending_assignment = assigned
        self.pending_generation = self.generation
        self.app_steps.append(STEP_CALLBACKS)

    def send_sync(self, now_ms: int, assignments: tuple[tuple[str, bytes], ...]) -> None:
        self.move(ClassicClientState.COMPLETING_REBALANCE)
        request = sync_request(self.config, self.generation, self.member_id, self.protocol_name, assignments)
        self.sync_id = self._send(request, now_ms, self.config.request_timeout_ms)

    # -------------------------------------------------------------------------------------- internals
    def _send(self, request: Request, now_ms: int, timeout_ms: int) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        self.inflight[request_id] = Inflight(
            api=api_name(request),
            request=request,
            sent_ms=now_ms,
            deadline_ms=now_ms + timeout_ms,
            generation=self.generation,
            member_id=self.member_id,
        )
        self._outbox.append(OutgoingRequest(request_id=request_id, request=request))
        return request_id

    def _wants_join(self) -> bool:
        return (
            self.state not in STOPPED
            and self.join_id is None
            and self.sync_id is None
            and (self.state is _UNJOINED or self.rejoin_needed)
        )

    def _heartbeating(self) -> bool:
        """Heartbeats run once the member has a generation (Kafka disables them while joining; librdkafka
        also while its SyncGroup is in flight)."""
        if self.heartbeat_id is not None:
            return False
        if self.app.app.librdkafka and not self.app.app.aligned:
            return self.state is _STABLE
        return self.state in _HEARTBEATING

    def _committing(self) -> bool:
        return self.config.auto_commit and self.state is _STABLE and bool(self.owned)

    def _expire_inflight(self, now_ms: int) -> None:
        if not self.inflight:
            return
        for request_id in sorted(self.inflight):
            inflight = self.inflight[request_id]
            if inflight.deadline_ms > now_ms:
                continue
            del self.inflight[request_id]
            self.note(now_ms, "timeout", f"{inflight.api} request {request_id} timed out")
            self.app.answered(request_id, now_ms)
            if request_id == self.join_id or request_id == self.sync_id:
                self.join_id = self.sync_id = None
                self.move(ClassicClientState.UNJOINED)
                self.request_rejoin(now_ms, f"{inflight.api} timed out", self.config.retry_backoff_ms)
            elif request_id == self.heartbeat_id:
                self.heartbeat_id = None
                self.next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    def _check_lease(self, now_ms: int) -> None:
        if self.owned and (self.lease_ms is None or now_ms >= self.lease_ms):
            self.lose(now_ms, "session lease expired: the coordinator may have removed this member")
            if self.state is _STABLE:
                self.request_rejoin(now_ms, "partitions lost after the session lease expired")

    def _join_prepare(self, now_ms: int) -> bool:
        """Kafka's ``onJoinPrepare``, once per rebalance: True when its revocation callback keeps the
        application busy after ``now_ms`` (a commit to wait for, user work)."""
        self.needs_join_prepare = False
        if self.generation == NO_GENERATION or not self.member_id:
            self.lose(now_ms, "generation reset")
            return False
        if self.cooperative:
            if self.config.auto_commit and not self.commit_on_revoke:
                self.commit(self.owned, now_ms)  # Kafka: maybeAutoCommitOffsetsSync before every rebalance
            unsubscribed = frozenset(tp for tp in self.owned if tp[0] not in self.config.topics)
            if not unsubscribed:
                return False
            commit = self.revoke_in_poll(unsubscribed, now_ms, "topics no longer subscribed")
        else:
            commit = self.revoke_in_poll(self.owned, now_ms, "eager rebalance: revoke everything before JoinGroup")
        return self.app.callback(commit, now_ms, self.app.app.revoke_ms)

    def _join_waits_for_poll(self) -> bool:
        """Java sends JoinGroup from the application's poll; librdkafka from its own thread, after an eager
        member's revocation callback (which runs in a poll); and after a poll timeout every client rejoins
        from the next poll."""
        if self.poll_timed_out or not self.app.app.librdkafka:
            return True
        return not self.cooperative and self.needs_join_prepare and self.generation != NO_GENERATION

    def _maybe_join(self, now_ms: int) -> None:
        if self.join_scheduled or not self._wants_join() or now_ms < self.rejoin_at_ms:
            return
        if self._join_waits_for_poll():
            self.join_scheduled = True
            self.app_steps.append(STEP_JOIN)
        else:
            self._send_join(now_ms)

    def _run_app(self, now_ms: int) -> None:
        """Run the work waiting for the application, as far as its poll loop and callbacks allow."""
        app = self.app
        steps = self.app_steps
        while steps and app.at_poll(now_ms):
            app.in_poll = True
            step = steps.pop(0)
            if step in (STEP_JOIN, STEP_SEND_JOIN):
                self._step_join(step, now_ms)
            elif step == STEP_JOIN_RESPONSE:
                stashed, self.stashed_join = self.stashed_join, None
                if stashed is not None:
                    responses.dispatch_join(self, stashed[0], stashed[1], now_ms)
            elif step == STEP_CALLBACKS:
                self._step_callbacks(now_ms)
            elif step == STEP_ASSIGN:
                if app.callback(None, now_ms, app.app.assign_ms):
                    steps.insert(0, STEP_ASSIGNED)
                else:
                    self._step_assigned(now_ms)
            else:
                self._step_assigned(now_ms)
            if not steps and self.state not in STOPPED:
                self._maybe_join(now_ms)  # a rejoin the callbacks asked for: in this poll
        if not steps and app.in_poll and app.free(now_ms):
            app.leave_poll(now_ms, bool(self.owned))

    def _step_join(self, step: int, now_ms: int) -> None:
        self.join_scheduled = False
        if not self._wants_join():
            return
        self.poll_timed_out = False
        if step == STEP_JOIN and self.needs_join_prepare and self._join_prepare(now_ms):
            self.join_scheduled = True
            self.app_steps.insert(0, STEP_SEND_JOIN)
            return
        self._send_join(now_ms)

    def _step_callbacks(self, now_ms: int) -> None:
        """The SyncGroup assignment, at the poll: revoke what is no longer assigned, then assign."""
        assigned = self.pending_assignment
        if assigned is None or self.pending_generation != self.generation:
            return
        revoked = self.owned - assigned
        self.pending_added = assigned - self.owned
        self.pending_revoked = bool(revoked)
        if revoked:
            commit = self.revoke_in_poll(revoked, now_ms, "not in the new assignment")
            self.app.callback(commit, now_ms, self.app.app.revoke_ms)
        self.app_steps.insert(0, STEP_ASSIGN)  # (once the revocation callback is done)

    def _step_assigned(self, now_ms: int) -> None:
        """onPartitionsAssigned returned: the new partitions are processed from now on."""
        assigned = self.pending_assignment
        self.pending_assignment = None
        if assigned is None or self.pending_generation != self.generation:
            return
        added = self.pending_added
        self.owned = self.owned | added
        self.owned_generation = self.generation
        self.callback(CallbackKind.ASSIGNED, added, now_ms, "SyncGroup assignment")
        self.next_commit_ms = now_ms + self.config.auto_commit_interval_ms
        # The leader withholds what a member claimed but must give up until that member rejoins; a claim
        # may already be gone (lost) by now, so compare with the claim, not only with what is owned.
        if self.cooperative and (self.pending_revoked or self.join_claimed - assigned):
            self.request_rejoin(now_ms, "cooperative rebalance: partitions were revoked")

    def _drop_rebalance_steps(self) -> None:
        """Forget the rebalance work still waiting for a poll (the generation it belonged to is gone)."""
        self.app_steps = [s for s in self.app_steps if s in (STEP_JOIN, STEP_SEND_JOIN)]
        self.stashed_join = None
        self.pending_assignment = None

    def _drop_app_work(self) -> None:
        self.app_steps = []
        self.join_scheduled = False
        self.stashed_join = None
        self.pending_assignment = None
        self.app.reset()
        self.app.loop.idle()

    def _check_poll_interval(self, now_ms: int) -> None:
        """``max.poll.interval.ms``: a batch that outlasts it makes the member leave the group (LeaveGroup,
        as Kafka's heartbeat thread sends), losing its partitions; it rejoins from its next poll."""
        if not self.app.loop.overran(now_ms, self.config.rebalance_timeout_ms):
            return
        if self.state is _UNJOINED and not self.member_id:
            return
        reason = "consumer poll timeout has expired"
        self.note(now_ms, "reset", reason)
        self.lose(now_ms, reason)
        if self.member_id and self.config.group_instance_id is None:
            self._send(leave_request(self.config, self.member_id), now_ms, self.config.request_timeout_ms)
        for request_id in (self.join_id, self.sync_id, self.heartbeat_id):
            if request_id is not None:
                self.inflight.pop(request_id, None)
        self.join_id = self.sync_id = self.heartbeat_id = None
        self.generation = NO_GENERATION
        self.protocol_name = None
        self.member_id = ""
        self.move(ClassicClientState.UNJOINED)
        self.needs_join_prepare = True
        self._drop_rebalance_steps()
        self.poll_timed_out = True
        self.request_rejoin(now_ms, reason)

    def _send_join(self, now_ms: int) -> None:
        if self.needs_join_prepare:
            self._join_prepare(now_ms)  # (not from a poll: nothing to wait for, see _join_waits_for_poll)
        owned = self.owned if self.cooperative else frozenset()
        state = SubscriptionState(
            topics=self.config.topics,
            owned=owned,
            generation=self.owned_generation if owned else self.generation,
            previous=self.previous,
            previous_generation=self.previous_generation,
            rack=self.config.rack,
        )
        request = join_request(
            self.config, self.member_id, self.join_protocols.build(self.assignors, state), self.rejoin_reason
        )
        self.join_claimed = owned
        self.last_join_ms = now_ms
        self.rejoin_needed = False
        self.move(ClassicClientState.PREPARING_REBALANCE)
        if not self.app.app.librdkafka or self.app.app.aligned:
            self.next_heartbeat_ms = None
        self.join_id = self._send(request, now_ms, self.config.join_timeout_ms)
