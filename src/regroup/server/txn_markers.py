"""Writing transaction markers (Kafka's ``TransactionMarkerChannelManager``, in process): for a ``MarkerJob``
a COMMIT or ABORT control batch into every partition of the transaction (appended on the loop, at most
``MARKER_SLICE_S`` between two turns given to other work, then fsynced
together by the store's group commit on its worker threads, under ``interval`` too), the outcome handed to
the group coordinator for the groups whose offsets the transaction committed, then the coordinator told
(``markers_written``) so the transaction completes.

The files of partitions never written before (``FILES_ASIDE_MIN`` of them or more) are made on the store's
worker thread first, as a Produce's are. A partition that no longer exists (its topic was deleted) is skipped,
as Kafka drops markers for unknown partitions. Without a group completion (``groups`` unset: no TxnOffsetCommit
is served, so no offsets can be pending) the groups are skipped. A marker the partition refuses as older than
its producer's epoch is skipped too (the producer was fenced by a newer marker; Kafka's coordinator likewise
gives up on it). A disk error (or a failed group completion) leaves the job to be retried after a back-off,
with the partitions already written remembered — until it succeeds or the server stops; a restart writes the
markers of every preparing transaction again (a duplicate marker is harmless: it closes nothing). ``submit``
returns a future that resolves once the markers are written and the completion applied (its record need not be
durable yet: until it is, a restart finds the transaction preparing and writes the markers again), or when
the first attempt failed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from regroup.server.errors import CoordinatorUnavailable
from regroup.server.time_slices import TimeSlices
from regroup.server.topics import FILES_ASIDE_MIN, TopicStore
from regroup.storage.batches import AppendRejected
from regroup.storage.format import StorageError
from regroup.storage.partition_log import PartitionLog
from regroup.transactions.results import MarkerJob

__all__ = ["GroupCompletion", "MarkerWriter"]

log = logging.getLogger("regroup.server.transactions")

#: ``completion(producer_id, producer_epoch, committed)``: the group coordinator materialises or drops that
#: producer's pending transactional offsets, durably, before it returns
GroupCompletion = Callable[[int, int, bool], Awaitable[None]]
RETRY_FIRST_S = 0.5
#: markers are appended for this long at most before the loop gets a turn (a transaction may span thousands
#: of partitions, each append about 20 µs). 2.5 ms rather than 5: beside transactions over 10,000 partitions the
#: turns over 10 ms went from 4-17 to 0-2 a window, what was left of a slice sharing its turn with other work
MARKER_SLICE_S = 0.0025
RETRY_MAX_S = 30.0


class MarkerWriter:
    def __init__(
        self,
        store: TopicStore,
        complete: Callable[[MarkerJob], Awaitable[None]],
        clock: Callable[[], int],
        groups: GroupCompletion | None = None,
    ) -> None:
        self._store = store
        self._complete = complete
        self._clock = clock
        self.groups = groups
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.written = 0  # markers appended (a counter for the metrics and tests)

    def submit(self, job: MarkerJob) -> asyncio.Future[None]:
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._closed:
            first.set_result(None)
            return first
        task = asyncio.get_running_loop().create_task(self._run(job, first))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return first

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def _run(self, job: MarkerJob, first: asyncio.Future[None]) -> None:
        done: set[tuple[str, int]] = set()
        groups_done = False
        delay = RETRY_FIRST_S
        try:
            while not self._closed:
                try:
                    await self._write_partitions(job, done)
                    if job.groups and not groups_done and self.groups is not None:
                        await asyncio.sleep(0)  # (the groups' completion in a turn of its own, after the markers)
                        await self.groups(job.producer_id, job.producer_epoch, job.committed)
                    groups_done = True
                    durable = self._complete(job)  # the completion is applied now and durable later
                    if not first.done():
                        first.set_result(None)  # (EndTxn answers: its outcome and markers are durable already)
                    await durable
                    return
                except CoordinatorUnavailable:
                    return  # stopping (or failed): a restart writes the markers of preparing transactions again
                except (OSError, StorageError) as exc:
                    log.error(
                        "writing the %s markers of producer %d (transaction %s) failed, retrying in %.1fs: %s",
                        "COMMIT" if job.committed else "ABORT",
                        job.producer_id,
                        job.transactional_id,
                        delay,
                        exc,
                    )
                if not first.done():
                    first.set_result(None)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
        finally:
            if not first.done():
                first.set_result(None)

    async def _make_files_aside(self, partitions: list[tuple[str, int]], slices: TimeSlices) -> None:
        """Have the files of the ``partitions`` never written (a transaction's markers may be the first thing
        written to thousands of them) made on the store's worker thread, when there are ``FILES_ASIDE_MIN`` of
        them: their markers' appends then find them made, rather than making each one on the loop."""
        wanted: list[tuple[PartitionLog, tuple[Path, Path]]] = []
        for tp in partitions:
            await slices.tick()
            plog = self._store.partition(*tp)
            files = None if plog is None else plog.unmade_files()
            if plog is not None and files is not None:
                wanted.append((plog, files))
        if len(wanted) >= FILES_ASIDE_MIN:
            await self._store.make_files(wanted)

    async def _write_partitions(self, job: MarkerJob, done: set[tuple[str, int]]) -> None:
        """Append the job's marker to every partition not ``done`` yet, then wait for their fsyncs together, on
        the store's group commit (worker threads, not the loop); a partition counts as done once its marker is
        fsynced (or refused, or its topic gone). A failed fsync raises, for the job to be retried."""
        written: dict[tuple[str, int], tuple[PartitionLog, int]] = {}
        slices = TimeSlices(MARKER_SLICE_S)
        todo = sorted(job.partitions - done)
        await self._make_files_aside(todo, slices)
        for tp in todo:
            await slices.tick()
            plog = self._store.partition(*tp)
            if plog is None:
                done.add(tp)  # the topic is gone, and its data with it
                continue
            try:
                info = plog.append_marker(
                    job.producer_id, job.producer_epoch, job.committed, job.coordinator_epoch, self._clock(), sync=False
                )
                self.written += 1
            except AppendRejected as exc:
                log.warning("%s-%d refused a transaction marker: %s", tp[0], tp[1], exc)
                done.add(tp)
                continue
            written[tp] = (plog, info.last_offset + 1)
        if written:
            failed = await self._store.group_sync.wait(dict(written.values()), fsynced=True, slices=slices)
            if not failed:
                done.update(written)  # (in C: a transaction may span 10,000 partitions)
            else:
                done.update(tp for tp, (plog, _) in written.items() if plog not in failed)
                names = ", ".join(str(plog.directory.name) for plog in failed)
                raise StorageError(f"the markers' fsync failed or their partition closed: {names}")
