"""A batch framed before the log is held (``format.frame_body`` + ``frame_header``, ``crc_shift``): the same
frame ``encode_batch`` makes, written by ``RecordLog`` as it writes any batch (across a roll, taken back when the
write fails), and ``SnapshottedLog`` framing a large batch outside its lock."""

from __future__ import annotations

import os
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.protocol.offsets import OffsetCommitRequest, PartitionCommit
from regroup.storage import snapshotted_log
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.crc_shift import crc32_joined
from regroup.storage.format import encode_batch, frame_body, frame_header
from regroup.storage.record_log import FsyncPolicy, RecordLog


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=2048))
def test_the_joined_crc_is_the_crc_of_the_joined_bytes(first: bytes, second: bytes) -> None:
    assert crc32_joined(zlib.crc32(first), zlib.crc32(second), len(second)) == zlib.crc32(first + second)


def test_the_joined_crc_over_megabytes_and_odd_lengths() -> None:
    body = os.urandom(3 * 1024 * 1024 + 7)
    head = b"header!"
    assert crc32_joined(zlib.crc32(head), zlib.crc32(body), len(body)) == zlib.crc32(head + body)
    with pytest.raises(ValueError):
        crc32_joined(0, 0, -1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20), st.integers(0, 2**63))
def test_a_frame_made_ahead_is_the_frame_encode_batch_makes(payloads: list[bytes], base_offset: int) -> None:
    body = frame_body(payloads)
    assert frame_header(base_offset, body) + body.data == encode_batch(base_offset, payloads)


def test_a_frame_made_ahead_checks_what_encode_batch_checks() -> None:
    with pytest.raises(ValueError):
        frame_body([])
    with pytest.raises(ValueError):
        frame_header(2**64 - 1, frame_body([b"a", b"b"]))


def test_the_log_writes_a_body_made_ahead_as_it_writes_payloads_across_a_roll(tmp_path: Path) -> None:
    batches = [[os.urandom(300) for _ in range(n)] for n in (1, 5, 2, 7, 3)]
    plain = RecordLog.open(tmp_path / "plain", fsync=FsyncPolicy.NEVER, segment_bytes=2048)
    ahead = RecordLog.open(tmp_path / "ahead", fsync=FsyncPolicy.NEVER, segment_bytes=2048)
    for batch in batches:
        assert plain.write(batch) == ahead.write(frame_body(batch))
    assert ahead.segment_count == plain.segment_count > 1
    assert ahead.write_unless_full(frame_body([os.urandom(4096)])) is None  # (it would start a new segment)
    plain.close()
    ahead.close()
    names = sorted(p.name for p in (tmp_path / "plain").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "ahead").iterdir())
    for name in names:
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "ahead" / name).read_bytes()
    with RecordLog.open(tmp_path / "ahead", fsync=FsyncPolicy.NEVER) as reopened:
        assert [payload for _, payload in reopened.read()] == [p for batch in batches for p in batch]


def test_a_failed_write_of_a_body_made_ahead_is_taken_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = RecordLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    log.write([b"first"])
    size = log.size_bytes
    real_write = os.write
    writes = [0]

    def header_then_fail(fd: int, data: bytes | memoryview) -> int:
        writes[0] += 1
        if writes[0] == 1:
            return real_write(fd, data)  # (the header)
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", header_then_fail)
    with pytest.raises(OSError, match="No space"):
        log.write(frame_body([os.urandom(1000)]))
    monkeypatch.undo()
    assert log.size_bytes == size and log.next_offset == 1
    log.write(frame_body([b"second"]))
    log.close()
    with RecordLog.open(tmp_path, fsync=FsyncPolicy.NEVER) as reopened:
        assert [payload for _, payload in reopened.read()] == [b"first", b"second"]


def test_a_large_batch_is_framed_before_the_coordinator_log_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of ``FRAME_AHEAD_BYTES`` or more is framed outside the lock ``write_now`` tries (so a small write
    goes in while it is framed); a smaller one is framed in the write, as before. Both read back."""
    from regroup.coordinator.coordinator import GroupCoordinator

    monkeypatch.setattr(snapshotted_log, "FRAME_AHEAD_BYTES", 2000)
    coordinator = GroupCoordinator()
    parts = tuple(PartitionCommit(p, 10 + p, metadata="m" * 100) for p in range(40))
    large = coordinator.offset_commit(OffsetCommitRequest(group_id="g", topics=(("t", parts),)), 1, 0).records
    small = coordinator.offset_commit(OffsetCommitRequest(group_id="h", topics=(("t", parts[:2]),)), 2, 0).records
    log = CoordinatorLog.open(tmp_path / "log", fsync=FsyncPolicy.NEVER)
    framed: list[int] = []
    real_frame_body = snapshotted_log.frame_body
    written_beside: list[bool] = []

    def watched(payloads: Any) -> Any:
        framed.append(len(payloads))
        written_beside.append(log.write_now(small[:1]))  # (the lock is free while it frames)
        return real_frame_body(payloads)

    monkeypatch.setattr(snapshotted_log, "frame_body", watched)
    thread = threading.Thread(target=log.append, args=(large,))
    thread.start()
    thread.join(5)
    log.append(small[1:])
    assert framed == [len(large)] and written_beside == [True]
    log.close()
    reopened = CoordinatorLog.open(tmp_path / "log", fsync=FsyncPolicy.NEVER)
    assert [r.key for r in reopened.records()] == [r.key for r in [small[0], *large, small[1]]]
    reopened.close()
