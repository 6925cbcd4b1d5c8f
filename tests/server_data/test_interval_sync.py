"""Produce under ``--fsync interval`` with the fsyncs off the event loop: the topic store hands every unsynced
partition (on its own timer, armed by an append, or on ``TopicStore.sync()``) to the group commit's worker
threads, while the records stay readable as soon as written.

- the fsyncs run on a worker thread, never on the loop's; records are read before their fsync;
- a failed fsync fails that partition's log (appends refuse: KAFKA_STORAGE_ERROR) and no other;
- a roll while an fsync is under way fsyncs nothing: the next fsync settles it (the store's next round, not its
  timer); a close fsyncs on the spot;
- without a running event loop (a plain synchronous owner) the store still fsyncs inline;
- the server: produces acknowledged under ``--fsync interval`` survive ``kill -9`` once the interval passed.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path

import pytest

from regroup.server.topics import TopicStore
from regroup.storage import partition_log
from regroup.storage.format import StorageError
from regroup.storage.partition_log import PartitionLog, PendingSync
from regroup.storage.record_log import FsyncPolicy
from tests.server.conftest import served
from tests.server.wire import WireClient, create_topics
from tests.server_data.batches import make_batch
from tests.server_data.helpers import fsync_file_by_file
from tests.server_data.test_group_commit import TOPIC, _end_offsets, _produce, _read_values


@pytest.fixture
def fsync_threads(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The thread of every fsync of a partition's segment (the real fsync still runs; file by file)."""
    fsync_file_by_file(monkeypatch)
    seen: list[threading.Thread] = []
    real = partition_log._fsync_file

    def spy(fd: int) -> None:
        seen.append(threading.current_thread())
        real(fd)

    monkeypatch.setattr(partition_log, "_fsync_file", spy)
    return seen


async def _until(check: object, what: str) -> None:
    """Give the loop (and the worker threads) turns until ``check()`` holds (bounded; no timing asserted)."""
    for _ in range(2_000):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


def _store(path: Path, interval_ms: float) -> TopicStore:
    store = TopicStore.open(path, fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=interval_ms)
    store.create_topic("t", 2)
    return store


def _plog(store: TopicStore, p: int = 0) -> PartitionLog:
    plog = store.partition("t", p)
    assert plog is not None
    return plog


# ---------------------------------------------------------------------- the store


def test_a_due_fsync_runs_on_a_worker_thread(tmp_path: Path, fsync_threads: list[threading.Thread]) -> None:
    loop_thread = threading.current_thread()

    async def main() -> None:
        with _store(tmp_path / "d", interval_ms=0) as store:
            plog = _plog(store)
            info = plog.append(make_batch([b"a", b"b"]), sync=True)  # as the produce handler appends (acks=1)
            assert info.base_offset == 0
            assert plog.log_end_offset == 2 and plog.read(0, 1 << 20) != b""  # readable before its fsync
            assert fsync_threads == []  # the append returned without fsyncing on the loop
            await _until(lambda: fsync_threads and not plog.sync_due, "the due fsync")
            assert all(t is not loop_thread for t in fsync_threads), fsync_threads
            assert not plog.failed

    asyncio.run(main())


def test_the_timer_sync_runs_on_a_worker_thread(tmp_path: Path, fsync_threads: list[threading.Thread]) -> None:
    loop_thread = threading.current_thread()

    async def main() -> None:
        with _store(tmp_path / "d", interval_ms=3_600_000) as store:
            logs = [_plog(store, 0), _plog(store, 1)]
            for plog in logs:
                plog.append(make_batch([b"x"]))
            assert fsync_threads == []  # the interval has not passed
            store.sync()  # what the server's timer calls: returns at once
            assert all(t is not loop_thread for t in fsync_threads)
            await _until(lambda: len(fsync_threads) == 2, "both partitions fsynced")
            assert all(t is not loop_thread for t in fsync_threads), fsync_threads
            store.sync()  # nothing left to fsync
            await asyncio.sleep(0.05)
            assert len(fsync_threads) == 2

    asyncio.run(main())


def test_without_a_running_loop_the_store_fsyncs_inline(tmp_path: Path, fsync_threads: list[threading.Thread]) -> None:
    with _store(tmp_path / "d", interval_ms=3_600_000) as store:
        _plog(store).append(make_batch([b"x"]))
        assert fsync_threads == []
        store.sync()
        assert fsync_threads == [threading.current_thread()]


def test_a_failed_interval_fsync_fails_that_partition_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad_dir = str(tmp_path / "d" / "topics" / "t" / "1")
    fsync_file_by_file(monkeypatch)
    real_run = PendingSync.run
    failing: list[int] = []

    def run(self: PendingSync) -> None:
        if failing and self.fd == failing[0]:
            partition_log.os.close(self.fd)
            raise OSError(5, "Input/output error")
        real_run(self)

    monkeypatch.setattr(PendingSync, "run", run)
    real_begin = PartitionLog.begin_sync

    def begin(self: PartitionLog) -> PendingSync | None:
        pending = real_begin(self)
        if pending is not None and str(self.directory) == bad_dir:
            failing.append(pending.fd)
        return pending

    monkeypatch.setattr(PartitionLog, "begin_sync", begin)

    async def main() -> None:
        with _store(tmp_path / "d", interval_ms=3_600_000) as store:
            good, bad = _plog(store, 0), _plog(store, 1)
            good.append(make_batch([b"g"]))
            bad.append(make_batch([b"b"]))
            store.sync()
            await _until(lambda: bad.failed, "the failed fsync reported")
            with pytest.raises(StorageError):  # the produce handler answers KAFKA_STORAGE_ERROR
                bad.append(make_batch([b"c"]))
            assert bad.read(0, 1 << 20) != b""  # what was written stays readable
            assert not good.failed
            assert good.append(make_batch([b"h"])).base_offset == 1

    asyncio.run(main())


def test_the_logs_know_when_their_store_runs_a_group_commit(tmp_path: Path) -> None:
    with _store(tmp_path / "d", interval_ms=5) as store:  # a synchronous owner: its fsyncs run inline
        assert not _plog(store, 0).group_commit and not _plog(store, 1).group_commit
        assert store.group_sync is not None  # (made by the first round an owner on an event loop asks for)
        assert _plog(store, 0).group_commit and _plog(store, 1).group_commit
        store.create_topic("u", 1)
        added = store.partition("u", 0)
        assert added is not None and added.group_commit


def test_a_roll_during_a_round_is_fsynced_by_the_next_round_not_the_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.current_thread()
    batch = make_batch([b"x" * 200])
    threads: list[threading.Thread] = []
    inside, release = threading.Event(), threading.Event()
    real = partition_log._fsync_file

    def held(fd: int) -> None:  # the first fsync waits inside until the test lets it go
        threads.append(threading.current_thread())
        inside.set()
        release.wait(30)
        real(fd)

    async def main() -> None:
        with TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=60_000) as store:
            store.create_topic("t", 1, {"segment.bytes": str(len(batch) * 2)})
            plog = _plog(store)
            plog.append(batch, sync=True)
            monkeypatch.setattr(partition_log, "_fsync_file", held)
            store.sync()  # (the owner's timer, once: a round starts)
            await _until(inside.is_set, "the round's fsync started")
            plog.append(batch, sync=True)
            plog.append(batch, sync=True)  # rolls while the round runs; the interval is far from passed
            assert plog.roll_unsettled and plog.segment_count == 2
            release.set()
            await _until(lambda: not plog.roll_unsettled, "the roll settled without the timer")
            assert loop_thread not in threads and len(threads) >= 3  # (the round's, the old segment's, the new one's)

    asyncio.run(main())


# ---------------------------------------------------------------------- the partition log


def test_a_roll_during_an_interval_fsync_waits_for_the_next_and_a_close_fsyncs_on_the_spot(
    tmp_path: Path, fsync_threads: list[threading.Thread]
) -> None:
    batch = make_batch([b"x" * 200])
    plog = PartitionLog.open(
        tmp_path / "p0", fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=0, segment_bytes=len(batch) * 2
    )
    plog.defer_interval_sync = True
    plog.append(batch)
    plog.append(batch)
    assert fsync_threads == [] and plog.sync_due  # due, but left to the owner
    pending = plog.begin_sync()
    assert pending is not None and not plog.sync_due  # one under way: not due again until it ends
    plog.append(batch)  # rolls while the fsync runs: nothing is fsynced here (the next fsync settles the roll)
    assert plog.segment_count == 2 and fsync_threads == []
    pending.run()
    plog.finish_sync(pending, None)
    assert len(fsync_threads) == 1 and plog.sync_due  # the roll is due for its fsync at once
    second = plog.begin_sync()
    assert second is not None
    plog.close()  # an fsync still under way: close settles the roll (the old segment) and fsyncs the segment itself
    assert len(fsync_threads) == 3
    second.run()  # (on its own descriptor: the close took nothing from under it)
    plog.finish_sync(second, None)
    reopened = PartitionLog.open(tmp_path / "p0")
    assert reopened.log_end_offset == 3
    reopened.close()


# ---------------------------------------------------------------------- the server


def test_acknowledged_produces_under_interval_survive_kill_9(tmp_path: Path) -> None:
    partitions, rounds = 4, 30
    with served(tmp_path, "--fsync", "interval") as server:
        acked: list[tuple[int, int, bytes]] = []
        with WireClient(server.port, timeout=30) as client:
            create_topics(client, {TOPIC: partitions})
            for n in range(rounds):
                for p in range(partitions):
                    value = f"{n}-{p}".encode()
                    acked.append((p, _produce(client, p, value), value))
            time.sleep(0.5)  # past the interval: the timer's fsync has run (kill -9 must not lose them anyway)
            assert _end_offsets(client, partitions) == dict.fromkeys(range(partitions), rounds)
        server.kill(signal.SIGKILL)
        server.start()
        with WireClient(server.port, timeout=30) as client:
            values = _read_values(client, partitions)
            for p, offset, value in acked:
                assert values[p][offset] == value
            # and the partitions still take appends after the restart
            assert _produce(client, 0, b"after") == rounds
