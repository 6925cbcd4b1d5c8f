"""The coordinator's records through the on-disk log: a restart rebuilds the same hard state."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result
from regroup.protocol.classic import JoinGroupRequest, LeaveGroupRequest, LeavingMember, SyncGroupRequest
from regroup.protocol.offsets import OffsetCommitRequest, PartitionCommit
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.encoded_ahead import EncodedAhead
from regroup.storage.record_log import FsyncPolicy, RecordLog
from tests.group_views import classic_groups

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=3_000)


class Driver:
    """Runs a few groups through joins, syncs, commits and leaves, persisting every result."""

    def __init__(self, log: CoordinatorLog, coordinator: GroupCoordinator) -> None:
        self.log = log
        self.c = coordinator
        self.now = 0
        self.key = 0
        self.responses: dict[int | str, object] = {}

    def _persist(self, result: Result) -> Result:
        self.log.append(result.records)
        self.responses.update({c.key: c.response for c in result.completions})
        return result

    def next_key(self) -> int:
        self.key += 1
        return self.key

    def form_group(self, group: str, size: int) -> list[str]:
        ids = []
        for _ in range(size):
            req = JoinGroupRequest(
                group_id=group,
                session_timeout_ms=30_000,
                rebalance_timeout_ms=30_000,
                protocol_type="consumer",
                protocols=(("range", b"meta"),),
            )
            k = self.next_key()
            ids.append(self._persist(self.c.join_group(req, k, self.now)).response_for(k).member_id)
        keys = {}
        for member in ids:
            keys[member] = self.next_key()
            req = JoinGroupRequest(
                group_id=group,
                member_id=member,
                session_timeout_ms=30_000,
                rebalance_timeout_ms=30_000,
                protocol_type="consumer",
                protocols=(("range", b"meta"),),
            )
            self._persist(self.c.join_group(req, keys[member], self.now))
        while classic_groups(self.c)[group].state.value == "PreparingRebalance":  # initial delay, extended once
            deadline = self.c.next_deadline()
            assert deadline is not None
            self.now = max(self.now, deadline)
            self._persist(self.c.advance(self.now))
        group_state = classic_groups(self.c)[group]
        assert group_state.state.value == "CompletingRebalance"
        leader = group_state.leader_id
        assert leader is not None
        generation = group_state.generation
        sync = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=leader,
            assignments=tuple((m, f"assignment-of-{m}".encode()) for m in ids),
        )
        self._persist(self.c.sync_group(sync, self.next_key(), self.now))
        return ids

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        req = OffsetCommitRequest(
            group_id=group,
            generation_id=-1,
            topics=((topic, (PartitionCommit(partition=partition, offset=offset),)),),
        )
        self._persist(self.c.offset_commit(req, self.next_key(), self.now))

    def leave(self, group: str, member: str) -> None:
        self._persist(
            self.c.leave_group(
                LeaveGroupRequest(group_id=group, members=(LeavingMember(member_id=member),)), self.next_key(), self.now
            )
        )


def test_restart_rebuilds_groups_and_offsets(tmp_path: Path) -> None:
    log = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    d = Driver(log, GroupCoordinator(CONFIG))
    members = d.form_group("g1", 3)
    d.form_group("g2", 2)
    d.commit("simple", "t", 0, 42)
    d.commit("simple", "t", 1, 7)
    d.leave("g1", members[0])
    log.close()

    reopened = CoordinatorLog.open(tmp_path)
    rebuilt = reopened.load(now_ms=d.now, config=CONFIG)
    assert rebuilt.hard_state() == d.c.hard_state()
    assert classic_groups(rebuilt)["g2"].state.value == "Stable"
    assert rebuilt.offsets.of("simple")[("t", 0)].offset == 42
    reopened.close()


def test_snapshot_bounds_what_a_restart_reads(tmp_path: Path) -> None:
    log = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER, snapshot_every=1)
    d = Driver(log, GroupCoordinator(CONFIG))
    rng = random.Random(3)
    for round_ in range(30):
        d.commit("simple", f"t{round_ % 3}", rng.randrange(4), round_)
        if round_ % 10 == 9:
            assert log.maybe_snapshot(d.c)
    d.form_group("g", 2)
    log.close()

    reopened = CoordinatorLog.open(tmp_path)
    records = list(reopened.records())
    # the snapshot holds one record per surviving key, not the history of 30 commits
    assert len(records) < 30
    assert GroupCoordinator.from_records(records, d.now, CONFIG).hard_state() == d.c.hard_state()
    reopened.close()


def test_write_now_counts_only_what_it_wrote_and_declines_a_new_segment(tmp_path: Path) -> None:
    """``write_now`` writes a batch that fits the active segment (counted toward the next snapshot) and declines
    one that would start a new segment (nothing written, nothing counted); ``write`` then takes it."""
    records = Driver(CoordinatorLog.open(tmp_path / "src", fsync=FsyncPolicy.NEVER), GroupCoordinator(CONFIG))
    commits = records.c.offset_commit(
        OffsetCommitRequest(group_id="g", topics=(("t", tuple(PartitionCommit(p, 10 + p) for p in range(4))),)),
        1,
        0,
    ).records
    assert len(commits) == 4
    # (segments of 400 bytes: after two records, a batch of four does not fit)
    log = CoordinatorLog(RecordLog.open(tmp_path / "log", fsync=FsyncPolicy.NEVER, segment_bytes=400), snapshot_every=7)
    assert log.write_now([]) and log.log.next_offset == 0
    assert log.write_now(commits[:2]) and log.log.next_offset == 2
    assert not log.write_now(commits) and log.log.next_offset == 2
    assert log.prepare_snapshot(records.c) is None  # (two counted, not six)
    assert log.write(commits) == 5 and log.log.segment_count == 2
    log.close()
    records.log.close()
    reopened = CoordinatorLog.open(tmp_path / "log", fsync=FsyncPolicy.NEVER)
    assert [r.key for r in reopened.records()] == [r.key for r in [*commits[:2], *commits]]
    reopened.close()


def test_write_now_never_waits_for_a_batch_another_thread_is_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another thread's ``append`` is in its write, ``write_now`` declines at once (nothing written); while
    that thread only encodes its batch, and once the write is done, ``write_now`` writes. The log holds every
    batch whole, in the order their writes took place."""
    driver = Driver(CoordinatorLog.open(tmp_path / "src", fsync=FsyncPolicy.NEVER), GroupCoordinator(CONFIG))
    commits = driver.c.offset_commit(
        OffsetCommitRequest(group_id="g", topics=(("t", tuple(PartitionCommit(p, 10 + p) for p in range(6))),)),
        1,
        0,
    ).records
    log = CoordinatorLog.open(tmp_path / "log", fsync=FsyncPolicy.NEVER)
    encoding, writing, go_on = threading.Event(), threading.Event(), threading.Event()
    real_encode, real_append = log.encode, log.log.append

    def slow_encode(record: Any) -> bytes:
        if record is commits[0]:
            encoding.set()
            assert go_on.wait(5)
        return real_encode(record)

    def slow_append(payloads: Any) -> int:
        writing.set()
        assert go_on.wait(5)
        return real_append(payloads)

    monkeypatch.setattr(log, "encode", slow_encode)
    log.ahead = EncodedAhead(slow_encode)
    appender = threading.Thread(target=log.append, args=(commits[:2],))
    appender.start()
    assert encoding.wait(5)
    assert log.write_now(commits[2:3]) and log.log.next_offset == 1  # (written while the other encodes)
    monkeypatch.setattr(log.log, "append", slow_append)
    go_on.set()
    appender.join(5)
    go_on.clear()
    writing = threading.Event()
    second = threading.Thread(target=log.append, args=(commits[3:5],))
    second.start()
    assert writing.wait(5)
    assert not log.write_now(commits[5:]) and log.log.next_offset == 3  # (declined: the other is writing)
    go_on.set()
    second.join(5)
    assert log.write_now(commits[5:]) and log.log.next_offset == 6
    log.close()
    driver.log.close()
    reopened = CoordinatorLog.open(tmp_path / "log", fsync=FsyncPolicy.NEVER)
    written = [commits[2], commits[0], commits[1], commits[3], commits[4], commits[5]]
    assert [r.key for r in reopened.records()] == [r.key for r in written]
    reopened.close()
