"""``ShareClientMember``: a sans-IO share consumer (KIP-932: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge),
driven like the other members::

    for out in member.poll(now_ms): send(out.request)           # requests due now
    member.on_response(out.request_id, response, now_ms)         # when an answer arrives
    wake up again at member.next_deadline()

Nothing here reads a clock, sleeps or touches a socket. Behaviour follows Kafka's ``KafkaShareConsumer`` with
implicit acknowledgement (its default):

* join with epoch 0 and the subscribed topics, then heartbeat every interval the coordinator returns, one
  heartbeat in flight at a time; the assignment in an answer is the set of partitions the member fetches from,
  taken at once (a share group revokes nothing first);
* the application polls: a ShareFetch for the assigned partitions acquires up to ``max_poll_records`` records
  (a different partition first each time); the application processes them (the application model's time per
  record, ``client.app``) and its next poll acknowledges them, riding on the next ShareFetch: ACCEPT, or, for a
  record whose processing failed (``release_fraction`` / ``reject_fraction``, drawn per record), RELEASE (it is
  delivered again) or REJECT (a poison record: archived). Acknowledgements no fetch can carry (no assignment,
  not in the group) go in a ShareAcknowledge of their own;
* a ShareFetch that finds nothing waits at the broker (``fetch_max_wait_ms``); after an empty answer the next
  fetch goes out at once (after an error, after the backoff);
* FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: rejoin with epoch 0 keeping the member id (records in hand are still
  processed and acknowledged); fatal errors stop the member; other errors are retried after the backoff;
* leave (``close()``, called from the application thread): the batch in hand is finished first, then a
  ShareAcknowledge with its acknowledgements closes the share session (the broker releases whatever the member
  still holds) and a heartbeat with epoch -1 leaves the group, sent together;
* crash: nothing more is sent. The records it held go back when the broker sees its connection drop, or when
  their locks lapse (the driver decides which, ``sim``).

A share member owns no partition exclusively, so it has no rebalance callbacks and no session lease: records
are protected by their acquisition locks, which the broker keeps.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from typing import Final

from regroup.client.app import INSTANT_APP, AppModel, Draws
from regroup.client.config import ShareConsumerConfig
from regroup.client.consumer_member import FENCED  # (the same errors send a share member back to epoch 0)
from regroup.client.types import ClientStateError, Inflight, MemberNote, OutgoingRequest, Request, api_name
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import ClientInfo
from regroup.protocol.share import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from regroup.protocol.share_fetch import (
    ACCEPT,
    REJECT,
    RELEASE,
    AckRanges,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    SharePartitionId,
    ack_ranges,
)

E = ErrorCode

#: Errors that end the share consumer.
FATAL: Final = frozenset(
    {
        E.INVALID_REQUEST,
        E.GROUP_MAX_SIZE_REACHED,
        E.UNSUPPORTED_VERSION,
        E.GROUP_AUTHORIZATION_FAILED,
        E.TOPIC_AUTHORIZATION_FAILED,
        E.GROUP_ID_NOT_FOUND,
    }
)


class ShareClientState(enum.Enum):
    """Where a share member is."""

    UNJOINED = "Unjoined"  # no join in flight (before the first, after being fenced, or backing off)
    JOINING = "Joining"  # the epoch-0 heartbeat is in flight
    STABLE = "Stable"  # in the group: heartbeating, fetching from its assignment
    LEFT = "Left"
    CRASHED = "Crashed"
    FAILED = "Failed"

    @property
    def running(self) -> bool:
        return self not in _ENDS


_ENDS: Final = (ShareClientState.LEFT, ShareClientState.CRASHED, ShareClientState.FAILED)
#: the share member's transitions (the stopped states go nowhere; the running ones may also close, crash or fail)
SHARE_CLIENT_TRANSITIONS: Final[dict[ShareClientState, frozenset[ShareClientState]]] = {
    ShareClientState.UNJOINED: frozenset((ShareClientState.JOINING, *_ENDS)),  # the epoch-0 heartbeat
    ShareClientState.JOINING: frozenset((ShareClientState.STABLE, ShareClientState.UNJOINED, *_ENDS)),
    ShareClientState.STABLE: frozenset((ShareClientState.UNJOINED, *_ENDS)),  # fenced: rejoin
    ShareClientState.LEFT: frozenset(),
    ShareClientState.CRASHED: frozenset(),
    ShareClientState.FAILED: frozenset(),
}


class ShareClientMember:
    """One share consumer. See the module docstring for the driving loop.

    ``topic_ids``: topic name -> topic id for the topics the client knows; assignments name topics by id.
    ``draws``: the process's random source (processing times and failed records); None draws nothing."""

    def __init__(
        self,
        config: ShareConsumerConfig,
        topic_ids: Mapping[str, uuid.UUID],
        now_ms: int = 0,
        app: AppModel = INSTANT_APP,
        draws: Draws | None = None,
    ) -> None:
        self.config = config
        self.app = app
        self.draws = draws
        self.topic_names = {topic_id: name for name, topic_id in topic_ids.items()}
        self.state = ShareClientState.UNJOINED
        self.member_id = config.member_id
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval_ms = config.heartbeat_interval_ms
        #: the partitions the member fetches from (the last assignment received)
        self.assignment: frozenset[SharePartitionId] = frozenset()
        #: records in hand (being processed) until ``batch_done_ms``
        self.batch: list[tuple[SharePartitionId, int]] = []
        self.batch_done_ms: int | None = None
        #: processed records waiting to be acknowledged: partition -> (offset, acknowledge type)
        self.pending: dict[SharePartitionId, list[tuple[int, int]]] = {}
        self.notes: list[MemberNote] = []
        self.inflight: dict[int, Inflight] = {}
        self.heartbeat_id: int | None = None
        self.fetch_id: int | None = None
        self.ack_id: int | None = None
        self.full_needed = True
        self.next_heartbeat_ms: int | None = None
        self.next_fetch_ms = now_ms
        self.rejoin_at_ms = now_ms + self._startup_ms()
        self.fetched = False  # a share session was opened (a ShareFetch sent)
        #: closing: when the batch in hand is done, then the requests the close waits for
        self.close_at_ms: int | None = None
        self.close_ack_id: int | None = None
        self.close_leave_id: int | None = None
        self._close_leaves = False
        self._fetches = 0
        self._next_request_id = 1
        self._outbox: list[OutgoingRequest] = []
        self._now = now_ms
        self._names: tuple[frozenset[SharePartitionId], frozenset[tuple[str, int]]] = (frozenset(), frozenset())

    # ------------------------------------------------------------------------------------- observing
    @property
    def generation(self) -> int:
        """The member epoch (the name the simulator's log uses for every protocol)."""
        return self.member_epoch

    @property
    def assigned(self) -> frozenset[tuple[str, int]]:
        """The assignment as (topic name, partition) pairs (partitions of unknown topic ids left out)."""
        ids = self.assignment
        if self._names[0] is not ids:
            names = self.topic_names
            self._names = (ids, frozenset((names[t], p) for t, p in ids if t in names))
        return self._names[1]

    @property
    def closing(self) -> bool:
        """Closed, and ``close()`` has not returned yet: the batch in hand is not done or the closing requests
        are not answered."""
        return self.close_at_ms is not None or self.close_ack_id is not None or self.close_leave_id is not None

    def move(self, to: ShareClientState) -> None:
        """The member's state changes only here, as ``SHARE_CLIENT_TRANSITIONS`` allows."""
        if to not in SHARE_CLIENT_TRANSITIONS[self.state]:
            raise ClientStateError(f"{self.config.client_id}: {self.state.value} -> {to.value} is not a transition")
        self.state = to

    def note(self, now_ms: int, kind: str, detail: str) -> None:
        self.notes.append(MemberNote(at_ms=now_ms, kind=kind, detail=detail))

    # ---------------------------------------------------------------------------------------- driving
    def poll(self, now_ms: int) -> list[OutgoingRequest]:
        """Handle what is due at ``now_ms`` (timeouts, the batch in hand, heartbeat, fetch, acknowledgements)
        and return the requests to send now, in order."""
        self._now = max(self._now, now_ms)
        if self.state.running:
            self._expire_inflight(now_ms)
            if self.batch_done_ms is not None and now_ms >= self.batch_done_ms:
                self._finish_batch()
            if self.state is ShareClientState.UNJOINED and self.heartbeat_id is None and now_ms >= self.rejoin_at_ms:
                self._send_heartbeat(now_ms, joining=True)
            elif self._heartbeat_due(now_ms):
                self._send_heartbeat(now_ms, joining=False)
            if self._fetch_ready() and now_ms >= self.next_fetch_ms:
                self._send_fetch(now_ms)
            elif self._acks_alone():
                self.ack_id = self._send(self._ack_request(close=False), now_ms)
        elif self.closing:
            self._close_step(now_ms)
        out, self._outbox = self._outbox, []
        return out

    def next_deadline(self) -> int | None:
        """The earliest time ``poll`` has something to do, or None."""
        if self._outbox:
            return self._now
        if not self.state.running:
            return self._close_deadline()
        candidates = [inf.deadline_ms for inf in self.inflight.values()]
        if self.batch_done_ms is not None:
            candidates.append(self.batch_done_ms)
        if self.heartbeat_id is None:
            if self.state is ShareClientState.UNJOINED:
                candidates.append(self.rejoin_at_ms)
            elif self._in_group() and self.next_heartbeat_ms is not None:
                candidates.append(self.next_heartbeat_ms)
        if self._fetch_ready():
            candidates.append(max(self.next_fetch_ms, self._now))
        elif self._acks_alone():
            candidates.append(self._now)
        return min(candidates) if candidates else None

    def on_response(self, request_id: int, response: object, now_ms: int) -> None:
        """Feed the coordinator's answer to request ``request_id``; answers nobody waits for are ignored."""
        self._now = max(self._now, now_ms)
        inflight = self.inflight.pop(request_id, None)
        if inflight is None:
            return
        if request_id == self.close_ack_id:
            self.close_ack_id = None
        elif request_id == self.close_leave_id:
            self.close_leave_id = None
        elif not self.state.running:
            return
        elif isinstance(response, ShareGroupHeartbeatResponse) and request_id == self.heartbeat_id:
            self.heartbeat_id = None
            self._on_heartbeat(inflight, response, now_ms)
        elif isinstance(response, ShareFetchResponse) and request_id == self.fetch_id:
            self.fetch_id = None
            self._on_fetch(inflight, response, now_ms)
        elif isinstance(response, ShareAcknowledgeResponse) and request_id == self.ack_id:
            self.ack_id = None
            if response.error is not E.NONE:
                self.note(now_ms, "retry", f"ShareAcknowledge: {response.error.name}")

    def leave(self, now_ms: int) -> None:
        """Close the consumer: once the batch in hand is processed, acknowledge it closing the share session, and
        leave the group (epoch -1)."""
        if not self.state.running:
            return
        self._now = max(self._now, now_ms)
        self._close_leaves = self.member_epoch > 0 or self.state is ShareClientState.JOINING
        self.move(ShareClientState.LEFT)
        self.inflight.clear()  # (answers to the heartbeat or fetch in flight no longer matter)
        self.heartbeat_id = self.fetch_id = self.ack_id = None
        self.close_at_ms = self.batch_done_ms if self.batch else now_ms

    def crash(self) -> None:
        """The process dies: nothing more is sent; what it held is the broker's to release."""
        self.move(ShareClientState.CRASHED)
        self.batch = []
        self.batch_done_ms = None
        self.pending = {}
        self.inflight.clear()
        self._outbox.clear()
        self.heartbeat_id = self.fetch_id = self.ack_id = None
        self.close_at_ms = self.close_ack_id = self.close_leave_id = None

    # -------------------------------------------------------------------------------------- internals
    def _startup_ms(self) -> int:
        """How long after its start the process sends its first request (0 when phases are aligned)."""
        if self.app.aligned or self.draws is None:
            return 0
        return int(self.draws.random() * self.app.startup_ms)

    def _in_group(self) -> bool:
        return self.state is ShareClientState.STABLE and self.member_epoch > 0

    def _heartbeat_due(self, now_ms: int) -> bool:
        if self.heartbeat_id is not None or not self._in_group():
            return False
        return self.next_heartbeat_ms is not None and now_ms >= self.next_heartbeat_ms

    def _fetch_ready(self) -> bool:
        """Whether the application is waiting in ``poll()`` for records it can fetch."""
        return self._in_group() and bool(self.assignment) and not self.batch and self.fetch_id is None

    def _acks_alone(self) -> bool:
        """Acknowledgements are waiting that no fetch will carry."""
        if not self.pending or self.ack_id is not None or self.fetch_id is not None:
            return False
        return not (self._in_group() and self.assignment)

    def _send_heartbeat(self, now_ms: int, *, joining: bool) -> None:
        config = self.config
        if joining:
            self.member_epoch = JOIN_EPOCH
            self.full_needed = True
            self.move(ShareClientState.JOINING)
        full = self.full_needed
        request = ShareGroupHeartbeatRequest(
            group_id=config.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            rack_id=config.rack if full else None,
            subscribed_topic_names=tuple(sorted(set(config.topics))) if full else None,
            client=ClientInfo(client_id=config.client_id),
        )
        self.heartbeat_id = self._send(request, now_ms)

    def _on_heartbeat(self, inflight: Inflight, resp: ShareGroupHeartbeatResponse, now_ms: int) -> None:
        error = resp.error
        request = inflight.request
        assert isinstance(request, ShareGroupHeartbeatRequest)
        if error is E.NONE:
            self.full_needed = False
            self.member_epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            self.next_heartbeat_ms = max(now_ms, inflight.sent_ms + self.heartbeat_interval_ms)
            if self.state is ShareClientState.JOINING:
                self.move(ShareClientState.STABLE)
            if resp.assignment is not None:
                self.assignment = frozenset((t, p) for t, ps in resp.assignment for p in ps)
            return
        self.full_needed = True
        if error in FENCED:
            if request.member_epoch == self.member_epoch:
                self.note(now_ms, "reset", f"ShareGroupHeartbeat: {error.name}")
                self._rejoin(now_ms)
        elif error in FATAL:
            self._fail(now_ms, f"ShareGroupHeartbeat: {error.name}")
        else:  # coordinator moving or loading, unknown server error: back off and retry
            self.note(now_ms, "retry", f"ShareGroupHeartbeat: {error.name}")
            if self.state is ShareClientState.JOINING:
                self.move(ShareClientState.UNJOINED)
                self.rejoin_at_ms = now_ms + self.config.retry_backoff_ms
            else:
                self.next_heartbeat_ms = now_ms + self.config.retry_backoff_ms

    def _rejoin(self, now_ms: int) -> None:
        """Fenced: no assignment any more; rejoin with epoch 0 keeping the member id."""
        self.member_epoch = JOIN_EPOCH
        self.assignment = frozenset()
        self.next_heartbeat_ms = None
        self.move(ShareClientState.UNJOINED)
        self.rejoin_at_ms = now_ms
        self.note(now_ms, "rejoin", "rejoining with epoch 0")

    def _fail(self, now_ms: int, reason: str) -> None:
        self.note(now_ms, "fatal", reason)
        self.move(ShareClientState.FAILED)
        self.batch = []
        self.batch_done_ms = None
        self.pending = {}
        self.inflight.clear()

    def _send_fetch(self, now_ms: int) -> None:
        order = sorted(self.assignment)
        shift = self._fetches % len(order)  # a different partition first each time
        self._fetches += 1
        request = ShareFetchRequest(
            group_id=self.config.group_id,
            member_id=self.member_id,
            partitions=tuple(order[shift:] + order[:shift]),
            max_records=self.app.max_poll_records,
            max_wait_ms=self.config.fetch_max_wait_ms,
            acknowledgements=self._take_acks(),
        )
        self.fetched = True
        self.fetch_id = self._send(request, now_ms, extra_ms=self.config.fetch_max_wait_ms)

    def _on_fetch(self, inflight: Inflight, resp: ShareFetchResponse, now_ms: int) -> None:
        if resp.error is not E.NONE:
            self.note(now_ms, "retry", f"ShareFetch: {resp.error.name}")
            self.next_fetch_ms = now_ms + self.config.retry_backoff_ms
            return
        records = [
            (tp, offset) for tp, runs in resp.acquired for first, last, _ in runs for offset in range(first, last + 1)
        ]
        if not records:
            wait = max(self.config.fetch_max_wait_ms, self.config.retry_backoff_ms)
            self.next_fetch_ms = max(now_ms, inflight.sent_ms + wait)
            return
        self.batch = records
        self.batch_done_ms = now_ms + int(self.app.records_ms(len(records), self.draws) + 0.5)

    def _finish_batch(self) -> None:
        """The application has processed the records in hand: each is to be acknowledged, as its processing
        went."""
        release, reject = self.config.release_fraction, self.config.reject_fraction
        draws = self.draws if release > 0 or reject > 0 else None
        for tp, offset in self.batch:
            ack_type = ACCEPT
            if draws is not None:
                u = draws.random()
                ack_type = RELEASE if u < release else REJECT if u < release + reject else ACCEPT
            self.pending.setdefault(tp, []).append((offset, ack_type))
        self.batch = []
        self.batch_done_ms = None

    def _take_acks(self) -> tuple[tuple[SharePartitionId, AckRanges], ...]:
        acks = tuple((tp, ack_ranges(self.pending[tp])) for tp in sorted(self.pending))
        self.pending = {}
        return acks

    def _ack_request(self, *, close: bool) -> ShareAcknowledgeRequest:
        return ShareAcknowledgeRequest(
            group_id=self.config.group_id,
            member_id=self.member_id,
            acknowledgements=self._take_acks(),
            close_session=close,
        )

    # --- closing ---------------------------------------------------------------------------------------
    def _close_step(self, now_ms: int) -> None:
        """The batch in hand done: acknowledge it closing the share session, and leave (epoch -1)."""
        if self.close_at_ms is not None:
            if now_ms < self.close_at_ms:
                return
            self.close_at_ms = None
            if self.batch:
                self._finish_batch()
            if self.fetched or self.pending:
                self.close_ack_id = self._send(self._ack_request(close=True), now_ms)
            if self._close_leaves:
                leave = ShareGroupHeartbeatRequest(
                    group_id=self.config.group_id,
                    member_id=self.member_id,
                    member_epoch=LEAVE_EPOCH,
                    client=ClientInfo(client_id=self.config.client_id),
                )
                self.close_leave_id = self._send(leave, now_ms)
        if self.close_ack_id is not None and not self._waiting(self.close_ack_id, now_ms):
            self.close_ack_id = None
        if self.close_leave_id is not None and not self._waiting(self.close_leave_id, now_ms):
            self.close_leave_id = None

    def _waiting(self, request_id: int, now_ms: int) -> bool:
        """Whether request ``request_id`` is still unanswered and within its timeout (else it is forgotten)."""
        waiting = self.inflight.get(request_id)
        if waiting is not None and now_ms < waiting.deadline_ms:
            return True
        self.inflight.pop(request_id, None)
        return False

    def _close_deadline(self) -> int | None:
        if self.close_at_ms is not None:
            return self.close_at_ms
        deadlines = [
            self.inflight[i].deadline_ms for i in (self.close_ack_id, self.close_leave_id) if i in self.inflight
        ]
        return min(deadlines) if deadlines else None

    # --- requests ----------------------------------------------------------------------------------------
    def _expire_inflight(self, now_ms: int) -> None:
        for request_id in sorted(self.inflight):
            inflight = self.inflight[request_id]
            if inflight.deadline_ms > now_ms:
                continue
            del self.inflight[request_id]
            self.note(now_ms, "timeout", f"{inflight.api} request {request_id} timed out")
            if request_id == self.heartbeat_id:
                self.heartbeat_id = None
                self.full_needed = True
                if self.state is ShareClientState.JOINING:
                    self.move(ShareClientState.UNJOINED)
                    self.rejoin_at_ms = now_ms + self.config.retry_backoff_ms
                else:
                    self.next_heartbeat_ms = now_ms + self.config.retry_backoff_ms
            elif request_id == self.fetch_id:  # (its acknowledgements are lost: those records' locks lapse)
                self.fetch_id = None
                self.next_fetch_ms = now_ms + self.config.retry_backoff_ms
            elif request_id == self.ack_id:
                self.ack_id = None

    def _send(self, request: Request, now_ms: int, extra_ms: int = 0) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        self.inflight[request_id] = Inflight(
            api=api_name(request),
            request=request,
            sent_ms=now_ms,
            deadline_ms=now_ms + self.config.request_timeout_ms + extra_ms,
            generation=self.member_epoch,
            member_id=self.member_id,
        )
        self._outbox.append(OutgoingRequest(request_id=request_id, request=request))
        return request_id
