"""The partition log on open and between uses: no file descriptor held per partition (a shared, bounded handle
cache), nothing created before the first append, and recovery that tells a torn tail (cut) from damage
(refused, naming the file, the byte and what is intact after it) — in the active segment and older ones."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

import regroup.storage.partition_log as partition_log
from regroup.storage.batches import parse_header
from regroup.storage.format import CorruptLogError
from regroup.storage.handles import HandleCache
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch
from tests.unit.storage.test_partition_log import decode, open_log

FIRST = "00000000000000000000.log"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def batch_starts(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        pos += parse_header(data, pos).size
    return out


def fill(path: Path, batches: int, **kwargs: object) -> PartitionLog:
    """A log of ``batches`` batches of 3 records each: values ``b"<batch>-<record>"``."""
    log = open_log(path, **kwargs)
    for i in range(batches):
        log.append(make_batch([f"{i}-{k}".encode() for k in range(3)]))
    return log


def flip(path: Path, position: int) -> bytes:
    original = path.read_bytes()
    data = bytearray(original)
    data[position] ^= 0x40
    path.write_bytes(bytes(data))
    return original


# ---------------------------------------------------------------------- descriptors


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_many_partitions_share_a_bounded_number_of_descriptors(tmp_path: Path) -> None:
    handles = HandleCache(3)
    before = open_fds()
    logs = [open_log(tmp_path / str(p), handles=handles) for p in range(40)]
    assert open_fds() == before  # opening holds nothing
    for round_ in range(3):
        for p, log in enumerate(logs):
            log.append(make_batch([f"{p}.{round_}".encode()]))
            assert open_fds() <= before + 3
    assert decode(logs[7].read(0, 1 << 20)) == [(0, b"7.0"), (1, b"7.1"), (2, b"7.2")]  # reopens to read
    for log in logs:
        log.close()
    assert open_fds() == before and len(handles) == 0
    again = [open_log(tmp_path / str(p), handles=handles) for p in range(40)]
    assert [log.log_end_offset for log in again] == [3] * 40
    assert open_fds() == before


def test_a_partition_never_written_has_no_files(tmp_path: Path) -> None:
    path = tmp_path / "topic" / "0"
    log = open_log(path, fsync=FsyncPolicy.ALWAYS)
    assert not path.exists() and log.log_end_offset == 0 and log.read(0, 100) == b""
    assert log.offset_for_timestamp(0) is None and log.max_timestamp() is None
    log.sync()
    log.close()
    log = open_log(path, fsync=FsyncPolicy.ALWAYS)
    assert log.append(make_batch([b"first"])).base_offset == 0
    assert sorted(os.listdir(path)) == [FIRST]
    log.close()
    assert open_log(path).log_end_offset == 1


def test_an_evicted_handle_with_unsynced_appends_is_fsynced_by_the_next_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(partition_log, "_fsync_file", lambda fd: synced.append(fd))
    handles = HandleCache(1)
    kwargs = {"fsync": FsyncPolicy.INTERVAL, "fsync_interval_ms": 10_000, "clock": lambda: 0.0, "handles": handles}
    a, b = open_log(tmp_path / "a", **kwargs), open_log(tmp_path / "b", **kwargs)
    a.append(make_batch([b"x"]))
    assert synced == []  # the interval has not passed
    b.append(make_batch([b"y"]))  # takes a's place in the cache: a keeps a duplicate, fsyncs nothing here
    assert synced == []
    a.sync()  # through the kept duplicate alone, not reopening a (b keeps its place in the cache)
    assert len(synced) == 1
    a.sync()  # nothing left to sync for a
    assert len(synced) == 1
    b.close()  # b's own unsynced append
    assert len(synced) == 2


# ---------------------------------------------------------------------- the active segment


@pytest.mark.parametrize("field", ["payload", "length", "base-offset"])
def test_damage_mid_log_refuses_naming_file_byte_and_what_follows(tmp_path: Path, field: str) -> None:
    """One flipped byte in batch 10 of 60 (the case that used to drop 147 acknowledged records)."""
    fill(tmp_path, 60).close()
    path = tmp_path / FIRST
    start = batch_starts(path.read_bytes())[10]
    position = {"payload": start + 70, "length": start + 9, "base-offset": start + 6}[field]
    original = flip(path, position)
    message = (
        re.escape(f"{path}: ")
        + r".* at byte "
        + str(start)
        + re.escape(" (offset 30), yet 49 intact batches (offsets 33..179")
    )
    with pytest.raises(CorruptLogError, match=message):
        open_log(tmp_path)
    damaged = path.read_bytes()
    assert len(damaged) == len(original) and damaged != original  # nothing was cut


def test_a_torn_tail_is_still_cut_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fill(tmp_path, 5).close()
    path = tmp_path / FIRST
    good = path.read_bytes()
    path.write_bytes(good + make_batch([b"torn"])[:-7])
    log = open_log(tmp_path)
    assert log.log_end_offset == 15 and log.truncated_bytes == len(make_batch([b"torn"])) - 7
    assert path.read_bytes() == good
    assert "truncating" in caplog.text and "torn tail" in caplog.text


# ---------------------------------------------------------------------- older segments and strays


@pytest.fixture
def segments(tmp_path: Path) -> list[Path]:
    fill(tmp_path, 30, segment_bytes=600).close()
    files = sorted(tmp_path.glob("*.log"))
    assert len(files) >= 4
    return files


def test_a_damaged_older_segment_refuses_to_open(segments: list[Path]) -> None:
    older = segments[1]
    starts = batch_starts(older.read_bytes())
    flip(older, starts[1] + 70)  # a byte of record data: only the CRC tells
    with pytest.raises(CorruptLogError, match=re.escape(f"{older}: CRC-32C mismatch at byte {starts[1]}")):
        open_log(older.parent)


def test_damage_to_an_older_segment_while_running_fails_the_read(segments: list[Path]) -> None:
    log = open_log(segments[0].parent)
    starts = batch_starts(segments[0].read_bytes())
    flip(segments[0], starts[2] + 70)
    with pytest.raises(CorruptLogError, match=re.escape(f"{segments[0]}: CRC-32C mismatch at byte {starts[2]}")):
        log.read(6, 1 << 20)
    assert decode(log.read(0, 1))[0][0] == 0  # the batches before it still read


@pytest.mark.parametrize("damage", ["cut-short", "trailing-bytes", "missing-middle", "overlap"])
def test_older_segments_must_end_where_the_next_file_begins(segments: list[Path], damage: str) -> None:
    older = segments[1]
    data = older.read_bytes()
    if damage == "cut-short":
        older.write_bytes(data[: batch_starts(data)[-1]])  # loses its last whole batch
        match = "are missing"
    elif damage == "trailing-bytes":
        older.write_bytes(data + b"\0" * 10)
        match = "of an older segment; nothing intact follows"
    elif damage == "missing-middle":
        older.unlink()
        match = f"{segments[0]}: the segment ends at offset .* are missing"
    else:
        older.write_bytes(data + segments[2].read_bytes()[: batch_starts(segments[2].read_bytes())[1]])
        match = "overlap"
    with pytest.raises(CorruptLogError, match=match):
        open_log(older.parent)


@pytest.mark.parametrize("name", ["short", "notes.txt", "garbled"])
def test_unknown_files_refuse_to_open(segments: list[Path], name: str) -> None:
    directory = segments[0].parent
    if name == "short":  # a segment's name cut short: its data would silently drop out
        segments[-1].rename(directory / segments[-1].name[1:])
        name = segments[-1].name[1:]
    elif name == "garbled":
        segments[1].rename(directory / "0000000000000000x012.log")
        name = "0000000000000000x012.log"
    else:
        (directory / name).write_text("hello")
    with pytest.raises(CorruptLogError, match=f"unexpected file.*{re.escape(name)}"):
        open_log(directory)


def test_gap_markers_are_read_past(tmp_path: Path) -> None:
    """A repair's gap marker stands for lost offsets: reads pass over them; without it they are missing."""
    fill(tmp_path, 4).close()  # offsets 0..11
    (tmp_path / "00000000000000000012.gap").write_text("offsets 12..19 lost\n")
    batch = bytearray(make_batch([b"twenty", b"twenty-one"]))
    struct.pack_into(">qii", batch, 0, 20, len(batch) - 12, -1)  # stored form: base offset 20, leader epoch -1
    (tmp_path / "00000000000000000020.log").write_bytes(bytes(batch))
    log = open_log(tmp_path)
    assert (log.log_end_offset, log.segment_count) == (22, 2)
    for offset in (12, 15, 20):
        assert decode(log.read(offset, 1 << 20)) == [(20, b"twenty"), (21, b"twenty-one")]
    assert log.append(make_batch([b"next"])).base_offset == 22
    log.close()
    (tmp_path / "00000000000000000012.gap").unlink()
    with pytest.raises(CorruptLogError, match=r"offsets 12\.\.19 are missing"):
        open_log(tmp_path)


@pytest.mark.parametrize("policy", list(FsyncPolicy))
def test_a_missing_directory_opens_as_an_empty_one_does(tmp_path: Path, policy: FsyncPolicy) -> None:
    """A partition never written is opened without listing anything (its directory is not there); the log is the
    one an empty directory gives, before and after appends."""
    missing, empty = tmp_path / "missing" / "0", tmp_path / "empty" / "0"
    empty.mkdir(parents=True)
    logs = [open_log(path, fsync=policy) for path in (missing, empty)]
    views = [(log.log_start_offset, log.log_end_offset, log.written_end, log.read(0, 100)) for log in logs]
    assert views[0] == views[1] == (0, 0, 0, b"")
    for log in logs:
        log.append(make_batch([b"a", b"b"]))
        log.append(make_batch([b"c"]))
        log.sync()
    assert [log.log_end_offset for log in logs] == [3, 3]
    assert logs[0].read(0, 10_000) == logs[1].read(0, 10_000)
    for log in logs:
        log.close()
    assert sorted(os.listdir(missing)) == sorted(os.listdir(empty)) == [FIRST]
