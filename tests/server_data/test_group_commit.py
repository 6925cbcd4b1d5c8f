"""Group commit of Produce under ``--fsync always``: appends made on the event loop, the fsyncs of every
partition touched issued together on worker threads, each produce answered once its partitions are on disk.

- the partition log: records appended without their fsync are not read, listed or counted in the high
  watermark until a ``begin_sync``/``finish_sync`` pair has them on disk; a failed fsync fails the log;
- ``GroupSync``: concurrent waiters over many logs are all released, a failed fsync is reported for its log only;
  producers split into two groups by a slow fsync end up in one round (``server/round_gather.py``);
- the server: acknowledged produces from many concurrent connections survive ``kill -9``; pipelined produces
  on one connection are answered in order, with rising offsets.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from regroup.server.group_sync import GroupSync
from regroup.storage.format import StorageError
from regroup.storage.partition_log import PartitionLog, PendingSync
from regroup.storage.record_log import FsyncPolicy
from tests.server.conftest import served
from tests.server.wire import WireClient, create_topics
from tests.server_data.batches import make_batch
from tests.server_data.helpers import counting_turns

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
TOPIC = "group-commit"


def _open(path: Path, policy: FsyncPolicy = FsyncPolicy.ALWAYS) -> PartitionLog:
    return PartitionLog.open(path, fsync=policy)


# ---------------------------------------------------------------------- the partition log


def test_an_append_waiting_for_its_fsync_is_not_read(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p0")
    woken: list[int] = []
    plog.listener = lambda: woken.append(plog.log_end_offset)
    plog.append(make_batch([b"a", b"b"]))  # fsynced before returning
    assert plog.log_end_offset == plog.written_end == 2
    info = plog.append(make_batch([b"c"]), sync=False)
    assert info.base_offset == 2 and plog.written_end == 3
    assert plog.log_end_offset == 2 and plog.last_stable_offset == 2
    assert not plog.durable(3) and plog.durable(2)
    assert plog.read(2, 1 << 20) == b""
    first = plog.read(0, 1 << 20)
    pending = plog.begin_sync()
    assert pending is not None and pending.target == 3
    assert plog.begin_sync() is None  # nothing more to fsync: the pending one covers it
    plog.append(make_batch([b"d"]), sync=False)  # made while the fsync runs: the next round's
    pending.run()
    plog.finish_sync(pending, None)
    assert plog.log_end_offset == 3 and plog.durable(3) and not plog.durable(4)
    assert len(plog.read(0, 1 << 20)) > len(first)
    assert woken[-1] == 3
    again = plog.begin_sync()
    assert again is not None and again.target == 4
    again.run()
    plog.finish_sync(again, None)
    assert plog.log_end_offset == 4
    plog.close()
    reopened = _open(tmp_path / "p0")
    assert reopened.log_end_offset == 4
    reopened.close()


def test_a_roll_while_an_fsync_is_under_way_waits_for_the_next_fsync(tmp_path: Path) -> None:
    batch = make_batch([b"x" * 200])
    plog = PartitionLog.open(tmp_path / "p0", fsync=FsyncPolicy.ALWAYS, segment_bytes=len(batch) * 2)
    plog.append(batch, sync=False)
    plog.append(batch, sync=False)
    pending = plog.begin_sync()  # nothing left to fsync but what is under way
    assert pending is not None and pending.target == 2 and plog.log_end_offset == 0
    plog.append(batch, sync=False)  # rolls, fsyncing nothing: the records after it wait for the next fsync
    assert plog.segment_count == 2 and plog.log_end_offset == 0 and plog.written_end == 3
    pending.run()
    plog.finish_sync(pending, None)
    assert plog.log_end_offset == 2
    plog.append(batch)  # fsynced before returning, the roll settled first: everything before it is on disk
    assert plog.log_end_offset == plog.written_end == 4
    plog.close()


def test_a_failed_fsync_fails_the_log(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p0")
    plog.append(make_batch([b"a"]), sync=False)
    pending = plog.begin_sync()
    assert pending is not None
    pending.run()
    plog.finish_sync(pending, OSError(5, "Input/output error"))
    assert plog.failed and plog.log_end_offset == 0 and not plog.durable(1)
    with pytest.raises(StorageError):
        plog.append(make_batch([b"b"]))
    assert plog.begin_sync() is None
    plog.close()


@pytest.mark.parametrize("policy", [FsyncPolicy.INTERVAL, FsyncPolicy.NEVER])
def test_other_policies_read_what_was_appended(tmp_path: Path, policy: FsyncPolicy) -> None:
    plog = _open(tmp_path / "p0", policy)
    plog.append(make_batch([b"a"]), sync=False)
    assert plog.log_end_offset == 1 and plog.durable(1) and plog.read(0, 1 << 20) != b""
    plog.close()


# ---------------------------------------------------------------------- GroupSync


def test_group_sync_releases_every_waiter(tmp_path: Path) -> None:
    logs = [_open(tmp_path / f"p{i}") for i in range(12)]

    async def produce(i: int, turn: int) -> tuple[int, set[PartitionLog]]:
        plog = logs[(i + turn) % len(logs)]
        plog.append(make_batch([b"x" * 10]), sync=False)
        failed = await sync.wait({plog: plog.written_end})
        return plog.log_end_offset, failed

    async def main() -> list[tuple[int, set[PartitionLog]]]:
        out = []
        for turn in range(5):
            out += await asyncio.gather(*(produce(i, turn) for i in range(30)))
        return out

    sync = GroupSync()
    try:
        results = asyncio.run(main())
    finally:
        sync.close()
    assert all(not failed for _, failed in results)
    assert sum(plog.log_end_offset for plog in logs) == 150
    assert all(plog.durable(plog.written_end) for plog in logs)
    for plog in logs:
        plog.close()


def test_group_sync_reports_the_log_whose_fsync_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good, bad = _open(tmp_path / "good"), _open(tmp_path / "bad")
    real_run = PendingSync.run

    def run(self: PendingSync) -> None:
        if self.target == 2:  # the bad log's two records (the good one has one)
            os.close(self.fd)
            raise OSError(5, "Input/output error")
        real_run(self)

    monkeypatch.setattr(PendingSync, "run", run)

    async def main() -> tuple[set[PartitionLog], set[PartitionLog]]:
        good.append(make_batch([b"a"]), sync=False)
        bad.append(make_batch([b"a", b"b"]), sync=False)
        return await asyncio.gather(sync.wait({good: good.written_end}), sync.wait({bad: bad.written_end}))

    sync = GroupSync()
    try:
        first, second = asyncio.run(main())
    finally:
        sync.close()
    assert first == set() and second == {bad}
    assert good.log_end_offset == 1 and bad.failed and bad.log_end_offset == 0
    good.close()
    bad.close()


def test_a_large_round_is_batched_per_thread_and_gives_the_loop_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round of 300 logs, every fifth one's fsync failing: the fsyncs run on the worker threads in one batch
    per thread, each failure is reported for its log only, the others are durable, and with the slice at 0 the
    loop gets a turn between two logs' steps."""
    import regroup.server.group_sync as group_sync_module

    monkeypatch.setattr(group_sync_module, "SLICE_S", 0.0)
    logs = [_open(tmp_path / f"p{i}") for i in range(300)]
    bad = set(logs[::5])
    real_run = PendingSync.run
    threads: set[str] = set()

    def run(self: PendingSync) -> None:
        threads.add(threading.current_thread().name)
        if self.target == 2:  # (the bad logs have two records)
            os.close(self.fd)
            raise OSError(5, "Input/output error")
        real_run(self)

    monkeypatch.setattr(PendingSync, "run", run)
    submitted: list[int] = []
    real_submit = group_sync_module.concurrent.futures.ThreadPoolExecutor.submit

    def submit(self: Any, fn: Any, *args: Any) -> Any:
        submitted.append(len(args[0]) if args else 0)
        return real_submit(self, fn, *args)

    monkeypatch.setattr(group_sync_module.concurrent.futures.ThreadPoolExecutor, "submit", submit)

    async def main() -> tuple[set[PartitionLog], int]:
        for plog in logs:
            plog.append(make_batch([b"a", b"b"] if plog in bad else [b"a"]), sync=False)
        return await counting_turns(sync.wait({plog: plog.written_end for plog in logs}))

    sync = GroupSync()
    try:
        failed, turns = asyncio.run(main())
    finally:
        sync.close()
    assert failed == bad
    assert all(plog.durable(1) and not plog.failed for plog in logs if plog not in bad)
    assert all(plog.failed for plog in bad)
    assert sorted(submitted) == [300 // 8] * 4 + [300 // 8 + 1] * 4  # (one batch per thread)
    assert threads and all(name.startswith("regroup-fsync") for name in threads)
    assert turns >= 300
    for plog in logs:
        plog.close()


def _slow_fsyncs(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every log's fsync in a round takes ``seconds`` longer."""
    real_run = PendingSync.run

    def slow(self: PendingSync) -> None:
        time.sleep(seconds)
        real_run(self)

    monkeypatch.setattr(PendingSync, "run", slow)


def test_producers_in_two_groups_end_up_sharing_each_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten producers with one produce in flight each, half of them starting while the first round's (slow) fsyncs
    run: without a wait between rounds they alternate in two groups, each round covering five logs; the round
    after one that answered producers while others waited waits for those producers, and from then on every round
    covers all ten."""
    logs = [_open(tmp_path / f"p{i}") for i in range(10)]
    _slow_fsyncs(monkeypatch, 0.05)
    sizes: list[int] = []
    real_hand_out = GroupSync._hand_out

    def hand_out(self: GroupSync, loop: Any, rounds: Any) -> Any:
        sizes.append(len(rounds))
        return real_hand_out(self, loop, rounds)

    monkeypatch.setattr(GroupSync, "_hand_out", hand_out)

    async def producer(plog: PartitionLog, delay: float) -> None:
        await asyncio.sleep(delay)
        for _ in range(8):
            plog.append(make_batch([b"x"]), sync=False)
            assert await sync.wait({plog: plog.written_end}) == set()

    async def main() -> None:
        await asyncio.gather(*(producer(plog, 0 if i < 5 else 0.01) for i, plog in enumerate(logs)))

    sync = GroupSync()
    try:
        asyncio.run(main())
    finally:
        sync.close()
    # the first group alone; then both, the first round's producers gathered; the second group's last alone
    assert sizes == [5] + [10] * 7 + [5], sizes
    assert sync.gather.gathered >= 1
    assert all(plog.log_end_offset == 8 and plog.durable(plog.written_end) for plog in logs)
    for plog in logs:
        plog.close()


def test_closing_while_a_round_waits_for_its_producers_starts_no_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store closes while a round waits for the producers the last one answered, others waiting: the group
    commit starts no round after it (its threads are gone, the store closes the logs itself) and its task ends
    without an error."""
    logs = [_open(tmp_path / f"p{i}") for i in range(4)]
    _slow_fsyncs(monkeypatch, 0.05)

    async def produce(plog: PartitionLog, delay: float) -> None:
        await asyncio.sleep(delay)
        plog.append(make_batch([b"x"]), sync=False)
        await sync.wait({plog: plog.written_end})

    async def main() -> BaseException | None:
        first = [asyncio.ensure_future(produce(plog, 0)) for plog in logs[:2]]
        second = [asyncio.ensure_future(produce(plog, 0.01)) for plog in logs[2:]]
        while not sync.gather.gathering:  # (the first round answered its two; the other two wait)
            await asyncio.sleep(0.001)
        await asyncio.gather(*first)
        sync.close()
        runner = sync._runner
        assert runner is not None
        await asyncio.wait_for(asyncio.shield(runner), 5)
        for waiter in second:
            waiter.cancel()
        await asyncio.gather(*second, return_exceptions=True)
        return runner.exception()

    sync = GroupSync()
    assert asyncio.run(main()) is None
    for plog in logs:
        plog.close()


def test_a_cancelled_waiter_leaves_the_round_to_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A produce cancelled while its round's fsyncs run (its connection closed): the others' waits end as usual,
    every log is fsynced, and nothing is left waiting."""
    logs = [_open(tmp_path / f"p{i}") for i in range(3)]
    inside, release = threading.Event(), threading.Event()
    real_run = PendingSync.run

    def held(self: PendingSync) -> None:
        inside.set()
        release.wait(10)
        real_run(self)

    monkeypatch.setattr(PendingSync, "run", held)

    async def main() -> list[set[PartitionLog]]:
        for plog in logs:
            plog.append(make_batch([b"a"]), sync=False)
        waits = [asyncio.ensure_future(sync.wait({plog: plog.written_end})) for plog in logs]
        while not inside.is_set():
            await asyncio.sleep(0.001)
        waits[1].cancel()
        await asyncio.sleep(0.01)
        release.set()
        done = [await waits[0], await waits[2]]
        assert waits[1].cancelled()
        return done

    sync = GroupSync()
    try:
        results = asyncio.run(main())
    finally:
        sync.close()
    assert results == [set(), set()]
    assert all(plog.durable(1) for plog in logs) and sync._waiting == []
    for plog in logs:
        plog.close()


def test_the_store_has_one_group_sync(tmp_path: Path) -> None:
    from regroup.server.topics import TopicStore

    with TopicStore.open(tmp_path / "topics", fsync=FsyncPolicy.ALWAYS) as store:
        assert store.group_sync is store.group_sync


# ---------------------------------------------------------------------- the server


def _produce(client: WireClient, partition: int, value: bytes, acks: int = -1) -> int:
    batch = make_batch([value])
    parts = [{"index": partition, "records": batch}]
    answer = client.call(
        PRODUCE,
        9,
        transactional_id=None,
        acks=acks,
        timeout=30_000,
        topic_data=[{"name": TOPIC, "partition_data": parts}],
    )
    (row,) = answer.responses[0].partition_responses
    assert row.error_code == 0, row
    return int(row.base_offset)


def _end_offsets(client: WireClient, partitions: int) -> dict[int, int]:
    parts = [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(partitions)]
    answer = client.call(
        LIST_OFFSETS, 8, replica_id=-1, isolation_level=0, topics=[{"name": TOPIC, "partitions": parts}]
    )
    return {int(p.partition_index): int(p.offset) for p in answer.topics[0].partitions}


def test_acknowledged_produces_survive_kill_9(tmp_path: Path) -> None:
    producers, partitions = 24, 8  # several producers per partition: their appends share fsyncs
    acked: list[list[tuple[int, int]]] = [[] for _ in range(producers)]  # (partition, base offset) acknowledged
    stop = threading.Event()
    errors: list[BaseException] = []
    with served(tmp_path, "--fsync", "always") as server:
        with WireClient(server.port) as admin:
            create_topics(admin, {TOPIC: partitions})

        def producer(i: int) -> None:
            try:
                with WireClient(server.port, timeout=30) as client:
                    while not stop.is_set():
                        partition = (i + len(acked[i])) % partitions
                        acked[i].append((partition, _produce(client, partition, f"{i}-{len(acked[i])}".encode())))
            except (ConnectionError, OSError) as exc:  # the server was killed under it
                if not stop.is_set():
                    errors.append(exc)

        threads = [threading.Thread(target=producer, args=(i,), daemon=True) for i in range(producers)]
        for t in threads:
            t.start()
        while sum(len(a) for a in acked) < 400 and all(t.is_alive() for t in threads) and not errors:
            threading.Event().wait(0.05)
        stop.set()  # (set first: a producer whose connection the kill closes is not an error)
        server.kill(signal.SIGKILL)
        for t in threads:
            t.join(30)
        assert not errors, errors
        snapshot = [list(a) for a in acked]
        assert sum(len(a) for a in snapshot) >= 400
        server.start()
        with WireClient(server.port, timeout=30) as client:
            ends = _end_offsets(client, partitions)
            for i, rows in enumerate(snapshot):
                for partition, offset in rows:
                    assert offset < ends[partition], (i, partition, offset, ends)
            values = _read_values(client, partitions)
        for i, rows in enumerate(snapshot):
            for n, (partition, offset) in enumerate(rows):
                assert values[partition][offset] == f"{i}-{n}".encode()


def _read_values(client: WireClient, partitions: int) -> dict[int, dict[int, bytes]]:
    """Every record's value by partition and offset (Fetch v12 from 0, until each partition's end)."""
    ends = _end_offsets(client, partitions)
    out: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    position = dict.fromkeys(range(partitions), 0)
    while any(position[p] < ends[p] for p in range(partitions)):
        parts = [
            {
                "partition": p,
                "current_leader_epoch": -1,
                "fetch_offset": position[p],
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
            }
            for p in range(partitions)
            if position[p] < ends[p]
        ]
        answer = client.call(
            FETCH,
            12,
            cluster_id=None,
            replica_id=-1,
            max_wait=0,
            min_bytes=0,
            max_bytes=1 << 24,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[{"topic": TOPIC, "partitions": parts}],
            forgotten_topics_data=[],
            rack_id="",
        )
        for part in answer.responses[0].partitions:
            assert part.error_code == 0, part
            for offset, value in _records(bytes(part.records or b"")):
                out[int(part.partition_index)][offset] = value
                position[int(part.partition_index)] = offset + 1
    return out


def _records(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of each record of uncompressed v2 batches (keys absent, no headers)."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base = int.from_bytes(data[pos : pos + 8], "big")
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        count = int.from_bytes(data[pos + 57 : pos + 61], "big")
        at = pos + 61
        for _ in range(count):
            size, at = _varint(data, at)
            end = at + size
            at += 1  # attributes
            _, at = _varint(data, at)  # timestamp delta
            delta, at = _varint(data, at)
            key_len, at = _varint(data, at)
            at += max(key_len, 0)
            value_len, at = _varint(data, at)
            out.append((base + delta, data[at : at + value_len]))
            at = end
        pos += 12 + length
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7


def test_pipelined_produces_on_one_connection_are_answered_in_order(tmp_path: Path) -> None:
    with served(tmp_path, "--fsync", "always") as server, WireClient(server.port, timeout=30) as client:
        create_topics(client, {TOPIC: 4})
        sent = []
        for n in range(60):
            batch = make_batch([f"v{n}".encode()])
            parts = [{"index": p, "records": batch} for p in range(n % 4 + 1)]  # 1 to 4 partitions each
            sent.append(
                client.send(
                    PRODUCE,
                    9,
                    transactional_id=None,
                    acks=-1,
                    timeout=30_000,
                    topic_data=[{"name": TOPIC, "partition_data": parts}],
                )
            )
        last: dict[int, int] = {}
        for _ in sent:
            answer: Any = client.receive()  # checks the correlation id: the oldest request's answer first
            for row in answer.responses[0].partition_responses:
                assert row.error_code == 0
                assert row.base_offset > last.get(int(row.index), -1)
                last[int(row.index)] = int(row.base_offset)
        assert _end_offsets(client, 4) == {0: 60, 1: 45, 2: 30, 3: 15}
