"""Tests of the on-disk record log (``regroup.storage``): round trips across segment rolls, torn-tail
recovery at every cut point, corruption detection, snapshots and compaction, fsync policies, a model-based
property test, and a SIGKILL durability test with a child process."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.storage import CorruptLogError, FsyncPolicy, LogLockedError, RecordLog, StorageError
from regroup.storage import record_log as record_log_module
from regroup.storage.format import (
    FRAME_HEADER_SIZE,
    SNAPSHOT_HEADER_SIZE,
    FormatError,
    decode_frame,
    decode_snapshot,
    encode_batch,
    encode_snapshot,
    frame_size,
)
from regroup.storage.record_log import segment_name, snapshot_name

NEVER = FsyncPolicy.NEVER
SRC = Path(__file__).resolve().parents[3] / "src"


def payload(offset: int) -> bytes:
    """Deterministic payload of varying length for record ``offset`` (the kill -9 child uses the same)."""
    return hashlib.sha256(b"%d" % offset).digest()[: 1 + offset % 32] * (1 + offset % 3)


def append_range(log: RecordLog, count: int) -> int:
    """Append ``count`` records ``payload(next_offset ...)`` as one batch."""
    start = log.next_offset
    return log.append([payload(o) for o in range(start, start + count)])


def all_records(log: RecordLog) -> list[tuple[int, bytes]]:
    return list(log.read(log.first_offset))


def expected(start: int, end: int) -> list[tuple[int, bytes]]:
    return [(o, payload(o)) for o in range(start, end)]


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def frame_bounds(path: Path) -> list[tuple[int, int]]:
    """``(start, end)`` byte ranges of the frames of a (valid) segment file."""
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        end = decode_frame(data, pos).end
        out.append((pos, end))
        pos = end
    return out


def flip_bit(path: Path, position: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 1 << bit
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------------------------------------- format


def test_frame_round_trip_and_layout() -> None:
    frame = encode_batch(7, [b"a", b"", b"xyz"])
    assert len(frame) == frame_size([1, 0, 3]) == FRAME_HEADER_SIZE + 3 * 4 + 4
    assert frame[:4] == b"RGB1"
    decoded = decode_frame(b"junk" + frame, 4)
    assert (decoded.base_offset, decoded.payloads, decoded.end, decoded.next_offset) == (
        7,
        (b"a", b"", b"xyz"),
        4 + len(frame),
        10,
    )
    with pytest.raises(ValueError):
        encode_batch(0, [])


def test_snapshot_codec_rejects_damage() -> None:
    data = encode_snapshot(41, b"state")
    assert len(data) == SNAPSHOT_HEADER_SIZE + 5
    assert decode_snapshot(data, 41) == b"state"
    with pytest.raises(FormatError, match="file name"):
        decode_snapshot(data, 42)
    with pytest.raises(FormatError):
        decode_snapshot(data[:-1], 41)
    with pytest.raises(FormatError):
        decode_snapshot(data + b"\0", 41)
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x10
        with pytest.raises(FormatError):
            decode_snapshot(bytes(damaged), 41)


# ---------------------------------------------------------------------------------------------- basics


def test_empty_log(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path / "log", fsync=NEVER) as log:
        assert (log.next_offset, log.first_offset, log.segment_count) == (0, 0, 1)
        assert list(log.read()) == []
        offset, state, records = log.load()
        assert (offset, state, list(records)) == (None, None, [])
        assert log.append([]) == -1
    assert [p.name for p in segment_files(tmp_path / "log")] == [segment_name(0)]


def test_append_read_round_trip_across_segment_rolls(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=300) as log:
        for i in range(60):
            last = append_range(log, 1 + i % 4)
            assert last == log.next_offset - 1
        total = log.next_offset
        assert total == sum(1 + i % 4 for i in range(60))
        assert log.segment_count == len(segment_files(tmp_path)) > 5
        assert list(log.read()) == expected(0, total)
        assert list(log.read(total - 3)) == expected(total - 3, total)
        assert list(log.read(total)) == []
        for start in range(0, total, 7):
            assert next(iter(log.read(start))) == (start, payload(start))
        with pytest.raises(ValueError):
            log.read(total + 1)
    # Segments are named by their first offset and never exceed segment_bytes (no batch here is bigger).
    for path in segment_files(tmp_path):
        assert path.stat().st_size <= 300
        assert decode_frame(path.read_bytes(), 0).base_offset == int(path.stem)
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=300) as log:
        assert log.next_offset == total
        assert list(log.read()) == expected(0, total)
        assert log.truncated_bytes == 0
        assert append_range(log, 2) == total + 1
        assert list(log.read(total)) == expected(total, total + 2)


def test_append_returns_offset_of_last_record_and_validates_input(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        assert log.append([b"a"]) == 0
        assert log.append([b"b", b"c", b"d"]) == 3
        assert log.append([]) == 3
        assert log.append([b"e", b"f"]) == 5
        with pytest.raises(TypeError):
            log.append(b"not a batch")  # type: ignore[arg-type]
        assert [p for _, p in log.read()] == [b"a", b"b", b"c", b"d", b"e", b"f"]


@pytest.mark.parametrize("policy", list(FsyncPolicy))
def test_write_unless_full_writes_what_fits_and_nothing_that_would_roll(
    tmp_path: Path, policy: FsyncPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``write_unless_full`` writes a batch the active segment has room for, without an fsync, and declines
    (None, nothing written, no new file, no fsync) one that would start a new segment, which ``write`` then
    rolls to."""
    fsyncs: list[int] = []
    monkeypatch.setattr(record_log_module, "_fsync_file", lambda fd: fsyncs.append(fd))
    with RecordLog.open(tmp_path, fsync=policy, segment_bytes=300) as log:
        written = 0
        while True:
            batch = [payload(written + i) for i in range(2)]
            last = log.write_unless_full(batch)
            if last is None:
                break
            written += 2
            assert last == written - 1 == log.next_offset - 1
        assert written > 0 and fsyncs == []
        assert log.next_offset == written and log.segment_count == 1
        size = segment_files(tmp_path)[0].stat().st_size
        assert size + frame_size([len(p) for p in batch]) > 300
        assert log.write_unless_full([]) == written - 1
        assert log.write(batch) == written + 1 and log.segment_count == 2
        assert list(log.read()) == expected(0, written + 2)


def test_batch_bigger_than_a_segment_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=100) as log:
        log.append([b"x" * 10])
        log.append([b"y" * 500])
        log.append([b"z" * 10])
        assert log.segment_count == 3
        assert [p for _, p in log.read()] == [b"x" * 10, b"y" * 500, b"z" * 10]
        assert [p.name for p in segment_files(tmp_path)] == [segment_name(0), segment_name(1), segment_name(2)]


def test_directory_is_locked_while_open(tmp_path: Path) -> None:
    log = RecordLog.open(tmp_path, fsync=NEVER)
    with pytest.raises(LogLockedError):
        RecordLog.open(tmp_path, fsync=NEVER)
    log.close()
    log.close()  # idempotent
    assert log.closed
    with pytest.raises(StorageError, match="closed"):
        log.append([b"x"])
    RecordLog.open(tmp_path, fsync=NEVER).close()


# ---------------------------------------------------------------------------------------------- torn tails


def build_log(directory: Path, batches: list[int], segment_bytes: int = 1 << 20) -> int:
    """Append batches of the given sizes with ``payload``; return where the last batch's frame starts in the
    active segment."""
    with RecordLog.open(directory, fsync=NEVER, segment_bytes=segment_bytes) as log:
        for count in batches:
            append_range(log, count)
        last = range(log.next_offset - batches[-1], log.next_offset)
    return segment_files(directory)[-1].stat().st_size - frame_size([len(payload(o)) for o in last])


@pytest.mark.parametrize("last_batch", [1, 4])
def test_every_cut_point_in_the_last_frame_recovers_the_records_before_it(tmp_path: Path, last_batch: int) -> None:
    batches = [1, 3, 2, last_batch]
    before = build_log(tmp_path, batches, segment_bytes=120)
    active = segment_files(tmp_path)[-1]
    full = active.read_bytes()
    survivors = sum(batches[:-1])
    assert len(full) > before
    for cut in range(before, len(full)):
        active.write_bytes(full[:cut])
        with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=120) as log:
            assert log.next_offset == survivors, cut
            assert log.truncated_bytes == cut - before
            assert active.stat().st_size == before
            assert all_records(log) == expected(log.first_offset, survivors)
            assert list(log.read()) == expected(0, survivors)
            assert append_range(log, 2) == survivors + 1
        with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=120) as log:
            assert list(log.read()) == expected(0, survivors + 2)
        active.write_bytes(full)


@pytest.mark.parametrize(
    "garbage",
    [b"\0", b"\0" * 100, b"RGB1", b"RGB1" + b"\xff" * 40, os.urandom(3), os.urandom(1000)],
    ids=["zero", "zeros", "magic", "magic-junk", "random-short", "random-long"],
)
def test_garbage_after_the_last_frame_is_truncated(tmp_path: Path, garbage: bytes) -> None:
    build_log(tmp_path, [2, 1, 3])
    active = segment_files(tmp_path)[-1]
    size = active.stat().st_size
    active.write_bytes(active.read_bytes() + garbage)
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        assert (log.next_offset, log.truncated_bytes) == (6, len(garbage))
        assert active.stat().st_size == size
        assert list(log.read()) == expected(0, 6)


def test_stale_or_out_of_sequence_frames_at_the_tail_are_truncated(tmp_path: Path) -> None:
    build_log(tmp_path, [2, 1])
    active = segment_files(tmp_path)[-1]
    good = active.read_bytes()
    for frame in (encode_batch(0, [b"replayed"]), encode_batch(2, [b"duplicate"]), encode_batch(9, [b"gap"])):
        active.write_bytes(good + frame)
        with RecordLog.open(tmp_path, fsync=NEVER) as log:
            assert (log.next_offset, log.truncated_bytes) == (3, len(frame))
        assert active.read_bytes() == good


def test_a_flipped_bit_anywhere_in_the_last_frame_is_detected_and_truncated(tmp_path: Path) -> None:
    before = build_log(tmp_path, [2, 3, 2])
    active = segment_files(tmp_path)[-1]
    full = active.read_bytes()
    for position in range(before, len(full)):
        for bit in (0, 7):
            flip_bit(active, position, bit)
            with RecordLog.open(tmp_path, fsync=NEVER) as log:
                assert log.next_offset == 5, (position, bit)
                assert list(log.read()) == expected(0, 5)
            active.write_bytes(full)


def test_damage_followed_by_intact_frames_in_the_active_segment_is_an_error(tmp_path: Path) -> None:
    build_log(tmp_path, [2, 3, 2, 1])
    active = segment_files(tmp_path)[-1]
    bounds = frame_bounds(active)
    full = active.read_bytes()
    for position in (bounds[1][0] + 12, bounds[1][1] - 1):  # the second frame's offset field; its last byte
        flip_bit(active, position)
        # names the file, the byte and what is intact after the damage, and changes nothing
        message = f"{active}: .* at byte {bounds[1][0]} \\(offset 2\\), yet 2 intact frames \\(offsets 5..7"
        with pytest.raises(CorruptLogError, match=message):
            RecordLog.open(tmp_path, fsync=NEVER)
        assert active.read_bytes()[: bounds[1][0]] == full[: bounds[1][0]]  # nothing was truncated
        assert len(active.read_bytes()) == len(full)
        active.write_bytes(full)
    # A damaged length field hides where the next frame starts; the intact frames behind it are still found.
    flip_bit(active, bounds[0][0] + 6)
    with pytest.raises(CorruptLogError, match="3 intact frames"):
        RecordLog.open(tmp_path, fsync=NEVER)


def test_unknown_files_refuse_the_open(tmp_path: Path) -> None:
    build_log(tmp_path, [2, 3], segment_bytes=60)
    active = segment_files(tmp_path)[-1]
    for name in (active.name[1:], "notes.txt", active.name + ".orig"):  # a name cut short; strays
        stray = tmp_path / name
        if name == active.name[1:]:
            active.rename(stray)  # the active segment's records would silently drop out, their offsets reused
        else:
            stray.write_bytes(b"x")
        with pytest.raises(CorruptLogError, match=f"unexpected file.*{name}"):
            RecordLog.open(tmp_path, fsync=NEVER)
        if name == active.name[1:]:
            stray.rename(active)
        else:
            stray.unlink()
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        assert log.next_offset == 5


def test_gap_markers_are_passed_over(tmp_path: Path) -> None:
    """A repair's gap marker stands for lost offsets: reads skip them, the segment before must end at it."""
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        append_range(log, 3)
    (tmp_path / "00000000000000000003.gap").write_text("offsets 3..9 lost\n")
    (tmp_path / segment_name(10)).write_bytes(encode_batch(10, [payload(10), payload(11)]))
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        assert (log.next_offset, log.segment_count) == (12, 2)
        assert list(log.read()) == expected(0, 3) + expected(10, 12)
        assert list(log.read(5)) == expected(10, 12)
        assert append_range(log, 1) == 12
    (tmp_path / segment_name(10)).unlink()
    with pytest.raises(CorruptLogError, match="the last file is the gap marker"):
        RecordLog.open(tmp_path, fsync=NEVER)


# ---------------------------------------------------------------------------------------------- older segments


@pytest.fixture
def three_segments(tmp_path: Path) -> Path:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=150) as log:
        for _ in range(12):
            append_range(log, 2)
        assert log.segment_count >= 3
    return tmp_path


def assert_read_is_corrupt(directory: Path, match: str) -> None:
    with RecordLog.open(directory, fsync=NEVER, segment_bytes=150) as log:
        with pytest.raises(CorruptLogError, match=match):
            list(log.read())
        _, _, records = log.load()
        with pytest.raises(CorruptLogError):
            list(records)


def test_corruption_in_an_earlier_segment_raises(three_segments: Path) -> None:
    first = segment_files(three_segments)[0]
    flip_bit(first, frame_bounds(first)[1][1] - 2)
    assert_read_is_corrupt(three_segments, "checksum")


def test_truncated_earlier_segment_raises(three_segments: Path) -> None:
    first = segment_files(three_segments)[0]
    first.write_bytes(first.read_bytes()[:-5])
    assert_read_is_corrupt(three_segments, "past the end")


def test_earlier_segment_losing_a_whole_frame_raises(three_segments: Path) -> None:
    first = segment_files(three_segments)[0]
    first.write_bytes(first.read_bytes()[: frame_bounds(first)[-1][0]])
    assert_read_is_corrupt(three_segments, "next segment starts")


def test_missing_middle_segment_raises(three_segments: Path) -> None:
    segment_files(three_segments)[1].unlink()
    assert_read_is_corrupt(three_segments, "next segment starts")


def test_trailing_bytes_in_an_earlier_segment_raise(three_segments: Path) -> None:
    first = segment_files(three_segments)[0]
    first.write_bytes(first.read_bytes() + b"\0\0")
    assert_read_is_corrupt(three_segments, "next segment starts")


# ---------------------------------------------------------------------------------------------- snapshots


def test_snapshot_then_reopen_loads_it_and_only_the_later_records(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=150) as log:
        for _ in range(10):
            append_range(log, 2)
        log.snapshot(13, b"state@13")
        for _ in range(3):
            append_range(log, 2)
        assert log.snapshot_offsets == (13,)
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=150) as log:
        offset, state, records = log.load()
        assert (offset, state, list(records)) == (13, b"state@13", expected(14, 26))
        # Only one snapshot so far: everything is kept, so a damaged snapshot could still fall back to replay.
        assert log.first_offset == 0


def test_second_snapshot_compacts_the_segments_the_first_covers(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=150) as log:
        for _ in range(10):
            append_range(log, 2)
        segments_before = log.segment_count
        log.snapshot(13, b"state@13")
        for _ in range(10):
            append_range(log, 2)
        size_before = log.size_bytes
        log.snapshot(33, b"state@33")
        assert log.size_bytes < size_before
        for _ in range(2):
            append_range(log, 2)
        # Segments wholly at or below offset 13 are gone, the one holding 14 stays.
        bases = [int(p.stem) for p in segment_files(tmp_path)]
        assert bases[0] <= 14 and all(b > 14 for b in bases[1:])
        assert log.first_offset == bases[0] > 0
        assert log.segment_count == len(bases) and segments_before > 1
        on_disk = [p for p in tmp_path.iterdir() if p.name != "LOCK"]
        assert log.size_bytes == sum(p.stat().st_size for p in on_disk)
        assert all_records(log) == expected(bases[0], 44)
        with pytest.raises(ValueError, match="readable range"):
            log.read(0)
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=150) as log:
        assert (log.next_offset, log.first_offset) == (44, bases[0])
        offset, state, records = log.load()
        assert (offset, state, list(records)) == (33, b"state@33", expected(34, 44))


def test_only_the_two_newest_snapshots_are_kept(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=100) as log:
        for s in range(5):
            append_range(log, 3)
            log.snapshot(log.next_offset - 1, b"s%d" % s)
        assert log.snapshot_offsets == (11, 14)
        assert sorted(p.name for p in tmp_path.glob("snapshot-*")) == [snapshot_name(11), snapshot_name(14)]
        log.snapshot(14, b"again")  # same offset: replaced atomically
        assert log.snapshot_offsets == (11, 14)
        assert log.load()[:2] == (14, b"again")


def test_corrupt_newest_snapshot_falls_back_to_the_previous_one(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=100) as log:
        for s in range(4):
            append_range(log, 4)
            log.snapshot(log.next_offset - 2, b"state%d" % s)
        append_range(log, 1)
        assert log.snapshot_offsets == (10, 14)
    flip_bit(tmp_path / snapshot_name(14), SNAPSHOT_HEADER_SIZE + 1)
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=100) as log:
        offset, state, records = log.load()
        assert (offset, state, list(records)) == (10, b"state2", expected(11, 17))
    # Both damaged, and records before the older one were compacted: there is no valid starting point.
    (tmp_path / snapshot_name(10)).write_bytes(b"")
    with (
        RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=100) as log,
        pytest.raises(CorruptLogError, match="no intact"),
    ):
        log.load()


def test_corrupt_only_snapshot_falls_back_to_full_replay(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        append_range(log, 5)
        log.snapshot(3, b"state")
    snapshot = tmp_path / snapshot_name(3)
    snapshot.write_bytes(snapshot.read_bytes()[:-1])
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        offset, state, records = log.load()
        assert (offset, state, list(records)) == (None, None, expected(0, 5))


def test_snapshot_arguments_are_checked(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        with pytest.raises(ValueError):
            log.snapshot(0, b"nothing appended yet")
        append_range(log, 5)
        with pytest.raises(ValueError):
            log.snapshot(5, b"beyond the end")
        log.snapshot(3, b"ok")
        with pytest.raises(ValueError, match="older"):
            log.snapshot(2, b"older")


def test_leftover_snapshot_tmp_file_is_removed(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        append_range(log, 3)
    leftover = tmp_path / (snapshot_name(2) + ".tmp")
    leftover.write_bytes(encode_snapshot(2, b"half")[:10])
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        assert not leftover.exists()
        assert log.snapshot_offsets == ()
        assert log.load()[:2] == (None, None)


def test_snapshot_ahead_of_the_log_is_an_error(tmp_path: Path) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        append_range(log, 5)
        log.snapshot(4, b"state")
    active = segment_files(tmp_path)[-1]
    active.write_bytes(active.read_bytes()[:-1])  # the records the snapshot covers are (partly) gone
    with pytest.raises(CorruptLogError, match="ahead of the log"):
        RecordLog.open(tmp_path, fsync=NEVER)


# ---------------------------------------------------------------------------------------------- fsync policies


@pytest.fixture
def fsync_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = record_log_module._fsync_file

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(record_log_module, "_fsync_file", counting)
    return calls


def test_always_fsyncs_every_batch(tmp_path: Path, fsync_calls: list[int]) -> None:
    with RecordLog.open(tmp_path, fsync=FsyncPolicy.ALWAYS) as log:
        for _ in range(3):
            append_range(log, 2)
        log.append([])
        assert len(fsync_calls) == 3
    assert len(fsync_calls) == 3  # nothing pending at close


def test_interval_fsyncs_when_the_interval_has_passed(tmp_path: Path, fsync_calls: list[int]) -> None:
    now = [0.0]
    log = RecordLog.open(tmp_path, fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=50, clock=lambda: now[0])
    append_range(log, 1)
    now[0] = 0.049
    append_range(log, 1)
    assert fsync_calls == []
    now[0] = 0.050
    append_range(log, 1)
    assert len(fsync_calls) == 1
    append_range(log, 1)
    log.sync()
    log.sync()  # nothing new: no second fsync
    assert len(fsync_calls) == 2
    append_range(log, 1)
    log.close()
    assert len(fsync_calls) == 3


def test_never_does_not_fsync(tmp_path: Path, fsync_calls: list[int]) -> None:
    with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=64) as log:
        for _ in range(5):
            append_range(log, 3)
        log.snapshot(4, b"s")
    assert fsync_calls == []


def test_snapshot_fsyncs_pending_records_first(tmp_path: Path, fsync_calls: list[int]) -> None:
    with RecordLog.open(tmp_path, fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=10_000) as log:
        append_range(log, 3)
        assert fsync_calls == []
        log.snapshot(2, b"s")
        assert len(fsync_calls) == 2  # the active segment, then the snapshot file


# ---------------------------------------------------------------------------------------------- I/O failures


def test_failed_write_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = RecordLog.open(tmp_path, fsync=NEVER)
    append_range(log, 2)
    size = segment_files(tmp_path)[-1].stat().st_size
    real_write = os.write

    def half_then_fail(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError, match="No space"):
        append_range(log, 3)
    monkeypatch.undo()
    assert segment_files(tmp_path)[-1].stat().st_size == size
    assert log.next_offset == 2
    assert append_range(log, 1) == 2
    log.close()
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        assert list(log.read()) == expected(0, 3)


def test_failed_fsync_makes_the_log_refuse_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = RecordLog.open(tmp_path, fsync=FsyncPolicy.ALWAYS)

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(record_log_module, "_fsync_file", failing)
    with pytest.raises(OSError):
        append_range(log, 1)
    monkeypatch.undo()
    with pytest.raises(StorageError, match="refuses writes"):
        append_range(log, 1)
    log.close()
    with RecordLog.open(tmp_path, fsync=NEVER) as log:
        assert log.next_offset in (0, 1)


# ---------------------------------------------------------------------------------------------- model-based


@dataclass
class ModelSegment:
    base: int
    size: int = 0
    frames: list[tuple[int, int, int]] = field(default_factory=list)  # (first offset, end offset, end byte)


@dataclass
class Model:
    """What the log should hold, including which segments exist (mirrors the documented roll/compaction)."""

    segment_bytes: int
    records: list[bytes] = field(default_factory=list)
    segments: list[ModelSegment] = field(default_factory=lambda: [ModelSegment(0)])
    snapshots: list[tuple[int, bytes]] = field(default_factory=list)

    def append(self, payloads: list[bytes]) -> None:
        if not payloads:
            return
        size = frame_size([len(p) for p in payloads])
        active = self.segments[-1]
        if active.size > 0 and active.size + size > self.segment_bytes:
            active = ModelSegment(len(self.records))
            self.segments.append(active)
        active.size += size
        active.frames.append((len(self.records), len(self.records) + len(payloads), active.size))
        self.records.extend(payloads)

    def snapshot(self, offset: int, state: bytes) -> None:
        if self.snapshots and self.snapshots[-1][0] == offset:
            self.snapshots.pop()
        self.snapshots = [*self.snapshots, (offset, state)][-2:]
        if len(self.snapshots) == 2:
            covered = self.snapshots[0][0]
            while len(self.segments) > 1 and self.segments[1].base <= covered + 1:
                self.segments.pop(0)

    def lowest_cut(self) -> int:
        """Truncating the active segment below this byte would remove records the newest snapshot covers."""
        if not self.snapshots:
            return 0
        newest = self.snapshots[-1][0]
        return max([end_byte for first, _, end_byte in self.segments[-1].frames if first <= newest], default=0)

    def cut(self, position: int) -> int:
        """Truncate the active segment at byte ``position``; return the bytes recovery should discard."""
        active = self.segments[-1]
        kept = [f for f in active.frames if f[2] <= position]
        active.frames = kept
        new_size = kept[-1][2] if kept else 0
        del self.records[kept[-1][1] if kept else active.base :]
        discarded = position - new_size
        active.size = new_size
        return discarded


def check(log: RecordLog, model: Model) -> None:
    first = model.segments[0].base
    assert (log.next_offset, log.first_offset, log.segment_count) == (len(model.records), first, len(model.segments))
    assert list(log.read(first)) == list(enumerate(model.records))[first:]
    offset, state, records = log.load()
    if model.snapshots:
        newest, newest_state = model.snapshots[-1]
        assert (offset, state) == (newest, newest_state)
        assert list(records) == list(enumerate(model.records))[newest + 1 :]
    else:
        assert (offset, state, list(records)) == (None, None, list(enumerate(model.records)))
    assert log.snapshot_offsets == tuple(s for s, _ in model.snapshots)


@settings(max_examples=60, deadline=None)
@given(segment_bytes=st.sampled_from([48, 100, 250]), data=st.data())
def test_random_operations_match_an_in_memory_model(segment_bytes: int, data: st.DataObject) -> None:
    payloads = st.lists(st.binary(max_size=40), max_size=4)
    ops = st.sampled_from(["append", "append", "append", "snapshot", "reopen", "truncate", "garbage"])
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        model = Model(segment_bytes)
        log = RecordLog.open(directory, fsync=NEVER, segment_bytes=segment_bytes)
        try:
            for _ in range(data.draw(st.integers(1, 25), label="steps")):
                op = data.draw(ops, label="op")
                if op == "append":
                    batch = data.draw(payloads, label="batch")
                    assert log.append(batch) == len(model.records) + len(batch) - 1
                    model.append(batch)
                elif op == "snapshot" and model.records:
                    low = model.snapshots[-1][0] if model.snapshots else 0
                    offset = data.draw(st.integers(low, len(model.records) - 1), label="snapshot offset")
                    state = data.draw(st.binary(max_size=30), label="state")
                    log.snapshot(offset, state)
                    model.snapshot(offset, state)
                elif op in ("reopen", "truncate", "garbage"):
                    log.close()
                    active = directory / segment_name(model.segments[-1].base)
                    size = active.stat().st_size
                    assert size == model.segments[-1].size
                    discarded = 0
                    if op == "truncate" and size > model.lowest_cut():
                        position = data.draw(st.integers(model.lowest_cut(), size - 1), label="cut")
                        os.truncate(active, position)
                        discarded = model.cut(position)
                    elif op == "garbage":
                        junk = data.draw(st.binary(min_size=1, max_size=30), label="garbage")
                        with open(active, "ab") as f:
                            f.write(junk)
                        discarded = len(junk)
                    log = RecordLog.open(directory, fsync=NEVER, segment_bytes=segment_bytes)
                    assert log.truncated_bytes == discarded
                check(log, model)
            log.close()
            log = RecordLog.open(directory, fsync=NEVER, segment_bytes=segment_bytes)
            check(log, model)
        finally:
            log.close()


# ---------------------------------------------------------------------------------------------- kill -9

CHILD = r"""
import hashlib, sys
from regroup.storage import FsyncPolicy, RecordLog

def payload(offset):  # same as payload() in the test module
    return hashlib.sha256(b"%d" % offset).digest()[: 1 + offset % 32] * (1 + offset % 3)

log = RecordLog.open(sys.argv[1], fsync=FsyncPolicy.ALWAYS, segment_bytes=2048)
print("ready", log.next_offset, flush=True)
while True:
    start = log.next_offset
    count = 1 + start % 4
    last = log.append([payload(o) for o in range(start, start + count)])
    print(last, flush=True)
"""


def run_and_kill(directory: Path, kill_after: int, deadline: float) -> tuple[int, int]:
    """Run the appending child until it acknowledged ``kill_after`` batches (or the deadline), SIGKILL it, and
    return ``(offset it started at, last acknowledged offset)``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    try:
        ready = child.stdout.readline().split()
        assert ready[:1] == [b"ready"], child.stderr.read() if child.stderr else b""
        acknowledged: list[int] = []
        while len(acknowledged) < kill_after and time.monotonic() < deadline:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else b""
            acknowledged.append(int(line))
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate(timeout=5)
    # Lines printed before the kill are acknowledgements too; a line cut short by the kill is not.
    acknowledged += [int(line) for line in rest.split(b"\n")[:-1]]
    assert child.returncode == -signal.SIGKILL
    return int(ready[1]), acknowledged[-1] if acknowledged else int(ready[1]) - 1


@pytest.mark.timeout(30)
def test_no_acknowledged_record_is_lost_to_sigkill(tmp_path: Path) -> None:
    deadline = time.monotonic() + 4.0
    next_offset = 0
    for kill_after in (40, 90, 25):
        start, last_acknowledged = run_and_kill(tmp_path, kill_after, deadline)
        assert start == next_offset
        with RecordLog.open(tmp_path, fsync=NEVER, segment_bytes=2048) as log:
            assert log.next_offset > last_acknowledged
            # Every record is present and intact, with no gaps (a torn final batch would have been cut away).
            assert list(log.read()) == expected(0, log.next_offset)
            next_offset = log.next_offset
    assert next_offset >= 10
