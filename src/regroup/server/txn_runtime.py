"""The transaction runtime: the asyncio shell around the sans-IO ``TransactionCoordinator``, its durable log
(``<data dir>/transactions/``) and the writer of its markers. The clock, the timer and the group-commit writer
are the machinery it shares with the group coordinator's runtime (``core_runtime.py``); this module adds what
is specific to transactions.

* **Serialised.** Every core call runs synchronously on the event loop thread, one at a time; ``now_ms`` is
  the wall clock (``MonotonicClock``: never going backwards).
* **Durable before answered.** A call's records are submitted to the ``GroupCommitWriter``, which appends
  everything queued in one batch (one fsync under ``--fsync always``, the next batch written while the
  previous one is fsynced) on worker threads and then releases
  the callers in order. A call without records still waits for the records queued before it (with nothing
  queued it returns at once), so nobody is told about state a crash could take back. A failed append is
  fatal: waiting callers fail with ``CoordinatorUnavailable``, ``on_fatal`` stops the server; a restart
  replays the log.
* **Markers after the records.** A result's ``MarkerJob``\\ s go to the ``MarkerWriter`` only once the
  result's records (the PrepareCommit/PrepareAbort) are durable; it reports back with ``markers_written``.
  A caller may wait for its markers (EndTxn answers once the transaction is complete).
* **Timers.** One ``DeadlineTimer`` sleeps until ``next_deadline()`` (a day at most) and calls
  ``advance(now_ms)``: timed-out transactions are aborted, idle transactional ids expire.
* **Start-up.** The markers of every transaction found preparing are written again, and transactions open in
  a partition log that the coordinator does not cover get ABORT markers (``TransactionCoordinator.orphans``),
  before the server takes requests.
* **Snapshots.** When the writer's queue drains, ``TransactionLog.prepare_snapshot`` reads the state when a
  snapshot is due; the writer encodes it beside its writes and then writes it and compacts the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial

from regroup.server.core_runtime import DeadlineTimer, GroupCommitWriter, MonotonicClock, wall_ms
from regroup.server.errors import CoordinatorUnavailable
from regroup.server.topics import TopicStore
from regroup.server.txn_markers import GroupCompletion, MarkerWriter
from regroup.storage.snapshotted_log import SnapshotJob
from regroup.storage.transaction_log import TransactionLog
from regroup.transactions.coordinator import TransactionCoordinator
from regroup.transactions.records import TxnRecord
from regroup.transactions.results import MarkerJob, TxnConfig, TxnResult

__all__ = ["StoreProducerIds", "TransactionRuntime", "TxnOp"]

log = logging.getLogger("regroup.server.transactions")

TxnOp = Callable[[TransactionCoordinator, int], TxnResult]
MAX_TIMER_S = 86_400.0


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
        self._clock = MonotonicClock(clock)
        self._writer: GroupCommitWriter[TxnRecord] = GroupCommitWriter(
            log_.write if log_.pipelined else log_.append,
            flush=log_.sync if log_.pipelined else None,
            name="regroup-txn-log",
            logger=log,
            what="transaction log",
            snapshot=self._snapshot,
            on_failure=on_fatal,
        )
        self._timer = DeadlineTimer(clock, self._on_timer, max_delay_s=MAX_TIMER_S)
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
        self._writer.start()
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
        self._timer.cancel()
        await self.markers.close()
        await self._writer.close()
        self._log.close()

    @property
    def failure(self) -> BaseException | None:
        return self._writer.failure

    # ------------------------------------------------------------------------------------------ calls
    async def call(self, op: TxnOp, *, wait_markers: bool = False) -> TxnResult:
        """Run ``op(coordinator, now_ms)``; return its result once its records (and every earlier call's) are
        durable. ``wait_markers``: also wait until the markers it asked for are written and the transaction
        completed (or their first attempt failed: they are retried in the background)."""
        if self._closed or self.failure is not None:
            raise CoordinatorUnavailable("the transaction coordinator is not running")
        result = op(self.coordinator, self._clock.now())
        await self._durable(result.records)
        jobs = [self.markers.submit(job) for job in result.markers]
        self._arm_timer()
        if wait_markers and jobs:
            await asyncio.gather(*jobs)
        return result

    def now_ms(self) -> int:
        """The runtime's clock (wall time, never going backwards)."""
        return self._clock.now()

    def _durable(self, records: tuple[TxnRecord, ...]) -> asyncio.Future[None]:
        """A future resolved once ``records`` and everything queued before them are durable."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not records and self._writer.idle:
            future.set_result(None)
        else:
            self._writer.submit(records, partial(self._settle, future))
        return future

    def _settle(self, future: asyncio.Future[None], error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(None)
        elif self.failure is not None:
            future.set_exception(CoordinatorUnavailable("the transaction log failed"))
        else:
            future.set_exception(CoordinatorUnavailable("the transaction coordinator is shutting down"))

    def _complete(self, job: MarkerJob) -> asyncio.Future[None]:
        """The marker writer's report: every marker of ``job`` is durable. The coordinator completes the
        transaction at once; the future resolves when that record is durable."""
        if self._closed or self.failure is not None:
            raise CoordinatorUnavailable("the transaction coordinator is not running")
        result = self.coordinator.markers_written(job, self._clock.now())
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
        if not self._closed and self.failure is None:
            self._timer.arm(self.coordinator.next_deadline())

    def _on_timer(self) -> None:
        if self._closed or self.failure is not None:
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
    def _snapshot(self) -> SnapshotJob[TxnRecord] | None:
        job = self._log.prepare_snapshot(self.coordinator)
        if job is not None:
            ids = len(self.coordinator.transactions)
            log.info("transaction log compacted: snapshot of %d transactional id(s)", ids)
        return job
