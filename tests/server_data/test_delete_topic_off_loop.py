"""DeleteTopics of a topic with data holds the event loop for no partition's disk work (``TopicStore.detach_topic``,
``TopicStore.settle_deletes``, ``handlers/topics.py``): the topic's directory renamed into ``trash/`` on the loop,
its logs closed there in slices without fsyncing what they still held unsynced (the data goes), the rename made
durable and the files removed on the store's worker thread.

- a DeleteTopics of one topic, of any size, takes that path: no fsync and no file removal on the loop's thread,
  every log closed, the files gone soon after the answer, the topic gone after a restart;
- the closes are cut into slices (other work on the loop sees the topic's logs partly closed);
- logs detached but not closed yet (a deletion cancelled mid-way) are closed by the store's close.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest

from regroup.server import topics as topics_module
from regroup.server.handlers.topics import ZERO_UUID, build, handle_delete_topics
from regroup.server.topics import TopicStore
from regroup.storage import partition_log
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch
from tests.server_data.helpers import FakeBroker, _ms, acall, request_module

PARTITIONS = 40
BATCH = make_batch([b"x" * 100])


def _disk_threads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, threading.Thread]]:
    """The thread of every segment fsync and every tree removal (both still done)."""
    seen: list[tuple[str, threading.Thread]] = []
    real_fsync, real_rmtree = partition_log._fsync_file, shutil.rmtree

    def fsync(fd: int) -> None:
        seen.append(("fsync", threading.current_thread()))
        real_fsync(fd)

    def rmtree(path: Path, ignore_errors: bool = False) -> None:
        seen.append(("rmtree", threading.current_thread()))
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(partition_log, "_fsync_file", fsync)
    monkeypatch.setattr(topics_module.shutil, "rmtree", rmtree)
    return seen


def _written(store: TopicStore, name: str) -> list[PartitionLog]:
    """``name`` with one batch in every partition, none of them fsynced yet (as under ``--fsync interval`` just
    after a produce)."""
    store.create_topic(name, PARTITIONS)
    logs = []
    for p in range(PARTITIONS):
        plog = store.partition(name, p)
        assert plog is not None
        plog.append(BATCH, sync=False)
        logs.append(plog)
    return logs


@pytest.mark.parametrize("policy", [FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL])
def test_deleting_one_topic_with_data_does_its_disk_work_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy
) -> None:
    loop_thread = threading.current_thread()
    mod = request_module("delete_topics", 6)
    state = build(mod, "DeleteTopicState", name="doomed", topic_id=ZERO_UUID)
    request = build(mod, "DeleteTopicsRequest", topics=(state,), timeout=_ms(1000))
    with TopicStore.open(tmp_path / "d", fsync=policy, fsync_interval_ms=60_000) as store:
        logs = _written(store, "doomed")
        kept = _written(store, "kept")
        seen = _disk_threads(monkeypatch)
        broker = FakeBroker(store)

        async def main() -> list[int]:
            answer = await acall(handle_delete_topics, broker, "delete_topics", request)
            return [r.error_code for r in answer.responses]

        assert asyncio.run(main()) == [0]
        assert all(plog.closed for plog in logs) and not any(plog.closed for plog in kept)
        assert store.topic("doomed") is None and store.topic("kept") is not None
        deadline = time.monotonic() + 30
        while (tmp_path / "d" / "trash").exists() and any((tmp_path / "d" / "trash").iterdir()):
            assert time.monotonic() < deadline, "trash/ never emptied"
            time.sleep(0.01)
        assert not (tmp_path / "d" / "topics" / "doomed").exists()
        assert [what for what, thread in seen if thread is loop_thread] == []
        assert ("rmtree", loop_thread) not in seen and any(what == "rmtree" for what, _ in seen)
    with TopicStore.open(tmp_path / "d", fsync=policy) as reopened:
        assert reopened.topic("doomed") is None and reopened.topic("kept") is not None


async def _settled_watching(store: TopicStore, trash: Path, count: Callable[[], int]) -> set[int]:
    """``store.settle_deletes([trash])`` while other work on the loop reads ``count()`` at every turn: what it
    read."""
    seen: set[int] = set()
    done = False

    async def watch() -> None:
        while not done:
            seen.add(count())
            await asyncio.sleep(0)

    watcher = asyncio.get_running_loop().create_task(watch())
    await asyncio.sleep(0)
    try:
        await store.settle_deletes([trash])
    finally:
        done = True
        await watcher
    return seen


def test_the_closes_of_a_deleted_topic_are_cut_into_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics_module, "SLICE_S", 0.0)  # (a turn after every close)

    async def main() -> set[int]:
        with TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.INTERVAL) as store:
            logs = _written(store, "doomed")
            trash = store.detach_topic("doomed")
            assert trash is not None and not any(plog.closed for plog in logs)  # (the loop's part: one rename)
            seen = await _settled_watching(store, trash, lambda: sum(plog.closed for plog in logs))
            assert all(plog.closed for plog in logs)
            return seen  # how many were closed, as other work on the loop saw it

    partly = {n for n in asyncio.run(main()) if 0 < n < PARTITIONS}
    assert len(partly) >= PARTITIONS // 2  # (between two closes, mostly)


def test_logs_detached_and_not_closed_yet_are_closed_with_the_store(tmp_path: Path) -> None:
    store = TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.ALWAYS)
    logs = _written(store, "doomed")
    assert store.detach_topic("doomed") is not None
    assert not any(plog.closed for plog in logs)
    store.close()
    assert all(plog.closed for plog in logs)


def test_a_deleted_topic_s_logs_are_let_go_as_they_are_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each log is freed in the slice that closes it (10,000 closed logs freed together held the loop 25 ms):
    other work on the loop sees some of them gone and others still there; a deletion cancelled mid-way leaves
    the rest, in their order, for the store's close."""
    monkeypatch.setattr(topics_module, "SLICE_S", 0.0)  # (a turn after every close)

    async def main() -> tuple[set[int], list[PartitionLog]]:
        with TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.INTERVAL) as store:
            refs = [weakref.ref(plog) for plog in _written(store, "doomed")]
            trash = store.detach_topic("doomed")
            assert trash is not None
            # how many were still there, as other work on the loop saw it
            alive = await _settled_watching(store, trash, lambda: sum(ref() is not None for ref in refs))
            assert all(ref() is None for ref in refs)
            # cancelled after a few closes: the rest wait for the store's close, in their order
            refs = [weakref.ref(plog) for plog in _written(store, "again")]
            assert store.detach_topic("again") is not None
            settling = asyncio.get_running_loop().create_task(store.settle_deletes([]))
            for _ in range(5):
                await asyncio.sleep(0)
            settling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await settling
            left = list(store._detached_logs)
            assert 0 < len(left) < PARTITIONS and not any(plog.closed for plog in left)
            assert left == [ref() for ref in refs[PARTITIONS - len(left) :]]
            return alive, left

    alive, left = asyncio.run(main())
    assert len({n for n in alive if 0 < n < PARTITIONS}) >= PARTITIONS // 2
    assert all(plog.closed for plog in left)  # (closed by the store's close)


def test_many_detached_logs_are_closed_from_the_next_turn_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The turn that detached a topic of more than ``CLOSED_AT_ONCE`` partitions has worked enough: its logs are
    closed from the next turn of the loop on (here all in that turn, the slices being long); fewer are closed at
    once."""
    monkeypatch.setattr(topics_module, "SLICE_S", 60.0)

    async def closed_in_first_step(at_once: int) -> tuple[int, bool]:
        monkeypatch.setattr(topics_module, "CLOSED_AT_ONCE", at_once)
        with TopicStore.open(tmp_path / f"d{at_once}", fsync=FsyncPolicy.INTERVAL) as store:
            logs = _written(store, "doomed")
            assert store.detach_topic("doomed") is not None
            settling = asyncio.get_running_loop().create_task(store.settle_deletes([]))
            await asyncio.sleep(0)  # (the task's first step)
            first = sum(plog.closed for plog in logs)
            await settling
            return first, all(plog.closed for plog in logs)

    assert asyncio.run(closed_in_first_step(PARTITIONS - 1)) == (0, True)
    assert asyncio.run(closed_in_first_step(PARTITIONS)) == (PARTITIONS, True)
