"""A partition log's transactions: markers (bytes checked by kio's reader), open transactions, the last
stable offset, the aborted-transaction index, read_committed reads, producer-state rules around markers, and
all of it rebuilt the same after reopening — also from older segments, and after a torn tail."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch

from regroup.storage.batches import parse_header
from regroup.storage.markers import CONTROL, TRANSACTIONAL, marker_batch, read_marker
from regroup.storage.partition_log import AppendRejected, PartitionLog, Reject
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch

TXN = TRANSACTIONAL


def txn_batch(pid: int, seq: int, n: int = 1, epoch: int = 0) -> bytes:
    return make_batch([b"v"] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, attributes=TXN)


def plain(pid: int = -1, seq: int = -1, epoch: int = 0, n: int = 1) -> bytes:
    return make_batch([b"p"] * n, producer_id=pid, producer_epoch=epoch if pid >= 0 else -1, base_sequence=seq)


def open_log(path: Path, segment_bytes: int = 1 << 20) -> PartitionLog:
    return PartitionLog.open(path, fsync=FsyncPolicy.NEVER, segment_bytes=segment_bytes)


def test_marker_bytes_are_a_control_batch_kio_reads() -> None:
    data = marker_batch(42, 3, True, 7, 1_700_000_000_123)
    batch, size = read_batch(data, 0)
    assert size == len(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, -1)
    assert batch.attributes & 0x30 == 0x30  # control and transactional
    (record,) = batch.records
    assert record.key == b"\x00\x00\x00\x01" and record.value == b"\x00\x00\x00\x00\x00\x07"
    h = parse_header(data)
    assert h.attributes == CONTROL | TXN
    marker = read_marker(data, 0, h)
    assert marker is not None and (marker.committed, marker.coordinator_epoch) == (True, 7)
    abort = marker_batch(42, 3, False, 0, 0)
    assert read_marker(abort, 0, parse_header(abort)).committed is False  # type: ignore[union-attr]


def test_lso_follows_open_transactions_and_aborts_are_indexed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(plain())  # 0
    log.append(txn_batch(1, 0, 2))  # 1-2: producer 1 opens at 1
    log.append(plain())  # 3
    assert log.last_stable_offset == 1 and log.log_end_offset == 4
    log.append(txn_batch(2, 0))  # 4: producer 2 opens at 4
    log.append(txn_batch(1, 2))  # 5
    assert log.open_transactions().keys() == {1, 2}
    info = log.append_marker(1, 0, False, 0, 1)  # 6: producer 1 aborts
    assert info.base_offset == 6 and log.last_stable_offset == 4
    assert log.aborted_transactions(0, 100) == [(1, 1)]
    log.append_marker(2, 0, True, 0, 1)  # 7: producer 2 commits
    assert log.last_stable_offset == log.log_end_offset == 8
    assert log.aborted_transactions(0, 100) == [(1, 1)]  # commits are not indexed
    assert log.aborted_transactions(7, 100) == []  # the abort's marker is before 7
    assert log.aborted_transactions(0, 1) == []  # its data starts at 1
    log.append_marker(3, 0, False, 0, 1)  # a marker with nothing open: written, indexes nothing
    assert log.aborted_transactions(0, 100) == [(1, 1)] and log.log_end_offset == 9
    reopened = open_log(tmp_path / "p")
    assert reopened.last_stable_offset == 9 and reopened.aborted_transactions(0, 100) == [(1, 1)]


def test_read_committed_reads_stop_at_the_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(plain(n=2))  # 0-1
    log.append(txn_batch(1, 0, 3))  # 2-4
    log.append(plain())  # 5
    lso = log.last_stable_offset
    assert lso == 2
    assert len(log.read(0, 1 << 20, max_offset=lso)) == len(plain(n=2))
    assert log.read(2, 1 << 20, max_offset=lso) == b""
    assert log.read(5, 1 << 20, max_offset=lso) == b""
    assert len(log.read(0, 1 << 20)) > len(plain(n=2))  # read_uncommitted sees everything
    log.append_marker(1, 0, True, 0, 1)
    assert log.read(2, 1 << 20, max_offset=log.last_stable_offset) != b""


def test_a_producer_with_an_open_transaction_may_not_write_outside_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(txn_batch(1, 0))
    with pytest.raises(AppendRejected) as refused:
        log.append(plain(1, 1))
    assert refused.value.reason is Reject.INVALID_TXN_STATE and log.log_end_offset == 1
    log.append_marker(1, 0, True, 0, 1)
    log.append(plain(1, 1))  # after the marker: sequences continue


def test_transactional_batches_need_a_producer_id(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    with pytest.raises(AppendRejected) as refused:
        log.append(make_batch([b"x"], attributes=TXN))
    assert refused.value.reason is Reject.INVALID_RECORD


def test_a_marker_bumping_the_epoch_fences_the_old_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(txn_batch(1, 0, epoch=4))
    with pytest.raises(AppendRejected) as stale:
        log.append_marker(1, 3, False, 0, 1)
    assert stale.value.reason is Reject.INVALID_PRODUCER_EPOCH
    log.append_marker(1, 5, False, 0, 1)  # the coordinator's fencing abort
    with pytest.raises(AppendRejected) as fenced:
        log.append(txn_batch(1, 1, epoch=4))
    assert fenced.value.reason is Reject.INVALID_PRODUCER_EPOCH
    log.append(txn_batch(1, 0, epoch=6))  # the new session starts at sequence 0
    reopened = open_log(tmp_path / "p")
    with pytest.raises(AppendRejected):
        reopened.append(txn_batch(1, 1, epoch=4))
    assert reopened.open_transactions()[1].first_offset == 2


def test_state_is_rebuilt_from_older_segments_too(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", segment_bytes=200)
    log.append(txn_batch(1, 0))  # 0: opens in the first segment
    for _ in range(6):
        log.append(plain())
    log.append(txn_batch(2, 0))
    log.append_marker(2, 0, False, 0, 1)
    assert log.segment_count > 2
    lso, aborted = log.last_stable_offset, log.aborted_transactions(0, 100)
    reopened = open_log(tmp_path / "p", segment_bytes=200)
    assert (reopened.last_stable_offset, reopened.aborted_transactions(0, 100)) == (lso, aborted) == (0, [(2, 7)])


def test_a_torn_marker_is_cut_and_the_transaction_is_open_again(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    log.append(txn_batch(1, 0))
    log.append_marker(1, 0, True, 0, 1)
    log.close()
    segment = next((tmp_path / "p").glob("*.log"))
    segment.write_bytes(segment.read_bytes()[:-3])
    reopened = open_log(tmp_path / "p")
    assert (reopened.log_end_offset, reopened.last_stable_offset) == (1, 0)
    reopened.append_marker(1, 0, True, 0, 1)  # the coordinator writes it again
    assert reopened.last_stable_offset == 2


# a model of Kafka's rules: the aborted transactions a read_committed consumer must be told about are
# exactly those whose data overlaps the returned range
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("data", "plain", "commit", "abort")), st.integers(1, 3)), max_size=30))
def test_aborted_index_matches_a_model(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]) -> None:
    log = open_log(tmp_path_factory.mktemp("p") / "p", segment_bytes=300)
    seqs: dict[int, int] = {}
    open_: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []  # pid, first, marker offset
    for kind, pid in steps:
        if kind == "data":
            first = log.log_end_offset
            log.append(txn_batch(pid, seqs.get(pid, 0)))
            seqs[pid] = seqs.get(pid, 0) + 1
            open_.setdefault(pid, first)
        elif kind == "plain":
            if pid in open_:
                continue
            log.append(plain(pid, seqs.get(pid, 0)))
            seqs[pid] = seqs.get(pid, 0) + 1
        else:
            marker = log.log_end_offset
            log.append_marker(pid, 0, kind == "commit", 0, 1)
            first_offset = open_.pop(pid, None)
            if kind == "abort" and first_offset is not None:
                aborted.append((pid, first_offset, marker))
        assert log.last_stable_offset == min(open_.values(), default=log.log_end_offset)
    end = log.log_end_offset
    for start in range(end + 1):
        for upper in range(start, end + 2):
            want = [(p, f) for p, f, m in aborted if m >= start and f < upper]
            assert log.aborted_transactions(start, upper) == want
    reopened = open_log(log.directory, segment_bytes=300)
    assert reopened.aborted_transactions(0, end + 1) == [(p, f) for p, f, _ in aborted]
    assert reopened.last_stable_offset == log.last_stable_offset
