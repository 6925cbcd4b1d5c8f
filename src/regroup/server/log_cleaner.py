"""The cleaning pass over a topic store's partitions: ``segment.ms`` rolls, retention (``cleanup.policy``
delete: ``retention.ms``, ``retention.bytes``) and compaction (compact) — once when the server starts, then
every ``--log-retention-check-interval-ms`` (Kafka's ``log.retention.check.interval.ms``, 5 minutes).

A shell (docs/architecture.md) on the server's event loop. Rolling and retention's bookkeeping run inline:
retention takes the expired segments out of the log on the loop (no read sees them from then on, the log
start offset moves), and their files are removed on a worker thread afterwards, a few dozen partitions' worth
at a time, each partition's oldest first (:class:`~regroup.storage.partition_log.DroppedSegments`): deleting
files on a busy disk can take tens of milliseconds. The pass ends once they are removed; a crash before that
leaves files that are whole older segments at the next start, deleted again by its first pass. DeleteRecords
(``handlers/records.py``) hands the files of the segments it drops to the same worker-thread removal
(:func:`remove_dropped`). A compaction's planning — reading the older segments and rewriting them in memory —
runs on a worker thread, as it only reads files that never change in place; so does the file work of
swapping the result in (:func:`regroup.storage.compaction.apply_steps`), one rewritten group at a time:
writing, fsyncing and indexing the new segment, then fsyncing the directory and removing the segments it
replaced. Only the switch of the log in memory and the two renames that go with it (``.cleaned`` to
``.swap``, ``.swap`` to ``.log``) run on the loop. A partition is compacted again only when a segment was
rolled since its last compaction, or a tombstone it kept has since expired. A failure in one partition is
logged and the pass goes on; the server never stops for it.

The pass on the loop gives it back after every partition and between two groups a compaction swaps in, and
lists each topic's partitions only when it reaches that topic, so that no step of it grows with the number of
partitions in the store, nor keeps a list of them all alive (over 10,000 partitions the longest step measured
about 2 ms, one partition's retention; ``bench/cleaner.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from regroup.storage import compaction
from regroup.storage.format import StorageError
from regroup.storage.partition_log import DroppedSegments, PartitionLog
from regroup.storage.retention import enforce_retention, maybe_roll
from regroup.storage.topic_config import LogPolicy

__all__ = ["DEFAULT_CHECK_INTERVAL_MS", "CleaningReport", "LogCleaner", "log_report", "remove_dropped"]

log = logging.getLogger(__name__)

DEFAULT_CHECK_INTERVAL_MS = 300_000
#: partitions whose dropped segment files go to the worker thread together
REMOVE_BATCH = 64


@dataclass(slots=True)
class CleaningReport:
    """What one pass did, over all partitions."""

    rolled: int = 0
    segments_deleted: int = 0
    bytes_deleted: int = 0
    compacted: int = 0
    records_removed: int = 0
    bytes_compacted_away: int = 0
    failures: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Compacted:
    cleaned_to: int
    deadline_ms: int | None


class _Store(Protocol):
    """What the cleaner needs of the topic store (``server/topics.py``)."""

    def topics(self) -> Mapping[str, object]: ...
    def opened_partitions(self, name: str) -> list[PartitionLog]: ...


class LogCleaner:
    """Runs the cleaning pass over ``store``; ``policy_of(topic)`` gives each topic's :class:`LogPolicy`."""

    def __init__(self, store: _Store, policy_of: Callable[[str], LogPolicy]) -> None:
        self._store = store
        self._policy_of = policy_of
        self._compacted: weakref.WeakKeyDictionary[PartitionLog, _Compacted] = weakref.WeakKeyDictionary()

    def run_once(self, now_ms: int) -> CleaningReport:
        """One whole pass, synchronously (at startup, and for tests)."""

        def inline(job: Callable[[], compaction.CompactionPlan]) -> compaction.CompactionPlan:
            return job()

        report = CleaningReport()
        for topic, plog in self._partitions():
            self._retain(topic, plog, now_ms, report, remove=True)
            job = self._compaction_job(topic, plog, now_ms)
            if job is not None:
                self._apply(plog, _run(job, inline, report, plog), report)
        return report

    async def run_async(self, now_ms: Callable[[], int]) -> CleaningReport:
        """One whole pass on the event loop; compaction plans and the removal of dropped segment files on
        worker threads."""
        report = CleaningReport()
        removals: list[tuple[Path, DroppedSegments]] = []
        try:
            for topic, plog in self._partitions():
                if plog.closed:
                    continue
                dropped = self._retain(topic, plog, now_ms(), report, remove=False)
                if dropped is not None:
                    removals.append((plog.directory, dropped))
                    if len(removals) >= REMOVE_BATCH:
                        batch, removals = removals, []
                        await _remove(batch, report)
                job = self._compaction_job(topic, plog, now_ms())
                if job is not None:
                    try:
                        planned = await asyncio.to_thread(job)
                    except (OSError, StorageError, ValueError) as exc:
                        _fail(report, plog, exc)
                        continue
                    if not plog.closed:
                        await self._apply_async(plog, planned, report)
                await asyncio.sleep(0)
            batch, removals = removals, []
            await _remove(batch, report)
        finally:  # cancelled: the files not handed over stay (whole older segments at the next start)
            for _, dropped in removals:
                os.close(dropped.dir_fd)
        return report

    async def run_forever(self, interval_ms: int, now_ms: Callable[[], int]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            log_report(await self.run_async(now_ms))

    # ------------------------------------------------------------------ internals

    def _partitions(self) -> Iterator[tuple[str, PartitionLog]]:
        """``(topic, log)`` of every opened partition of the topics there are when the pass starts, topic by
        topic, each topic's logs listed when the pass reaches it (one topic deleted meanwhile has none)."""
        for topic in list(self._store.topics()):
            for plog in self._store.opened_partitions(topic):
                yield topic, plog

    def _retain(
        self, topic: str, plog: PartitionLog, now_ms: int, report: CleaningReport, *, remove: bool
    ) -> DroppedSegments | None:
        """Roll and apply retention; with ``remove=False`` the files of the segments dropped are returned
        (their directory held open) instead of removed."""
        policy = self._policy_of(topic)
        try:
            if maybe_roll(plog, now_ms, policy.segment_ms):
                report.rolled += 1
            if policy.delete:
                done = enforce_retention(
                    plog,
                    now_ms,
                    retention_ms=policy.retention_ms,
                    retention_bytes=policy.retention_bytes,
                    remove=remove,
                )
                report.segments_deleted += done.segments_deleted
                report.bytes_deleted += done.bytes_deleted
                if done.dropped:
                    return DroppedSegments.open(plog.directory, done.dropped)
        except (OSError, StorageError, ValueError) as exc:
            _fail(report, plog, exc)
        return None

    def _compaction_job(
        self, topic: str, plog: PartitionLog, now_ms: int
    ) -> Callable[[], compaction.CompactionPlan] | None:
        policy = self._policy_of(topic)
        if not policy.compact:
            return None
        spans = plog.older_segments()
        if not spans:
            return None
        last = self._compacted.get(plog)
        due = last is None or last.cleaned_to < spans[-1].end
        due = due or (last is not None and last.deadline_ms is not None and now_ms >= last.deadline_ms)
        if not due:
            return None

        def job() -> compaction.CompactionPlan:
            return compaction.plan(
                spans,
                now_ms,
                delete_retention_ms=policy.delete_retention_ms,
                min_lag_ms=policy.min_compaction_lag_ms,
                group_bytes=policy.segment_bytes,
            )

        return job

    def _apply(self, plog: PartitionLog, planned: compaction.CompactionPlan | None, report: CleaningReport) -> None:
        if planned is None:
            return
        try:
            done = compaction.apply(plog, planned)
        except (OSError, StorageError, ValueError) as exc:
            _fail(report, plog, exc)
            return
        self._applied(plog, planned, done, report)

    async def _apply_async(
        self, plog: PartitionLog, planned: compaction.CompactionPlan | None, report: CleaningReport
    ) -> None:
        """:meth:`_apply` with the file work on a worker thread, giving the loop back meanwhile (each group
        finds its segments again)."""
        if planned is None:
            return
        steps = compaction.apply_steps(plog, planned)
        try:
            work = next(steps)
            while True:
                try:
                    await asyncio.to_thread(work)
                except (OSError, StorageError, ValueError) as exc:  # the steps decide: raised again, or the end
                    work = steps.throw(exc)
                else:
                    work = next(steps)
        except StopIteration as finished:
            done: compaction.CompactionResult = finished.value
        except (OSError, StorageError, ValueError) as exc:  # a segment swapped in stays a .swap until reopened
            _fail(report, plog, exc)
            return
        self._applied(plog, planned, done, report)

    def _applied(
        self,
        plog: PartitionLog,
        planned: compaction.CompactionPlan,
        done: compaction.CompactionResult,
        report: CleaningReport,
    ) -> None:
        self._compacted[plog] = _Compacted(planned.cleaned_to, planned.next_deadline_ms)
        if done.segments_written:
            report.compacted += 1
            report.records_removed += done.records_removed
            report.bytes_compacted_away += done.bytes_before - done.bytes_after


def _run(
    job: Callable[[], compaction.CompactionPlan],
    runner: Callable[[Callable[[], compaction.CompactionPlan]], compaction.CompactionPlan],
    report: CleaningReport,
    plog: PartitionLog,
) -> compaction.CompactionPlan | None:
    try:
        return runner(job)
    except (OSError, StorageError, ValueError) as exc:
        _fail(report, plog, exc)
        return None


async def _remove(batch: list[tuple[Path, DroppedSegments]], report: CleaningReport) -> None:
    """Remove the dropped segment files of ``batch`` on a worker thread; each partition's failure is logged."""
    for directory, exc in await remove_dropped(batch):
        _failed(report, directory, exc)


async def remove_dropped(batch: list[tuple[Path, DroppedSegments]]) -> list[tuple[Path, OSError]]:
    """Remove the files of segments taken out of their logs — ``(partition directory, its dropped files)``,
    each partition's oldest first — on a worker thread, which closes their directories; the partitions whose
    removal failed (the files left are whole older segments, dropped again later)."""
    if not batch:
        return []
    return await asyncio.to_thread(_remove_all, batch)


def _remove_all(batch: list[tuple[Path, DroppedSegments]]) -> list[tuple[Path, OSError]]:
    """(On the worker thread.) Each partition's files, oldest first; the partitions that failed."""
    failed = []
    for directory, dropped in batch:
        try:
            dropped.remove()
        except OSError as exc:  # the files left continue into the log: whole older segments at the next start
            failed.append((directory, exc))
    return failed


def _fail(report: CleaningReport, plog: PartitionLog, exc: BaseException) -> None:
    _failed(report, plog.directory, exc)


def _failed(report: CleaningReport, directory: Path, exc: BaseException) -> None:
    line = f"{directory}: {type(exc).__name__}: {exc}"
    report.failures.append(line)
    log.error("cleaning %s", line)


def log_report(report: CleaningReport) -> None:
    """An info line for a pass that changed anything."""
    if report.rolled or report.segments_deleted or report.compacted:
        log.info(
            "log cleaning rolled=%d segments_deleted=%d bytes_deleted=%d compacted=%d records_removed=%d "
            "bytes_compacted_away=%d",
            report.rolled,
            report.segments_deleted,
            report.bytes_deleted,
            report.compacted,
            report.records_removed,
            report.bytes_compacted_away,
        )
