"""The transaction coordinator's log on disk (``<data dir>/transactions/``): it rebuilds the coordinator from
its records and from a snapshot plus the records after it; damage in the middle refuses to start with the
one-line repair hint, ``regroup repair`` reports and quarantines it, and the server starts again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from regroup.storage.record_log import FsyncPolicy
from regroup.storage.transaction_log import TransactionLog
from regroup.transactions.coordinator import TransactionCoordinator
from regroup.transactions.results import CountingProducerIds
from tests.server.conftest import ServerProcess
from tests.server.wire import WireClient
from tests.server_data.test_damage import flip, refused, regroup, units

NEVER = FsyncPolicy.NEVER


def write_transactions(directory: Path, ids: int, snapshot_at: int | None = None) -> TransactionCoordinator:
    """``ids`` transactional ids, each initialised, given a partition and committed (records written as the
    server writes them); a snapshot after ``snapshot_at`` of them."""
    coordinator = TransactionCoordinator(producer_ids=CountingProducerIds())
    now = int(time.time() * 1000)  # (the server expires ids idle for a week: these are recent)
    log = TransactionLog.open(directory, fsync=NEVER)
    try:
        for i in range(ids):
            tid = f"tx-{i}"
            s = coordinator.init_producer_id(tid, 60_000, -1, -1, now + i)
            log.append(s.records)
            log.append(coordinator.add_partitions(tid, s.producer_id, 0, [("t", i % 3)], now + i).records)
            end = coordinator.end_txn(tid, s.producer_id, 0, True, now + i)
            log.append(end.records)
            log.append(coordinator.markers_written(end.markers[0], now + i).records)
            if snapshot_at is not None and i + 1 == snapshot_at:
                log.snapshot(coordinator.snapshot_records())
    finally:
        log.close()
    return coordinator


def test_the_log_rebuilds_the_coordinator_with_and_without_a_snapshot(tmp_path: Path) -> None:
    for name, snapshot_at in (("plain", None), ("snapshot", 5)):
        written = write_transactions(tmp_path / name, 12, snapshot_at)
        log = TransactionLog.open(tmp_path / name, fsync=NEVER)
        try:
            assert log.load().hard_state() == written.hard_state()
            assert len(list(log.records())) == (48 if snapshot_at is None else 5 + 7 * 4)
        finally:
            log.close()


@pytest.fixture
def server_for(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for srv in started:
        srv.kill()
        assert "Traceback" not in srv.log() and " ERROR " not in srv.log(), srv.log()


def test_damage_refuses_to_start_until_repaired(tmp_path: Path, server_for: list[ServerProcess]) -> None:
    data_dir = tmp_path / "data"
    written = write_transactions(data_dir / "transactions", 20)
    active = sorted((data_dir / "transactions").glob("*.log"))[-1]
    bad = units(active, "coordinator")[10]
    flip(active, bad.pos + 30)
    line = refused(data_dir)
    assert f"{active}: " in line and f"regroup repair --data-dir {data_dir}" in line
    report = regroup("repair", "--data-dir", str(data_dir))
    assert report.returncode == 1 and f"{active}: " in report.stdout
    assert regroup("repair", "--data-dir", str(data_dir), "--quarantine").returncode == 0
    log = TransactionLog.open(data_dir / "transactions", fsync=NEVER)
    try:
        rebuilt = log.load().hard_state()
    finally:
        log.close()
    assert rebuilt == written.hard_state()  # frame 10 was tx-2's PrepareCommit; its CompleteCommit follows
    srv = ServerProcess(data_dir, tmp_path / "server.log", ["--log-level", "warning"])
    server_for.append(srv)
    srv.start()
    with WireClient(srv.port) as client:
        states = client.call(65, 0, transactional_ids=["tx-2", "tx-19"]).transaction_states
    assert [(s.transactional_id, s.error_code, s.transaction_state) for s in states] == [
        ("tx-2", 0, "CompleteCommit"),
        ("tx-19", 0, "CompleteCommit"),
    ]
