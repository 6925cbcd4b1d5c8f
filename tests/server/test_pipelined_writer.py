"""The pipelined group commit (``GroupCommitWriter`` given a ``flush``): batches are written (in order) while an
earlier fsync runs, callbacks fire in submission order and only after an fsync that started once their write had
returned; a failure in either stage fails every batch not yet durable. Also ``RecordLog.write``/``sync`` on
two threads across a roll, and acknowledged OffsetCommits surviving ``kill -9`` under ``--fsync always``."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from regroup.records.model import OffsetCommitKey, OffsetCommitValue, Record
from regroup.server.core_runtime import GroupCommitWriter
from regroup.server.runtime import CoordinatorRuntime
from regroup.storage import record_log
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy, RecordLog
from tests.server.conftest import served
from tests.server.test_runtime import commit_op, fetch_op
from tests.server.wire import OFFSET_COMMIT, OFFSET_FETCH, WireClient, create_topics

log = logging.getLogger("tests.pipelined_writer")

Event = tuple[str, Any]


class StagedLog:
    """A write/flush pair that records the order of events: ``("written", records)`` once a write returned,
    ``("flush-start", n)`` / ``("flush-end", n)`` around the n-th flush, ``("done", tag)`` per callback.
    ``flush_gate`` (when set) holds each flush after its start is recorded; ``fail_write``/``fail_flush`` make
    the next write or flush raise."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lock = threading.Lock()
        self.flush_gate: threading.Semaphore | None = None
        self.flush_started = threading.Event()
        self.written = threading.Event()
        self.fail_write = False
        self.fail_flush = False
        self.slow_writes = False  # every other write sleeps a little (another thread could overtake it)
        self.flushes = 0
        self.threads: dict[str, set[str]] = {"write": set(), "flush": set()}

    def record(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)

    def write(self, records: Sequence[str]) -> None:
        self.threads["write"].add(threading.current_thread().name)
        if self.fail_write:
            raise OSError(5, "Input/output error (write)")
        if self.slow_writes and len(self.events) % 2:
            time.sleep(0.002)
        self.record(("written", tuple(records)))
        self.written.set()

    def flush(self, written: object = None) -> None:
        self.threads["flush"].add(threading.current_thread().name)
        self.flushes += 1
        n = self.flushes
        self.record(("flush-start", n))
        self.flush_started.set()
        if self.flush_gate is not None:
            assert self.flush_gate.acquire(timeout=5)
        if self.fail_flush:
            raise OSError(5, "Input/output error (fsync)")
        self.record(("flush-end", n))

    def done(self, tag: str, errors: list[tuple[str, BaseException | None]] | None = None) -> Any:
        def callback(error: BaseException | None) -> None:
            self.record(("done", tag))
            if errors is not None:
                errors.append((tag, error))

        return callback


def pipelined(staged: StagedLog, **kwargs: Any) -> GroupCommitWriter[str]:
    w: GroupCommitWriter[str] = GroupCommitWriter(
        staged.write, flush=staged.flush, name="test-log", logger=log, what="test log", **kwargs
    )
    w.start()
    return w


def assert_durable_before_done(events: list[Event], tags: dict[str, str]) -> None:
    """Each callback ``("done", tag)`` comes after a ``flush-end`` whose ``flush-start`` follows the write of
    the record ``tags[tag]`` (when the batch had one)."""
    for i, (kind, tag) in enumerate(events):
        if kind != "done" or tag not in tags:
            continue
        written_at = next(j for j, (k, v) in enumerate(events) if k == "written" and tags[tag] in v)
        started = {v: j for j, (k, v) in enumerate(events[:i]) if k == "flush-start"}
        ended = [v for k, v in events[:i] if k == "flush-end"]
        assert any(started[n] > written_at for n in ended), (tag, events)


def wait_for(flag: threading.Event) -> None:
    assert flag.wait(5)


async def until(flag: threading.Event) -> None:
    await asyncio.get_running_loop().run_in_executor(None, wait_for, flag)


def test_the_next_batch_is_written_while_an_fsync_runs_and_callbacks_wait_for_a_later_fsync() -> None:
    async def scenario() -> None:
        staged = StagedLog()
        staged.flush_gate = threading.Semaphore(0)
        w = pipelined(staged)
        done = []
        w.submit(["a"], staged.done("a", done))
        await until(staged.flush_started)  # the fsync covering "a" runs (held)
        staged.written.clear()
        w.submit(["b"], staged.done("b", done))
        w.submit([], staged.done("empty", done))  # waits for "b", queued before it
        w.submit(["c"], staged.done("c", done))
        await until(staged.written)  # "b" (and maybe "c") written while fsync 1 is still held
        assert ("flush-end", 1) not in staged.events and done == []
        for _ in range(10):
            staged.flush_gate.release()
        await asyncio.wait_for(w.wait_idle(), 5)
        assert done == [("a", None), ("b", None), ("empty", None), ("c", None)]
        written = [e for e in staged.events if e[0] == "written"]
        assert written[0] == ("written", ("a",)) and staged.events.index(written[1]) < staged.events.index(
            ("flush-end", 1)
        )
        assert_durable_before_done(staged.events, {"a": "a", "b": "b", "c": "c"})
        assert staged.events.index(("done", "a")) > staged.events.index(("flush-end", 1))
        assert staged.events.index(("done", "b")) > staged.events.index(("flush-end", 2))
        threads = staged.threads["write"] | staged.threads["flush"]
        assert len(threads) == 2 and all(t.startswith("test-log") for t in threads)  # (two jobs at once)
        await w.close()

    asyncio.run(scenario())


def test_callbacks_fire_in_submission_order_under_a_stream_of_batches() -> None:
    async def scenario() -> None:
        staged = StagedLog()
        staged.slow_writes = True
        w = pipelined(staged)
        done: list[tuple[str, BaseException | None]] = []
        tags: dict[str, str] = {}
        for i in range(300):
            tag = f"r{i}"
            if i % 7 == 3:
                w.submit([], staged.done(tag, done))
            else:
                tags[tag] = tag
                w.submit([tag], staged.done(tag, done))
            if i % 5 == 0:
                await asyncio.sleep(0)  # let the stages take what is queued so far
        await asyncio.wait_for(w.wait_idle(), 10)
        assert [tag for tag, _ in done] == [f"r{i}" for i in range(300)]
        assert all(error is None for _, error in done)
        written = [r for kind, value in staged.events if kind == "written" for r in value]
        assert written == list(tags)  # written in submission order, whichever thread wrote
        assert_durable_before_done(staged.events, tags)
        assert staged.flushes >= 1
        await w.close()

    asyncio.run(scenario())


def test_a_batch_without_records_after_durable_ones_needs_no_flush() -> None:
    async def scenario() -> None:
        staged = StagedLog()
        snapshots: list[int] = []
        w = pipelined(staged, snapshot=lambda: snapshots.append(1))
        done: list[tuple[str, BaseException | None]] = []
        w.submit([], staged.done("empty", done))
        await asyncio.wait_for(w.wait_idle(), 5)
        assert done == [("empty", None)] and staged.flushes == 0 and snapshots == [1]
        await w.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("stage", ["write", "flush"])
def test_a_failure_in_either_stage_fails_every_batch_not_yet_durable(
    stage: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        staged = StagedLog()
        staged.flush_gate = threading.Semaphore(0)
        failures: list[BaseException] = []
        w = pipelined(staged, on_failure=failures.append)
        done: list[tuple[str, BaseException | None]] = []
        w.submit(["a"], staged.done("a", done))
        await until(staged.flush_started)  # the fsync of "a" is under way
        if stage == "write":
            staged.fail_write = True
            w.submit(["b"], staged.done("b", done))
            await asyncio.wait_for(w.wait_idle(), 5)  # the write of "b" failed while "a" was being flushed
        else:
            staged.written.clear()
            w.submit(["b"], staged.done("b", done))
            await until(staged.written)
            staged.fail_flush = True
            staged.flush_gate.release()
            await asyncio.wait_for(w.wait_idle(), 5)
        assert len(failures) == 1 and isinstance(failures[0], OSError) and w.failure is failures[0]
        assert done == [("a", failures[0]), ("b", failures[0])]
        with pytest.raises(RuntimeError):
            w.submit(["c"])
        for _ in range(5):
            staged.flush_gate.release()  # (let a held flush finish so that close can stop its thread)
        await asyncio.wait_for(w.close(), 5)
        assert done == [("a", failures[0]), ("b", failures[0])]  # nothing answered twice, nothing late

    with caplog.at_level(logging.CRITICAL, logger=log.name):
        asyncio.run(scenario())
    assert "test log write failed; stopping" in caplog.text


def test_a_failing_callback_is_fatal_when_pipelined() -> None:
    async def scenario() -> None:
        staged = StagedLog()
        failures: list[BaseException] = []
        w = pipelined(staged, on_failure=failures.append)

        def boom(error: BaseException | None) -> None:
            raise ValueError("bug")

        done: list[BaseException | None] = []
        w.submit(["a"], boom)
        w.submit(["b"], done.append)
        await asyncio.wait_for(w.wait_idle(), 5)
        assert isinstance(w.failure, ValueError) and failures == [w.failure] and done == [w.failure]
        await w.close()

    asyncio.run(scenario())


def test_close_waits_for_the_last_flush() -> None:
    async def scenario() -> None:
        staged = StagedLog()
        staged.flush_gate = threading.Semaphore(0)
        w = pipelined(staged)
        done: list[tuple[str, BaseException | None]] = []
        w.submit(["a"], staged.done("a", done))
        closing = asyncio.create_task(w.close())
        await until(staged.flush_started)
        assert not closing.done() and done == []
        staged.flush_gate.release()
        await asyncio.wait_for(closing, 5)
        assert done == [("a", None)]

    asyncio.run(scenario())


# ---------------------------------------------------------------------- the record log on two threads


def test_write_and_sync_on_two_threads_across_rolls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A roll waits for an fsync under way (it never closes the descriptor being fsynced); ``sync`` covers
    what was written; everything written is read back, also after reopening."""
    real_fsync = record_log._fsync_file
    in_fsync = threading.Event()
    release = threading.Event()
    checked: list[bool] = []

    def slow_fsync(fd: int) -> None:
        if threading.current_thread().name == "syncer" and not checked:
            in_fsync.set()
            assert release.wait(5)
            os.fstat(fd)  # still open: raises EBADF if a roll closed it meanwhile
            checked.append(True)
        real_fsync(fd)

    monkeypatch.setattr(record_log, "_fsync_file", slow_fsync)
    log_ = RecordLog.open(tmp_path / "log", segment_bytes=300)
    log_.write([b"x" * 100])
    syncer = threading.Thread(target=log_.sync, name="syncer")
    syncer.start()
    assert in_fsync.wait(5)
    writer = threading.Thread(target=lambda: [log_.write([b"%d" % i * 50]) for i in range(20)], name="writer")
    writer.start()
    writer.join(0.2)
    assert writer.is_alive() and log_.segment_count == 1  # the first roll waits for the fsync under way
    release.set()
    syncer.join(5)
    writer.join(5)
    assert checked == [True] and not writer.is_alive() and log_.segment_count > 2
    log_.sync()
    expected = [b"x" * 100] + [b"%d" % i * 50 for i in range(20)]
    assert [payload for _, payload in log_.read(0)] == expected
    log_.close()
    with RecordLog.open(tmp_path / "log") as again:
        assert [payload for _, payload in again.read(0)] == expected


def test_sync_fsyncs_only_when_something_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_fsync = record_log._fsync_file
    monkeypatch.setattr(record_log, "_fsync_file", lambda fd: (calls.append(fd), real_fsync(fd)))
    with RecordLog.open(tmp_path / "log", fsync=FsyncPolicy.ALWAYS) as log_:
        log_.sync()
        assert calls == []
        log_.write([b"a"])
        assert calls == []  # write never fsyncs
        log_.sync()
        assert len(calls) == 1
        log_.sync()
        assert len(calls) == 1
        log_.append([b"b"])  # append under ALWAYS still does
        assert len(calls) == 2


def commit_records(group: str) -> list[Record]:
    return [Record(OffsetCommitKey(group, "t", 0), OffsetCommitValue(1, -1, "", 0, None))]


def test_a_sync_through_a_covered_offset_fsyncs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_fsync = record_log._fsync_file
    monkeypatch.setattr(record_log, "_fsync_file", lambda fd: (calls.append(fd), real_fsync(fd)))
    with RecordLog.open(tmp_path / "log", fsync=FsyncPolicy.ALWAYS) as log_:
        first = log_.write([b"a"])
        second = log_.write([b"b", b"c"])
        log_.sync(first)  # covers the second write too: it returned before this fsync began
        assert len(calls) == 1
        log_.sync(second)
        assert len(calls) == 1
        third = log_.write([b"d"])
        log_.sync(second)  # (an older batch: covered, even with the log written since)
        assert len(calls) == 1
        log_.sync(third)
        assert len(calls) == 2


def test_batches_written_while_an_fsync_runs_share_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one fsync is held, batches submitted on later loop turns are each written as a job of their own;
    once it returns, one more fsync covers them all, not one each."""
    held, release = threading.Event(), threading.Event()
    fsyncs: list[int] = []
    real_fsync = record_log._fsync_file

    def fsync(fd: int) -> None:
        fsyncs.append(fd)
        if len(fsyncs) == 1:
            held.set()
            assert release.wait(5)
        real_fsync(fd)

    monkeypatch.setattr(record_log, "_fsync_file", fsync)
    log_ = CoordinatorLog.open(tmp_path / "log", fsync=FsyncPolicy.ALWAYS)
    done: list[str] = []

    async def main() -> None:
        writer = GroupCommitWriter(log_.write, flush=log_.sync, name="shared", logger=log, what="test log")
        writer.start()
        batch = commit_records("first")
        writer.submit(batch, lambda exc: done.append("first"))
        await until(held)
        for n in range(5):  # one batch per loop turn: a job each
            writer.submit(commit_records(f"b{n}"), lambda exc, n=n: done.append(f"b{n}"))
            await asyncio.sleep(0.01)
        assert done == []
        release.set()
        await writer.wait_idle()
        await writer.close()

    try:
        asyncio.run(main())
    finally:
        log_.close()
    assert done == ["first", "b0", "b1", "b2", "b3", "b4"]
    assert len(fsyncs) == 2


def test_the_coordinator_runtime_pipelines_across_rolls_and_snapshots(tmp_path: Path) -> None:
    """Many concurrent commits through a pipelined runtime over a real log whose segments roll and which
    snapshots every few records: every commit is answered, and a reload sees each group's last offset."""

    def open_log() -> CoordinatorLog:
        return CoordinatorLog(RecordLog.open(tmp_path / "log", segment_bytes=4096), snapshot_every=50)

    async def commits(rt: CoordinatorRuntime, group: str) -> None:
        for offset in range(1, 31):
            await rt.call(commit_op(group, offset))

    async def scenario() -> None:
        log_ = open_log()
        assert log_.pipelined
        rt = CoordinatorRuntime.load(log_)
        rt.start()
        assert rt._writer.pipelined
        await asyncio.wait_for(asyncio.gather(*(commits(rt, f"g{i}") for i in range(20))), 60)
        await rt.close()
        assert log_.log.segment_count > 1 or log_.log.first_offset > 0
        assert log_.log.snapshot_offsets
        log_.close()
        again = open_log()
        rt = CoordinatorRuntime.load(again)
        rt.start()
        for i in range(20):
            answer = await rt.call(fetch_op(f"g{i}"))
            assert answer.topics[0][1][0].offset == 30
        await rt.close()
        again.close()

    asyncio.run(scenario())


# ---------------------------------------------------------------------- the server

TOPIC = "pipelined-commits"


def _commit(client: WireClient, group: str, offset: int, partitions: int) -> None:
    parts = [{"partition_index": p, "committed_offset": offset, "committed_metadata": ""} for p in range(partitions)]
    answer = client.call(
        OFFSET_COMMIT,
        9,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[{"name": TOPIC, "partitions": parts}],
    )
    errors = {p.error_code for t in answer.topics for p in t.partitions}
    assert errors == {0}, answer


def _committed(client: WireClient, group: str) -> dict[int, int]:
    answer = client.call(OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=True)
    return {int(p.partition_index): int(p.committed_offset) for t in answer.topics for p in t.partitions}


@pytest.mark.parametrize("fsync", ["always", "interval", "never"])
def test_acknowledged_offset_commits_survive_kill_9(tmp_path: Path, fsync: str) -> None:
    """Under every policy (``interval`` and ``never`` write the commits of a turn on the loop before answering
    them: the page cache outlives the process)."""
    committers, partitions = 16, 3
    acked = [0] * committers  # the last offset each committer's group had acknowledged
    stop = threading.Event()
    errors: list[BaseException] = []
    with served(tmp_path, "--fsync", fsync) as server:
        with WireClient(server.port) as admin:
            create_topics(admin, {TOPIC: partitions})

        def committer(i: int) -> None:
            try:
                with WireClient(server.port, timeout=30) as client:
                    offset = 0
                    while not stop.is_set():
                        offset += 1
                        _commit(client, f"g{i}", offset, partitions)
                        acked[i] = offset
            except (ConnectionError, OSError) as exc:  # the server was killed under it
                if not stop.is_set():
                    errors.append(exc)

        threads = [threading.Thread(target=committer, args=(i,), daemon=True) for i in range(committers)]
        for t in threads:
            t.start()
        while sum(acked) < 600 and all(t.is_alive() for t in threads) and not errors:
            threading.Event().wait(0.05)
        stop.set()  # (set first: a committer whose connection the kill closes is not an error)
        server.kill(signal.SIGKILL)
        for t in threads:
            t.join(30)
        assert not errors, errors
        snapshot = list(acked)
        assert sum(snapshot) >= 600
        server.start()
        with WireClient(server.port, timeout=30) as client:
            for i, offset in enumerate(snapshot):
                committed = _committed(client, f"g{i}")
                assert committed == dict.fromkeys(range(partitions), committed[0]), committed
                assert committed[0] >= offset, (i, committed, offset)


def test_a_batch_is_answered_in_the_loop_turn_after_its_job_returns() -> None:
    """The job's thread hands its end to the loop itself: the batch's callback runs in the next turn (through
    the asyncio future of ``run_in_executor`` it ran a turn later: under load every turn holds a chunk of some
    heavy request, and every commit under ``--fsync always`` waits on this)."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        go, flushed = threading.Event(), threading.Event()

        def flush(written: object = None) -> None:
            assert go.wait(5)
            flushed.set()

        w: GroupCommitWriter[str] = GroupCommitWriter(
            lambda records: None, flush=flush, name="turns", logger=log, what="test log"
        )
        w.start()
        turn = [0]
        done_at: list[int] = []
        returned_at: list[int] = []

        def tick() -> None:
            turn[0] += 1
            if turn[0] < 10:
                loop.call_soon(tick)

        def hold() -> None:  # the loop waits here while the job's thread returns and hands its end over
            go.set()
            assert flushed.wait(5)
            time.sleep(0.05)
            returned_at.append(turn[0])

        w.submit(["a"], lambda error: done_at.append(turn[0]))
        await asyncio.sleep(0)  # the pump's turn: the job is handed to a thread, which waits for `go`
        loop.call_soon(tick)
        loop.call_soon(hold)
        while turn[0] < 10:
            await asyncio.sleep(0)
        assert done_at == [returned_at[0] + 1]
        await w.close()

    asyncio.run(scenario())


def test_a_job_is_settled_only_once_its_own_end_was_seen_even_when_a_later_one_ended_first() -> None:
    """Job 0's fsync fails after job 1's succeeded, both ends reaching the loop in the same turn, job 1's first.
    Job 0's batches must get the error (a later fsync of the same file need not report a write-back error an
    earlier one did): settling waits for each job's own end to be seen, not for its future to be done."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        release0, failed0 = threading.Event(), threading.Event()
        release1, flushed1 = threading.Event(), threading.Event()
        flushes = [0]

        def flush(written: object = None) -> None:
            flushes[0] += 1
            if flushes[0] == 1:  # job 0's: held, then failing
                assert release0.wait(5)
                failed0.set()
                raise OSError(5, "Input/output error (fsync)")
            assert release1.wait(5)  # job 1's: held, then done
            flushed1.set()

        failures: list[BaseException] = []
        w: GroupCommitWriter[str] = GroupCommitWriter(
            lambda records: None, flush=flush, name="ends", logger=log, what="test log", on_failure=failures.append
        )
        w.start()
        done: list[tuple[str, BaseException | None]] = []
        w.submit(["a"], lambda error: done.append(("a", error)))
        await asyncio.sleep(0)  # job 0 handed to a thread: it writes, then holds in its fsync
        w.submit(["b"], lambda error: done.append(("b", error)))
        await asyncio.sleep(0)  # job 1: written after job 0's write, fsynced at once

        def hold() -> None:  # both ends are handed to the loop while it waits here, job 1's first
            release1.set()
            assert flushed1.wait(5)
            time.sleep(0.05)
            release0.set()
            assert failed0.wait(5)
            time.sleep(0.05)

        loop.call_soon(hold)
        for _ in range(100):
            if len(done) == 2:
                break
            await asyncio.sleep(0.01)
        assert [tag for tag, _ in done] == ["a", "b"]
        assert all(isinstance(error, OSError) for _, error in done), done
        assert len(failures) == 1
        await w.close()

    logging.getLogger("tests.pipelined_writer").disabled = True
    try:
        asyncio.run(scenario())
    finally:
        logging.getLogger("tests.pipelined_writer").disabled = False


def _slow_flushes() -> StagedLog:
    """A ``StagedLog`` whose every flush takes 0.1 s."""
    staged = StagedLog()
    real_flush = staged.flush

    def slow_flush(written: object = None) -> None:
        time.sleep(0.1)
        real_flush(written)

    staged.flush = slow_flush  # type: ignore[method-assign]
    return staged


async def _after_a_wave_of_five(staged: StagedLog) -> GroupCommitWriter[str]:
    """A pipelined writer over ``staged`` once five batches went as a wave (each its own job, dispatched while
    the first flush ran) and it is idle again."""
    w = pipelined(staged)
    for tag in "abcde":
        w.submit([tag], staged.done(tag))
        await asyncio.sleep(0)
    await w.wait_idle()
    return w


def _wave_then(after_wave: list[str], monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    """Five batches dispatched while jobs run (a wave of five: each flush takes 0.1 s), then, once none runs, the
    batches of ``after_wave`` submitted one loop turn apart; the events."""
    from regroup.server import core_runtime

    monkeypatch.setattr(core_runtime, "LINGER_MAX_S", 1.0)  # (the wait is then bounded by the last job's 0.1 s)
    staged = _slow_flushes()

    async def scenario() -> None:
        w = await _after_a_wave_of_five(staged)
        staged.events.clear()
        for tag in after_wave:
            w.submit([tag], staged.done(tag))
            await asyncio.sleep(0)
        await w.wait_idle()
        await w.close()

    asyncio.run(scenario())
    return staged.events


def test_a_new_wave_waits_for_its_batches_and_shares_one_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients answered by one fsync send their next batches a moment apart: the first of the new wave waits for
    the rest (as many as the last wave had), and the five are one write and one fsync, not one alone and four
    behind it."""
    events = _wave_then(list("fghij"), monkeypatch)
    assert [e for e in events if e[0] == "written"] == [("written", tuple("fghij"))]
    assert [e[0] for e in events].count("flush-start") == 1
    assert [e[1] for e in events if e[0] == "done"] == list("fghij")


def test_a_lone_batch_after_a_wave_waits_no_longer_than_the_last_job_took(monkeypatch: pytest.MonkeyPatch) -> None:
    began = time.perf_counter()
    events = _wave_then(["f"], monkeypatch)
    assert [e for e in events if e[0] in ("written", "done")] == [("written", ("f",)), ("done", "f")]
    assert time.perf_counter() - began < 5  # (the wave 0.5 s at most, the wait 0.1 s, f's flush 0.1 s)


def _behind_a_running_job(linger_max_s: float, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, list[Event]]:
    """A wave of five (each flush 0.1 s), then ``f`` alone, its flush held; ``g`` submitted meanwhile. Whether
    ``g`` was written within 30 ms while ``f``'s flush was held; the events."""
    from regroup.server import core_runtime

    monkeypatch.setattr(core_runtime, "LINGER_MAX_S", linger_max_s)
    staged = _slow_flushes()
    written_early: list[bool] = []

    async def scenario() -> None:
        w = await _after_a_wave_of_five(staged)
        gate = staged.flush_gate = threading.Semaphore(0)
        staged.events.clear()
        w.submit(["f"], staged.done("f"))
        for _ in range(500):
            if ("flush-start", 6) in staged.events or len(staged.events) > 1:
                break
            await asyncio.sleep(0.01)
        w.submit(["g"], staged.done("g"))
        await asyncio.sleep(0.03)
        written_early.append(("written", ("g",)) in staged.events)
        gate.release(2)
        await w.wait_idle()
        await w.close()

    asyncio.run(scenario())
    return written_early[0], staged.events


def test_behind_a_running_job_a_batch_waits_for_it_when_jobs_are_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs of at most ``LINGER_MAX_S``: a batch queued while one runs (fewer than the last wave) waits for it to
    end, so that the running job's clients, back a moment later, share its fsync."""
    early, events = _behind_a_running_job(1.0, monkeypatch)
    assert not early
    assert [e[1] for e in events if e[0] == "done"] == ["f", "g"]


def test_behind_a_running_job_a_batch_is_written_at_once_when_jobs_are_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs over ``LINGER_MAX_S`` (a slow disk): the batch is written at once, for the next fsync to cover."""
    early, events = _behind_a_running_job(0.05, monkeypatch)
    assert early
    assert [e[1] for e in events if e[0] == "done"] == ["f", "g"]
