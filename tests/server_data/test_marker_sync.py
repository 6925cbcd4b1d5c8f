"""Transaction markers are fsynced by the topic store's group commit, on its worker threads, not on the event
loop (``server/txn_markers.py``): every partition's marker is appended, then their fsyncs are waited for together,
under ``--fsync always`` and ``interval`` alike; the transaction completes only once every marker is fsynced, and
a failed fsync leaves the job to its retries without completing it. The files of many partitions never written
are made on the store's worker thread before their markers are appended."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from regroup.server import group_sync, txn_markers
from regroup.server import topics as topics_module
from regroup.server.time_slices import TimeSlices
from regroup.server.topics import FILES_ASIDE_MIN, TopicStore
from regroup.server.txn_markers import MarkerWriter
from regroup.storage import partition_log
from regroup.storage.markers import TRANSACTIONAL
from regroup.storage.record_log import FsyncPolicy
from regroup.transactions.results import MarkerJob
from tests.server_data.batches import make_batch
from tests.server_data.helpers import counting_turns, fsync_file_by_file

PARTITIONS = 4
PRODUCER = 7


def _store(path: Path, policy: FsyncPolicy, partitions: int = PARTITIONS) -> TopicStore:
    store = TopicStore.open(path, fsync=policy)
    store.create_topic("t", partitions)
    for p in range(partitions):
        plog = store.partition("t", p)
        assert plog is not None
        plog.append(
            make_batch([b"v"], producer_id=PRODUCER, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL)
        )
        plog.sync()
    return store


def _job(partitions: int = PARTITIONS) -> MarkerJob:
    return MarkerJob(
        transactional_id="tx",
        producer_id=PRODUCER,
        producer_epoch=0,
        committed=True,
        partitions=frozenset(("t", p) for p in range(partitions)),
        groups=frozenset(),
        coordinator_epoch=0,
    )


def _write_markers(store: TopicStore, job: MarkerJob) -> list[MarkerJob]:
    """Run a ``MarkerWriter`` over ``job`` to its end; the jobs it completed."""
    completed: list[MarkerJob] = []

    async def complete(done: MarkerJob) -> None:
        completed.append(done)

    async def main() -> None:
        writer = MarkerWriter(store, complete, lambda: 1_000)
        try:
            await writer.submit(job)
        finally:
            await writer.close()

    asyncio.run(main())
    return completed


@pytest.mark.parametrize("policy", [FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL])
def test_markers_are_fsynced_on_worker_threads_before_the_transaction_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy
) -> None:
    fsync_file_by_file(monkeypatch)
    store = _store(tmp_path / "store", policy)
    fsyncs: list[threading.Thread] = []
    real = partition_log._fsync_file

    def slow_fsync(fd: int) -> None:
        time.sleep(0.05)
        real(fd)
        fsyncs.append(threading.current_thread())

    monkeypatch.setattr(partition_log, "_fsync_file", slow_fsync)
    seen_at_completion: list[bool] = []

    async def complete(job: MarkerJob) -> None:
        logs = [store.partition(*tp) for tp in sorted(job.partitions)]
        seen_at_completion.extend(plog is not None and plog.fsynced(plog.written_end) for plog in logs)

    async def main() -> int:
        writer = MarkerWriter(store, complete, lambda: 1_000)
        _, turns = await counting_turns(writer.submit(_job()))
        await writer.close()
        return turns

    try:
        turns = asyncio.run(main())
    finally:
        store.close()
    assert len(fsyncs) == PARTITIONS and threading.main_thread() not in fsyncs
    assert seen_at_completion == [True] * PARTITIONS
    assert turns > 10  # the loop went on while the markers' fsyncs ran (about 50 ms, all at once)


def test_a_failed_marker_fsync_leaves_the_transaction_to_its_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsync_file_by_file(monkeypatch)
    store = _store(tmp_path / "store", FsyncPolicy.ALWAYS)
    bad = store.partition("t", 2)
    assert bad is not None
    real_run = partition_log.PendingSync.run

    def run(self: partition_log.PendingSync) -> None:
        if str(bad.directory) in str(Path(f"/proc/self/fd/{self.fd}").readlink()):
            raise OSError(5, "Input/output error")
        real_run(self)

    monkeypatch.setattr(partition_log.PendingSync, "run", run)
    monkeypatch.setattr(txn_markers, "RETRY_FIRST_S", 0.01)
    completed: list[MarkerJob] = []

    async def complete(job: MarkerJob) -> None:
        completed.append(job)

    async def main() -> MarkerWriter:
        writer = MarkerWriter(store, complete, lambda: 1_000)
        await writer.submit(_job())  # resolves after the first attempt failed
        await asyncio.sleep(0.1)  # retries: the failed log refuses appends until it is reopened
        assert writer.pending == 1
        await writer.close()
        return writer

    try:
        writer = asyncio.run(main())
    finally:
        store.close()
    assert completed == []
    assert writer.written == PARTITIONS  # the other partitions' markers were not written again


@pytest.mark.parametrize("policy", [FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL, FsyncPolicy.NEVER])
def test_a_marker_appended_without_its_fsync_is_fsynced_once_a_sync_covers_it(
    tmp_path: Path, policy: FsyncPolicy
) -> None:
    store = _store(tmp_path / "store", policy)
    plog = store.partition("t", 0)
    assert plog is not None
    info = plog.append_marker(PRODUCER, 0, True, 0, 1_000, sync=False)
    end = info.last_offset + 1
    assert plog.fsynced(end) is (policy is FsyncPolicy.NEVER)
    assert plog.last_stable_offset == (1 if policy is FsyncPolicy.ALWAYS else end)  # (ALWAYS: read once on disk)
    plog.sync()
    assert plog.fsynced(end) and plog.last_stable_offset == end
    store.close()


def test_the_markers_of_a_large_transaction_are_appended_in_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other work runs between two appends (the slice made 0): it sees the transaction's markers partly appended,
    and the transaction completes with every partition marked."""
    monkeypatch.setattr(txn_markers, "MARKER_SLICE_S", 0.0)
    store = _store(tmp_path / "store", FsyncPolicy.NEVER, 40)
    completed: list[MarkerJob] = []

    async def complete(job: MarkerJob) -> None:
        completed.append(job)

    async def main() -> set[int]:
        writer = MarkerWriter(store, complete, lambda: 1_000)
        seen: set[int] = set()
        done = False

        async def watch() -> None:
            while not done:
                seen.add(writer.written)
                await asyncio.sleep(0)

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await writer.submit(_job(40))
        finally:
            done = True
            await watcher
            await writer.close()
        return seen

    try:
        seen = asyncio.run(main())
        assert len(completed) == 1
        for p in range(40):
            plog = store.partition("t", p)
            assert plog is not None and plog.last_stable_offset == plog.log_end_offset == 2
    finally:
        store.close()
    assert len({n for n in seen if 0 < n < 40}) >= 20


@pytest.mark.parametrize("new", [FILES_ASIDE_MIN - 1, 40])
def test_the_files_of_partitions_never_written_are_made_aside_for_their_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new: int
) -> None:
    """A transaction whose markers are the first thing written to ``FILES_ASIDE_MIN`` partitions or more has
    their directories made on the store's worker thread (none on the loop); fewer are made by their appends. Every
    partition gets its marker either way."""
    made: list[str] = []
    real = topics_module.make_files

    def make_files(directory: Path, segment: Path) -> None:
        made.append(threading.current_thread().name)
        real(directory, segment)

    monkeypatch.setattr(topics_module, "make_files", make_files)
    store = _store(tmp_path / "store", FsyncPolicy.ALWAYS, 1)
    store.create_topic("fresh", new)
    job = MarkerJob(
        transactional_id="tx",
        producer_id=PRODUCER,
        producer_epoch=0,
        committed=False,
        partitions=frozenset({("t", 0)} | {("fresh", p) for p in range(new)}),
        groups=frozenset(),
        coordinator_epoch=0,
    )
    try:
        assert _write_markers(store, job) == [job]
        ends = [plog.log_end_offset for p in range(new) if (plog := store.partition("fresh", p)) is not None]
        assert ends == [1] * new
        assert store.partition("t", 0).log_end_offset == 2  # type: ignore[union-attr]
    finally:
        store.close()
    if new >= FILES_ASIDE_MIN:
        assert len(made) == new and all(name.startswith("topic-disk") for name in made)
    else:
        assert made == []


def test_a_wait_on_many_logs_is_released_between_turns_and_a_late_waiter_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The round's check of a waiter on many logs (a transaction's markers) gives the loop turns between chunks
    of ``RELEASE_CHUNK`` logs; a waiter that arrives during those turns is answered by a later round, not lost."""
    monkeypatch.setattr(group_sync, "RELEASE_CHUNK", 10)
    monkeypatch.setattr(group_sync, "SLICE_S", 0.0)
    store = _store(tmp_path / "store", FsyncPolicy.ALWAYS, 40)
    turns = 0
    seen: list[int] = []
    real = group_sync._reached

    def reached(plog: partition_log.PartitionLog, end: int, fsynced: bool) -> bool:
        seen.append(turns)
        return real(plog, end, fsynced)

    monkeypatch.setattr(group_sync, "_reached", reached)

    async def main() -> tuple[set[partition_log.PartitionLog], set[partition_log.PartitionLog]]:
        nonlocal turns
        logs = [store.partition("t", p) for p in range(40)]
        targets = {}
        for plog in logs:
            assert plog is not None
            targets[plog] = plog.append(make_batch([b"w"]), sync=False).last_offset + 1
        late: asyncio.Task[set[partition_log.PartitionLog]] | None = None

        async def other() -> None:
            nonlocal turns, late
            while True:
                turns += 1
                if late is None and len(seen) > 45:  # (inside the first round's release)
                    plog = logs[0]
                    assert plog is not None
                    end = plog.append(make_batch([b"late"]), sync=False).last_offset + 1
                    late = asyncio.get_running_loop().create_task(store.group_sync.wait({plog: end}, fsynced=True))
                await asyncio.sleep(0)

        ticking = asyncio.get_running_loop().create_task(other())
        try:
            first = await store.group_sync.wait(targets, fsynced=True)
            while late is None:
                await asyncio.sleep(0)
            second = await asyncio.wait_for(late, 30)
        finally:
            ticking.cancel()
        return first, second

    try:
        first, second = asyncio.run(main())
        assert first == set() and second == set()
        ends = [plog.log_end_offset for p in range(40) if (plog := store.partition("t", p)) is not None]
        assert ends == [3] + [2] * 39  # (every append durable, the late one too)
    finally:
        store.close()
    # the first round's check of the 40 logs (the calls after the wait's own 40) spread over several turns
    assert len(set(seen[40:80])) >= 3


def test_the_check_of_the_markers_logs_goes_on_in_the_slices_of_their_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first check of the logs a transaction's markers wait on runs in the marker writer's own slices (the
    appends' last slice and the check's first are one slice, not two back to back), and every partition still
    gets its marker, fsynced."""
    monkeypatch.setattr(group_sync, "RELEASE_CHUNK", 10)
    store = _store(tmp_path / "store", FsyncPolicy.NEVER, 40)
    made: list[TimeSlices] = []
    checked_in: list[TimeSlices | None] = []

    class Recorded(TimeSlices):
        def __init__(self, slice_s: float) -> None:
            super().__init__(slice_s)
            made.append(self)

    real_unreached = group_sync._unreached

    async def unreached(
        targets: dict[partition_log.PartitionLog, int], fsynced: bool, slices: TimeSlices | None
    ) -> dict[partition_log.PartitionLog, int]:
        checked_in.append(slices)
        return await real_unreached(targets, fsynced, slices)

    monkeypatch.setattr(txn_markers, "TimeSlices", Recorded)
    monkeypatch.setattr(group_sync, "_unreached", unreached)
    try:
        assert len(_write_markers(store, _job(40))) == 1
        for p in range(40):
            plog = store.partition("t", p)
            assert plog is not None and plog.fsynced(plog.log_end_offset) and plog.log_end_offset == 2
    finally:
        store.close()
    assert len(made) == 1 and checked_in[0] is made[0]


def test_a_wait_whose_logs_are_all_durable_checks_each_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait on logs already fsynced up to their offsets returns no failure after one look at each (no round, no
    second pass over them), in slices or not."""
    counted = 0
    real = group_sync._reached

    def reached(plog: partition_log.PartitionLog, end: int, fsynced: bool) -> bool:
        nonlocal counted
        counted += 1
        return real(plog, end, fsynced)

    monkeypatch.setattr(group_sync, "_reached", reached)
    monkeypatch.setattr(group_sync, "RELEASE_CHUNK", 10)
    for partitions in (5, 40):
        counted = 0
        store = _store(tmp_path / f"store-{partitions}", FsyncPolicy.ALWAYS, partitions)
        try:
            targets = {}
            for p in range(partitions):
                plog = store.partition("t", p)
                assert plog is not None
                targets[plog] = plog.log_end_offset
            failed = asyncio.run(store.group_sync.wait(targets, fsynced=True))
        finally:
            store.close()
        assert failed == set() and counted == partitions
