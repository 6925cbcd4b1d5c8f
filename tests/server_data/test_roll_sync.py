"""Segment rolls in the topic store and the server: the fsyncs a roll needs (the old segment, the directory)
run on the group commit's worker threads, never on the event loop, under ``--fsync always`` and ``interval``.

- a store appending as the produce handler does, with every fsync slowed down: no fsync on the loop's thread,
  no append that waits for one, and every record there after reopening;
- the server with small segments: produces acknowledged under ``--fsync always`` or ``interval`` survive
  ``kill -9`` (the interval passed), whatever roll was under way.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from regroup.server.topics import TopicStore
from regroup.storage import partition_log
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from tests.server.conftest import served
from tests.server.wire import WireClient, create_topics
from tests.server_data.batches import make_batch
from tests.server_data.test_group_commit import PRODUCE, TOPIC, _read_values

SLOW = 0.02  # seconds per fsync: a slow disk
BATCH = make_batch([b"x" * 200])


def _slow_disk(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, threading.Thread]]:
    """Every fsync of a segment or a directory and every rename of a roll, slowed down (``SLOW``), with the
    thread it ran on."""
    seen: list[tuple[str, threading.Thread]] = []
    real_file, real_dir, real_rename = partition_log._fsync_file, partition_log._fsync_dir, partition_log.rename_once

    def fsync_file(fd: int) -> None:
        time.sleep(SLOW)
        real_file(fd)
        seen.append(("fsync", threading.current_thread()))

    def fsync_dir(directory: Path) -> None:
        time.sleep(SLOW)
        real_dir(directory)
        seen.append(("fsync-dir", threading.current_thread()))

    def rename(src: Path, dst: Path) -> None:
        real_rename(src, dst)
        seen.append(("rename", threading.current_thread()))

    monkeypatch.setattr(partition_log, "_fsync_file", fsync_file)
    monkeypatch.setattr(partition_log, "_fsync_dir", fsync_dir)
    monkeypatch.setattr(partition_log, "rename_once", rename)
    return seen


def _plog(store: TopicStore) -> PartitionLog:
    plog = store.partition("t", 0)
    assert plog is not None
    return plog


@pytest.mark.parametrize("policy", [FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL])
def test_rolls_in_the_store_fsync_on_worker_threads_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy
) -> None:
    loop_thread = threading.current_thread()
    segment = str(len(BATCH) * 3)
    with TopicStore.open(tmp_path / "d", fsync=policy, fsync_interval_ms=5) as store:
        store.create_topic("t", 1, {"segment.bytes": segment})
        plog = _plog(store)
        plog.append(BATCH)  # (the partition's directory is created, durably, by its first append)
        plog.sync()
        seen = _slow_disk(monkeypatch)
        longest = 0.0

        async def main() -> None:
            nonlocal longest
            for i in range(30):
                for _ in range(1 + i % 2):  # (two appends before their fsync: some rolls find the segment unsynced)
                    started = time.perf_counter()
                    plog.append(BATCH, sync=policy is not FsyncPolicy.ALWAYS)  # as the produce handler does
                    longest = max(longest, time.perf_counter() - started)
                if policy is FsyncPolicy.ALWAYS:
                    assert await store.group_sync.wait({plog: plog.written_end}) == set()
                else:  # nobody waits: the append's own wake-up has the roll fsynced (paced to the slow disk
                    # here; a segment full again before that grows, up to twice its size: tests/unit/storage)
                    deadline = time.monotonic() + 30
                    while plog.roll_unsettled and time.monotonic() < deadline:
                        await asyncio.sleep(SLOW / 4)
            await asyncio.sleep(SLOW * 8)  # under INTERVAL: the last round ends
            store.sync()  # (the owner's timer)
            await asyncio.sleep(SLOW * 8)

        asyncio.run(main())
        assert plog.segment_count >= 8 and not plog.failed  # (46 batches, three a segment, six if a roll waits)
        assert {what for what, _ in seen} == {"fsync", "rename", "fsync-dir"}  # (rolls of both kinds)
        assert [what for what, t in seen if t is loop_thread] == []
        assert longest < 2 * SLOW, longest  # no append waited for the two fsyncs a roll made before
        assert plog.log_end_offset == 46
    names = os.listdir(tmp_path / "d" / "topics" / "t" / "0")
    assert not [n for n in names if n.endswith(".rolling")], names
    with TopicStore.open(tmp_path / "d", fsync=policy) as store:
        assert _plog(store).log_end_offset == 46


def _produce(client: WireClient, partition: int, value: bytes) -> int:
    """Produce one record stamped now (retention keeps it), acks=-1; its offset."""
    batch = make_batch([value], timestamps=[int(time.time() * 1000)])
    parts = [{"index": partition, "records": batch}]
    answer = client.call(
        PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=30_000,
        topic_data=[{"name": TOPIC, "partition_data": parts}],
    )
    (row,) = answer.responses[0].partition_responses
    assert row.error_code == 0, row
    return int(row.base_offset)


@pytest.mark.parametrize("fsync", ["always", "interval"])
def test_acknowledged_produces_with_small_segments_survive_kill_9(tmp_path: Path, fsync: str) -> None:
    partitions, producers, rounds = (
        3,
        6,
        40,
    )  # two producers a partition: a roll often finds the other's append unsynced
    properties = tmp_path / "server.properties"
    properties.write_text(f"log.segment.bytes={len(make_batch([b'0-00'])) * 3}\n", encoding="utf-8")
    acked: list[list[tuple[int, int, bytes]]] = [[] for _ in range(producers)]
    errors: list[BaseException] = []
    with served(tmp_path, "--fsync", fsync, "--config", str(properties)) as server:
        with WireClient(server.port, timeout=30) as client:
            create_topics(client, {TOPIC: partitions})

        def producer(i: int) -> None:
            try:
                with WireClient(server.port, timeout=30) as client:
                    for n in range(rounds):
                        value = f"{i}-{n:02d}".encode()
                        acked[i].append((i % partitions, _produce(client, i % partitions, value), value))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=producer, args=(i,), daemon=True) for i in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        if fsync == "interval":
            time.sleep(0.5)  # past the interval: the timer's fsync has run
        server.kill(signal.SIGKILL)
        segments = list((tmp_path / "data").rglob("*.log"))
        assert len(segments) >= producers * rounds // 6  # three batches a segment, six at most while a roll waits
        server.start()
        with WireClient(server.port, timeout=30) as client:
            values = _read_values(client, partitions)
            for rows in acked:
                assert len(rows) == rounds
                for p, offset, value in rows:
                    assert values[p][offset] == value
            assert _produce(client, 0, b"after") == producers * rounds // partitions
