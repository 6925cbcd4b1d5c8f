"""``ClassicMember``: a sans-IO consumer group member for the classic protocol (JoinGroup / SyncGroup /
Heartbeat / LeaveGroup / OffsetCommit), eager or cooperative (KIP-429).

The driver (the simulator, a test harness, a real client shell) runs the loop::

    for out in member.poll(now_ms): send(out.request)           # requests due now
    member.on_response(out.request_id, response, now_ms)         # when an answer arrives
    wake up again at member.next_deadline()

Nothing here reads a clock, sleeps or touches a socket. Client behaviour follows the Java consumer
(``AbstractCoordinator`` / ``ConsumerCoordinator``, reference §2.3-2.6):

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
from regroup.client.config import MemberConfig, rebalance_protocol
from regroup.client.embedded import JoinProtocols, SubscriptionState, by_topic
from regroup.client.ownership import OwnedPartitions
from regroup.client.requests import commit_request, heartbeat_request, join_request, leave_request, sync_request
from regroup.client.types import (
    STOPPED,
    CallbackEvent,
    CallbackKind,
    Inflight,
    MemberNote,
    MemberState,
    OutgoingRequest,
    Request,
    TopicPartition,
    api_name,
)
from regroup.protocol.classic import NO_GENERATION

S = MemberState
#: states read on every poll, as module constants (the compiled build reads them without a class lookup)
_UNJOINED: Final = MemberState.UNJOINED
_STABLE: Final = MemberState.STABLE
_HEARTBEATING: Final = (MemberState.COMPLETING_REBALANCE, MemberState.STABLE)
#: later than any deadline (``next_deadline``'s starting point)
_NEVER: Final = 2**62


class ClassicMember(OwnedPartitions):
    """One consumer of a classic group. See the module docstring for the driving loop."""

    def __init__(self, config: MemberConfig, partition_counts: Mapping[str, int], now_ms: int = 0) -> None:
        self.config = config
        self.assignors = tuple(registry.get(name) for name in config.strategies)
        self.rebalance_protocol = rebalance_protocol(config.strategies)
        self.partition_counts = dict(partition_counts)
        self.state = S.UNJOINED
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
        self.committed: dict[TopicPartition, int] = {}
        self.join_claimed: frozenset[TopicPartition] = frozenset()  # owned partitions the last JoinGroup listed
        self.join_protocols = JoinProtocols()  # builds each JoinGroup's protocols from what changed since the last
        self.metadata_snapshot: dict[str, int] | None = None  # leader: partition counts it assigned with
        self.inflight: dict[int, Inflight] = {}
        self.join_id: int | None = None
        self.sync_id: int | None = None
        self.heartbeat_id: int | None = None
        self.rejoin_needed = True
        self.rejoin_reason = "initial join"
        self.needs_join_prepare = True
        self.rejoin_at_ms = now_ms
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
        flight."""
        return self.state is _STABLE and not self.rejoin_needed and self.join_id is None and self.sync_id is None

    # ---------------------------------------------------------------------------------------- driving
    def poll(self, now_ms: int) -> list[OutgoingRequest]:
        """Handle what is due at ``now_ms`` (timeouts, lease, heartbeat, auto-commit, rejoin) and return
        the requests to send now, in order."""
        self._now = max(self._now, now_ms)
        if self.state not in STOPPED:
            self._expire_inflight(now_ms)
            self._check_lease(now_ms)
            if self._wants_join() and now_ms >= self.rejoin_at_ms:
                self._send_join(now_ms)
            if self._heartbeating() and self.next_heartbeat_ms is not None and now_ms >= self.next_heartbeat_ms:
                self.heartbeat_id = self._send(
                    heartbeat_request(self.config, self.generation, self.member_id),
                    now_ms,
                    self.config.request_timeout_ms,
                )
            if self._committing() and self.next_commit_ms is not None and now_ms >= self.next_commit_ms:
                self.commit(self.owned, now_ms)
                self.next_commit_ms = now_ms + self.config.auto_commit_interval_ms
        out, self._outbox = self._outbox, []
        return out

    def next_deadline(self) -> int | None:
        """The earliest time ``poll`` has something to do, or None."""
        if self._outbox:
            return self._now
        if self.state in STOPPED:
            return None
        # (the earliest candidate kept as a plain int: asked after every step of the member)
        earliest = _NEVER
        for inf in self.inflight.values():
            if inf.deadline_ms < earliest:
                earliest = inf.deadline_ms
        if self.owned and self.lease_ms is not None and self.lease_ms < earliest:
            earliest = self.lease_ms
        if self._wants_join() and self.rejoin_at_ms < earliest:
            earliest = self.rejoin_at_ms
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

    def leave(self, now_ms: int) -> None:
        """Close the consumer: commit and revoke (or lose, mid-rebalance) what it owns, then LeaveGroup
        (static members do not send it, KIP-345)."""
        if self.state in STOPPED:
            return
        self._now = max(self._now, now_ms)
        if self.owned:
            if self.state is _STABLE and self.generation >= 0:
                self.revoke(self.owned, now_ms, "consumer closed")
            else:
                self.lose(now_ms, "consumer closed during a rebalance")
        if self.member_id and self.config.group_instance_id is None:
            self._send(leave_request(self.config, self.member_id), now_ms, self.config.request_timeout_ms)
        self.state = S.LEFT
        self.inflight = {k: v for k, v in self.inflight.items() if v.api in ("OffsetCommit", "LeaveGroup")}

    def crash(self) -> None:
        """The process dies: no callback, no commit, no LeaveGroup; processing stops."""
        self.state = S.CRASHED
        self.owned = frozenset()
        self.inflight.clear()
        self._outbox.clear()

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

    # ------------------------------------------------------------------ helpers used by ``responses``
    @property
    def callback_generation(self) -> int:
        return self.generation

    @property
    def auto_commit(self) -> bool:
        return self.config.auto_commit

    def commit(self, partitions: frozenset[TopicPartition], now_ms: int) -> None:
        """OffsetCommit of ``partitions`` at their processed position (``now_ms``)."""
        if not partitions or self.generation < 0 or not self.member_id:
            return
        request = commit_request(self.config, self.generation, self.member_id, partitions, now_ms)
        self._send(request, now_ms, self.config.request_timeout_ms)

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
        self.state = S.UNJOINED
        self.needs_join_prepare = True
        self.request_rejoin(now_ms, reason)

    def fail(self, now_ms: int, reason: str) -> None:
        """A fatal error: the consumer stops (its partitions are lost)."""
        self.note(now_ms, "fatal", reason)
        self.lose(now_ms, reason)
        self.state = S.FAILED
        self.inflight.clear()

    def extend_lease(self, sent_ms: int) -> None:
        bound = sent_ms + min(self.config.session_timeout_ms, self.config.rebalance_timeout_ms)
        self.lease_ms = bound if self.lease_ms is None else max(self.lease_ms, bound)

    def check_metadata(self, now_ms: int) -> None:
        if self.state is not _STABLE or not self.is_leader or self.metadata_snapshot is None:
            return
        current = {t: self.partition_counts.get(t, 0) for t in self.metadata_snapshot}
        if current != self.metadata_snapshot:
            self.request_rejoin(now_ms, "topic metadata changed")

    def send_sync(self, now_ms: int, assignments: tuple[tuple[str, bytes], ...]) -> None:
        self.state = S.COMPLETING_REBALANCE
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
        """Heartbeats run once the member has a generation (Kafka disables them while joining)."""
        return self.state in _HEARTBEATING and self.heartbeat_id is None

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
            if request_id == self.join_id or request_id == self.sync_id:
                self.join_id = self.sync_id = None
                self.state = S.UNJOINED
                self.request_rejoin(now_ms, f"{inflight.api} timed out", self.config.retry_backoff_ms)
            elif request_id == self.heartbeat_id:
                self.heartbeat_id = None
                self.next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    def _check_lease(self, now_ms: int) -> None:
        if self.owned and (self.lease_ms is None or now_ms >= self.lease_ms):
            self.lose(now_ms, "session lease expired: the coordinator may have removed this member")
            if self.state is _STABLE:
                self.request_rejoin(now_ms, "partitions lost after the session lease expired")

    def _join_prepare(self, now_ms: int) -> None:
        """Kafka's ``onJoinPrepare``, once per rebalance."""
        if self.generation == NO_GENERATION or not self.member_id:
            self.lose(now_ms, "generation reset")
            return
        if self.config.auto_commit:
            self.commit(self.owned, now_ms)  # Kafka: maybeAutoCommitOffsetsSync before every rebalance
        if self.cooperative:
            unsubscribed = frozenset(tp for tp in self.owned if tp[0] not in self.config.topics)
            if unsubscribed:  # already committed above
                self.callback(CallbackKind.REVOKED, unsubscribed, now_ms, "topics no longer subscribed")
                self.owned = self.owned - unsubscribed
        else:
            self.callback(
                CallbackKind.REVOKED, self.owned, now_ms, "eager rebalance: revoke everything before JoinGroup"
            )
            self.owned = frozenset()

    def _send_join(self, now_ms: int) -> None:
        if self.needs_join_prepare:
            self._join_prepare(now_ms)
            self.needs_join_prepare = False
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
        self.rejoin_needed = False
        self.state = S.PREPARING_REBALANCE
        self.next_heartbeat_ms = None
        self.join_id = self._send(request, now_ms, self.config.join_timeout_ms)
