"""Under ``--fsync interval`` and ``never`` the group coordinator's writer writes a turn's committed offsets on the
event loop (``GroupCommitWriter``'s ``write_now``, ``CoordinatorRuntime._write_now``): a commit is answered
without a trip through the writer's thread; records of any other kind, offsets with long metadata, turns of
many records and a batch that would start a new segment (a roll fsyncs) go to the thread, and no fsync ever
runs on the loop. What was answered is in the log when it is reopened."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from regroup.coordinator.result import Completion, Result
from regroup.protocol.offsets import OffsetCommitRequest, OffsetFetchRequest, PartitionCommit
from regroup.records.model import GroupMetadataKey, GroupMetadataValue, Record
from regroup.server import runtime as runtime_module
from regroup.server.runtime import CoordinatorRuntime
from regroup.storage import record_log as record_log_module
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy, RecordLog

POLICIES = [FsyncPolicy.INTERVAL, FsyncPolicy.NEVER]


class Spy:
    """Where each write and fsync of the record log ran while ``serving`` (opening and closing the log are not
    the loop's requests), and how many records each write held."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writes: list[tuple[str, str, int]] = []  # (how, thread, records)
        self.fsyncs: list[str] = []
        self.serving = False
        real_now, real_write = RecordLog.write_unless_full, RecordLog.write
        real_fsync = record_log_module._fsync_file

        def write_unless_full(log: RecordLog, payloads: Sequence[bytes]) -> int | None:
            last = real_now(log, payloads)
            if last is not None and payloads:
                self.writes.append(("now", threading.current_thread().name, len(payloads)))
            return last

        def write(log: RecordLog, payloads: Sequence[bytes]) -> int:
            self.writes.append(("thread", threading.current_thread().name, len(payloads)))
            return real_write(log, payloads)

        def fsync(fd: int) -> None:
            if self.serving:
                self.fsyncs.append(threading.current_thread().name)
            real_fsync(fd)

        monkeypatch.setattr(RecordLog, "write_unless_full", write_unless_full)
        monkeypatch.setattr(RecordLog, "write", write)
        monkeypatch.setattr(record_log_module, "_fsync_file", fsync)


def commit(partition: int, offset: int, metadata: str = "") -> Any:
    req = OffsetCommitRequest(
        group_id="g", topics=(("t", (PartitionCommit(partition=partition, offset=offset, metadata=metadata),)),)
    )
    return lambda c, key, now: c.offset_commit(req, key, now)


def fetched(runtime: CoordinatorRuntime) -> Any:
    req = OffsetFetchRequest(group_id="g", topics=(("t", tuple(range(8))),))
    return runtime.call(lambda c, key, now: c.offset_fetch(req, key, now))


def group_record(key: int) -> Any:
    """A core call writing one classic group's record (of no members) and answering ``ok``."""
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=0,
        protocol_name=None,
        leader=None,
        current_state_timestamp_ms=0,
        members=(),
    )
    return lambda c, k, now: Result(
        records=[Record(GroupMetadataKey(group_id=f"other-{key}"), value)], completions=[Completion(k, "ok")]
    )


def offsets(response: Any) -> dict[int, int]:
    return {p.partition: p.offset for _, partitions in response.topics for p in partitions if p.offset >= 0}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_turn_s_commits_are_written_on_the_loop_in_one_write(
    tmp_path: Path, policy: FsyncPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    loop_thread = threading.current_thread().name

    async def scenario() -> dict[int, int]:
        runtime = CoordinatorRuntime.load(CoordinatorLog.open(tmp_path, fsync=policy))
        runtime.start()
        spy.serving = True
        for round_ in range(3):
            await asyncio.gather(*(runtime.call(commit(p, 10 * round_ + p)) for p in range(8)))
        answer = offsets(await fetched(runtime))
        spy.serving = False
        await runtime.close()
        return answer

    assert asyncio.run(scenario()) == {p: 20 + p for p in range(8)}
    assert spy.writes == [("now", loop_thread, 8)] * 3
    assert loop_thread not in spy.fsyncs

    async def reloaded() -> dict[int, int]:
        runtime = CoordinatorRuntime.load(CoordinatorLog.open(tmp_path, fsync=policy))
        runtime.start()
        answer = offsets(await fetched(runtime))
        await runtime.close()
        return answer

    assert asyncio.run(reloaded()) == {p: 20 + p for p in range(8)}


@pytest.mark.parametrize("policy", POLICIES)
def test_other_records_long_metadata_and_large_turns_go_to_the_thread(
    tmp_path: Path, policy: FsyncPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    monkeypatch.setattr(runtime_module, "WRITE_NOW_MAX_RECORDS", 4)
    loop_thread = threading.current_thread().name

    async def scenario() -> dict[int, int]:
        runtime = CoordinatorRuntime.load(CoordinatorLog.open(tmp_path, fsync=policy))
        runtime.start()
        spy.serving = True
        assert await runtime.call(group_record(1)) == "ok"
        await runtime.call(commit(0, 5, metadata="m" * (runtime_module.WRITE_NOW_MAX_METADATA + 1)))
        await asyncio.gather(*(runtime.call(commit(p, 7)) for p in range(1, 6)))  # five records in one turn
        await runtime.call(commit(6, 9, metadata="m" * runtime_module.WRITE_NOW_MAX_METADATA))
        answer = offsets(await fetched(runtime))
        spy.serving = False
        await runtime.close()
        return answer

    assert asyncio.run(scenario()) == {0: 5, 1: 7, 2: 7, 3: 7, 4: 7, 5: 7, 6: 9}
    # the turn of five: declined together, then offered one by one, four written on the loop (the turn's bound),
    # the fifth on the thread
    assert [(how, n) for how, _, n in spy.writes] == [
        ("thread", 1),
        ("thread", 1),
        *[("now", 1)] * 4,
        ("thread", 1),
        ("now", 1),
    ]
    assert all(thread != loop_thread for how, thread, _ in spy.writes if how == "thread")
    assert loop_thread not in spy.fsyncs


@pytest.mark.parametrize("policy", POLICIES)
def test_a_turn_that_would_start_a_new_segment_is_written_by_the_thread(
    tmp_path: Path, policy: FsyncPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With segments of 600 bytes, commits one at a time: each that still fits is written on the loop, each
    that would roll (the old segment fsynced unless ``never``, a file made) on the thread; no fsync on the loop,
    and every offset answered is there after a reopen."""
    spy = Spy(monkeypatch)
    loop_thread = threading.current_thread().name
    real_open = RecordLog.open
    monkeypatch.setattr(RecordLog, "open", lambda directory, **kw: real_open(directory, **{**kw, "segment_bytes": 600}))

    async def scenario(commits: int) -> dict[int, int]:
        runtime = CoordinatorRuntime.load(CoordinatorLog.open(tmp_path, fsync=policy))
        runtime.start()
        spy.serving = True
        for i in range(commits):
            await runtime.call(commit(i % 8, i))
        answer = offsets(await fetched(runtime))
        spy.serving = False
        await runtime.close()
        return answer

    expected = {p: max(i for i in range(40) if i % 8 == p) for p in range(8)}
    assert asyncio.run(scenario(40)) == expected
    hows = [how for how, _, _ in spy.writes]
    assert hows.count("thread") >= 3 and hows.count("now") >= 20, hows
    assert loop_thread not in spy.fsyncs
    assert asyncio.run(scenario(0)) == expected
