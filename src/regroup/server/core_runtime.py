"""The machinery shared by the runtimes that drive a sans-IO core on the event loop (the group coordinator's
``runtime.py``, the transaction coordinator's ``txn_runtime.py``): the clock they call the core with, the one
timer that wakes the core at its next deadline, and the group-commit writer that makes the core's records
durable before anybody is told about them.

* ``MonotonicClock``: a millisecond wall clock that never goes backwards between readings.
* ``DeadlineTimer``: one ``call_later`` handle, re-armed to the core's ``next_deadline()``; it fires a
  callback (the runtime's ``advance``) just after the deadline passes.
* ``GroupCommitWriter``: a queue of record batches, made durable in submission order, many per disk call,
  and each batch's completion callback called in submission order once its records (and every earlier
  batch's) are durable, except for a batch of another scope written beside a long append (below). A batch
  without records still waits for the batches queued before it. Two shapes:

  - *pipelined* (given ``flush``, under ``--fsync always``): everything queued so far becomes one job on a
    pool of ``PIPELINE_DEPTH`` worker threads: write it (``append``: serialise + ``write(2)``, no fsync), then
    ``flush(written)`` (fsync, unless one that began after this write returned already covers it). Jobs
    write in submission order (a job waits for the writes of the jobs before it to return), so while one job's
    fsync runs the jobs after it are serialised and written, and the next fsync, started as soon as the first
    returns (the log serialises its fsyncs), covers all of them: the jobs whose records it covered do no
    fsync of their own. Callbacks follow the jobs' completions in submission order. Scopes apply here too: a
    job waits only for the writes of the jobs before it whose scopes meet its own (all of them when its scope
    or theirs is unknown), and once fsynced is done before the unfinished jobs it need not follow (unless it
    holds a batch without records or of unknown scope, which waits for everything before it): under
    ``--fsync always`` a healthy group's commit need not wait while a 10,000-member group's record is encoded
    (``_WriteTurns``, ``_settle_passing``). When fewer batches are queued than the last wave took (the batches
    dispatched between two moments without a running job), and no job runs or the last one took
    ``LINGER_MAX_S`` at most (a fast disk), the queue waits for the rest, up to what the last job took
    (``LINGER_MAX_S`` at most): the clients one fsync answered come back a moment apart, and one fsync covers
    them instead of two.
  - *whole* (no ``flush``): ``append`` writes and makes durable (or not, as the fsync policy says) in one
    call on the one worker thread, and the callbacks follow it. A batch submitted while the thread is free
    is handed to it within ``submit``; one submitted while it works goes, with everything queued meanwhile,
    when it is done (its end reaches the loop as one callback: each batch waits two turns of the loop at
    most, which under a busy loop is most of its wait). Optionally it also fsyncs a short while after
    appends stop (``sync``, for ``--fsync interval``), on the same thread. Given ``write_now``, the batches
    submitted while the thread is free are instead kept to the end of the loop's turn and offered to it
    together: it writes them on the loop when that is cheap (small records, no new segment: no fsync), and
    they are done in that same turn; what it declines goes to the thread as before. The hand-over to the
    thread and back cost more than writing a few small records (the thread waits for the interpreter's lock
    the loop holds, then the loop for the thread's wake-up): OffsetCommit under ``--fsync never`` from ten
    connections, about 9,600 a second through the thread, 13,700 written on the loop. A batch may name its
    *scope* (the runtime's group ids): while the thread appends, the queued batches whose scope meets neither
    the thread's batches nor a batch queued before them that stays are offered to ``write_now`` at the end of the
    turn (``_offer_beside``; the log writes them between the thread's encoding and its write, never inside
    it), and those it writes are done before the batches they passed: another group's records, which replay the
    same in either order, need not wait while a 10,000-member group's record is encoded; the same goes for a
    turn's batches ``write_now`` declines together, those of other scopes written one by one. (Healthy commits'
    wait in the writer beside classic-joins-10k: up to 26-56 ms before, mostly under 25 ms after; what is left is
    the large record's framing and write, about 10 ms with the log held, docs/benchmarks.md.)

  When the queue drains (nothing queued, nothing being written) the snapshot hook runs on the loop (the core's
  state is then exactly the log's): it takes the state when a snapshot is due and returns a ``SnapshotJob``.
  Its ``encode`` (building and encoding the state's records: the long part) runs on a thread of its own while
  the writer goes on writing batches; then its ``write`` (the file, its fsyncs, the compaction) runs on the
  writer's thread between two writes: batches submitted meanwhile wait for that step only, so a healthy
  member's commit never waits for a large state to be encoded. The writer counts as idle while a snapshot is
  out (every batch so far is answered); one snapshot is out at a time, and ``close`` waits for it to be
  written. A failed write, flush, snapshot or callback is fatal: it is logged, every batch
  not yet durable gets its callback called with the error (a later job's write never starts after an
  earlier one failed), and the ``on_failure`` hook runs (the runtime fails its other waiters and stops the
  server).

Everything here runs on the event loop thread except the append, flush and sync functions and the snapshot
job's steps, which run on the writer's worker threads: in the whole shape one at a time on one thread;
pipelined, ``append`` one at a time and in order, ``flush`` on up to ``PIPELINE_DEPTH`` threads at once
(possibly while the next ``append`` runs), a snapshot's ``write`` alone; a snapshot's ``encode`` on the
writer's snapshot thread, beside any of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "INTERVAL_SYNC_S",
    "DeadlineTimer",
    "Done",
    "GroupCommitWriter",
    "MonotonicClock",
    "SnapshotJob",
    "WriterClosed",
    "wall_ms",
]

R = TypeVar("R")

Done = Callable[[BaseException | None], None]
"""A batch's completion callback: ``None`` once its records (and every earlier batch's) are durable, else the
error that stopped the writer (or ``WriterClosed``) before they were."""

INTERVAL_SYNC_S = 0.1


class SnapshotJob(Protocol):
    """A snapshot taken on the loop (``storage.snapshotted_log.SnapshotJob``): ``encode`` makes its bytes on any
    thread, beside writes; ``write`` stores them while nothing else is written."""

    def encode(self) -> Any: ...

    def write(self, state: Any) -> object: ...


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

    def peek(self) -> int:
        """What ``now()`` would return, without recording it: safe from another thread (``now()`` is not, two
        threads' writes could take ``last`` back)."""
        return max(self._last, self.source())


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


#: the longest a new wave's first batches wait for the rest (``GroupCommitWriter._lingering``)
LINGER_MAX_S = 0.002

PIPELINE_DEPTH = 8
"""Jobs (write + fsync) a pipelined writer runs at once: one fsyncing, the ones after it written and waiting for
the next fsync, which covers them all. With two (one fsyncing, one waiting), batches arriving during an fsync
waited for a free job and then for an fsync of their own: with fsyncs of 4 ms, 836 commits a second from 10
connections instead of 1,124 (docs/benchmarks.md)."""


@dataclass(slots=True)
class _Batch(Generic[R]):
    records: list[R]
    done: Done | None
    #: what the records concern (the runtime's group ids), or None: unknown (it neither passes nor is passed)
    scope: frozenset[Hashable] | None = None
    #: its records take long to encode (pipelined: it is a job of its own, ``_take_jobs``)
    heavy: bool = False


@dataclass(slots=True)
class _Job(Generic[R]):
    """Batches handed to the worker threads together (pipelined); ``future`` is ``None`` when they have no
    records (they only wait for the jobs before them). ``finished``: the loop has seen the job's thread return
    (its outcome checked), which is what settling waits for, not the future alone (a job without records is
    finished from the start). ``scope``: the groups its batches concern, None when one of them has records of
    unknown scope (the write turns', and what the jobs after it wait for); ``follows_all``: a batch of unknown
    scope is in it, so it is done only after every job before it."""

    batches: list[_Batch[R]]
    future: concurrent.futures.Future[float] | None
    finished: bool = False
    scope: frozenset[Hashable] | None = None
    follows_all: bool = True


def _job_scope(batches: Sequence[_Batch[Any]]) -> tuple[frozenset[Hashable] | None, bool]:
    """(a job's ``scope``, its ``follows_all``) from its batches: a batch of unknown scope makes the job follow
    every job before it, and with records makes its scope unknown."""
    scopes: list[frozenset[Hashable]] = []
    follows_all = unknown = False
    for batch in batches:
        if batch.scope is None:
            follows_all = True
            unknown = unknown or bool(batch.records)
        else:
            scopes.append(batch.scope)
    if unknown:
        return None, True
    return frozenset().union(*scopes), follows_all


def _nothing() -> None:
    """(Nothing to do on the loop after an interval's fsync.)"""


def _call_on_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[], None], _: object) -> None:
    """A worker thread's future is done: ``callback`` runs on ``loop`` (not at all if the loop closed first)."""
    with contextlib.suppress(RuntimeError):  # (the loop is closed: so is the writer)
        loop.call_soon_threadsafe(callback)


class _WriteTurns:
    """Keeps the pipelined jobs' writes in order across the worker threads: a job writes once the writes of the
    jobs before it that it must follow returned (``_meets``: those whose scopes meet its own; all of them for a
    job of unknown scope, and a job of unknown scope for all after it); after a failed write (or once the writer
    stopped) no later job writes. Jobs are entered on the loop, in submission order, before any of them runs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        #: the jobs entered whose write has not returned: write turn -> scope (None: unknown)
        self._open: dict[int, frozenset[Hashable] | None] = {}
        self._broken = False

    def enter(self, seq: int, scope: frozenset[Hashable] | None) -> None:
        with self._cond:
            self._open[seq] = scope

    def wait(self, seq: int) -> None:
        with self._cond:
            scope = self._open.get(seq)
            while not self._broken and any(
                earlier < seq and _meets(other, scope) for earlier, other in self._open.items()
            ):
                self._cond.wait()
            if self._broken:
                raise WriterClosed("an earlier write failed or the writer stopped")

    def passed(self, seq: int) -> None:
        with self._cond:
            self._open.pop(seq, None)
            self._cond.notify_all()

    def break_(self) -> None:
        with self._cond:
            self._broken = True
            self._cond.notify_all()


def _meets(one: frozenset[Hashable] | None, other: frozenset[Hashable] | None) -> bool:
    """Whether records of these two scopes must keep their order (either unknown, or a group in both)."""
    return one is None or other is None or not one.isdisjoint(other)


class GroupCommitWriter(Generic[R]):
    """Makes submitted record batches durable in submission order, many per disk call; create, then
    :meth:`start` on the event loop.

    Whole (no ``flush``): ``append(records)`` and ``sync()`` run on the writer's one worker thread (named
    after ``name``), ``append`` making the records as durable as the policy says. Pipelined (``flush``
    given): each job calls ``append(records)`` (a write only; in submission order) then ``flush(written)``
    (``written``: what that ``append`` returned) on one of ``PIPELINE_DEPTH`` worker threads; a batch is durable
    once the ``flush`` after its ``append`` returned. ``snapshot()``
    runs on the loop thread whenever the queue drains and no snapshot is out, and returns None or a
    ``SnapshotJob`` (its ``encode`` on a thread of its own, its ``write`` on a worker thread while nothing else
    is written). ``sync``, when given (whole only), runs
    ``sync_after_s`` after an append unless one is already scheduled (under ``--fsync interval`` this bounds
    the loss window once appends stop). ``write_now`` (whole only) writes records on the loop without an fsync
    when it judges that cheap, and says whether it did. A failure is logged to ``logger`` as ``<what> write
    failed``."""

    def __init__(
        self,
        append: Callable[[Sequence[R]], object],
        *,
        name: str,
        logger: logging.Logger,
        what: str,
        snapshot: Callable[[], SnapshotJob | None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        sync: Callable[[], object] | None = None,
        sync_after_s: float = INTERVAL_SYNC_S,
        flush: Callable[[Any], object] | None = None,
        write_now: Callable[[Sequence[R]], bool] | None = None,
    ) -> None:
        if flush is not None and sync is not None:
            raise ValueError("a pipelined writer fsyncs every job: it takes no interval sync")
        if flush is not None and write_now is not None:
            raise ValueError("a pipelined writer writes on its threads only")
        self._write_now = write_now
        self._turn_write = False  # (whole, with write_now) the end of this turn's write is scheduled
        self._beside_turn = False  # (whole, with write_now) the end of this turn's offer beside the thread is due
        self._declined = False  # (whole, with write_now) it declined the batches queued: the thread takes them
        self._append = append
        self._flush = flush
        self._name = name
        self._logger = logger
        self._what = what
        self._snapshot = snapshot
        self._on_failure = on_failure
        self._sync = sync
        self._sync_after_s = sync_after_s
        self._queue: list[_Batch[R]] = []  # submitted, not yet taken
        self._writing: list[_Batch[R]] = []  # (whole) taken: being appended
        self._completing: deque[_Batch[R]] = deque()  # durable, callbacks being called
        self._jobs: deque[_Job[R]] = deque()  # (pipelined) handed to the worker threads, oldest first
        self._running = 0  # (pipelined) jobs whose thread has not finished
        self._seq = 0  # (pipelined) write turn of the next job
        self._turns = _WriteTurns()
        self._pump_scheduled = False
        #: (pipelined) batches dispatched since no job ran; the last such wave's count; how long the last job
        #: took; the timer of a wave's first batches waiting for the rest (``_lingering``), and whether it fired
        self._wave_batches = 0
        self._wave = 0
        self._job_s = 0.0
        self._linger: asyncio.TimerHandle | None = None
        self._lingered = False
        self._busy = False  # (whole) the worker thread runs an append, a sync or a snapshot's write
        self._loop: asyncio.AbstractEventLoop | None = None  # (whole) the loop it was started on
        self._idle = asyncio.Event()
        self._idle.set()
        workers = PIPELINE_DEPTH if flush is not None else 1
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._started = False
        self._sync_handle: asyncio.TimerHandle | None = None
        self._sync_due = False
        self._failure: BaseException | None = None
        self._closed = False
        self._snapshotting = False  # a snapshot is to be written or being written: no job starts meanwhile
        #: a snapshot out (encoding, or encoded and not yet written): set when none is
        self._snapshot_done = asyncio.Event()
        self._snapshot_done.set()
        self._snapshot_ready: tuple[SnapshotJob, Any] | None = None  # encoded, to be written
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-snapshot")

    # ---------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._started = True
        if self._flush is None:
            self._loop = loop
            if self._queue:
                self._next()
        elif self._queue:
            self._schedule_pump()

    async def close(self) -> None:
        """Make everything queued durable (unless the writer failed or never started), stop the
        worker threads. Batches left queued get ``WriterClosed``."""
        if self._closed:
            return
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        if self._started and self._failure is None:
            await self._idle.wait()
            await self._snapshot_done.wait()  # (then the writer is idle again: nobody submits while closing)
        self._closed = True
        self._turns.break_()
        self._lose(WriterClosed(f"{self._what} closed"))
        self._executor.shutdown(wait=True)
        self._encoder.shutdown(wait=True)

    @property
    def started(self) -> bool:
        return self._started

    @property
    def pipelined(self) -> bool:
        """Whether each job writes, then fsyncs, on a pool of threads (a ``flush`` was given)."""
        return self._flush is not None

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
    def submit(
        self,
        records: Iterable[R],
        done: Done | None = None,
        scope: frozenset[Hashable] | None = None,
        *,
        heavy: bool = False,
    ) -> None:
        """Queue ``records`` (possibly none); ``done`` is called once they and every earlier batch are
        durable, or with the error that stopped the writer first. ``scope``: what the records concern (the
        runtime's group ids); a batch whose scope meets none of the batches before it that are still unwritten
        may be written before them (whole with ``write_now``: ``_offer_beside``; pipelined: its job's write turn),
        and then ``done`` is called before theirs. None: it is written in its turn. ``heavy``: the records take
        long to encode (a 10,000-member group's); pipelined, the batch is a job of its own, so that the batches
        queued with it may pass it."""
        if self._failure is not None or self._closed:
            raise RuntimeError(f"the {self._what} writer is not running")
        self._queue.append(_Batch(list(records), done, scope, heavy))
        self._idle.clear()
        if self._flush is None:
            self._next()
        elif self._started:
            self._schedule_pump()

    # ------------------------------------------------------------------------------------- whole shape
    def _next(self) -> None:
        """(whole, on the loop) Start the next piece of work on the worker thread unless one runs: the encoded
        snapshot's write, else everything queued (as one append; with ``write_now``, offered to it at the end of
        the turn first, ``_write_turn``), else the interval's fsync; with nothing left, take a snapshot if one is
        due and report idle. Called as a batch is submitted and as the thread's work ends: a batch submitted
        while the thread is free is handed to it at once, with no turn of the loop in between."""
        if not self._started or self._failure is not None or self._closed:
            return
        if self._busy and self._writing and self._queue and self._write_now is not None and not self._beside_turn:
            self._beside_turn = True
            asyncio.get_running_loop().call_soon(self._offer_beside)
        try:
            while not self._busy:
                if self._snapshot_ready is not None:  # (batches submitted meanwhile are written after it)
                    (job, state), self._snapshot_ready = self._snapshot_ready, None
                    self._on_thread(self._snapshot_write_done, job.write, state)
                elif self._queue and self._write_now is not None and not self._declined:
                    if not self._turn_write:
                        self._turn_write = True
                        asyncio.get_running_loop().call_soon(self._write_turn)
                    return
                elif self._queue:
                    self._declined = False
                    self._writing, self._queue = self._queue, []
                    records = [r for batch in self._writing for r in batch.records]
                    if records:
                        self._on_thread(self._appended, self._append, records)
                    else:  # (only batches without records: answered now, in order)
                        self._writing_done()
                elif self._sync_due:
                    self._sync_due = False
                    if self._sync is not None:
                        self._on_thread(_nothing, self._sync)
                else:
                    self._take_snapshot()
                    self._idle.set()
                    return
        except Exception as exc:
            self._fail(exc)

    def _write_turn(self) -> None:
        """(whole, on the loop, after the turn in which the first of them was submitted) Offer the batches queued
        to ``write_now``; done here if it wrote them, else (or with the thread busy meanwhile) as ``_next`` says."""
        self._turn_write = False
        if self._busy or self._snapshot_ready is not None or self._failure is not None or self._closed:
            self._next()
            return
        self._busy_step(self._write_queued)

    def _offer_beside(self) -> None:
        """(whole, on the loop, at the end of the turn in which batches were queued while the thread appends) Offer
        ``write_now`` the queued batches that may pass the thread's (``_write_passing``): a healthy group's commits
        need not wait for another group's large record to be encoded (a 10,000-member group's record: tens of
        milliseconds on the thread beside a busy loop)."""
        self._beside_turn = False
        if not self._busy or not self._writing or self._failure is not None or self._closed:
            return
        blocked: set[Hashable] = set()
        for batch in self._writing:
            if batch.scope is not None:
                blocked |= batch.scope
            elif batch.records:
                return
        try:
            self._write_passing(blocked)
        except Exception as exc:
            self._fail(exc)

    def _write_passing(self, blocked: set[Hashable]) -> None:
        """(whole, on the loop) Offer ``write_now``, one batch at a time in their order, the queued batches with
        records whose scope meets neither ``blocked`` (what the thread is appending) nor any batch queued before
        them that stays, and that follow no batch of unknown scope with records (one without records and scope
        passes nothing and blocks nothing: it waits for all before it). Those written are done now, before the
        batches they passed; one declined stays, and so do the later ones of its scope."""
        write_now = self._write_now
        assert write_now is not None
        passing: list[_Batch[R]] = []
        for batch in self._queue:
            if batch.scope is None:
                if batch.records:
                    break
                continue  # (it waits for the batches before it; those after it need not wait for it)
            if batch.records and batch.scope.isdisjoint(blocked) and write_now(batch.records):
                passing.append(batch)
            else:
                blocked |= batch.scope
        if not passing:
            return
        passed = {id(batch) for batch in passing}
        self._queue = [batch for batch in self._queue if id(batch) not in passed]
        self._completing.extend(passing)
        self._complete()

    def _write_queued(self) -> None:
        """(whole, on the loop) What ``_write_turn`` offers: every batch queued, done now if ``write_now`` wrote
        them (or they hold no records), else marked for the thread, once the batches that may pass the ones it
        declined are written (``_write_passing``: a healthy group's commits queued beside a large record are not
        appended with it)."""
        assert self._write_now is not None
        records = [r for batch in self._queue for r in batch.records]
        if not records or self._write_now(records):
            self._writing, self._queue = self._queue, []
            if records:
                self._appended()
            else:  # (only batches without records: answered now, in order)
                self._writing_done()
            return
        self._write_passing(set())
        self._declined = bool(self._queue)

    def _busy_step(self, step: Callable[[], None]) -> None:
        """(whole, on the loop) ``step`` with the worker counted busy, so that what its callbacks submit waits in
        the queue, then the next piece of work; a step that raises stops the writer."""
        self._busy = True
        try:
            step()
        except Exception as exc:
            self._fail(exc)
            return
        finally:
            self._busy = False
        self._next()

    def _on_thread(self, then: Callable[[], None], work: Callable[..., object], *args: Any) -> None:
        """(whole) Run ``work(*args)`` on the worker thread; ``then`` runs on the loop once it returned."""
        assert self._loop is not None
        self._busy = True
        future = self._executor.submit(work, *args)
        ended = functools.partial(self._thread_done, then, future)
        future.add_done_callback(functools.partial(_call_on_loop, self._loop, ended))

    def _thread_done(self, then: Callable[[], None], future: concurrent.futures.Future[object]) -> None:
        """(whole, on the loop) The thread's work returned: ``then`` (with the thread still counted busy, so that
        what its callbacks submit waits in the queue), then the next piece of work."""
        if self._ends_here(future):
            return
        self._busy_step(then)

    def _appended(self) -> None:
        self._schedule_sync()
        self._writing_done()

    def _writing_done(self) -> None:
        self._completing.extend(self._writing)
        self._writing = []
        self._complete()

    def _snapshot_write_done(self) -> None:
        self._snapshotting = False
        self._snapshot_done.set()

    def _schedule_sync(self) -> None:
        if self._sync is None or self._sync_handle is not None:
            return

        def due() -> None:
            self._sync_handle = None
            self._sync_due = True
            self._idle.clear()
            self._next()

        self._sync_handle = asyncio.get_running_loop().call_later(self._sync_after_s, due)

    # --------------------------------------------------------------------------------- pipelined shape
    def _schedule_pump(self) -> None:
        """Hand what is queued to the threads at the end of this loop iteration (so that the batches
        submitted during it go together)."""
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        try:
            self._dispatch()
            self._settle()
        except Exception as exc:
            self._fail(exc)

    def _dispatch(self) -> None:
        """Turn what is queued into a job, if fewer than ``PIPELINE_DEPTH`` jobs run (and no snapshot is to be
        written: it is written once the jobs running finished)."""
        if self._snapshot_ready is not None and self._running == 0 and self._failure is None and not self._closed:
            self._write_snapshot()
        if (
            self._failure is not None
            or self._closed
            or not self._queue
            or self._running >= PIPELINE_DEPTH
            or self._snapshotting
            or self._lingering()
        ):
            return
        jobs = self._take_jobs()
        for i, batches in enumerate(jobs):
            if self._running >= PIPELINE_DEPTH:
                self._queue = [batch for rest in jobs[i:] for batch in rest]  # (still in an order that may be written)
                break
            self._dispatch_job(batches)

    def _take_jobs(self) -> list[list[_Batch[R]]]:
        """(pipelined) Everything queued, as the batches of the jobs to dispatch in order: those whose scopes meet
        no job not yet done (nor a heavy or held-back batch before them) go first, together; then each heavy
        batch whose scope meets nothing before it, alone; then the rest together, in their order. So a healthy
        group's commits are not put in one job with another group's batches that wait for a 10,000-member
        group's record, nor with that record itself, and they pass it; any two batches whose scopes meet (or of
        unknown scope with records) keep their order."""
        queue, self._queue = self._queue, []
        held: set[Hashable] = set()
        for job in self._jobs:
            if job.scope is None:
                return [queue]
            held |= job.scope
        free: list[_Batch[R]] = []
        heavy: list[list[_Batch[R]]] = []
        behind: list[_Batch[R]] = []
        for n, batch in enumerate(queue):
            scope = batch.scope
            if scope is None:
                if batch.records:  # (it and everything after it keep their order behind what came before)
                    behind.extend(queue[n:])
                    break
                behind.append(batch)  # (without records: it waits for every job before it wherever it goes)
            elif not scope.isdisjoint(held):
                behind.append(batch)
                held |= scope
            elif batch.heavy:
                heavy.append([batch])
                held |= scope
            else:
                free.append(batch)
        return [jobs for jobs in (free, *heavy, behind) if jobs]

    def _dispatch_job(self, batches: list[_Batch[R]]) -> None:
        self._wave_batches += len(batches)
        records = [r for batch in batches for r in batch.records]
        job: _Job[R] = _Job(batches, None)
        job.scope, job.follows_all = _job_scope(batches)
        if not records:
            job.finished = True  # (nothing to write: done once the jobs it follows are)
        else:
            loop = asyncio.get_running_loop()
            self._turns.enter(self._seq, job.scope)
            job.future = self._executor.submit(self._write_then_flush, self._seq, records)
            self._seq += 1
            self._running += 1
            # The thread hands the loop the job's end itself: the loop sees it the next turn (through an asyncio
            # future it would be a turn later, every commit under --fsync always waiting that turn more).
            job.future.add_done_callback(functools.partial(_call_on_loop, loop, functools.partial(self._job_done, job)))
        self._jobs.append(job)

    def _lingering(self) -> bool:
        """(pipelined) Whether the batches queued wait a little longer before they become a job: when fewer are
        queued than the last wave of jobs took (the batches dispatched from one moment without a running job to
        the next), the first of a new wave waits for the rest, up to what the last job took (``LINGER_MAX_S`` at
        most), so that one fsync covers them all. Without it, the batches of clients answered by one fsync came
        back one first and the rest a moment later: the first fsynced alone, the rest waited for its fsync, then
        had their own (with fsyncs 4 ms slower, two fsyncs a round for ten committing connections). While a job
        runs they wait too, when jobs take ``LINGER_MAX_S`` at most (a fast disk): the clients of the running job
        are back a moment after its end and go with them, where else two groups of clients took turns, each with
        an fsync of its own (OffsetCommit from ten connections: 5.7 commits a job, 1.11x the commits a second with
        the wait); on a slow disk they are written at once, for the next fsync to cover (there, waiting cost 7%)."""
        if (
            (self._running and self._job_s > LINGER_MAX_S)
            or self._lingered
            or self._wave <= 1
            or len(self._queue) >= self._wave
        ):
            self._lingered = False
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            return False
        if self._linger is None:
            self._linger = asyncio.get_running_loop().call_later(min(self._job_s, LINGER_MAX_S), self._lingered_out)
        return True

    def _lingered_out(self) -> None:
        self._linger = None
        self._lingered = True
        self._pump()

    def _write_then_flush(self, seq: int, records: list[R]) -> float:
        """A job, on a worker thread: write after the previous job's write returned, then fsync (which covers
        this write and any before it). How long it took, from its turn to write."""
        assert self._flush is not None
        self._turns.wait(seq)
        began = time.perf_counter()
        try:
            written = self._append(records)
        except BaseException:
            self._turns.break_()
            raise
        self._turns.passed(seq)
        self._flush(written)
        return time.perf_counter() - began

    def _job_done(self, job: _Job[R]) -> None:
        """(pipelined, on the loop) A job's thread returned."""
        job.finished = True
        self._running -= 1
        if self._running == 0:
            self._wave, self._wave_batches = self._wave_batches, 0
        if self._failure is not None or self._closed or job.future is None or job.future.cancelled():
            return
        error = job.future.exception()
        if error is not None:
            self._fail(error)  # (batches of jobs before it that are not yet durable get the error too)
            return
        self._job_s = job.future.result()
        self._pump()

    def _settle(self) -> None:
        """Call the callbacks of the jobs that are done, in order, a job's once every job before it that it follows
        is done (``_settle_passing``: a job of other groups need not wait while a 10,000-member group's record is
        encoded); when nothing is left, snapshot and report idle."""
        jobs = self._jobs
        while jobs and jobs[0].finished:
            self._completing.extend(jobs.popleft().batches)
            self._complete()
        if len(jobs) > 1 and any(job.finished for job in jobs):
            self._settle_passing()
        self._dispatch()  # (a slot may have freed, or callbacks submitted more)
        if not self._jobs and not self._queue and self._failure is None and not self._snapshotting:
            self._take_snapshot()
            self._idle.set()

    def _settle_passing(self) -> None:
        """(pipelined) Done now: the finished jobs behind an unfinished one that follow none of the jobs still
        before them (their scopes meet no such job's, and they hold no batch that waits for everything)."""
        kept: deque[_Job[R]] = deque()
        passing: list[_Job[R]] = []
        for job in self._jobs:
            if job.finished and not job.follows_all and not any(_meets(k.scope, job.scope) for k in kept):
                passing.append(job)
            else:
                kept.append(job)
        self._jobs = kept  # (before any callback runs: one that raises fails the batches left, each once)
        for job in passing:
            self._completing.extend(job.batches)
        self._complete()

    def _write_snapshot(self) -> None:
        """(pipelined) Write the encoded snapshot on a worker thread (no job runs)."""
        assert self._snapshot_ready is not None
        (job, state), self._snapshot_ready = self._snapshot_ready, None
        future = self._executor.submit(job.write, state)
        written = functools.partial(self._snapshot_written, future)
        future.add_done_callback(functools.partial(_call_on_loop, asyncio.get_running_loop(), written))

    def _snapshot_written(self, future: concurrent.futures.Future[object]) -> None:
        """(pipelined) The snapshot's write returned: what was queued meanwhile is written now."""
        self._snapshotting = False
        if self._failure is not None or self._closed or future.cancelled():
            return
        error = future.exception()
        self._snapshot_done.set()
        if error is not None:
            self._fail(error)
            return
        self._pump()

    # ------------------------------------------------------------------------------------------ shared
    def _ends_here(self, future: concurrent.futures.Future[Any]) -> bool:
        """(on the loop) A thread's work returned: True when nothing follows it, the writer having stopped
        already, or stopping now on the error the work raised."""
        if self._failure is not None or self._closed or future.cancelled():
            return True
        error = future.exception()
        if error is not None:
            self._fail(error)
            return True
        return False

    def _take_snapshot(self) -> None:
        """(the writer drained) Ask the hook for a snapshot, unless one is out; encode it on the snapshot thread."""
        if self._snapshot is None or not self._snapshot_done.is_set() or self._failure is not None:
            return
        job = self._snapshot()
        if job is None:
            return
        self._snapshot_done.clear()
        future = self._encoder.submit(job.encode)
        encoded = functools.partial(self._snapshot_encoded, job, future)
        future.add_done_callback(functools.partial(_call_on_loop, asyncio.get_running_loop(), encoded))

    def _snapshot_encoded(self, job: SnapshotJob, future: concurrent.futures.Future[Any]) -> None:
        """The snapshot's ``encode`` returned: its ``write`` goes next, before any batch queued from now on."""
        if self._ends_here(future):
            return
        self._snapshot_ready = (job, future.result())
        self._snapshotting = True
        if self._flush is None:
            self._next()
        else:
            self._dispatch()

    def _complete(self) -> None:
        """Call the callbacks of the durable batches, oldest first. A batch leaves the deque before its
        callback runs: if that raises, the batches after it are failed with the error."""
        while self._completing:
            done = self._completing.popleft().done
            if done is not None:
                done(None)

    def _fail(self, exc: BaseException) -> None:
        self._logger.critical("%s write failed; stopping: %s", self._what, exc, exc_info=exc)
        self._failure = exc
        self._turns.break_()  # (a job not yet writing never will; one writing or fsyncing finishes on its own)
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        self._sync_due = False
        self._snapshot_ready = None
        self._idle.set()
        self._snapshot_done.set()
        self._lose(exc)
        if self._on_failure is not None:
            self._on_failure(exc)

    def _lose(self, exc: BaseException) -> None:
        lost = [*self._completing, *(b for job in self._jobs for b in job.batches), *self._writing, *self._queue]
        self._completing.clear()
        self._jobs.clear()
        self._writing = []
        self._queue = []
        for batch in lost:
            if batch.done is not None:
                batch.done(exc)
