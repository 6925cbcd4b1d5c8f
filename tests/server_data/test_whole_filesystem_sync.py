"""A group commit round made durable by one sync of the whole file system (``syncfs``) instead of one fsync per
file, when that has cost less lately (``server/sync_choice.py``, ``server/group_sync.py``).

- the choice: never for one file or where the platform cannot; tried first, then compared with a round made file
  by file; the dearer way left, and the whole sync tried again after ``PROBE_S``;
- a round of many logs: one whole sync on a worker thread covers them all (no file's own fsync, no descriptor
  left open), every log durable and its records read;
- a whole sync that fails: each log of the round fsynced on its own, the one whose fsync fails failed alone;
- a log settling a roll: fsynced file by file beside the whole sync (its steps have an order), the roll durable;
- ``--fsync interval`` on a running loop: appends to many partitions are fsynced by the store's timer in one
  round, within the interval, without anyone calling ``sync``;
- the server under ``--fsync always``: produces from many connections to many partitions, acknowledged, survive
  ``kill -9``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.server import group_sync
from regroup.server.group_sync import GroupSync
from regroup.server.sync_choice import KEPT, PROBE_S, SyncChoice
from regroup.server.topics import TopicStore
from regroup.storage import files, partition_log
from regroup.storage.partition_log import PartitionLog, PendingSync
from regroup.storage.record_log import FsyncPolicy
from tests.server.conftest import served
from tests.server.wire import WireClient, create_topics
from tests.server_data.batches import make_batch
from tests.server_data.test_group_commit import PRODUCE, TOPIC, _end_offsets, _read_values

needs_syncfs = pytest.mark.skipif(not files.syncs_filesystem(), reason="no syncfs reporting write-back errors here")


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------- the choice


def test_the_choice_without_syncfs_or_with_one_file_is_file_by_file() -> None:
    assert not SyncChoice(False).whole(100)
    choice = SyncChoice(True)
    assert not choice.whole(1) and not choice.whole(0)
    assert choice.whole(2)


def test_the_choice_tries_each_way_then_keeps_the_cheaper() -> None:
    clock = _Clock()
    choice = SyncChoice(True, clock)
    assert choice.whole(10)  # first: the whole sync, to learn its cost
    choice.saw_whole(0.0002)
    assert not choice.whole(10)  # then one round file by file, to compare
    choice.saw_files(0.0013, 10)  # (0.13 ms a file)
    assert choice.whole(10) and choice.whole(4)  # 0.2 ms against 0.65 and 0.26
    assert not choice.whole(3)  # 0.2 ms against 0.195: file by file
    assert choice.whole(2) is False


def test_a_dearer_whole_sync_is_left_and_probed_again_after_a_while() -> None:
    clock = _Clock()
    choice = SyncChoice(True, clock)
    choice.saw_whole(0.050)  # another program made the file system's dirty data large
    choice.saw_files(0.0002, 1)
    assert [choice.whole(10) for _ in range(5)] == [False] * 5
    clock.now += PROBE_S - 0.001
    assert not choice.whole(10)
    clock.now += 0.002
    assert choice.whole(10)  # probed again
    choice.saw_whole(0.0001)  # the disk is quiet again: the lower median of 50 and 0.1 ms is 0.1 ms
    assert choice.whole(10)


def test_a_lasting_slowdown_outweighs_one_quick_sync() -> None:
    clock = _Clock()
    choice = SyncChoice(True, clock)
    choice.saw_files(0.0002, 1)
    for seconds in (0.050, 0.060, 0.0001):  # two slow syncs, then a quick one
        choice.saw_whole(seconds)
    assert choice.whole_s == 0.050 and not choice.whole(10)
    choice.saw_whole(0.0001)
    assert choice.whole_s == 0.0001 and choice.whole(10)  # (lower median of four: the second smallest)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20), st.integers(1, 50))
def test_the_costs_are_the_lower_median_of_the_latest(seen: list[float], files: int) -> None:
    choice = SyncChoice(True)
    for seconds in seen:
        choice.saw_whole(seconds)
        choice.saw_files(seconds * files, files)
    latest = sorted(seen[-KEPT:])
    assert choice.whole_s == latest[(len(latest) - 1) // 2]
    assert choice.file_s == pytest.approx(choice.whole_s)
    choice.saw_files(1.0, 0)  # (an empty batch says nothing)
    assert choice.file_s == pytest.approx(choice.whole_s)


# ---------------------------------------------------------------------- the group commit


def _open(path: Path) -> PartitionLog:
    return PartitionLog.open(path, fsync=FsyncPolicy.ALWAYS)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def whole_syncs(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The thread of every sync of a whole file system (the real one still runs)."""
    seen: list[threading.Thread] = []
    real = group_sync.sync_filesystem

    def whole(fd: int) -> None:
        seen.append(threading.current_thread())
        real(fd)

    monkeypatch.setattr(group_sync, "sync_filesystem", whole)
    return seen


@pytest.fixture
def file_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptor of every fsync of one file (the real one still runs)."""
    seen: list[int] = []
    real = partition_log._fsync_file

    def one_file(fd: int) -> None:
        seen.append(fd)
        real(fd)

    monkeypatch.setattr(partition_log, "_fsync_file", one_file)
    return seen


@pytest.fixture
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing else waits to be written back (whatever the machine running the tests has dirty)."""
    monkeypatch.setattr(group_sync, "dirty_bytes", lambda: 0)


@needs_syncfs
@pytest.mark.usefixtures("quiet_machine")
def test_one_whole_sync_covers_a_round_of_many_logs(
    tmp_path: Path, whole_syncs: list[threading.Thread], file_fsyncs: list[int]
) -> None:
    logs = [_open(tmp_path / f"p{i}") for i in range(20)]
    sync = GroupSync(tmp_path)

    async def main() -> set[PartitionLog]:
        for plog in logs:
            plog.append(make_batch([b"a", b"b"]), sync=False)
        before = _open_fds()
        failed = await sync.wait({plog: plog.written_end for plog in logs})
        assert _open_fds() == before  # every duplicate descriptor of the round closed
        return failed

    try:
        failed = asyncio.run(main())
    finally:
        sync.close()
    assert failed == set()
    assert len(whole_syncs) == 1 and whole_syncs[0] is not threading.main_thread() and file_fsyncs == []
    assert sync.choice.whole_s is not None
    assert all(plog.durable(2) and plog.log_end_offset == 2 and plog.read(0, 1 << 20) for plog in logs)
    for plog in logs:
        plog.close()


@needs_syncfs
@pytest.mark.usefixtures("quiet_machine")
def test_a_failed_whole_sync_falls_back_to_each_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = [_open(tmp_path / f"p{i}") for i in range(6)]
    bad = logs[3]
    real_run = PendingSync.run
    ran: list[int] = []

    def failing_whole(fd: int) -> None:
        raise OSError(5, "Input/output error")

    def run(self: PendingSync) -> None:
        ran.append(self.target)
        if self.target == 3:  # (the bad log has three records)
            self.close()
            raise OSError(5, "Input/output error")
        real_run(self)

    monkeypatch.setattr(group_sync, "sync_filesystem", failing_whole)
    monkeypatch.setattr(PendingSync, "run", run)
    sync = GroupSync(tmp_path)

    async def main() -> set[PartitionLog]:
        for plog in logs:
            plog.append(make_batch([b"a", b"b", b"c"] if plog is bad else [b"a"]), sync=False)
        return await sync.wait({plog: plog.written_end for plog in logs})

    try:
        failed = asyncio.run(main())
    finally:
        sync.close()
    assert failed == {bad} and bad.failed and bad.log_end_offset == 0
    assert sorted(ran) == [1] * 5 + [3]  # each file fsynced on its own once the whole sync failed
    assert all(plog.durable(1) and not plog.failed for plog in logs if plog is not bad)
    assert sync.choice.whole_s is None  # (a failed sync is no measure of its cost)
    for plog in logs:
        plog.close()


@needs_syncfs
@pytest.mark.usefixtures("quiet_machine")
def test_a_roll_is_settled_file_by_file_beside_the_whole_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_syncs: list[threading.Thread]
) -> None:
    batch = make_batch([b"x" * 200])
    rolling = PartitionLog.open(tmp_path / "rolling", fsync=FsyncPolicy.ALWAYS, segment_bytes=len(batch) * 2)
    others = [_open(tmp_path / f"p{i}") for i in range(5)]
    settled: list[int] = []
    real_run = PendingSync.run

    def run(self: PendingSync) -> None:
        settled.append(self.target)
        real_run(self)

    monkeypatch.setattr(PendingSync, "run", run)
    covered = whole_syncs
    sync = GroupSync(tmp_path)

    async def main() -> set[PartitionLog]:
        for _ in range(2):
            rolling.append(batch, sync=False)
        await sync.wait({rolling: rolling.written_end})
        settled.clear()
        covered.clear()
        rolling.append(batch, sync=False)  # full: this append rolls
        assert rolling.roll_unsettled
        for plog in others:
            plog.append(batch, sync=False)
        targets = {plog: plog.written_end for plog in [rolling, *others]}
        return await sync.wait(targets)

    try:
        failed = asyncio.run(main())
    finally:
        sync.close()
    assert failed == set() and not rolling.roll_unsettled
    assert settled == [3] and len(covered) == 1  # the roll on its own, the five others in one whole sync
    assert rolling.durable(3) and all(plog.durable(1) for plog in others)
    assert len(list((tmp_path / "rolling").glob("*.log"))) == 2  # the new segment under its final name
    rolling.close()
    for plog in others:
        plog.close()


@needs_syncfs
@pytest.mark.parametrize("dirty", [group_sync.WHOLE_MAX_DIRTY_BYTES + 1, None])
def test_much_data_waiting_elsewhere_makes_the_round_file_by_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    whole_syncs: list[threading.Thread],
    file_fsyncs: list[int],
    dirty: int | None,
) -> None:
    """More than ``WHOLE_MAX_DIRTY_BYTES`` waiting to be written back on the machine (or no way to tell): the round
    the choice gave to the whole sync fsyncs each file instead, and that counts as a round file by file."""
    logs = [_open(tmp_path / f"p{i}") for i in range(6)]
    monkeypatch.setattr(group_sync, "dirty_bytes", lambda: dirty)
    sync = GroupSync(tmp_path)

    async def main() -> set[PartitionLog]:
        for plog in logs:
            plog.append(make_batch([b"a"]), sync=False)
        return await sync.wait({plog: plog.written_end for plog in logs})

    try:
        assert sync.choice.whole(len(logs))  # (the choice would take the whole sync)
        failed = asyncio.run(main())
    finally:
        sync.close()
    assert failed == set() and whole_syncs == [] and len(file_fsyncs) == len(logs)
    assert sync.choice.whole_s is None and sync.choice.file_s is not None
    assert all(plog.durable(1) for plog in logs)
    for plog in logs:
        plog.close()


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="no /proc/meminfo here")
def test_the_data_waiting_to_be_written_back_is_read_from_the_kernel(tmp_path: Path) -> None:
    dirty = files.dirty_bytes()
    assert isinstance(dirty, int) and dirty >= 0


# ---------------------------------------------------------------------- the store's interval timer


def test_interval_appends_are_fsynced_by_the_stores_timer_in_one_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds: list[int] = []
    real_hand_out = GroupSync._hand_out

    def hand_out(self: GroupSync, loop: asyncio.AbstractEventLoop, jobs: list[object]) -> object:
        rounds.append(len(jobs))
        return real_hand_out(self, loop, jobs)  # type: ignore[arg-type]

    monkeypatch.setattr(GroupSync, "_hand_out", hand_out)

    async def main() -> None:
        with TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=50) as store:
            store.create_topic("t", 8)
            logs = [store.partition("t", p) for p in range(8)]
            assert all(plog is not None for plog in logs)
            for plog in logs:
                assert plog is not None
                plog.append(make_batch([b"a"]))
                assert plog.log_end_offset == 1 and not plog.fsynced(1)  # readable at once, fsynced later
            for _ in range(400):
                if all(plog is not None and plog.fsynced(1) for plog in logs):
                    break
                await asyncio.sleep(0.005)
            assert all(plog is not None and plog.fsynced(1) for plog in logs)
            assert rounds == [8]  # the timer's one round took every partition
            assert store._sync_timer is None  # (armed again by the next append only)
            logs[0].append(make_batch([b"b"]))  # type: ignore[union-attr]
            assert store._sync_timer is not None

    asyncio.run(main())


# ---------------------------------------------------------------------- the server


@pytest.mark.parametrize("policy", ["always", "interval"])
def test_produces_to_many_partitions_survive_kill_9(tmp_path: Path, policy: str) -> None:
    """Eight connections producing to a partition each, in rounds (their fsyncs in shared rounds); everything
    acknowledged survives ``kill -9`` (under ``interval``, once the interval has passed)."""
    connections, rounds = 8, 15
    with served(tmp_path, "--fsync", policy) as server:
        with WireClient(server.port) as admin:
            create_topics(admin, {TOPIC: connections})
        clients = [WireClient(server.port, timeout=30) for _ in range(connections)]
        try:
            for r in range(rounds):
                for p, client in enumerate(clients):
                    client.send(PRODUCE, 9, **_produce_fields(p, f"{p}-{r}".encode()))
                for client in clients:
                    (row,) = client.receive().responses[0].partition_responses
                    assert row.error_code == 0 and row.base_offset == r, row
        finally:
            for client in clients:
                client.close()
        if policy == "interval":
            time.sleep(0.5)  # (several intervals)
        server.kill(signal.SIGKILL)
        server.start()
        with WireClient(server.port, timeout=30) as client:
            assert _end_offsets(client, connections) == dict.fromkeys(range(connections), rounds)
            values = _read_values(client, connections)
    assert values == {p: {r: f"{p}-{r}".encode() for r in range(rounds)} for p in range(connections)}


def _produce_fields(partition: int, value: bytes) -> dict[str, object]:
    parts = [{"index": partition, "records": make_batch([value])}]
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [{"name": TOPIC, "partition_data": parts}],
    }
