"""The coordinator runtime: the asyncio shell that owns the sans-IO ``GroupCoordinator`` (the share-group
coordinator runs inside it) and its durable log. The clock, the timer and the group-commit writer are the
shared machinery of ``core_runtime.py``; this module adds what is specific to the group coordinator.

* **Serialised.** Every core call happens synchronously on the event loop thread, one at a time, so the
  core needs no locks. ``now_ms`` is the wall clock (``MonotonicClock``: never going backwards).
* **Durable before visible.** Each call's ``Result`` is submitted to the ``GroupCommitWriter``, which appends
  the records of everything queued so far in one batch (group commit: one fsync for many requests) on its
  worker thread (under ``--fsync always`` pipelined on two: the next batch is written while the previous one
  is fsynced) and only then resolves the response futures of those results, in call order. A result
  without records still waits for the appends queued before it, so nobody is told about state that a crash
  could take back. When a result has no records and nothing it could depend on waits for the writer, its
  completions are handed out at once instead: when nothing is queued or being written at all, or, for a
  call that concerns one group (``call``'s ``group_id``), when no record of that group is waiting (the
  runtime counts, per group, the batches not yet durable that hold its records). A group's answers depend
  only on its own state, so a healthy member's Heartbeat or OffsetFetch does not wait behind another
  group's large rebalance being written (Kafka's coordinator gets the same from its fifty partitions, each
  with a log of its own). A failed append is fatal (as
  in docs/architecture.md): waiting requests fail with ``CoordinatorUnavailable`` and ``on_fatal`` is
  called so the server stops; a restart replays the log. Under ``--fsync interval`` the writer also syncs
  the log shortly after appends stop.
* **Answers at once.** ``answer_at_once`` runs a core operation that either answers with nothing to make
  durable and nothing else changed but soft state (a steady member's heartbeat moving its session deadline:
  ``GroupCoordinator.heartbeat_at_once``) or declines; it runs only when ``call``'s fast path would apply
  (the writer idle, or nothing of the request's group waiting for it), so the answer may go out at once.
* **Parked requests.** A request key is a counter; its future resolves with the completion carrying that
  key, possibly in the result of a later call (a parked JoinGroup). A key the core ``dropped`` (superseded by
  a newer request of the same member) fails with ``RequestDropped``; the connection layer then closes that
  connection, which is what its client did already (Kafka leaves such a request unanswered forever). A
  result that answers many waiting requests at once (a classic group of 10,000 members completing its join
  or sync phase) hands their answers out behind those of the large results before it, ``ANSWERS_PER_TURN``
  per turn of the loop for all of them together, so that the requests woken, each encoding and writing its
  response, take the loop a slice at a time however many such results are due in one turn (the batches of
  several chunks of a rebalance's answers made durable together); a result answering a few requests (a
  commit) answers them at once, never behind a rebalance's.
* **Work beside the loop.** Work a core call hands out (``Result.asides``: a large KIP-848 group's target
  computed in full) runs on one worker thread, one piece after another; its outcome comes back to the loop,
  where ``GroupCoordinator.land`` applies it as a write of its own (a landing that raises is landed again as
  a failure, so that nothing waits for it forever).
* **Timers.** One ``DeadlineTimer`` sleeps until ``next_deadline()`` and calls ``advance(now_ms)``; it is
  re-armed after every core call.
* **Cluster image.** ``update_metadata`` hands the coordinator the topics as the server knows them (at
  startup and after every topic change), so consumer groups assign exactly the topic ids Metadata reports.
* **Snapshots.** When the writer's queue drains (the coordinator's state is exactly what the log holds),
  ``CoordinatorLog.prepare_snapshot`` takes the state every ``snapshot_every`` records; the writer builds and
  encodes its records on its snapshot thread while it goes on writing batches, then writes the snapshot and
  compacts the log between two writes (``core_runtime.py``).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from regroup.coordinator.asides import Aside, outcome_of
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.ids import IdSource
from regroup.coordinator.offsets import PlannedTopic, plan_topic
from regroup.coordinator.result import Completion, RequestKey, Result
from regroup.model.cluster import ClusterImage
from regroup.protocol.offsets import PartitionCommits
from regroup.records.model import (
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PendingOffsetCommitKey,
    Record,
)
from regroup.server.core_runtime import DeadlineTimer, GroupCommitWriter, MonotonicClock
from regroup.server.core_runtime import wall_ms as wall_ms
from regroup.server.errors import CoordinatorUnavailable, RequestDropped
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.snapshotted_log import SnapshotJob

log = logging.getLogger("regroup.server.runtime")

#: the most waiting requests one turn of the loop hands the answers of large results to (``_answer``), all
#: such results together: each one woken then encodes and writes its response in the next turn, about 50
#: microseconds for a JoinGroup or SyncGroup; a result answering this many or fewer answers them at once
ANSWERS_PER_TURN = 50

#: the records of one turn the loop writes to the log itself under ``--fsync interval`` and ``never``
#: (``_write_now``), when every one is a committed offset (or its removal) with metadata of at most
#: ``WRITE_NOW_MAX_METADATA`` characters: encoding one takes a few microseconds; larger turns, and records of
#: any other kind (a group of 10,000 members is one record of megabytes), go to the writer's thread
WRITE_NOW_MAX_RECORDS = 1024
WRITE_NOW_MAX_METADATA = 512
_OFFSET_KEYS = (OffsetCommitKey, PendingOffsetCommitKey)

#: under ``--fsync always``, a batch of this many records or more, or holding a classic group's record of this
#: many members or more (about 400 kB, a few milliseconds to encode), is a job of the writer's own
#: (``GroupCommitWriter.submit``'s ``heavy``): the other groups' commits queued with it need not wait for it
HEAVY_BATCH = 1_000

CoreOp = Callable[[GroupCoordinator, RequestKey, int], Result]
#: ``op(coordinator, *request, now_ms)``: the answer given at once, or None (see ``answer_at_once``)
AtOnceOp = Callable[..., Any]
Observer = Callable[[GroupCoordinator, Result, int], None]


class Uuid4Ids:
    """Member ids for the real server: ``<client id or instance id>-<random uuid4>``, as Kafka."""

    def unique_suffix(self) -> str:
        return str(uuid.uuid4())


class NoResponse(Exception):
    """A core call that must answer at once completed nothing for its key (a bug in the core)."""


class CoordinatorRuntime:
    """Drives one ``GroupCoordinator`` over a ``CoordinatorLog``; create with :meth:`load`, then ``start()``."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        log_: CoordinatorLog,
        *,
        clock: Callable[[], int] = wall_ms,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self._log = log_
        self._clock = MonotonicClock(clock)
        self._on_fatal = on_fatal
        self._observers: list[Observer] = []
        self._keys = itertools.count(1)
        self._waiting: dict[RequestKey, asyncio.Future[Any]] = {}
        interval = log_.log.fsync_policy is FsyncPolicy.INTERVAL
        self._writer: GroupCommitWriter[Record] = GroupCommitWriter(
            log_.write if log_.pipelined else log_.append,
            flush=log_.sync if log_.pipelined else None,
            name="regroup-log",
            logger=log,
            what="coordinator log",
            snapshot=self._snapshot,
            on_failure=self._failed,
            sync=log_.log.sync if interval else None,
            write_now=None if log_.pipelined else self._write_now,
        )
        self._timer = DeadlineTimer(clock, self._on_timer)
        self._closed = False
        #: group id -> batches submitted to the writer, holding records of the group, not yet durable
        self._unwritten: dict[str, int] = {}
        #: records the loop wrote to the log itself (``_write_now``) since this turn of the loop began
        self._written_now = 0
        #: large results' answers not handed out yet, in order: [completions, dropped keys, next to hand]
        self._answers: collections.deque[list[Any]] = collections.deque()
        self._answers_scheduled = False  # a later turn hands out more of ``_answers``
        #: runs the work core calls hand out (``_hand_out``), made on first use
        self._aside_pool: ThreadPoolExecutor | None = None
        #: pieces of work handed out and landed since start, and the worker's time on them (metrics)
        self.asides_landed = 0
        self.aside_seconds = 0.0

    # ---------------------------------------------------------------------------------------- lifecycle
    @classmethod
    def load(
        cls,
        log_: CoordinatorLog,
        *,
        config: CoordinatorConfig | None = None,
        ids: IdSource | None = None,
        clock: Callable[[], int] = wall_ms,
        on_fatal: Callable[[BaseException], None] | None = None,
        group_configs: Mapping[str, GroupConfig] | None = None,
    ) -> CoordinatorRuntime:
        """Rebuild the coordinator from the log (groups come back Stable or Empty, offsets as committed), with
        the groups' own settings."""
        coordinator = log_.load(clock(), config, ids, group_configs)
        return cls(coordinator, log_, clock=clock, on_fatal=on_fatal)

    def add_observer(self, observer: Observer) -> None:
        """``observer(coordinator, result, now_ms)`` runs right after every core call that said something
        happened (``result.events``: joins, state changes, assignments, commits; a heartbeat that changed nothing
        has none and is not observed). An observer that needs the groups as loaded is called once directly."""
        self._observers.append(observer)

    def start(self) -> None:
        self._writer.start()
        self._arm_timer()

    async def close(self) -> None:
        """Stop taking calls, make everything queued durable, then close the log."""
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        if self._aside_pool is not None:
            self._aside_pool.shutdown(wait=False, cancel_futures=True)  # (its outcomes are dropped: see _land)
        await self._writer.close()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(CoordinatorUnavailable("the coordinator is shutting down"))
        self._waiting.clear()
        self._log.close()

    @property
    def failure(self) -> BaseException | None:
        return self._writer.failure

    # ------------------------------------------------------------------------------------------ calls
    async def call(self, op: CoreOp, *, may_park: bool = False, group_id: str | None = None) -> Any:
        """Run ``op(coordinator, key, now_ms)`` and return the response completed for ``key`` once the records
        of this and every earlier call are durable. ``may_park``: the response may come from a later call.
        ``group_id``: the one group the call concerns (its answers, and those of requests parked on the group
        that it completes, depend on that group's state alone), or None (several groups, or none named); with
        it, the timers due are fired first, as a write of their own (``_fire_due``: what they do may be any
        group's), so that the call's own result is about that group alone."""
        key, response, future = self._begin(op, may_park, group_id)
        if future is None:
            return response
        return await self._answer_to(key, future)

    def call_then(
        self, op: CoreOp, done: Callable[[Any, BaseException | None], None], *, group_id: str | None = None
    ) -> tuple[bool, Any]:
        """``call`` (never parked) for a caller without a coroutine (an OffsetCommit answered at once):
        ``(True, response)`` when the response is known now; else ``(False, None)``, and ``done(response,
        None)`` is called once it is durable, or ``done(None, error)`` with what ``call`` would raise."""
        key, response, future = self._begin(op, False, group_id)
        if future is None:
            return True, response
        future.add_done_callback(partial(self._then, key, done))
        return False, None

    def _then(
        self, key: RequestKey, done: Callable[[Any, BaseException | None], None], future: asyncio.Future[Any]
    ) -> None:
        self._waiting.pop(key, None)
        if future.cancelled():
            done(None, asyncio.CancelledError())
            return
        error = future.exception()
        done(None if error is not None else future.result(), error)

    def _begin(self, op: CoreOp, may_park: bool, group_id: str | None) -> tuple[RequestKey, Any, Any]:
        """``call``'s work up to its wait: ``(key, response, None)`` when the response is known now, else
        ``(key, None, future)``; raises what ``call`` raises at once."""
        writer = self._writer
        if self._closed or writer.failure is not None:
            raise CoordinatorUnavailable("the coordinator is not running")
        key = next(self._keys)
        now_ms = self._clock.now()
        if group_id is not None:
            self._fire_due(now_ms)  # (as a write of their own: what they do may be any group's)
        result = op(self.coordinator, key, now_ms)
        if result.asides:
            self._hand_out(result)
        if not result.records and writer.started and self._nothing_waits(group_id):
            # Fast path: every earlier call this one could depend on is durable, and this result has nothing
            # to make durable: its completions go out now, in the order the writer would have used, without a
            # trip through the writer (and without a future for an immediate answer).
            if result.events:
                self._observe(result)
            completions = result.completions
            if len(completions) == 1 and completions[0].key == key and not result.dropped:
                self._arm_timer()
                return key, completions[0].response, None  # (the common case: this call's answer, nothing else)
            found, response = self._resolve_now(result, key)
            self._arm_timer()
            if found:
                return key, response, None
            if key in result.dropped:
                raise RequestDropped(f"request {key} was superseded")
            if not may_park:
                raise NoResponse(f"core call {op!r} answered nothing")
            del result  # (a parked request's frame keeps none of it for as long as it waits)
            return key, None, self._wait_for(key)
        future = self._wait_for(key)
        if not may_park and not any(c.key == key for c in result.completions):
            future.set_exception(NoResponse(f"core call {op!r} answered nothing"))
        self._after(result, key, group_id)
        del result
        return key, None, future

    def answer_at_once(self, op: AtOnceOp, *request: Any, group_id: str | None = None) -> Any | None:
        """``op(coordinator, *request, now_ms)``: a core operation that either answers at once, having changed
        nothing a record, an event or another request's answer would carry (a steady member's heartbeat moving
        its session deadline), or answers None having changed nothing. Runs only when every earlier call it
        could depend on is durable (``call``'s own fast path: the writer idle, or no record of ``group_id``,
        the request's group, waiting for it), so the answer may go out now; None otherwise, and from a stopped
        coordinator (``call`` is for all of those)."""
        writer = self._writer
        if self._closed or writer.failure is not None or not writer.started:
            return None
        now_ms = self._clock.now()
        if group_id is not None:
            self._fire_due(now_ms)
        if not self._nothing_waits(group_id):
            return None
        response = op(self.coordinator, *request, now_ms)
        if response is not None:
            self._arm_timer()
        return response

    def plan_offset_commit(
        self,
        group_id: str,
        topic: str,
        columns: PartitionCommits,
        retention_ms: int,
        producer_id: int | None = None,
    ) -> PlannedTopic:
        """``topic``'s part of an OffsetCommit of ``group_id`` (``producer_id``: a TxnOffsetCommit), worked out
        ahead from the request alone (``offsets.plan_topic``), stamped now, its records encoded for the log's
        writer to take: safe from any thread (it reads the clock without recording and the coordinator's
        configuration, which never changes)."""
        now_ms = self._clock.peek()
        expire_ms = now_ms + retention_ms if retention_ms != -1 else None
        limit = self.coordinator.config.offset_metadata_max_bytes
        plan = plan_topic(group_id, topic, columns, now_ms, expire_ms, limit, producer_id)
        self._log.encode_ahead(plan.records)
        return plan

    async def write(self, op: CoreOp) -> None:
        """Run ``op(coordinator, key, now_ms)``, an operation that answers no request (the transaction
        coordinator's markers completing a producer's pending offsets), and return once its records and every
        earlier call's are durable."""
        if self._closed or self.failure is not None:
            raise CoordinatorUnavailable("the coordinator is not running")
        key = next(self._keys)
        result = op(self.coordinator, key, self._clock.now())
        if result.asides:
            self._hand_out(result)
        future = self._wait_for(key)
        self._observe(result)
        done = Completion(key, None)  # resolved by the writer once everything queued so far is durable
        self._submit(result, [done, *result.completions])
        self._arm_timer()
        await self._answer_to(key, future)

    def update_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        """Hand the coordinator a group's new settings (they apply from each member's next heartbeat)."""
        self.coordinator.set_group_config(group_id, config)

    def update_metadata(self, image: ClusterImage) -> None:
        """Hand the coordinator a new cluster image (topics created, deleted or grown). Nobody waits for an
        answer; records the call produces (timers it fires) are written like any call's."""
        if self._closed or self.failure is not None:
            return
        result = self.coordinator.update_metadata(image, self._clock.now())
        if result.asides:
            self._hand_out(result)
        self._after(result)

    def _wait_for(self, key: RequestKey) -> asyncio.Future[Any]:
        """A future for ``key``'s answer, found by ``_answer`` while it waits (``_answer_to``)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        return future

    async def _answer_to(self, key: RequestKey, future: asyncio.Future[Any]) -> Any:
        """``future``'s outcome; ``key`` waits no more once it is read, or its caller cancelled. (No done callback:
        it would cost each waiting request a closure and a copy of the context, objects the collector walks for
        as long as the request is parked.)"""
        try:
            return await future
        finally:
            self._waiting.pop(key, None)

    def _resolve_now(self, result: Result, key: RequestKey) -> tuple[bool, Any]:
        """``_resolve`` for a result that needs no append; ``key``'s own response is returned, not resolved
        (nothing waits for it yet)."""
        found, response = False, None
        for completion in result.completions:
            if completion.key == key:
                found, response = True, completion.response
                break
        self._answer(result.completions, result.dropped)
        return found, response

    def _observe(self, result: Result) -> None:
        if not result.events:
            return
        for observer in self._observers:
            try:
                observer(self.coordinator, result, self._clock.last)
            except Exception:
                log.exception("observer failed")

    def _after(self, result: Result, key: RequestKey | None = None, group_id: str | None = None) -> None:
        """Observe ``result`` and hand it to the writer; ``key``: the request whose call made it, whose answer
        goes first (``_answer``: before the parked requests the call completed too); ``group_id``: the one group
        the call concerns (``call``), if it named one."""
        self._observe(result)
        if result.records or result.completions or result.dropped:
            completions = list(result.completions)
            if key is not None and len(completions) > 1 and completions[0].key != key:
                own = next((i for i, c in enumerate(completions) if c.key == key), None)
                if own is not None:
                    completions.insert(0, completions.pop(own))
            self._submit(result, completions, group_id)
        self._arm_timer()

    def _nothing_waits(self, group_id: str | None) -> bool:
        """No earlier call that an answer about ``group_id`` (None: about anything) could depend on waits for
        the writer: the writer is idle, or no batch holding a record of the group is."""
        if self._writer.idle:
            return True
        return group_id is not None and group_id not in self._unwritten

    def _submit(self, result: Result, completions: list[Completion], group_id: str | None = None) -> None:
        """Hand ``result``'s records to the writer; ``completions`` and the dropped keys are resolved after. A
        result without records waits for the batches of ``group_id`` before it (the one group the call concerns:
        its answers depend on that group alone), or for all of them when the call named none."""
        dropped = list(result.dropped)
        if not result.records:
            scope = None if group_id is None else frozenset((group_id,))
            self._writer.submit(result.records, partial(self._resolve, completions, dropped), scope)
            return
        groups = frozenset(record.key.group_id for record in result.records)  # (the batch's scope, too)
        unwritten = self._unwritten
        for group_id in groups:
            unwritten[group_id] = unwritten.get(group_id, 0) + 1
        heavy = self._writer.pipelined and _heavy(result.records)
        self._writer.submit(result.records, partial(self._written, groups, completions, dropped), groups, heavy=heavy)

    def _written(
        self,
        groups: frozenset[str],
        completions: list[Completion],
        dropped: list[RequestKey],
        error: BaseException | None,
    ) -> None:
        """A batch holding records of ``groups`` is durable (or failed): those groups wait for it no more."""
        unwritten = self._unwritten
        for group_id in groups:
            left = unwritten.get(group_id, 1) - 1
            if left > 0:
                unwritten[group_id] = left
            else:
                unwritten.pop(group_id, None)
        self._resolve(completions, dropped, error)

    # ------------------------------------------------------------------------------------------ timers
    def _arm_timer(self) -> None:
        if not self._closed:
            self._timer.arm(self.coordinator.next_deadline())

    def _on_timer(self) -> None:
        if self._closed or self.failure is not None:
            return
        self._fire(self._clock.now())

    def _fire_due(self, now_ms: int) -> None:
        """Fire the timers due by ``now_ms``, if any, as a write of their own (before a call about one group,
        whose result then concerns that group alone); not the next chunks of work cut into chunks (a large
        group's parked answers): only the runtime's own timer fires those, one chunk a turn of the loop at most
        however many requests the turn handles (``timers.is_paced``)."""
        deadline = self.coordinator.next_deadline()
        if deadline is not None and deadline <= now_ms:
            self._fire(now_ms, paced=False)

    def _fire(self, now_ms: int, *, paced: bool = True) -> None:
        try:
            result = self.coordinator.advance(now_ms, paced=paced)
        except Exception:
            log.exception("coordinator timers failed")
            result = Result()
        if result.asides:
            self._hand_out(result)
        self._after(result)

    # ------------------------------------------------------------------------------------- work aside
    def _hand_out(self, result: Result) -> None:
        """Run each piece of work ``result`` hands out on the worker thread; its outcome lands on the loop."""
        if self._closed:
            return
        pool = self._aside_pool
        if pool is None:
            pool = self._aside_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="regroup-aside")
        loop = asyncio.get_running_loop()
        for aside in result.asides:
            future = loop.run_in_executor(pool, _timed_outcome, aside)
            future.add_done_callback(partial(self._land, aside))

    def _land(self, aside: Aside, future: asyncio.Future[tuple[object, float]]) -> None:
        """Hand a piece of work's outcome back to the coordinator; its records are written like any call's."""
        if self._closed or self.failure is not None or future.cancelled():
            return
        outcome, seconds = future.result()
        self.asides_landed += 1
        self.aside_seconds += seconds
        try:
            result = self.coordinator.land(aside, outcome, self._clock.now())
        except Exception as exc:
            log.exception("landing work done aside failed")
            try:  # (landed as a failure, so that its group does not wait for it forever)
                result = self.coordinator.land(aside, exc, self._clock.now())
            except Exception:
                log.exception("landing work done aside as a failure failed")
                return
        if result.asides:
            self._hand_out(result)
        self._after(result)

    # ------------------------------------------------------------------------------------------ writer
    def _write_now(self, records: Sequence[Record]) -> bool:
        """(the writer's, on the loop) Write ``records`` now, without an fsync, when that is cheap: all committed
        offsets, no more than ``WRITE_NOW_MAX_RECORDS`` with those written so in this turn of the loop (the
        writer may offer a turn's batches one by one), and room for them in the log's segment. Whether it did."""
        if self._written_now + len(records) > WRITE_NOW_MAX_RECORDS:
            return False
        for record in records:
            value = record.value
            if not isinstance(record.key, _OFFSET_KEYS) or not (
                value is None or (type(value) is OffsetCommitValue and len(value.metadata) <= WRITE_NOW_MAX_METADATA)
            ):
                return False
        if not self._log.write_now(records):
            return False
        if not self._written_now:
            asyncio.get_running_loop().call_soon(self._new_turn_written_now)
        self._written_now += len(records)
        return True

    def _new_turn_written_now(self) -> None:
        self._written_now = 0

    def _snapshot(self) -> SnapshotJob[Record] | None:
        return self._log.prepare_snapshot(self.coordinator)

    def _resolve(self, completions: list[Completion], dropped: list[RequestKey], error: BaseException | None) -> None:
        """A submitted result is durable: answer its completions and fail its dropped keys, in order. (On a
        failed write ``_failed`` fails every waiting request.)"""
        if error is not None:
            return
        self._answer(completions, dropped)

    def _answer(self, completions: Sequence[Completion], dropped: Sequence[RequestKey]) -> None:
        """Hand ``completions`` to the requests waiting for them, then fail the ``dropped`` keys: at once when
        they are ``ANSWERS_PER_TURN`` at most, else the first at once (the answer to the request whose call
        made the result, put first by ``_after``: a heartbeat whose call fired a rebalance's timer) and the
        others behind the large results still being handed out, that many per turn of the loop for them all.
        Each request woken goes on in the next turn (its handler encodes and writes its response), so a
        rebalance that releases 10,000 parked requests at once wakes them a slice per turn, and the requests
        of other connections are read and answered in between. (Answers of different requests need no order
        among them: everything each one depends on is durable already.)"""
        if len(completions) <= ANSWERS_PER_TURN:
            _hand(self._waiting, completions, dropped)
            return
        _hand(self._waiting, completions[:1], ())  # (the request whose call made the result: ``_after``)
        self._answers.append([completions, dropped, 1])
        if not self._answers_scheduled:
            self._hand_answers()

    def _hand_answers(self) -> None:
        """One turn's share of the large results' answers (``_answer``); a later turn asked for the rest."""
        self._answers_scheduled = False
        waiting, queue = self._waiting, self._answers
        budget = ANSWERS_PER_TURN
        while queue and budget:
            entry = queue[0]
            completions, dropped, start = entry
            end = min(start + budget, len(completions))
            _hand(waiting, completions[start:end], ())
            budget -= end - start
            if end < len(completions):
                entry[2] = end
                break
            queue.popleft()
            _hand(waiting, (), dropped)
        if queue:
            self._answers_scheduled = True
            asyncio.get_running_loop().call_soon(self._hand_answers)

    def _failed(self, exc: BaseException) -> None:
        for future in list(self._waiting.values()):
            if not future.done():
                future.set_exception(CoordinatorUnavailable("the coordinator log failed"))
        if self._on_fatal is not None:
            self._on_fatal(exc)


def _hand(
    waiting: dict[RequestKey, asyncio.Future[Any]], completions: Sequence[Completion], dropped: Sequence[RequestKey]
) -> None:
    """Resolve the futures ``completions`` answer, then fail those of the ``dropped`` keys (superseded)."""
    for completion in completions:
        future = waiting.get(completion.key)
        if future is not None and not future.done():
            future.set_result(completion.response)
    for key in dropped:
        future = waiting.get(key)
        if future is not None and not future.done():
            future.set_exception(RequestDropped(f"request {key} was superseded"))


def _timed_outcome(aside: Aside) -> tuple[object, float]:
    """``outcome_of(aside)`` and the seconds it took (on the worker thread)."""
    start = time.perf_counter()
    outcome = outcome_of(aside)
    return outcome, time.perf_counter() - start


def _heavy(records: Sequence[Record]) -> bool:
    """Whether a batch's records take long to encode (``HEAVY_BATCH``)."""
    if len(records) >= HEAVY_BATCH:
        return True
    for record in records:
        value = record.value
        if type(value) is GroupMetadataValue and len(value.members) >= HEAVY_BATCH:
            return True
    return False
