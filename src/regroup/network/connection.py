"""One client connection, as an ``asyncio.Protocol``: frames are cut from the received bytes in
``data_received``, each request is decoded and its handler started eagerly (``network/eager.py``), and the
responses are written with ``transport.write`` strictly in request order (Kafka clients match responses to
requests by order and correlation id).

* **Synchronous path.** A request whose handler finishes without suspending (Heartbeat, Metadata,
  ApiVersions, ...) is answered inside ``data_received``: no task, no event-loop round trip. The responses
  of the requests handled in one turn go out in one write.
* **Answers at once.** A responder may answer a request from its bytes before it is decoded
  (``answer_at_once``: the server's answers to a steady member's heartbeat or a usual Produce,
  ``server/at_once.py``); such an
  answer takes its place in request order like any other, and a request it declines is decoded and handed
  to ``respond``.
* **Parked or durable requests.** A handler that suspends (a JoinGroup parked for seconds, a commit waiting
  for its append) finishes in a task; requests behind it are still *computed* at once, but their responses
  wait in a per-connection FIFO until everything before them is written. Requests of different connections
  never wait for each other.
* **Fairness.** One turn of the event loop handles at most ``FRAMES_PER_TURN`` requests or
  ``SECONDS_PER_TURN`` of one connection (the request that crosses the time bound is the turn's last); the
  rest of what it sent is handled in later turns (``loop.call_soon``), after every other connection with
  data has had its turn. A client that pipelines thousands of requests therefore delays another client's
  heartbeat by about one turn, not by its whole burst. With a ``TurnBudget`` (the server's, shared by all
  its connections: ``network/turn_budget.py``) a connection also stops where the turn's shared budget ends,
  after one request at least, so that many connections with data at once take the loop a turn at a time too;
  what it leaves for later waits in the budget's queue, each waiting connection taking a short turn in order
  (those that come back after one behind those new to the wait), a budget's worth per turn. A connection
  whose next request is a classic rebalance's (``REBALANCE_APIS``) handles none when it gets data after the
  shared budget is spent: it waits in the queue's second line at once.
* **Back-pressure.** Two bounds per connection, checked before each request is handled: at most
  ``max_in_flight`` requests in the FIFO (unfinished, or finished and waiting behind an unfinished one; the
  responses of one turn's synchronous requests are bounded by ``FRAMES_PER_TURN`` instead), and at most
  ``max_queued_bytes`` of responses not yet accepted by the socket (the transport's write buffer plus the
  responses waiting in the FIFO and in this turn's write). At either bound the connection
  stops handling requests and stops reading (TCP back-pressure: the client's writes block, as Kafka mutes
  the channel); it resumes when a parked request finishes or the write buffer drains to a quarter of the
  bound, i.e. when the client reads. Reading also pauses while complete requests wait for a later turn, so
  a connection holds at most one read (256 KiB) of unhandled requests besides the frame being received (up
  to ``max_frame_bytes``); its responses take at most ``max_queued_bytes`` plus one response.
* **Large requests are decoded off the loop.** A frame of at least ``DECODE_ASIDE_BYTES`` (an OffsetCommit
  of every partition of a large assignment, a CreateTopics of thousands of partitions) is decoded in the
  connection's decoding thread, whose work the interpreter interleaves with the loop's, so the loop goes on
  serving other connections meanwhile. This connection handles nothing else until that request's handler
  has taken its first step, so its requests are still handled in the order they were sent. A dispatcher with
  ``plan_aside`` also has it work on the decoded request there (the core's records of a large OffsetCommit).
  The first request of an API version in the process (once authenticated) waits, with what follows it, while
  that thread imports the version's kio modules and composes their readers and writers
  (``codec.prepare_version``: 4-10 ms the loop would spend once per version); it is then handled as any other.
  Other connections' requests that arrived after it may be handled first (as in Kafka, whose request handler
  threads take different connections' requests at once), except for the group membership APIs and the offset
  commits (``ORDERED_APIS``), whose order across connections decides a group's state: their first is prepared
  on the loop, where it stands (and a server has the decoding thread prepare all their versions once it serves).
* **Idleness.** A connection idle for ``max_idle_ms`` (Kafka's ``connections.max.idle.ms``: no bytes read,
  no response written, and no request outstanding — a JoinGroup parked for a long rebalance keeps its
  connection) is closed. One timer per connection checks it; activity only moves a timestamp, and the timer
  re-arms itself for the remainder when it fires.
* **Admission.** ``admit`` (the server's connection limits, ``network/admission.py``) is asked once the peer
  address is known; a refused connection is closed at once, before anything is read.
* **Stalls.** With a ``StallObserver`` (the server's stall watchdog), every request's synchronous handling is
  timed (from the end of the one before: cutting its frame, decoding, the handler's first step, encoding) with
  the clock reading the turn budget takes anyway, and so is each later step of a handler that suspended; a
  step of at least ``notable_s`` is reported with its request.

Anything the peer gets wrong (bad frame, unknown API, undecodable request) closes this connection only, after
the responses already complete in front of it are written; so does a failure of the server's own while a frame
is handled (the process out of descriptors when a message's module is first imported, say), logged at WARNING at
most once a minute per kind. On end of stream or a reset the connection's
outstanding handler tasks are cancelled: the core keeps whatever it already did (a parked member stays until
it rejoins or its session expires, as in Kafka) and the response is simply never written.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol, cast

from regroup.network.admission import RateLimit
from regroup.network.codec import DecodedRequest, VersionRanges, decode_request, prepare_version, unprepared
from regroup.network.deferred import Deferred
from regroup.network.eager import Started, start
from regroup.network.errors import CloseConnection, ProtocolError
from regroup.network.framing import DEFAULT_MAX_FRAME_BYTES, FrameBuffer, FramedPieces
from regroup.network.limits import Limits
from regroup.network.session import Session, SessionState
from regroup.network.turn_budget import QUEUED_TURN_S, Later, TurnBudget

log = logging.getLogger("regroup.network.connection")

OWN_FAILURE_LOG_INTERVAL_S = 60.0
_own_failures = RateLimit(OWN_FAILURE_LOG_INTERVAL_S)  # the server's own failures to handle a frame, by type

DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_QUEUED_BYTES = 1024 * 1024
DEFAULT_MAX_IDLE_MS = 600_000
#: the most one connection handles in one turn of the event loop before yielding to the others
FRAMES_PER_TURN = 128
#: the largest frame a connection not yet authenticated may send (Kafka's sasl.server.max.receive.size)
SASL_MAX_RECEIVE_BYTES = 524_288
SECONDS_PER_TURN = 0.005
#: the requests of a classic rebalance (JoinGroup, LeaveGroup, SyncGroup): a connection whose next request is
#: one of them, left for a later turn, waits in the turn budget's second line, behind the connections whose
#: next request is anything else (a steady member's heartbeat, commit or fetch)
REBALANCE_APIS = frozenset({11, 13, 14})
#: the APIs whose requests' order across connections decides a group's state: the membership APIs of the three
#: group types (classic, KIP-848, share) and the offset commits checked against a member's generation or epoch
#: (OffsetCommit, TxnOffsetCommit); a version's first is prepared on the loop, where it stands
ORDERED_APIS = REBALANCE_APIS | {12, 68, 76, 8, 28}
#: frames at least this large are decoded in the decoding thread (about 1.5 ms of kio's time on the loop)
DECODE_ASIDE_BYTES = 64 * 1024

_decoder: concurrent.futures.ThreadPoolExecutor | None = None


def _decoding_thread() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread every connection decodes its large frames in (decoding is pure: kio over bytes)."""
    global _decoder
    if _decoder is None:
        _decoder = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="regroup-decode")
    return _decoder


def prepare_ordered_versions(versions: VersionRanges) -> concurrent.futures.Future[None]:
    """Have the decoding thread prepare every advertised version of ``ORDERED_APIS``, each API's newest first
    (their first requests are prepared on the loop otherwise, where they stand; about 130 ms of that thread for
    all of them). Called once a server is serving; a version that fails to prepare is left to its first request."""

    def prepare_all() -> None:
        newest_first = sorted(
            ((key, version) for key in ORDERED_APIS if key in versions for version in range(*_span(versions[key]))),
            key=lambda kv: (versions[kv[0]][1] - kv[1], kv[0]),  # every API's newest, then the ones before
        )
        for key, version in newest_first:
            try:
                prepare_version(key, version)
            except Exception as exc:  # (the server's own, met again by that version's first request)
                log.debug("could not prepare api key %d version %d: %s", key, version, exc)

    return _decoding_thread().submit(prepare_all)


def _span(advertised: tuple[int, int]) -> tuple[int, int]:
    return advertised[0], advertised[1] + 1


#: a framed response (large ones may come in pieces: ``framing.FramedPieces``), or None when none is sent
Response = bytes | FramedPieces | None


class StallObserver(Protocol):
    """Told which requests held the event loop long (the server's stall watchdog)."""

    @property
    def notable_s(self) -> float:
        """Steps at least this long (seconds) are reported."""
        ...

    def request_step(self, seconds: float, request: DecodedRequest, connection: Connection) -> None:
        """A step of ``request``'s handling on ``connection`` held the loop ``seconds``."""
        ...


class Responder(Protocol):
    """What answers a connection's requests (the server's dispatcher): the API versions and identifier limits
    requests are decoded against, and the framed response to one request (None: none is sent). Raising
    ``ProtocolError`` or ``CloseConnection`` closes the connection after the responses before it."""

    @property
    def versions(self) -> VersionRanges: ...
    @property
    def limits(self) -> Mapping[int, Limits]: ...
    async def respond(
        self, request: DecodedRequest, *, client_host: str, connection_id: int, session: Session | None = None
    ) -> Response: ...


#: ``answer_at_once(frame, principal, client_host, connection_id, busy)``: the framed response to a request
#: answered at once from its bytes (or a ``Deferred`` that settles with it), or None (it is decoded and handed to
#: ``respond``); ``busy``: an earlier request of the connection is still being handled
AnswerAtOnce = Callable[[bytes, str, str, int, bool], "bytes | Deferred[bytes] | None"]
#: ``plan_aside(request)``: work on a large decoded request done on the decoding thread, kept in ``request.plan``
#: (it must not raise)
PlanAside = Callable[[DecodedRequest], None]


def _decode_and_plan(
    frame: bytes, versions: VersionRanges, limits: Mapping[int, Limits], plan_aside: PlanAside | None
) -> DecodedRequest:
    """``decode_request``, then ``plan_aside`` of the request: the decoding thread's work for one large frame."""
    request = decode_request(frame, versions, limits)
    if plan_aside is not None:
        plan_aside(request)
    return request


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class _Slot:
    """A response position in request order: ``done`` with ``data`` (None: nothing to send) or ``error``."""

    __slots__ = ("data", "done", "error", "task")

    def __init__(self) -> None:
        self.done = False
        self.data: Response = None
        self.error: BaseException | None = None
        self.task: asyncio.Task[Response] | None = None


class Connection(asyncio.Protocol):
    def __init__(
        self,
        dispatcher: Responder,
        connection_id: int,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        max_idle_ms: int = DEFAULT_MAX_IDLE_MS,
        admit: Callable[[Connection], bool] | None = None,
        on_close: Callable[[Connection], None] | None = None,
        new_session: Callable[[asyncio.Transport], Session] | None = None,
        stalls: StallObserver | None = None,
        turn_budget: TurnBudget | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.connection_id = connection_id
        self.peer = "?"
        self.client_host = ""
        self.admitted = False
        self._frames = FrameBuffer(max_frame_bytes)
        self._max_frame_bytes = max_frame_bytes
        self._max_in_flight = max(1, max_in_flight)
        self._max_queued_bytes = max(1, max_queued_bytes)
        self._max_idle_s = max_idle_ms / 1000
        self._admit = admit
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._slots: collections.deque[_Slot] = collections.deque()
        self._held_bytes = 0  # responses done but waiting in _slots behind an unfinished one
        self._reading_paused = False
        self._writing_paused = False
        self._processing = False
        self._next_turn: asyncio.Handle | Later | None = None  # buffered requests left for a later turn
        self._decoding = False  # a large frame is being decoded aside: nothing behind it is handled yet
        self._closing = False
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._new_session = new_session
        #: who the peer is and what it may send now (``network/session.py``); PLAINTEXT and anonymous until made
        self.session = Session(listener="PLAINTEXT", monotonic_ms=self._monotonic_ms, wall_ms=_wall_ms)
        self.session.on_released = self._released
        self._close_when_written = False  # the session failed: close once the responses before are written
        self._stalls = stalls
        #: the request handling every connection of the server shares per turn of the loop, if any
        self._turn_budget = turn_budget
        self._in_queued_turn = False  # handling a turn from the turn budget's queue (``_queued_turn``)
        self._notable_s = float("inf") if stalls is None else stalls.notable_s
        self._on_step = None if stalls is None else self._late_step
        #: the dispatcher's answers at once from a request's bytes (``server/at_once.py``), if it gives any
        self._at_once: AnswerAtOnce | None = getattr(dispatcher, "answer_at_once", None)
        #: the dispatcher's work on a large request done where it is decoded, if it does any
        self._plan_aside: PlanAside | None = getattr(dispatcher, "plan_aside", None)

    # ------------------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport's methods without subclassing it
        self._transport = cast(asyncio.Transport, transport)
        transport = self._transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "?"
        self.client_host = peer[0] if isinstance(peer, tuple) and peer else ""
        if self._admit is not None and not self._admit(self):
            self._closing = True
            transport.close()
            return
        self.admitted = True
        if self._new_session is not None:
            self.session = self._new_session(transport)
            self.session.on_released = self._released
        # the transport reports (pause_writing) a write buffer above the queued-bytes bound
        transport.set_write_buffer_limits(high=self._max_queued_bytes, low=self._max_queued_bytes // 4)
        self._idle_timer = self._loop.call_later(self._max_idle_s, self._check_idle)
        log.debug("connection %d from %s opened", self.connection_id, self.peer)

    def data_received(self, data: bytes) -> None:
        self._last_active = self._loop.time()
        self._frames.feed(data)
        self._process()

    def eof_received(self) -> bool:
        try:
            self._frames.check_complete()
        except ProtocolError as exc:
            log.info("closing connection %d from %s: %s", self.connection_id, self.peer, exc)
        self._close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("connection %d from %s lost: %s", self.connection_id, self.peer, exc)
        self._close()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._on_close is not None:
            self._on_close(self)
            self._on_close = None
        if self.admitted:
            log.debug("connection %d from %s closed", self.connection_id, self.peer)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._process()

    # ------------------------------------------------------------------------------ requests
    def _process(self, seconds: float = SECONDS_PER_TURN) -> None:
        """Handle the complete frames buffered for ``seconds`` at most (one request at least), within this turn's
        budgets and the back-pressure bounds."""
        if self._processing or self._closing or self._next_turn is not None or self._close_when_written:
            return
        if self._decoding:
            return
        transport = self._transport
        assert transport is not None
        self._processing = True
        slots, frames = self._slots, self._frames
        max_in_flight, max_queued = self._max_in_flight, self._max_queued_bytes
        out: list[bytes | FramedPieces] = []
        out_bytes = 0
        queued = self._held_bytes + transport.get_write_buffer_size()  # before this turn's responses
        handled = 0
        clock = time.perf_counter
        now = clock()  # (after each request: its handling is timed from the end of the one before)
        turn_ends = now + seconds
        if self._turn_budget is not None:
            shared_ends = self._turn_budget.ends(now)
            if now >= shared_ends and not self._in_queued_turn and self._frames.next_api_key() in REBALANCE_APIS:
                # the turn's shared budget is spent and this is a rebalance's request: it waits in the second
                # line rather than being handled in this turn (hundreds of a large group's connections with
                # data at once would each handle one here)
                self._processing = False
                self._take_a_later_turn()
                self._update_reading()
                return
            turn_ends = min(turn_ends, shared_ends)
        notable = self._notable_s
        at_once, host, connection_id = self._at_once, self.client_host, self.connection_id
        try:
            while not self._closing and not self._writing_paused and len(slots) < max_in_flight:
                if queued + out_bytes > max_queued:
                    if not out:
                        break  # back-pressure: wait for a parked request or the client's reads
                    self._write(out)  # the transport sends what the socket takes at once
                    out_bytes = 0
                    queued = self._held_bytes + transport.get_write_buffer_size()
                    continue
                if handled and (handled >= FRAMES_PER_TURN or now >= turn_ends):  # (one request at least)
                    if frames.buffered:
                        self._take_a_later_turn()
                    break
                session = self.session
                if session.busy or self._close_when_written:
                    break  # an authentication step is being answered: what follows waits for it
                try:
                    # before authentication a frame is at most Kafka's sasl.server.max.receive.size
                    frames.max_bytes = self._max_frame_bytes if session.authenticated else SASL_MAX_RECEIVE_BYTES
                    frame = frames.next_frame()
                    if frame is None:
                        break
                    if session.state is SessionState.RAW_TOKENS:
                        self._raw_token(frame, out)
                        if self._closing:
                            return
                        continue
                    api_key = int.from_bytes(frame[:2], "big", signed=True)
                    refused = session.check(api_key)
                    if refused is not None:
                        raise ProtocolError(refused)
                    if (
                        session.authenticated
                        and api_key not in ORDERED_APIS
                        and (version := unprepared(frame, self.dispatcher.versions)) is not None
                    ):
                        frames.unread(frame)
                        self._prepare_aside(*version)
                        break
                    if len(frame) >= DECODE_ASIDE_BYTES:
                        self._decode_aside(frame, session)
                        break
                    data = (
                        None if at_once is None else at_once(frame, session.principal, host, connection_id, bool(slots))
                    )
                    if data is None:
                        request = decode_request(frame, self.dispatcher.versions, self.dispatcher.limits)
                except ProtocolError as exc:
                    self._write(out)
                    self._fail(exc)
                    return
                except Exception as exc:  # the server's own failure, not the client's: say, out of descriptors
                    self._write(out)  # when a message's module is imported on its first request
                    self._fail_own(exc)
                    return
                handled += 1
                if data is not None:  # answered at once: done, in order behind whatever is still running
                    began, now = now, clock()
                    if now - began >= notable:
                        self._late_step_of_frame(now - began, frame)
                    if isinstance(data, Deferred):  # its bytes to come (a Produce waiting for its fsync)
                        if not data.settled:
                            slot = _Slot()
                            slots.append(slot)
                            data.then(functools.partial(self._answered, slot))
                            continue
                        data, failed = data.outcome
                        if failed is not None:
                            self._write(out)
                            self._fail(failed)
                            return
                        if data is None:
                            continue
                    if not slots:
                        out.append(data)
                        out_bytes += len(data)
                    else:
                        slot = _Slot()
                        slot.done, slot.data = True, data
                        self._held_bytes += len(data)
                        queued += len(data)
                        slots.append(slot)
                    continue
                started: Started[Response] = start(
                    self.dispatcher.respond(
                        request, client_host=self.client_host, connection_id=self.connection_id, session=session
                    ),
                    self._on_step,
                    request,
                )
                began, now = now, clock()
                if now - began >= notable:
                    self._late_step(now - began, request)
                if session.state is SessionState.FAILED:
                    self._close_when_written = True
                if started.done and not slots:
                    if started.error is not None:
                        self._write(out)
                        self._fail(started.error)
                        return
                    result = started.result
                    if result is not None:
                        out.append(result)
                        out_bytes += len(result)
                    continue
                slot = _Slot()
                if started.done:
                    slot.done, slot.data, slot.error = True, started.result, started.error
                    if slot.data is not None:
                        self._held_bytes += len(slot.data)
                        queued += len(slot.data)
                else:
                    assert started.task is not None
                    slot.task = started.task
                    started.on_done = functools.partial(self._answered, slot)
                    started.task.add_done_callback(functools.partial(self._finished, slot))
                slots.append(slot)
            self._write(out)
            if self._close_when_written and not slots:
                self._close()
        finally:
            self._processing = False
            self._update_reading()

    def _prepare_aside(self, api_key: int, api_version: int) -> None:
        """Have the decoding thread prepare this API version (``codec.prepare_version``); the frame of it put back
        in front, and what follows it, are handled once it is done."""
        self._decoding = True
        future = self._loop.run_in_executor(_decoding_thread(), prepare_version, api_key, api_version)
        future.add_done_callback(self._prepared)

    def _prepared(self, future: asyncio.Future[None]) -> None:
        self._decoding = False
        failed = None if future.cancelled() else future.exception()
        if isinstance(failed, Exception):  # the server's own (out of descriptors importing a module, say)
            self._fail_own(failed)
        elif not self._closing and self._next_turn is None:
            self._next_turn = self._loop.call_soon(self._turn)

    def _decode_aside(self, frame: bytes, session: Session) -> None:
        """Queue ``frame``'s request: decoded in the decoding thread, then handled like any other, in order."""
        self._decoding = True
        slot = _Slot()
        slot.task = self._loop.create_task(self._handle_aside(frame, session))
        slot.task.add_done_callback(functools.partial(self._finished, slot))
        self._slots.append(slot)

    async def _handle_aside(self, frame: bytes, session: Session) -> Response:
        dispatcher = self.dispatcher
        try:
            request = await self._loop.run_in_executor(
                _decoding_thread(), _decode_and_plan, frame, dispatcher.versions, dispatcher.limits, self._plan_aside
            )
        except ProtocolError:
            self._decoding = False
            self._close_when_written = True  # nothing behind it is handled: the connection closes after it
            raise
        except BaseException:
            self._decoding = False
            raise
        began = time.perf_counter()
        try:
            started: Started[Response] = start(
                dispatcher.respond(
                    request, client_host=self.client_host, connection_id=self.connection_id, session=session
                ),
                self._on_step,
                request,
            )
        finally:
            self._decoding = False
            if not self._closing and self._next_turn is None:  # what came behind it, from the next turn on
                self._next_turn = self._loop.call_soon(self._turn)
        self._late_step(time.perf_counter() - began, request)
        if session.state is SessionState.FAILED:
            self._close_when_written = True
        if started.task is not None:
            return await started.task
        if started.error is not None:
            raise started.error
        return started.result

    def _raw_token(self, frame: bytes, out: list[bytes | FramedPieces]) -> None:
        """A SASL token sent raw after a SaslHandshake v0: its reply goes out raw too; a failure closes."""
        session = self.session
        reply = session.raw_token(frame)
        if reply is None:
            log.info(
                "authentication failed peer=%s listener=%s mechanism=%s user=%.256r: %.1024s",
                self.client_host,
                session.listener,
                session.mechanism,
                session.user,
                session.failure,
            )
            self._write(out)
            self._close()
            return
        out.append(len(reply).to_bytes(4, "big") + reply)

    def _late_step(self, seconds: float, request: DecodedRequest) -> None:
        """A step of ``request``'s handling took ``seconds``: the stall observer hears of a notable one."""
        if self._stalls is not None and seconds >= self._notable_s:
            self._stalls.request_step(seconds, request, self)

    def _late_step_of_frame(self, seconds: float, frame: bytes) -> None:
        """``_late_step`` for a request answered at once (its frame decodes: it was answered)."""
        try:
            request = decode_request(frame, self.dispatcher.versions, self.dispatcher.limits)
        except ProtocolError:
            return
        self._late_step(seconds, request)

    def _monotonic_ms(self) -> float:
        return self._loop.time() * 1000

    def _take_a_later_turn(self) -> None:
        """Handle the frames left buffered when this turn's budget ran out in a later turn of the loop: in the
        shared queue of the turn budget when there is one (in its second line when this turn was a turn from
        it, or when the next request is a rebalance's, ``REBALANCE_APIS``), else on a turn of this connection's
        own."""
        budget = self._turn_budget
        if budget is None:
            self._next_turn = self._loop.call_soon(self._turn)
        else:
            again = self._in_queued_turn or self._frames.next_api_key() in REBALANCE_APIS
            self._next_turn = budget.later(self._queued_turn, again=again)

    def _turn(self) -> None:
        """A later turn for the requests left buffered when the previous turn's budget ran out."""
        self._next_turn = None
        self._process()

    def _queued_turn(self) -> None:
        """A turn from the shared budget's queue: ``QUEUED_TURN_S`` of handling (one request at least), then the
        back of the queue's second line if requests are left."""
        self._next_turn = None
        self._in_queued_turn = True
        try:
            self._process(QUEUED_TURN_S)
        finally:
            self._in_queued_turn = False

    def _released(self) -> None:
        """The request that held the later ones (``Session.hold``) let go, maybe before it is answered: they go
        on, on a turn of their own."""
        if not (self._closing or self._close_when_written):
            self._go_on()

    def _go_on(self) -> None:
        """Handle the frames left buffered on a turn of their own (no request starts inside another's task), or
        read again."""
        if self._frames.buffered and self._next_turn is None:
            self._next_turn = self._loop.call_soon(self._turn)  # (new work: one request at least, next turn)
        else:
            self._update_reading()

    def _finished(self, slot: _Slot, task: asyncio.Task[Response]) -> None:
        """A handler task ended: record its outcome and write whatever is now at the head, in order (unless the
        continuation told it already, ``_answered``: the task's error, which it re-raises for anyone awaiting it,
        is then marked read here, or asyncio would log it as never retrieved when the task is freed)."""
        if slot.done:
            if not task.cancelled():
                task.exception()
            return
        if task.cancelled():
            self._settle(slot, None, asyncio.CancelledError())
        else:
            error = task.exception()
            self._settle(slot, None if error is not None else task.result(), error)
        if self._closing:
            return
        self._process()  # frames left buffered at a bound; updates reading either way

    def _answered(self, slot: _Slot, data: Response | None, error: BaseException | None) -> None:
        """A continuation's last step (inside its task): record the outcome and write what is now at the head. The
        frames left buffered are handled on the next turn, so no request starts inside another's task."""
        if slot.done:
            return
        self._settle(slot, data, error)
        if not (self._closing or self._close_when_written):
            self._go_on()

    def _settle(self, slot: _Slot, data: Response | None, error: BaseException | None) -> None:
        """Record ``slot``'s outcome and write the answers now complete at the head, in order."""
        slot.done, slot.task, slot.error = True, None, error
        if error is None:
            slot.data = data
            if data is not None:
                self._held_bytes += len(data)
        if self._closing:
            return
        slots = self._slots
        if slots and slots[0] is slot:
            out: list[bytes | FramedPieces] = []
            while slots and slots[0].done:
                head = slots.popleft()
                if head.error is not None:
                    self._write(out)
                    self._fail(head.error)
                    return
                if head.data is not None:
                    out.append(head.data)
                    self._held_bytes -= len(head.data)
            self._write(out)
        if self._close_when_written and not slots:
            self._close()

    def _write(self, chunks: list[bytes | FramedPieces]) -> None:
        transport = self._transport
        if not chunks or transport is None or self._closing:
            return
        try:
            transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))  # type: ignore[arg-type]
        except TypeError:  # a response in pieces among them: each written as it is, uncopied
            pieces: list[bytes] = []
            for chunk in chunks:
                pieces.extend(chunk.pieces if isinstance(chunk, FramedPieces) else (chunk,))
            transport.writelines(pieces)
        self._last_active = self._loop.time()
        chunks.clear()

    def _update_reading(self) -> None:
        """Read only while requests can be handled now: not at a bound, nothing left for a later turn."""
        transport = self._transport
        if transport is None or self._closing:
            return
        held = self._held_bytes  # with none, the buffer alone over the bound means writing is paused
        pause = (
            self._writing_paused
            or self.session.busy
            or self._next_turn is not None
            or self._decoding
            or len(self._slots) >= self._max_in_flight
            or (held > 0 and held + transport.get_write_buffer_size() > self._max_queued_bytes)
        )
        if pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    # ------------------------------------------------------------------------------ closing
    def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, ProtocolError | CloseConnection):
            log.info("closing connection %d from %s: %s", self.connection_id, self.peer, exc)
        elif isinstance(exc, ConnectionError | OSError):
            log.debug("connection %d from %s lost: %s", self.connection_id, self.peer, exc)
        elif not isinstance(exc, asyncio.CancelledError):
            log.error(
                "closing connection %d from %s after an unexpected error", self.connection_id, self.peer, exc_info=exc
            )
        self._close()

    def _fail_own(self, exc: Exception) -> None:
        """A frame could not be handled for a reason of the server's own: the connection is closed (no answer
        can be built), and that is logged at WARNING (a process out of descriptors fails this way for every
        connection, so at most one line per ``OWN_FAILURE_LOG_INTERVAL_S``, saying how many more there were)."""
        suppressed = _own_failures.check(type(exc).__name__)
        if suppressed is not None:
            more = f" ({suppressed} more connections closed so since the last line)" if suppressed else ""
            log.warning(
                "closing connection %d from %s: cannot handle its request: %s: %s%s",
                self.connection_id,
                self.peer,
                type(exc).__name__,
                exc,
                more,
            )
        self._close()

    def _close(self) -> None:
        """Cancel outstanding handlers and close the transport (written responses are still flushed)."""
        if self._closing:
            return
        self._closing = True
        if self._next_turn is not None:
            self._next_turn.cancel()
            self._next_turn = None
        for slot in self._slots:
            if slot.task is not None:
                slot.task.cancel()
        if self._transport is not None:
            self._transport.close()

    def close(self) -> list[asyncio.Task[Response]]:
        """Shutdown: close the connection; returns the handler tasks being cancelled (to await them)."""
        tasks = [slot.task for slot in self._slots if slot.task is not None]
        self._close()
        return tasks

    def _check_idle(self) -> None:
        """The idle timer: close the connection, or re-arm for whatever is left of the idle period."""
        self._idle_timer = None
        if self._closing:
            return
        now = self._loop.time()
        if self._slots:
            self._last_active = now  # waiting on us is not idleness
        left = self._last_active + self._max_idle_s - now
        if left > 0:
            self._idle_timer = self._loop.call_later(left, self._check_idle)
            return
        log.info(
            "closing connection %d from %s: idle for more than %d ms",
            self.connection_id,
            self.peer,
            round(self._max_idle_s * 1000),
        )
        self._close()
