"""The transaction runtime: the asyncio shell around the sans-IO ``TransactionCoordinator``, its durable log
(``<data dir>/transactions/``) and the writer of its markers.

* **Serialised.** Every core call runs synchronously on the event loop thread, one at a time; ``now_ms`` is
  the wall clock, never going backwards.
* **Durable before answered.** A call's records are queued for the writer task, which appends everything
  queued in one batch (one fsync under ``--fsync always``) on a worker thread and then releases the callers
  in order. A call without records still waits for the records queued before it, so nobody is told about
  state a crash could take back. A failed append is fatal: ``on_fatal`` stops the server; a restart replays
  the log.
* **Markers after the records.** A result's ``MarkerJob``\\ s go to the ``MarkerWriter`` only once the
  result's records (the PrepareCommit/PrepareAbort) are durable; it reports back with ``markers_written``.
  A caller may wait for its markers (EndTxn answers once the transaction is complete).
* **Timers.** One ``call_later`` handle sleeps until ``next_deadline()`` and calls ``advance(now_ms)``:
  timed-out transactions are aborted, idle transactional ids expire.
* **Start-up.** The markers of every transaction found preparing are written again, and transactions open in
  a partition log that the coordinator does not cover get ABORT markers (``TransactionCoordinator.orphans``),
  before the server takes requests.
* **Snapshots.** When nothing is queued, ``TransactionLog.maybe_snapshot`` compacts the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from regroup.server.errors import CoordinatorUnavailable
from regroup.server.topics import TopicStore
from regroup.server.txn_markers import GroupCompletion, MarkerWriter
from regroup.storage.transaction_log import TransactionLog
from regroup.transactions.coordinator import TransactionCoordinator
from regroup.transactions.records import TxnRecord
from regroup.transactions.results import MarkerJob, TxnConfig, TxnResult

__all__ = ["StoreProducerIds", "TransactionRuntime", "TxnOp"]

log = logging.getLogger("regroup.server.transactions")

TxnOp = Callable[[TransactionCoordinator, int], TxnResult]


def wall_ms() -> int:
    return int(time.time() * 1000)


class StoreProducerIds:
    """Producer ids from the topic store's durable allocator (shared with idempotent producers)."""

    def __init__(self, store: TopicStore) -> None:
        self._store = store

    def next_producer_id(self) -> int:
        return self._store.allocate_producer_id()


class TransactionRuntime:
    """Drives one ``TransactionCoordinator`` over a ``TransactionLog``; create with :meth:`load`, then
    ``await start()``."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        log_: TransactionLog,
        store: TopicStore,
        *,
        clock: Callable[[], int] = wall_ms,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self._log = log_
        self._store = store
        self._clock = clock
        self._on_fatal = on_fatal
        self._queue: list[tuple[list[TxnRecord], asyncio.Future[None]]] = []
        self._tail: asyncio.Future[None] | None = None  # the last queued batch's future
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="regroup-txn-log")
        self._writer: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._last_now = 0
        self._failure: BaseException | None = None
        self._closed = False
        self.markers = MarkerWriter(store, self._complete, clock)

    @classmethod
    def load(
        cls,
        log_: TransactionLog,
        store: TopicStore,
        *,
        config: TxnConfig | None = None,
        clock: Callable[[], int] = wall_ms,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> TransactionRuntime:
        """Rebuild the coordinator from its log."""
        coordinator = log_.load(config, StoreProducerIds(store))
        return cls(coordinator, log_, store, clock=clock, on_fatal=on_fatal)

    def set_group_completion(self, completion: GroupCompletion | None) -> None:
        """How a transaction's outcome reaches the group coordinator's pending offsets."""
        self.markers.groups = completion

    async def start(self) -> None:
        """Start the writer and the timer; write the markers of transactions left preparing and of orphans."""
        self._writer = asyncio.get_running_loop().create_task(self._write_loop(), name="regroup-txn-log-writer")
        pending = self.coordinator.pending_markers()
        orphans = self.coordinator.orphans(self._open_in_partitions())
        for job in orphans:
            log.warning(
                "aborting a transaction open in %s-%d that the coordinator does not know (producer %d, epoch %d): "
                "records not yet on disk were lost in a crash",
                *next(iter(job.partitions)),
                job.producer_id,
                job.producer_epoch,
            )
        if pending:
            log.info("completing %d transaction(s) found preparing", len(pending))
        await asyncio.gather(*(self.markers.submit(job) for job in [*orphans, *pending]))
        self._arm_timer()

    async def close(self) -> None:
        """Stop taking calls, make everything queued durable, stop the marker writer, close the log."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        await self.markers.close()
        if self._writer is not None and self._failure is None:
            await self._idle.wait()
        if self._writer is not None:
            self._writer.cancel()
        for _, future in self._queue:
            if not future.done():
                future.set_exception(CoordinatorUnavailable("the transaction coordinator is shutting down"))
        self._executor.shutdown(wait=True)
        self._log.close()

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    # ------------------------------------------------------------------------------------------ calls
    async def call(self, op: TxnOp, *, wait_markers: bool = False) -> TxnResult:
        """Run ``op(coordinator, now_ms)``; return its result once its records (and every earlier call's) are
        durable. ``wait_markers``: also wait until the markers it asked for are written and the transaction
        completed (or their first attempt failed: they are retried in the background)."""
        if self._closed or self._failure is not None:
            raise CoordinatorUnavailable("the transaction coordinator is not running")
        result = op(self.coordinator, self._now())
        await self._durable(result.records)
        jobs = [self.markers.submit(job) for job in result.markers]
        self._arm_timer()
        if wait_markers and jobs:
            await asyncio.gather(*jobs)
        return result

    def now_ms(self) -> int:
        """The runtime's clock (wall time, never going backwards)."""
        return self._now()

    def _now(self) -> int:
        self._last_now = max(self._last_now, self._clock())
        return self._last_now

    def _durable(self, records: tuple[TxnRecord, ...]) -> asyncio.Future[None]:
        if not records:
            tail = self._tail
            if tail is None or tail.done():
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                done.set_result(None)
                return done
            return asyncio.shield(tail)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((list(records), future))
        self._tail = future
        self._idle.clear()
        self._wake.set()
        return future

    def _complete(self, job: MarkerJob) -> asyncio.Future[None]:
        """The marker writer's report: every marker of ``job`` is durable. The coordinator completes the
        transaction at once; the future resolves when that record is durable."""
        if self._closed or self._failure is not None:
            raise CoordinatorUnavailable("the transaction coordinator is not running")
        result = self.coordinator.markers_written(job, self._now())
        self._arm_timer()
        return self._durable(result.records)

    def _open_in_partitions(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        found: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for tp, plog in self._store.loaded_partitions():
            for pid, txn in plog.open_transactions().items():
                found.setdefault(tp, []).append((pid, txn.producer_epoch))
        return found

    # ------------------------------------------------------------------------------------------ timers
    def _arm_timer(self) -> None:
        if self._closed or self._failure is not None:
            return
        deadline = self.coordinator.next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is not None:
            delay_s = min(max(0, deadline - self._clock() + 1) / 1000, 86_400.0)
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if self._closed or self._failure is not None:
            return
        asyncio.get_running_loop().create_task(self._advance())

    async def _advance(self) -> None:
        try:
            result = await self.call(lambda c, now: c.advance(now))
        except CoordinatorUnavailable:
            return
        for job in result.markers:
            log.info(
                "transaction %s (producer %d) timed out: aborting it, producer epoch now %d",
                job.transactional_id,
                job.producer_id,
                job.producer_epoch,
            )
        self._arm_timer()

    # ------------------------------------------------------------------------------------------ writer
    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch, self._queue = self._queue, []
                records = [r for rs, _ in batch for r in rs]
                try:
                    await loop.run_in_executor(self._executor, self._log.append, records)
                except Exception as exc:
                    self._fail(exc, [f for _, f in batch])
                    return
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)
            if self._log.maybe_snapshot(self.coordinator):
                ids = len(self.coordinator.transactions)
                log.info("transaction log compacted: snapshot of %d transactional id(s)", ids)
            self._idle.set()

    def _fail(self, exc: BaseException, futures: list[asyncio.Future[None]]) -> None:
        log.critical("transaction log write failed; stopping: %s", exc, exc_info=exc)
        self._failure = exc
        self._idle.set()
        for future in [*futures, *(f for _, f in self._queue)]:
            if not future.done():
                future.set_exception(CoordinatorUnavailable("the transaction log failed"))
        self._queue.clear()
        if self._on_fatal is not None:
            self._on_fatal(exc)
