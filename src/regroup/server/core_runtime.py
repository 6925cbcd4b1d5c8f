"""The machinery shared by the runtimes that drive a sans-IO core on the event loop (the group coordinator's
``runtime.py``, the transaction coordinator's ``txn_runtime.py``): the clock they call the core with, the one
timer that wakes the core at its next deadline, and the group-commit writer that makes the core's records
durable before anybody is told about them.

* ``MonotonicClock``: a millisecond wall clock that never goes backwards between readings.
* ``DeadlineTimer``: one ``call_later`` handle, re-armed to the core's ``next_deadline()``; it fires a
  callback (the runtime's ``advance``) just after the deadline passes.
* ``GroupCommitWriter``: a queue of record batches. A writer task takes everything queued so far, appends it
  in one call (one fsync for many callers) on its single worker thread, then calls each batch's completion
  callback in submission order. A batch without records still waits for the batches queued before it. When
  the queue drains the snapshot hook runs (the core's state is then exactly the log's). A failed append (or
  snapshot, or callback) is fatal: it is logged, every batch not yet durable gets its callback called with
  the error, and the ``on_failure`` hook runs (the runtime fails its other waiters and stops the server).
  Optionally it fsyncs a short while after appends stop (for ``--fsync interval``).

Everything here runs on the event loop thread except the append and sync functions, which run on the writer's
worker thread, one at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = [
    "INTERVAL_SYNC_S",
    "DeadlineTimer",
    "Done",
    "GroupCommitWriter",
    "MonotonicClock",
    "WriterClosed",
    "wall_ms",
]

R = TypeVar("R")

Done = Callable[[BaseException | None], None]
"""A batch's completion callback: ``None`` once its records (and every earlier batch's) are durable, else the
error that stopped the writer (or ``WriterClosed``) before they were."""

INTERVAL_SYNC_S = 0.1


def wall_ms() -> int:
    return int(time.time() * 1000)


class MonotonicClock:
    """``now()`` is ``source()`` in milliseconds, except that it never goes below a value it returned before."""

    __slots__ = ("_last", "source")

    def __init__(self, source: Callable[[], int] = wall_ms) -> None:
        self.source = source
        self._last = 0

    def now(self) -> int:
        self._last = max(self._last, self.source())
        return self._last

    @property
    def last(self) -> int:
        """The latest value ``now()`` returned (0 before the first call)."""
        return self._last


class DeadlineTimer:
    """One ``call_later`` handle that calls ``fire()`` once ``clock()`` passes the deadline last armed.

    Arming the deadline already armed keeps the handle; arming ``None`` (the core has nothing due) or
    :meth:`cancel` leaves nothing armed. ``max_delay_s`` caps a single sleep (``fire`` then runs early and the
    owner re-arms). The handle belongs to the running event loop of the call to :meth:`arm`."""

    __slots__ = ("_clock", "_deadline", "_fire", "_handle", "_max_delay_s")

    def __init__(self, clock: Callable[[], int], fire: Callable[[], None], *, max_delay_s: float | None = None) -> None:
        self._clock = clock
        self._fire = fire
        self._max_delay_s = max_delay_s
        self._handle: asyncio.TimerHandle | None = None
        self._deadline: int | None = None

    @property
    def deadline(self) -> int | None:
        """The deadline armed, or ``None``."""
        return self._deadline if self._handle is not None else None

    def arm(self, deadline: int | None) -> None:
        if deadline == self._deadline and self._handle is not None:
            return
        self.cancel()
        self._deadline = deadline
        if deadline is not None:
            delay_s = max(0, deadline - self._clock() + 1) / 1000
            if self._max_delay_s is not None:
                delay_s = min(delay_s, self._max_delay_s)
            self._handle = asyncio.get_running_loop().call_later(delay_s, self._on_due)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._deadline = None

    def _on_due(self) -> None:
        self._handle = None
        self._deadline = None
        self._fire()


class WriterClosed(Exception):
    """Handed to the callbacks of batches still queued when a writer that never ran is closed."""


@dataclass(slots=True)
class _Batch(Generic[R]):
    records: list[R]
    done: Done | None


class GroupCommitWriter(Generic[R]):
    """Appends submitted record batches in submission order, many per ``append`` call; create, then
    :meth:`start` on the event loop.

    ``append(records)`` and ``sync()`` run on the writer's one worker thread (named after ``name``);
    ``snapshot()`` runs on the loop thread whenever the queue drains. ``sync``, when given, runs
    ``sync_after_s`` after an append unless one is already scheduled (under ``--fsync interval`` this bounds
    the loss window once appends stop). A failure is logged to ``logger`` as ``<what> write failed``."""

    def __init__(
        self,
        append: Callable[[Sequence[R]], object],
        *,
        name: str,
        logger: logging.Logger,
        what: str,
        snapshot: Callable[[], object] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        sync: Callable[[], object] | None = None,
        sync_after_s: float = INTERVAL_SYNC_S,
    ) -> None:
        self._append = append
        self._name = name
        self._logger = logger
        self._what = what
        self._snapshot = snapshot
        self._on_failure = on_failure
        self._sync = sync
        self._sync_after_s = sync_after_s
        self._queue: list[_Batch[R]] = []
        self._in_flight: deque[_Batch[R]] = deque()  # taken from the queue, callbacks not yet called
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._task: asyncio.Task[None] | None = None
        self._sync_handle: asyncio.TimerHandle | None = None
        self._sync_due = False
        self._failure: BaseException | None = None
        self._closed = False

    # ---------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self._name}-writer")

    async def close(self) -> None:
        """Make everything queued durable (unless the writer failed or never started), stop the task and the
        worker thread. Batches left queued get ``WriterClosed``."""
        if self._closed:
            return
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        if self._task is not None and self._failure is None:
            await self._idle.wait()
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        self._lose(WriterClosed(f"{self._what} closed"))
        self._executor.shutdown(wait=True)

    @property
    def started(self) -> bool:
        return self._task is not None

    @property
    def idle(self) -> bool:
        """Nothing is queued or being written: every batch submitted so far has had its callback called."""
        return self._idle.is_set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped the writer, if one did."""
        return self._failure

    # ------------------------------------------------------------------------------------------ submit
    def submit(self, records: Iterable[R], done: Done | None = None) -> None:
        """Queue ``records`` (possibly none); ``done`` is called once they and every earlier batch are
        durable, or with the error that stopped the writer first."""
        if self._failure is not None or self._closed:
            raise RuntimeError(f"the {self._what} writer is not running")
        self._queue.append(_Batch(list(records), done))
        self._idle.clear()
        self._wake.set()

    # ------------------------------------------------------------------------------------------ task
    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._drain()
            except Exception as exc:
                self._fail(exc)
                return

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue or self._sync_due:
            if self._queue:
                self._in_flight.extend(self._queue)
                self._queue = []
                records = [r for batch in self._in_flight for r in batch.records]
                if records:
                    await loop.run_in_executor(self._executor, self._append, records)
                    self._schedule_sync()
                while self._in_flight:
                    done = self._in_flight.popleft().done
                    if done is not None:
                        done(None)
            else:
                self._sync_due = False
                if self._sync is not None:
                    await loop.run_in_executor(self._executor, self._sync)
        if self._snapshot is not None:
            self._snapshot()
        self._idle.set()

    def _schedule_sync(self) -> None:
        if self._sync is None or self._sync_handle is not None:
            return

        def due() -> None:
            self._sync_handle = None
            self._sync_due = True
            self._idle.clear()
            self._wake.set()

        self._sync_handle = asyncio.get_running_loop().call_later(self._sync_after_s, due)

    def _fail(self, exc: BaseException) -> None:
        self._logger.critical("%s write failed; stopping: %s", self._what, exc, exc_info=exc)
        self._failure = exc
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        self._sync_due = False
        self._idle.set()
        self._lose(exc)
        if self._on_failure is not None:
            self._on_failure(exc)

    def _lose(self, exc: BaseException) -> None:
        lost = [*self._in_flight, *self._queue]
        self._in_flight.clear()
        self._queue = []
        for batch in lost:
            if batch.done is not None:
                batch.done(exc)
