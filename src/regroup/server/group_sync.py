"""Group commit of a topic store's partition logs: the fsyncs of every partition appended to since the last round
issued together on worker threads. Under ``--fsync always`` every produce waiting on them is released once its
partitions are on disk (``handlers/data.py``); under ``--fsync interval`` the store hands it, on its own
timer, every partition with appends not yet fsynced, and at once a log whose roll waits (nobody waits: the
records were readable as soon as written). One per topic store (``TopicStore.group_sync``), on its event loop;
the store closes it. A log's fsync here also settles a segment roll it has not made durable yet (the old segment's
fsync, the new one's rename into place, the directory's fsync: ``PendingSync``), so no roll fsyncs on the loop.
A worker thread runs its batch of jobs one after another, each failure reported for its own job (``run_each``,
which the topic store's worker jobs use too). A round of several files may instead be one sync of the whole file
system (``syncfs``, on one worker thread, the rolls to settle beside it file by file) when that has cost less
lately (``sync_choice.py``); if it fails, each of its files is fsynced on its own, which tells which failed.
A round after one that answered produces while others already waited first waits a moment for the producers it
answered (``round_gather.py``), so that producers do not settle into two groups taking turns."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from regroup.server.round_gather import RoundGather
from regroup.server.sync_choice import SyncChoice
from regroup.server.time_slices import TimeSlices
from regroup.storage.files import CLOEXEC, dirty_bytes, sync_filesystem, syncs_filesystem
from regroup.storage.partition_log import PartitionLog, PendingSync

E = TypeVar("E", bound=Exception)

log = logging.getLogger(__name__)

#: worker threads of one store's group commit: fsyncs of different files issued together, so the file
#: system can put them in one journal commit
SYNC_THREADS = 8
#: a round is one sync of the whole file system only while the machine has at most this much written data not yet
#: written back (``storage.files.dirty_bytes``): that sync writes it all before it returns
WHOLE_MAX_DIRTY_BYTES = 32 << 20
#: a round gives the loop a turn after this long (each log's ``begin_sync`` and ``finish_sync`` run on it)
SLICE_S = 0.005
#: a waiter's logs checked between two looks at the slice's clock (``wait``, ``_release``; fewer: at once)
RELEASE_CHUNK = 500


class GroupSync:
    """Group commit of the partition logs' fsyncs (one per topic store, on its event loop).

    ``wait(targets)`` waits until each ``(log, offset)`` is durable (``fsynced``: covered by a finished fsync,
    whatever the policy: a transaction marker). One round at a time: every log with appends not yet fsynced is
    handed to the worker threads (:meth:`PartitionLog.begin_sync`, one fsync per log, all at once), and when
    they have all ended each log learns its result on the loop (:meth:`PartitionLog.finish_sync`); appends made
    meanwhile go in the next round. The logs are handed out as one batch per worker thread (each thread fsyncs
    its batch one log after another), and the loop's part is cut into slices of ``SLICE_S``: a round of 10,000
    partitions held the loop for about half a second. ``wait`` returns the logs whose fsync failed (or that were
    closed) first."""

    def __init__(self, directory: Path | None = None) -> None:
        """``directory``: where the logs are (their store's), whose file system a round may sync whole; None: every
        round fsyncs file by file."""
        #: (log -> the offset it waits for, whether it waits for ``fsynced`` rather than ``durable``, its future)
        self._waiting: list[tuple[dict[PartitionLog, int], bool, asyncio.Future[None]]] = []
        self._dirty: set[PartitionLog] = set()
        self._runner: asyncio.Task[None] | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        #: a descriptor of ``directory``, held open for the whole syncs: each reports the write-back errors on the
        #: file system since the one before (since this opened it, for the first)
        self._fs_fd = -1
        if directory is not None and syncs_filesystem():
            self._fs_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC)
        self.choice = SyncChoice(self._fs_fd >= 0)
        #: whether the next round waits for the produces the last one answered (``round_gather.py``)
        self.gather = RoundGather()
        self._gathered: asyncio.Future[None] | None = None
        self._closed = False

    def schedule(self, plog: PartitionLog) -> None:
        """fsync ``plog``'s appends in the next round, without waiting for it (acks=0; ``INTERVAL``)."""
        self._dirty.add(plog)
        self._start()

    async def wait(
        self, targets: dict[PartitionLog, int], *, fsynced: bool = False, slices: TimeSlices | None = None
    ) -> set[PartitionLog]:
        """Wait until every log is durable up to its offset (``fsynced``: fsynced, under ``INTERVAL`` too); the
        logs that failed (or closed) first. More than ``RELEASE_CHUNK`` logs are checked in slices: the first time
        in the caller's ``slices`` when given (the caller's work and this check share its current slice; a slice of
        their own began a new one after the caller's full slice: 10,000 markers' appends, then the check of their
        10,000 logs, held the loop for about 10 ms together)."""
        pending = await _unreached(targets, fsynced, slices)
        if not pending:
            return set()  # (every log reached its offset: durable, whatever happens to its log later)
        await self._enlist(pending, fsynced)  # (a cancelled produce cancels its own future only)
        return set(await _unreached(pending, fsynced, None))

    def wait_then(self, targets: dict[PartitionLog, int], done: Callable[[set[PartitionLog]], None]) -> bool:
        """``wait`` (durable, a few logs) for a caller without a coroutine (a Produce answered at once): whether
        any log still has to get there; if so, ``done`` is called on the loop once all have, with the logs that
        failed (or closed) first."""
        pending = _unreached_now(targets, False)
        if not pending:
            return False
        self._enlist(pending, False).add_done_callback(partial(_then, pending, done))
        return True

    def _enlist(self, pending: dict[PartitionLog, int], fsynced: bool) -> asyncio.Future[None]:
        """A future done once the round that covers every log of ``pending`` has ended (the next one, or one
        after it for a log appended to while a round runs)."""
        self._dirty.update(pending)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((pending, fsynced, future))
        if self.gather.arrive() and self._gathered is not None and not self._gathered.done():
            self._gathered.set_result(None)
        self._start()
        return future

    def _start(self) -> None:
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._dirty and not self._closed:  # (closed: the store closes its logs itself)
            logs, self._dirty = self._dirty, set()
            slices = TimeSlices(SLICE_S)
            rounds: list[tuple[PartitionLog, PendingSync]] = []
            for plog in logs:
                job = plog.begin_sync()
                if job is not None:
                    rounds.append((plog, job))
                await slices.tick()
            began = time.perf_counter()
            batches, runs = self._hand_out(loop, rounds)
            for batch, run in zip(batches, runs, strict=True):
                errors, seconds, whole = await run
                if seconds is not None and whole:
                    self.choice.saw_whole(seconds)
                elif seconds is not None:
                    self.choice.saw_files(seconds, len(batch))
                for (plog, job), error in zip(batch, errors, strict=True):
                    if error is not None:  # an fsync error: the log refuses appends from now on
                        log.error("fsync of %s failed: %s: %s", plog.directory, type(error).__name__, error)
                    plog.finish_sync(job, error)
                    await slices.tick()
            answered = await self._release(slices)  # (a produce still waiting puts its logs back for the next round)
            wait_s = self.gather.after_round(answered, time.perf_counter() - began, waiting=bool(self._dirty))
            if wait_s > 0:
                await self._gather(loop, wait_s)

    async def _gather(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        """Wait until the produces the last round answered are back, ``seconds`` at most (``round_gather.py``)."""
        gathered = self._gathered = loop.create_future()
        timer = loop.call_later(seconds, _set_unless_done, gathered)
        try:
            await gathered
        finally:
            timer.cancel()
            self._gathered = None
            self.gather.ended()

    def _hand_out(
        self, loop: asyncio.AbstractEventLoop, rounds: list[tuple[PartitionLog, PendingSync]]
    ) -> tuple[list[list[tuple[PartitionLog, PendingSync]]], list[asyncio.Future[_Done]]]:
        """The round's jobs in batches, each running on a worker thread: one batch per thread (a round of 10,000
        partitions is 8 futures on the loop, not 10,000), or, when the choice says so, one whole sync of the file
        system for every job it covers and the rolls to settle beside it, spread over the other threads."""
        covered = [entry for entry in rounds if not entry[1].ordered]
        whole = self.choice.whole(len(covered))
        rest = [entry for entry in rounds if entry[1].ordered] if whole else rounds
        threads = SYNC_THREADS - 1 if whole else SYNC_THREADS
        batches = [rest[i::threads] for i in range(min(threads, len(rest)))]
        runs = [loop.run_in_executor(self._executor(), _sync_all, [job for _, job in b]) for b in batches]
        if whole:
            batches.append(covered)
            runs.append(loop.run_in_executor(self._executor(), _sync_whole, self._fs_fd, [job for _, job in covered]))
        return batches, runs

    async def _release(self, slices: TimeSlices) -> int:
        """Answer the waiters whose logs are all durable (or failed, or closed): how many. A waiter's logs are
        checked ``RELEASE_CHUNK`` at a time, the loop given a turn once a slice is over (a transaction's markers
        wait on 10,000 logs); waiters that arrive meanwhile are checked by the next round."""
        waiting, self._waiting = self._waiting, []
        still = []
        answered = 0
        for pending, fsynced, future in waiting:
            behind = await _unreached(pending, fsynced, slices)
            if all(plog.failed or plog.closed for plog in behind):
                if not future.done():
                    future.set_result(None)
                    answered += 1
            else:
                still.append((pending, fsynced, future))
                self._dirty.update(behind)
        self._waiting = still + self._waiting
        return answered

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="regroup-fsync")
        return self._pool

    def close(self) -> None:
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        if self._fs_fd >= 0:
            os.close(self._fs_fd)
            self._fs_fd = -1


def run_each(run: Callable[..., object], jobs: Sequence[tuple[Any, ...]], catching: type[E]) -> list[E | None]:
    """(on a worker thread) ``run(*job)`` for each job, one after another: what each raised of ``catching``, or
    None (anything else is raised)."""
    raised: list[E | None] = []
    for job in jobs:
        try:
            run(*job)
        except catching as exc:
            raised.append(exc)
        else:
            raised.append(None)
    return raised


#: what a worker thread's batch ended with: each job's error or None, how long it took (None: not a measure of
#: either way), whether it was one sync of the whole file system
_Done = tuple[list[Exception | None], float | None, bool]


def _sync_all(jobs: list[PendingSync]) -> _Done:
    """(on a worker thread) Each job's fsync, one after another: what each raised, or None."""
    start = time.perf_counter()
    errors = run_each(PendingSync.run, [(job,) for job in jobs], Exception)
    return errors, time.perf_counter() - start, False


def _sync_whole(fd: int, jobs: list[PendingSync]) -> _Done:
    """(on a worker thread) One sync of the file system ``fd`` is on, covering every job; if it fails, each job's
    own fsync (what each raised, or None: the failed write-back is reported by its file's). With more than
    ``WHOLE_MAX_DIRTY_BYTES`` waiting to be written back on the machine (another program's writes, which the
    whole sync would wait for), each job's own fsync instead."""
    dirty = dirty_bytes()
    if dirty is None or dirty > WHOLE_MAX_DIRTY_BYTES:
        return _sync_all(jobs)
    start = time.perf_counter()
    try:
        sync_filesystem(fd)
    except OSError as exc:
        log.warning("syncing the whole file system failed (%s): fsyncing each file of the round", exc)
        return run_each(PendingSync.run, [(job,) for job in jobs], Exception), None, True
    seconds = time.perf_counter() - start
    for job in jobs:
        job.close()
    return [None] * len(jobs), seconds, True


def _then(
    pending: dict[PartitionLog, int], done: Callable[[set[PartitionLog]], None], future: asyncio.Future[None]
) -> None:
    """(``wait_then``) The round covering ``pending`` ended: ``done`` with the logs that did not get there."""
    if not future.cancelled():
        done(set(_unreached_now(pending, False)))


def _set_unless_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _unreached_now(targets: dict[PartitionLog, int], fsynced: bool) -> dict[PartitionLog, int]:
    """The ``targets`` not durable (``fsynced``) yet."""
    return {plog: end for plog, end in targets.items() if not _reached(plog, end, fsynced)}


async def _unreached(
    targets: dict[PartitionLog, int], fsynced: bool, slices: TimeSlices | None
) -> dict[PartitionLog, int]:
    """``_unreached_now``; for more than ``RELEASE_CHUNK`` targets, that many between two looks at the ``slices``'
    clock (a slice of its own when None; a transaction's markers wait on 10,000 logs)."""
    if len(targets) <= RELEASE_CHUNK:
        return _unreached_now(targets, fsynced)
    if slices is None:
        slices = TimeSlices(SLICE_S)
    out: dict[PartitionLog, int] = {}
    items = list(targets.items())
    for start in range(0, len(items), RELEASE_CHUNK):
        out.update(
            (plog, end) for plog, end in items[start : start + RELEASE_CHUNK] if not _reached(plog, end, fsynced)
        )
        await slices.tick()
    return out


def _reached(plog: PartitionLog, end: int, fsynced: bool) -> bool:
    return plog.fsynced(end) if fsynced else plog.durable(end)
