"""Compaction, retention and DeleteRecords on a real partition log directory: what is kept (exactly the latest
record of each key in the cleaned range, offsets in place and covered without a hole), what a consumer reads
back, and that a crash at any step of a segment swap leaves a log that opens with nothing lost that is kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.storage.batches import check_batch
from regroup.storage.compaction import compact, plan
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.retention import enforce_retention
from regroup.storage.segment_dir import segment_name
from regroup.storage.segment_swap import cleaned_name, swap_name
from tests.server_data.batches import BASE_TS, make_batch

NOW = BASE_TS + 10**9


def _open(path: Path, segment_bytes: int = 400) -> PartitionLog:
    return PartitionLog.open(path, fsync=FsyncPolicy.NEVER, segment_bytes=segment_bytes)


def _records(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record readable from the log start, decoded independently of the
    compaction module (plain v2 record parsing)."""
    out = []
    offset = plog.log_start_offset
    last_end = None
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20)
        pos = 0
        while pos < len(data):
            h = check_batch(data, pos)
            assert not isinstance(h, str), h
            if last_end is not None:
                assert h.base_offset == last_end, "batches must cover every offset"
            last_end = h.last_offset + 1
            body = data[pos + 61 : pos + h.size]
            out += [(o, k, v) for o, k, v in _parse(body, h.base_offset, h.record_count) if o >= plog.log_start_offset]
            pos += h.size
        offset = last_end
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _parse(body: bytes, base: int, count: int) -> list[tuple[int, bytes | None, bytes | None]]:
    out, pos = [], 0
    for _ in range(count):
        length, pos = _varint(body, pos)
        end = pos + length
        _, pos = _varint(body, pos + 1)
        delta, pos = _varint(body, pos)
        klen, pos = _varint(body, pos)
        key = body[pos : pos + klen] if klen >= 0 else None
        pos += max(klen, 0)
        vlen, pos = _varint(body, pos)
        value = body[pos : pos + vlen] if vlen >= 0 else None
        out.append((base + delta, key, value))
        pos = end
    return out


def _fill(plog: PartitionLog, writes: list[list[tuple[int, int | None]]]) -> list[tuple[int, bytes, bytes | None]]:
    """Append one batch per entry of ``writes`` ((key number, value number or None for a tombstone) each);
    returns (offset, key, value) of every record written."""
    written = []
    for batch in writes:
        keys = [b"k%d" % k for k, _ in batch]
        values = [None if v is None else b"v%d" % v for _, v in batch]
        info = plog.append(make_batch(values, keys=keys))
        written += [(info.base_offset + i, keys[i], values[i]) for i in range(len(batch))]
    return written


writes_strategy = st.lists(
    st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.integers(0, 99))), min_size=1, max_size=5),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=writes_strategy, tombstones_expired=st.booleans())
def test_compaction_keeps_exactly_the_latest_record_per_key(tmp_path: Path, writes, tombstones_expired: bool) -> None:
    directory = tmp_path / f"p{os.urandom(4).hex()}"
    plog = _open(directory)
    written = _fill(plog, writes)
    active_base = plog.older_segments()[-1].end if plog.older_segments() else 0
    retention = 1 if tombstones_expired else 10**12
    compact(plog, NOW, delete_retention_ms=retention)
    # reopened, the log reads the same
    plog.close()
    plog = _open(directory)
    got = _records(plog)
    cleaned = [r for r in written if r[0] < active_base]
    latest = {key: offset for offset, key, _ in cleaned}
    expected = [r for r in cleaned if latest[r[1]] == r[0] and not (r[2] is None and tombstones_expired)] + [
        r for r in written if r[0] >= active_base
    ]
    assert got == expected
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    assert plog.log_end_offset == len(written)
    # compacting again changes nothing
    again, _ = compact(plog, NOW, delete_retention_ms=retention)
    assert again.records_before == again.records_after
    assert _records(plog) == expected
    plog.close()
    shutil.rmtree(directory)


def test_tombstones_are_kept_until_delete_retention_passes(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p", segment_bytes=100)
    _fill(plog, [[(1, 1)], [(1, None)], [(2, 2)], [(3, 3)]])
    planned, _ = compact(plog, BASE_TS + 1000, delete_retention_ms=5000)
    assert (1, None) in [(int(k[1:]), v) for _, k, v in _records(plog) if k]
    assert planned.next_deadline_ms is not None and planned.next_deadline_ms <= BASE_TS + 5000 + 10
    compact(plog, BASE_TS + 100_000, delete_retention_ms=5000)
    keys = [k for _, k, _ in _records(plog)]
    assert b"k1" not in keys and b"k2" in keys


def _swap_states(tmp_path: Path) -> tuple[Path, list[tuple[int, bytes, bytes | None]], int]:
    plog = _open(tmp_path / "p", segment_bytes=150)
    written = _fill(plog, [[(i % 3, i)] for i in range(30)])
    active_base = plog.older_segments()[-1].end
    plog.close()
    return tmp_path / "p", written, active_base


def test_a_crash_at_any_step_of_a_swap_leaves_a_log_that_opens(tmp_path: Path) -> None:
    directory, written, active_base = _swap_states(tmp_path)
    pristine = tmp_path / "pristine"
    shutil.copytree(directory, pristine)
    plog = _open(directory, 150)
    spans = plog.older_segments()
    planned = plan(spans, NOW, delete_retention_ms=10**12)
    assert len(planned.groups) == 1
    bases, data = planned.groups[0]
    plog.close()
    latest = {key: offset for offset, key, _ in written if offset < active_base}
    compacted = [r for r in written if r[0] >= active_base or latest[r[1]] == r[0]]
    steps = [
        ("cleaned file half written", lambda d: (d / cleaned_name(bases[0])).write_bytes(data[: len(data) // 2])),
        ("cleaned file complete", lambda d: (d / cleaned_name(bases[0])).write_bytes(data)),
        ("swap committed", lambda d: (d / swap_name(bases[0])).write_bytes(data)),
        ("swap committed, half the old segments deleted", lambda d: (
            (d / swap_name(bases[0])).write_bytes(data),
            [(d / segment_name(b)).unlink() for b in bases[1 : len(bases) // 2 + 1]],
        )),
        ("swap committed, every old segment but the first deleted", lambda d: (
            (d / swap_name(bases[0])).write_bytes(data),
            [(d / segment_name(b)).unlink() for b in bases[1:]],
        )),
    ]  # fmt: skip
    for what, crash in steps:
        shutil.rmtree(directory)
        shutil.copytree(pristine, directory)
        crash(directory)
        plog = _open(directory, 150)
        got = _records(plog)
        committed = what.startswith("swap")
        assert got == (compacted if committed else written), what
        assert sorted(os.listdir(directory)) == sorted(
            n for n in os.listdir(directory) if n.endswith(".log") or n == "log-start-offset"
        ), what
        plog.close()


def test_retention_deletes_old_segments_oldest_first_never_the_active_one(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p", segment_bytes=150)
    _fill(plog, [[(i, i)] for i in range(20)])
    segments = plog.segment_count
    done = enforce_retention(plog, NOW, retention_ms=1000, retention_bytes=-1)
    assert done.segments_deleted == segments - 1 and plog.segment_count == 1
    assert plog.log_start_offset == plog.older_segments()[-1].end if plog.older_segments() else True
    assert [o for o, _, _ in _records(plog)] == list(range(plog.log_start_offset, 20))
    plog.close()
    plog = _open(tmp_path / "p", segment_bytes=150)
    assert plog.segment_count == 1 and plog.log_end_offset == 20


def test_retention_by_size(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p", segment_bytes=150)
    _fill(plog, [[(i, i)] for i in range(20)])
    total = plog.size_bytes
    done = enforce_retention(plog, NOW, retention_ms=-1, retention_bytes=total // 2)
    assert done.segments_deleted > 0 and plog.size_bytes <= total // 2 + 150
    assert plog.size_bytes + done.bytes_deleted == total


def test_delete_records_moves_the_log_start_durably(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p", segment_bytes=150)
    _fill(plog, [[(i, i)] for i in range(20)])
    assert plog.advance_log_start(13) == 13
    assert plog.advance_log_start(5) == 13  # never down
    assert all(span.end > 13 for span in plog.older_segments())
    plog.close()
    plog = _open(tmp_path / "p", segment_bytes=150)
    assert plog.log_start_offset == 13
    assert [o for o, _, _ in _records(plog)] == list(range(13, 20))
    assert plog.offset_for_timestamp(0) == (BASE_TS, 13)


def test_a_crash_at_any_step_of_retention_leaves_a_log_that_opens(tmp_path: Path) -> None:
    """Retention deletes the oldest segment files one by one: every prefix deleted is a log that opens, starts
    at the first file left and serves everything after it."""
    plog = _open(tmp_path / "p", segment_bytes=150)
    _fill(plog, [[(i, i)] for i in range(20)])
    bases = [span.base for span in plog.older_segments()] + [plog.older_segments()[-1].end]  # the active one last
    plog.close()
    assert len(bases) > 2
    for deleted in range(len(bases)):
        for base in bases[:deleted]:
            (tmp_path / "p" / segment_name(base)).unlink(missing_ok=True)
        plog = _open(tmp_path / "p", segment_bytes=150)
        assert plog.log_start_offset == bases[deleted]
        assert [o for o, _, _ in _records(plog)] == list(range(bases[deleted], 20))
        plog.close()
