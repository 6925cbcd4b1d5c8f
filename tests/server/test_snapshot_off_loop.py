"""A coordinator log's snapshot is taken on the event loop when the writer drains, encoded on the writer's
snapshot thread while batches go on being written, then written (the file, its fsyncs, the compaction) on the
writer's thread between two writes: the loop stays free meanwhile, every batch submitted before it is already
answered, batches submitted while it is encoded are written at once, and those submitted while it is written
wait for that step only, in both shapes of ``GroupCommitWriter``. Through the runtime, a log snapshotted this way
rebuilds the coordinator."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.protocol.offsets import OffsetCommitRequest, OffsetFetchRequest, PartitionCommit
from regroup.server.core_runtime import GroupCommitWriter
from regroup.server.runtime import CoordinatorRuntime
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy
from tests.server.test_pipelined_writer import until

log = logging.getLogger("tests.snapshot_off_loop")

SHAPES = ["whole", "pipelined"]


class Step:
    """One step of the snapshot job: records where it ran, waits for ``gate``, fails when ``fail``."""

    def __init__(self, name: str, events: list[tuple[str, ...]]) -> None:
        self.name = name
        self.events = events
        self.gate = threading.Event()
        self.started = threading.Event()
        self.fail = False
        self.threads: list[str] = []

    def run(self) -> None:
        self.threads.append(threading.current_thread().name)
        self.events.append((f"{self.name}-start",))
        self.started.set()
        assert self.gate.wait(5)
        if self.fail:
            raise OSError(28, "No space left on device")
        self.events.append((f"{self.name}-end",))


class SnapshotLog:
    """A log whose appends, flushes and snapshot job's steps record what happened, in order, and on which
    thread; each step waits for its gate."""

    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []
        self.encoding = Step("encode", self.events)
        self.writing = Step("write", self.events)
        self.due = True

    def append(self, records: Sequence[str]) -> None:
        self.events.append(("written", *records))

    def flush(self, written: object = None) -> None:
        self.events.append(("flushed",))

    def encode(self) -> bytes:
        self.encoding.run()
        return b"state"

    def write(self, state: bytes) -> None:
        assert state == b"state"
        self.writing.run()

    def hook(self) -> SnapshotLog | None:
        if not self.due:
            return None
        self.due = False
        self.events.append(("prepared",))
        return self


def writer(fake: SnapshotLog, shape: str, **kwargs: object) -> GroupCommitWriter[str]:
    w: GroupCommitWriter[str] = GroupCommitWriter(
        fake.append,
        name="snap-log",
        logger=log,
        what="test log",
        snapshot=fake.hook,
        flush=fake.flush if shape == "pipelined" else None,
        **kwargs,  # type: ignore[arg-type]
    )
    w.start()
    return w


async def settle(w: GroupCommitWriter[str], done: list[tuple[str, BaseException | None]], count: int) -> None:
    for _ in range(500):
        if len(done) >= count and w.idle:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(done)


@pytest.mark.parametrize("shape", SHAPES)
def test_batches_are_written_while_the_snapshot_is_encoded_and_wait_only_for_its_write(shape: str) -> None:
    async def scenario() -> None:
        fake = SnapshotLog()
        w = writer(fake, shape)
        done: list[tuple[str, BaseException | None]] = []
        w.submit(["a"], lambda e: done.append(("a", e)))
        await until(fake.encoding.started)
        assert done == [("a", None)] and w.idle  # answered before the snapshot is encoded
        # encoding: a batch is written and answered meanwhile
        w.submit(["b"], lambda e: done.append(("b", e)))
        await settle(w, done, 2)
        assert done == [("a", None), ("b", None)]
        fake.encoding.gate.set()
        await until(fake.writing.started)
        # writing: a batch waits for it
        ticks = 0
        for _ in range(5):  # the loop turns while the write waits
            await asyncio.sleep(0)
            ticks += 1
        w.submit(["c"], lambda e: done.append(("c", e)))
        w.submit([], lambda e: done.append(("empty", e)))
        await asyncio.sleep(0.05)
        assert ("written", "c") not in fake.events and len(done) == 2 and not w.idle
        fake.writing.gate.set()
        await asyncio.wait_for(w.wait_idle(), 5)
        written = [e for e in fake.events if e[0] != "flushed"]
        assert written == [
            ("written", "a"),
            ("prepared",),
            ("encode-start",),
            ("written", "b"),
            ("encode-end",),
            ("write-start",),
            ("write-end",),
            ("written", "c"),
        ]
        assert done == [("a", None), ("b", None), ("c", None), ("empty", None)] and ticks == 5
        assert fake.encoding.threads[0].startswith("snap-log-snapshot")
        assert fake.writing.threads[0].startswith("snap-log") and not fake.writing.threads[0].startswith(
            "snap-log-snapshot"
        )
        await w.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("shape", SHAPES)
def test_close_waits_for_the_snapshot_out_to_be_written(shape: str) -> None:
    async def scenario() -> None:
        fake = SnapshotLog()
        w = writer(fake, shape)
        w.submit(["a"])
        await until(fake.encoding.started)
        closing = asyncio.create_task(w.close())
        await asyncio.sleep(0.05)
        assert not closing.done()
        fake.encoding.gate.set()
        fake.writing.gate.set()
        await asyncio.wait_for(closing, 5)
        assert [e for e in fake.events if e[0] != "flushed"][-1] == ("write-end",)

    asyncio.run(scenario())


@pytest.mark.parametrize("step", ["encode", "write"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_failed_snapshot_stops_the_writer_and_fails_what_waited_for_it(
    shape: str, step: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        fake = SnapshotLog()
        failing = fake.encoding if step == "encode" else fake.writing
        failing.fail = True
        failures: list[BaseException] = []
        w = writer(fake, shape, on_failure=failures.append)
        done: list[tuple[str, BaseException | None]] = []
        w.submit(["a"], lambda e: done.append(("a", e)))
        await until(fake.encoding.started)
        if step == "write":
            fake.encoding.gate.set()
            await until(fake.writing.started)
        w.submit(["b"], lambda e: done.append(("b", e)))
        if step == "encode":
            await settle(w, done, 2)  # (written while the snapshot was encoded)
        failing.gate.set()
        for _ in range(200):
            if failures:
                break
            await asyncio.sleep(0.01)
        assert [type(f) for f in failures] == [OSError] and w.failure is failures[0]
        if step == "write":
            assert done[0] == ("a", None) and done[1][0] == "b" and done[1][1] is failures[0]
            assert ("written", "b") not in fake.events
        else:
            assert done == [("a", None), ("b", None)]
        with pytest.raises(RuntimeError):
            w.submit(["c"])
        await w.close()

    with caplog.at_level(logging.CRITICAL, logger="tests.snapshot_off_loop"):
        asyncio.run(scenario())
    assert any("test log write failed" in r.getMessage() for r in caplog.records)


def commit(partition: int, offset: int) -> Any:
    req = OffsetCommitRequest(group_id="g", topics=(("t", (PartitionCommit(partition=partition, offset=offset),)),))
    return lambda c, key, now: c.offset_commit(req, key, now)


def fetch() -> Any:
    req = OffsetFetchRequest(group_id="g", topics=(("t", tuple(range(5))),))
    return lambda c, key, now: c.offset_fetch(req, key, now)


@pytest.mark.parametrize("fsync", list(FsyncPolicy))
def test_a_log_snapshotted_off_the_loop_rebuilds_the_coordinator(tmp_path: Path, fsync: FsyncPolicy) -> None:
    """Commits past several snapshots (``snapshot_every`` 20) through the runtime; the snapshots exist, the
    log was compacted, and a runtime reloaded from the directory fetches every last offset."""

    async def commit_all() -> None:
        clog = CoordinatorLog.open(tmp_path, fsync=fsync, snapshot_every=20)
        runtime = CoordinatorRuntime.load(clog)
        runtime.start()
        for round_ in range(12):
            await asyncio.gather(*(runtime.call(commit(p, 100 * round_ + p)) for p in range(5)))
        await runtime.close()

    async def fetch_all() -> dict[int, int]:
        clog = CoordinatorLog.open(tmp_path, fsync=fsync, snapshot_every=20)
        runtime = CoordinatorRuntime.load(clog)
        runtime.start()
        response = await runtime.call(fetch())
        await runtime.close()
        return {p.partition: p.offset for _, partitions in response.topics for p in partitions}

    asyncio.run(commit_all())
    snapshots = sorted(p.name for p in (tmp_path).rglob("snapshot-*.bin"))
    assert snapshots, sorted(p.name for p in tmp_path.rglob("*"))
    assert asyncio.run(fetch_all()) == {p: 1100 + p for p in range(5)}


def test_the_snapshot_holds_the_state_when_it_was_taken_not_when_its_records_are_built() -> None:
    """``snapshot_records_later`` copies the offsets' tables at once: commits and a new group after it (the
    loop goes on while the writer's thread builds the records) are not in what it builds."""
    coordinator = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    now = 1_000
    for partition in range(3):
        coordinator.offset_commit(_commit_request("g", partition, 10 + partition), partition, now)
    taken = coordinator.hard_state()
    later = coordinator.snapshot_records_later()
    coordinator.offset_commit(_commit_request("g", 0, 99), 10, now + 1)
    coordinator.offset_commit(_commit_request("h", 7, 5), 11, now + 1)
    built = later()
    assert GroupCoordinator.from_records(built, now).hard_state() == taken != coordinator.hard_state()
    rebuilt_now = GroupCoordinator.from_records(coordinator.snapshot_records(), now)
    assert rebuilt_now.hard_state() == coordinator.hard_state()


def _commit_request(group: str, partition: int, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group, generation_id=-1, topics=(("t", (PartitionCommit(partition=partition, offset=offset),)),)
    )
