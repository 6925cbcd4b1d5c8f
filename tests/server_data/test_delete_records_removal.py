"""DeleteRecords' file work off the event loop (``handlers/records.py``, ``PartitionLog.plan_log_start`` /
``log_start_written``, ``TopicStore.write_log_starts``, ``DroppedSegments``): the new log start offsets are
written durably on the topic store's worker thread, then the segments wholly below them taken out of the log
on the loop; their files are removed on a worker thread.

- reads below a new log start succeed until its write is done; two requests of one partition never take its
  log start back down, whatever order their writes come in; a topic deleted meanwhile is answered as unknown;

- the answer carries the new low watermark; while the files wait for the worker, a read below it is refused
  and the loop serves other work; once the handler has answered, the files are gone;
- a crash before the files are removed leaves older segments below the persisted log start offset: the log
  reopens with that log start offset (nothing below it is read), and the next DeleteRecords or cleaning pass
  drops the leftovers.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.delete_records.v2 import request as dr
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from regroup.server import topics as topics_module
from regroup.server.api import RequestContext
from regroup.server.handlers import records
from regroup.server.handlers.records import handle_delete_records
from regroup.server.log_cleaner import LogCleaner
from regroup.server.topics import TopicStore
from regroup.storage.partition_log import DroppedSegments, OffsetOutOfRange, PartitionLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.segment_swap import LOG_START_FILE
from tests.server_data.batches import BASE_TS, make_batch
from tests.server_data.helpers import FakeBroker, wire

BATCHES = 8
SEGMENT_BYTES = str(len(make_batch([b"v0"])) + 1)  # one batch per segment


def _request(topic: str, offsets: dict[int, int]) -> Any:
    partitions = tuple(dr.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items())
    return dr.DeleteRecordsRequest(
        topics=(dr.DeleteRecordsTopic(name=topic, partitions=partitions),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
    )


async def _delete(broker: FakeBroker, topic: str, offsets: dict[int, int]) -> dict[int, tuple[ErrorCode, int]]:
    ctx = RequestContext(
        api_key=21, api_version=2, correlation_id=1, client_id="test", client_host="127.0.0.1", connection_id=1
    )
    response = wire(await handle_delete_records(broker, ctx, wire(_request(topic, offsets))))
    return {p.partition_index: (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}


def _filled_store(root: Path, partitions: int = 2) -> TopicStore:
    store = TopicStore.open(root, fsync=FsyncPolicy.ALWAYS)
    store.create_topic("t", partitions, {"segment.bytes": SEGMENT_BYTES, "retention.ms": "-1"})
    for p in range(partitions):
        plog = store.partition("t", p)
        assert plog is not None
        for b in range(BATCHES):
            plog.append(make_batch([b"v%d" % b], timestamps=[BASE_TS + b]), sync=False)
        plog.sync()
    return store


def _segments(directory: Path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(directory) if n.endswith(".log"))


def _values(plog: PartitionLog) -> list[int]:
    """The first offset of every batch readable from the log start (one record each here)."""
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20)
        assert data
        base = int.from_bytes(data[:8], "big")
        out.append(base)
        offset = base + 1
    return out


def _delete_held(
    broker: FakeBroker,
    offsets: dict[int, int],
    entered: threading.Event,
    release: threading.Event,
    while_held: Callable[[asyncio.Task[dict[int, tuple[ErrorCode, int]]]], None],
) -> dict[int, tuple[ErrorCode, int]]:
    """DeleteRecords of topic ``t`` whose worker-thread job sets ``entered`` and waits for ``release``:
    ``while_held(task)`` runs on the loop once the worker holds the job (the loop still turning), then the job is
    released and the answer returned."""

    async def scenario() -> dict[int, tuple[ErrorCode, int]]:
        task = asyncio.create_task(_delete(broker, "t", offsets))
        for _ in range(5_000):  # the loop keeps turning while the worker holds the job
            if entered.is_set() or task.done():
                break
            await asyncio.sleep(0.001)
        assert entered.is_set(), "the job was not handed to a worker thread"
        while_held(task)
        release.set()
        return await task

    try:
        return asyncio.run(scenario())
    finally:
        release.set()


def test_answered_reads_below_refused_files_removed_on_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _filled_store(tmp_path / "d")
    broker = FakeBroker(topic_store=store)
    directories = {p: store.partition("t", p).directory for p in (0, 1)}  # type: ignore[union-attr]
    assert _segments(directories[0]) == list(range(BATCHES))

    entered, release = threading.Event(), threading.Event()
    threads: list[int] = []
    real_remove = DroppedSegments.remove

    def held(self: DroppedSegments) -> int:
        threads.append(threading.get_ident())
        entered.set()
        assert release.wait(30)
        return real_remove(self)

    monkeypatch.setattr(DroppedSegments, "remove", held)

    def while_held(task: asyncio.Task[Any]) -> None:
        for p, start in ((0, 5), (1, 3)):
            plog = store.partition("t", p)
            assert plog is not None and plog.log_start_offset == start
            with pytest.raises(OffsetOutOfRange):
                plog.read(start - 1, 1 << 20)
            assert _values(plog) == list(range(start, BATCHES))
            assert (directories[p] / LOG_START_FILE).read_text().strip() == str(start)
        assert _segments(directories[0])[0] == 0  # not removed yet: the worker holds them
        assert not task.done()

    answer = _delete_held(broker, {0: 5, 1: 3}, entered, release, while_held)
    assert answer == {0: (ErrorCode.none, 5), 1: (ErrorCode.none, 3)}
    assert threads and threading.get_ident() not in threads
    assert _segments(directories[0]) == [5, 6, 7]
    assert _segments(directories[1]) == [3, 4, 5, 6, 7]
    store.close()


@pytest.mark.parametrize("then", ["delete_records", "cleaning_pass"])
def test_a_crash_before_the_files_are_removed_reopens_with_the_persisted_log_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    store = _filled_store(tmp_path / "d", partitions=1)
    broker = FakeBroker(topic_store=store)
    crashed = tmp_path / "crashed"

    def crash(self: DroppedSegments) -> int:  # the process dies while the files wait for the worker
        shutil.copytree(tmp_path / "d", crashed)
        os.close(self.dir_fd)
        return 0

    monkeypatch.setattr(DroppedSegments, "remove", crash)
    assert asyncio.run(_delete(broker, "t", {0: 6})) == {0: (ErrorCode.none, 6)}
    store.close()
    monkeypatch.undo()

    reopened = TopicStore.open(crashed, fsync=FsyncPolicy.ALWAYS)
    plog = reopened.partition("t", 0)
    assert plog is not None
    directory = plog.directory
    assert _segments(directory) == list(range(BATCHES))  # the files a crash left, whole older segments
    assert plog.log_start_offset == 6
    with pytest.raises(OffsetOutOfRange):
        plog.read(5, 1 << 20)
    assert _values(plog) == [6, 7]
    if then == "delete_records":  # asking again for an offset below changes nothing but drops the leftovers
        assert asyncio.run(_delete(FakeBroker(topic_store=reopened), "t", {0: 2})) == {0: (ErrorCode.none, 6)}
    else:
        report = LogCleaner(reopened, reopened.configs.policy).run_once(BASE_TS)
        assert not report.failures and report.segments_deleted == 6
    assert _segments(directory) == [6, 7]
    assert plog.log_start_offset == 6 and _values(plog) == [6, 7]
    reopened.close()
    again = PartitionLog.open(directory)
    assert again.log_start_offset == 6 and _values(again) == [6, 7]
    again.close()


# ---------------------------------------------------------------------------------------- the log start's writes


def _watch_writes(monkeypatch: pytest.MonkeyPatch, before: Any = None) -> list[tuple[str, int, str]]:
    """Each ``log-start-offset`` the topic store's worker writes: (partition directory, offset, thread)."""
    writes: list[tuple[str, int, str]] = []
    real = topics_module.write_log_start_up

    def write(directory: Path, offset: int, *, sync: bool) -> None:
        if before is not None:
            before()
        writes.append((directory.name, offset, threading.current_thread().name))
        real(directory, offset, sync=sync)

    monkeypatch.setattr(topics_module, "write_log_start_up", write)
    return writes


def test_the_log_starts_are_written_on_the_store_worker_before_reads_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writes of every partition of the request go to the topic store's worker; until a partition's is
    done, reads below the new log start still succeed (nothing was acknowledged yet), and after it they do not."""
    store = _filled_store(tmp_path / "d", partitions=3)
    broker = FakeBroker(topic_store=store)
    entered, release = threading.Event(), threading.Event()
    writes = _watch_writes(monkeypatch, before=lambda: (entered.set(), release.wait(30)))

    def while_held(task: asyncio.Task[Any]) -> None:
        assert not task.done()
        plog = store.partition("t", 0)
        assert plog is not None and plog.log_start_offset == 0 and _values(plog)[0] == 0

    answer = _delete_held(broker, {0: 5, 1: 3, 2: -1}, entered, release, while_held)
    assert answer == {0: (ErrorCode.none, 5), 1: (ErrorCode.none, 3), 2: (ErrorCode.none, BATCHES)}
    assert [(name, offset) for name, offset, _ in writes] == [("0", 5), ("1", 3), ("2", BATCHES)]
    assert all(thread.startswith("topic-disk") for _, _, thread in writes)
    for p, start in ((0, 5), (1, 3), (2, BATCHES)):
        plog = store.partition("t", p)
        assert plog is not None and plog.log_start_offset == start
        assert (plog.directory / LOG_START_FILE).read_text().strip() == str(start)
    store.close()


def test_two_requests_of_one_partition_never_move_its_log_start_down(tmp_path: Path) -> None:
    """Two DeleteRecords of one partition at once, the higher first: both planned before either is written;
    the lower one's write does not take the file back down, and both answer the higher log start."""
    store = _filled_store(tmp_path / "d", partitions=1)
    broker = FakeBroker(topic_store=store)

    async def both() -> list[dict[int, tuple[ErrorCode, int]]]:
        return list(await asyncio.gather(_delete(broker, "t", {0: 6}), _delete(broker, "t", {0: 3})))

    assert asyncio.run(both()) == [{0: (ErrorCode.none, 6)}, {0: (ErrorCode.none, 6)}]
    plog = store.partition("t", 0)
    assert plog is not None and plog.log_start_offset == 6
    directory = plog.directory
    assert (directory / LOG_START_FILE).read_text().strip() == "6"
    store.close()
    again = PartitionLog.open(directory)
    assert again.log_start_offset == 6
    again.close()


def test_a_topic_deleted_while_its_log_starts_are_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _filled_store(tmp_path / "d", partitions=2)
    broker = FakeBroker(topic_store=store)
    entered, release = threading.Event(), threading.Event()
    _watch_writes(monkeypatch, before=lambda: (entered.set(), release.wait(30)))

    answer = _delete_held(broker, {0: 5, 1: 3}, entered, release, lambda _: store.delete_topic("t"))
    assert answer == {p: (ErrorCode.unknown_topic_or_partition, -1) for p in (0, 1)}
    store.close()


class _CountedHolds:
    """A connection's session as the handler's slices see it: how many holds are open, and how many were taken."""

    def __init__(self) -> None:
        self.open = 0
        self.taken = 0

    def hold(self) -> None:
        self.open += 1
        self.taken += 1

    def release(self) -> None:
        self.open -= 1


def test_a_long_walk_gives_the_loop_turns_and_holds_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With slices of no length, the handler plans each partition in a turn of its own (other work runs between
    two), from the first turn on the connection's later requests are held, and the hold is let go with the answer."""
    partitions = 40
    store = _filled_store(tmp_path / "d", partitions=partitions)
    broker = FakeBroker(topic_store=store)
    monkeypatch.setattr(records, "DELETE_SLICE_S", 0.0)
    turns = 0
    planned_at: list[int] = []
    plan = records._plan

    def counted_plan(*args: Any) -> Any:
        planned_at.append(turns)
        return plan(*args)

    monkeypatch.setattr(records, "_plan", counted_plan)
    session = _CountedHolds()
    held_while_planning: list[int] = []

    async def run() -> dict[int, tuple[ErrorCode, int]]:
        nonlocal turns
        ctx = RequestContext(
            api_key=21,
            api_version=2,
            correlation_id=1,
            client_id="t",
            client_host="h",
            connection_id=1,
            session=session,
        )
        task = asyncio.ensure_future(
            handle_delete_records(broker, ctx, wire(_request("t", dict.fromkeys(range(partitions), 4))))
        )
        while not task.done():
            turns += 1
            if planned_at and len(planned_at) < partitions:
                held_while_planning.append(session.open)
            await asyncio.sleep(0)
        response = wire(task.result())
        return {p.partition_index: (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}

    assert asyncio.run(run()) == {p: (ErrorCode.none, 4) for p in range(partitions)}
    assert len(set(planned_at)) == partitions  # each partition planned in a turn of its own
    assert held_while_planning and set(held_while_planning) == {1}
    assert session.open == 0 and session.taken >= 1
    store.close()
