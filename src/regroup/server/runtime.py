"""The coordinator runtime: the asyncio shell that owns the sans-IO ``GroupCoordinator`` and its durable log.

* **Serialised.** Every core call happens synchronously on the event loop thread, one at a time, so the
  core needs no locks. ``now_ms`` is the wall clock (never allowed to go backwards between calls).
* **Durable before visible.** Each call's ``Result`` is queued for the writer task, which appends the
  records of everything queued so far in one batch (group commit: one fsync for many requests) on a single
  worker thread and only then resolves the response futures of those results, in call order. A result
  without records still waits for the appends queued before it, so nobody is told about state that a crash
  could take back. When nothing is queued or being written and a result has no records, its completions
  are handed out at once instead (the writer would resolve them next anyway, with nothing to wait for): the
  common Heartbeat/OffsetFetch answer costs no trip through the writer task. A failed append is fatal (as
  in docs/architecture.md): waiting requests fail with ``CoordinatorUnavailable`` and ``on_fatal`` is
  called so the server stops; a restart replays the log.
* **Parked requests.** A request key is a counter; its future resolves with the completion carrying that
  key, possibly in the result of a later call (a parked JoinGroup). A key the core ``dropped`` (superseded by
  a newer request of the same member) fails with ``RequestDropped``; the connection layer then closes that
  connection, which is what its client did already (Kafka leaves such a request unanswered forever).
* **Timers.** One ``call_later`` handle sleeps until ``next_deadline()`` and calls ``advance(now_ms)``; it
  is re-armed after every core call.
* **Cluster image.** ``update_metadata`` hands the coordinator the topics as the server knows them (at
  startup and after every topic change), so consumer groups assign exactly the topic ids Metadata reports.
* **Snapshots.** When the queue is drained (the coordinator's state is exactly what the log holds),
  ``CoordinatorLog.maybe_snapshot`` compacts the log every ``snapshot_every`` records.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.ids import IdSource
from regroup.coordinator.result import Completion, RequestKey, Result
from regroup.model.cluster import ClusterImage
from regroup.records.model import Record
from regroup.server.errors import CoordinatorUnavailable, RequestDropped
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy

log = logging.getLogger("regroup.server.runtime")

CoreOp = Callable[[GroupCoordinator, RequestKey, int], Result]
Observer = Callable[[GroupCoordinator, Result, int], None]
INTERVAL_SYNC_S = 0.1


def wall_ms() -> int:
    return int(time.time() * 1000)


class Uuid4Ids:
    """Member ids for the real server: ``<client id or instance id>-<random uuid4>``, as Kafka."""

    def unique_suffix(self) -> str:
        return str(uuid.uuid4())


class NoResponse(Exception):
    """A core call that must answer at once completed nothing for its key (a bug in the core)."""


@dataclass(slots=True)
class _Pending:
    records: list[Record]
    completions: list[Completion]
    dropped: list[RequestKey] = field(default_factory=list)


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
        self._clock = clock
        self._on_fatal = on_fatal
        self._observers: list[Observer] = []
        self._keys = itertools.count(1)
        self._waiting: dict[RequestKey, asyncio.Future[Any]] = {}
        self._queue: list[_Pending] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="regroup-log")
        self._writer: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._sync_handle: asyncio.TimerHandle | None = None
        self._sync_due = False
        self._last_now = 0
        self._failure: BaseException | None = None
        self._closed = False

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
        """``observer(coordinator, result, now_ms)`` runs right after every core call (events, logging)."""
        self._observers.append(observer)

    def start(self) -> None:
        self._writer = asyncio.get_running_loop().create_task(self._write_loop(), name="regroup-log-writer")
        self._arm_timer()

    async def close(self) -> None:
        """Stop taking calls, make everything queued durable, then close the log."""
        if self._closed:
            return
        self._closed = True
        for handle in (self._timer, self._sync_handle):
            if handle is not None:
                handle.cancel()
        if self._writer is not None and self._failure is None:
            await self._idle.wait()
        if self._writer is not None:
            self._writer.cancel()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(CoordinatorUnavailable("the coordinator is shutting down"))
        self._waiting.clear()
        self._executor.shutdown(wait=True)
        self._log.close()

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    # ------------------------------------------------------------------------------------------ calls
    async def call(self, op: CoreOp, *, may_park: bool = False) -> Any:
        """Run ``op(coordinator, key, now_ms)`` and return the response completed for ``key`` once the records
        of this and every earlier call are durable. ``may_park``: the response may come from a later call."""
        if self._closed or self._failure is not None:
            raise CoordinatorUnavailable("the coordinator is not running")
        key = next(self._keys)
        result = op(self.coordinator, key, self._now())
        if not result.records and self._idle.is_set() and self._writer is not None:
            # Fast path: nothing is queued or being written, so every earlier call is durable and answered, and
            # this result has nothing to make durable: its completions go out now, in the order the writer would
            # have used, without a trip through the writer task (and without a future for an immediate answer).
            self._observe(result)
            found, response = self._resolve_now(result, key)
            self._arm_timer()
            if found:
                return response
            if key in result.dropped:
                raise RequestDropped(f"request {key} was superseded")
            if not may_park:
                raise NoResponse(f"core call {op!r} answered nothing")
            return await self._wait_for(key)
        future = self._wait_for(key)
        if not may_park and not any(c.key == key for c in result.completions):
            future.set_exception(NoResponse(f"core call {op!r} answered nothing"))
        self._after(result)
        return await future

    async def write(self, op: CoreOp) -> None:
        """Run ``op(coordinator, key, now_ms)``, an operation that answers no request (the transaction
        coordinator's markers completing a producer's pending offsets), and return once its records and every
        earlier call's are durable."""
        if self._closed or self._failure is not None:
            raise CoordinatorUnavailable("the coordinator is not running")
        key = next(self._keys)
        result = op(self.coordinator, key, self._now())
        future = self._wait_for(key)
        self._observe(result)
        done = Completion(key, None)  # resolved by the writer once everything queued so far is durable
        self._queue.append(_Pending(list(result.records), [*result.completions, done], list(result.dropped)))
        self._idle.clear()
        self._wake.set()
        self._arm_timer()
        await future

    def update_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        """Hand the coordinator a group's new settings (they apply from each member's next heartbeat)."""
        self.coordinator.set_group_config(group_id, config)

    def update_metadata(self, image: ClusterImage) -> None:
        """Hand the coordinator a new cluster image (topics created, deleted or grown). Nobody waits for an
        answer; records the call produces (timers it fires) are written like any call's."""
        if self._closed or self._failure is not None:
            return
        self._after(self.coordinator.update_metadata(image, self._now()))

    def _wait_for(self, key: RequestKey) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        future.add_done_callback(lambda _: self._waiting.pop(key, None))
        return future

    def _resolve_now(self, result: Result, key: RequestKey) -> tuple[bool, Any]:
        """``_resolve`` for a result that needs no append; ``key``'s own response is returned, not resolved."""
        found, response = False, None
        for completion in result.completions:
            if completion.key == key:
                if not found:
                    found, response = True, completion.response
                continue
            future = self._waiting.get(completion.key)
            if future is not None and not future.done():
                future.set_result(completion.response)
        for dropped in result.dropped:
            future = self._waiting.get(dropped)
            if future is not None and not future.done():
                future.set_exception(RequestDropped(f"request {dropped} was superseded"))
        return found, response

    def _now(self) -> int:
        self._last_now = max(self._last_now, self._clock())
        return self._last_now

    def _observe(self, result: Result) -> None:
        for observer in self._observers:
            try:
                observer(self.coordinator, result, self._last_now)
            except Exception:
                log.exception("observer failed")

    def _after(self, result: Result) -> None:
        self._observe(result)
        if result.records or result.completions or result.dropped:
            self._queue.append(_Pending(list(result.records), list(result.completions), list(result.dropped)))
            self._idle.clear()
            self._wake.set()
        self._arm_timer()

    # ------------------------------------------------------------------------------------------ timers
    def _arm_timer(self) -> None:
        if self._closed:
            return
        deadline = self.coordinator.next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is not None:
            delay_s = max(0, deadline - self._clock() + 1) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if self._closed or self._failure is not None:
            return
        try:
            result = self.coordinator.advance(self._now())
        except Exception:
            log.exception("coordinator timers failed")
            result = Result()
        self._after(result)

    # ------------------------------------------------------------------------------------------ writer
    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._drain()
            except Exception as exc:
                self._fail(exc)
                return

    async def _drain(self) -> None:
        """The only place the log is touched after start: appends and interval syncs on the worker thread,
        snapshots on the loop thread while nothing is queued (then the coordinator's state is the log's)."""
        loop = asyncio.get_running_loop()
        while self._queue or self._sync_due:
            if self._queue:
                batch, self._queue = self._queue, []
                records = [r for p in batch for r in p.records]
                if records:
                    await loop.run_in_executor(self._executor, self._log.append, records)
                    self._schedule_interval_sync()
                for pending in batch:
                    self._resolve(pending)
            else:
                self._sync_due = False
                await loop.run_in_executor(self._executor, self._log.log.sync)
        self._log.maybe_snapshot(self.coordinator)
        self._idle.set()

    def _resolve(self, pending: _Pending) -> None:
        for completion in pending.completions:
            future = self._waiting.get(completion.key)
            if future is not None and not future.done():
                future.set_result(completion.response)
        for key in pending.dropped:
            future = self._waiting.get(key)
            if future is not None and not future.done():
                future.set_exception(RequestDropped(f"request {key} was superseded"))

    def _fail(self, exc: BaseException) -> None:
        log.critical("coordinator log write failed; stopping: %s", exc, exc_info=exc)
        self._failure = exc
        self._idle.set()
        for future in list(self._waiting.values()):
            if not future.done():
                future.set_exception(CoordinatorUnavailable("the coordinator log failed"))
        if self._on_fatal is not None:
            self._on_fatal(exc)

    def _schedule_interval_sync(self) -> None:
        """Under ``--fsync interval`` bound the loss window when appends stop: sync once shortly after."""
        if self._log.log.fsync_policy is not FsyncPolicy.INTERVAL or self._sync_handle is not None:
            return

        def due() -> None:
            self._sync_handle = None
            self._sync_due = True
            self._idle.clear()
            self._wake.set()

        self._sync_handle = asyncio.get_running_loop().call_later(INTERVAL_SYNC_S, due)
