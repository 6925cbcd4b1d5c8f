"""The rebalance timeline's durable rows (``storage/history_log.py``): append and load in order, roll at the
segment size, prune by the window and by bytes, and a torn or garbled line skipped and counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regroup.storage.history_log import HistoryLog


def rows(start: int, n: int, pad: str = "") -> list[dict[str, Any]]:
    return [{"seq": i, "t": start + i, "type": "group_state", "detail": f"group=g{pad}"} for i in range(n)]


def test_rows_come_back_in_order_across_restarts(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 10_000)
    log.append(rows(0, 3), 3)
    log.append(rows(3, 2), 5)
    log.close()
    again = HistoryLog(tmp_path, 10_000)
    assert list(again.load(5)) == rows(0, 3) + rows(3, 2)
    again.append(rows(5, 1), 6)  # a new process writes a segment of its own
    assert len(again.segments()) == 2
    assert list(again.load(6)) == rows(0, 3) + rows(3, 2)  # (not its own rows: it observed them already)
    again.close()
    assert [r["t"] for r in HistoryLog(tmp_path, 10_000).load(6)] == list(range(6))
    assert again.skipped_lines == 0


def test_a_segment_rolls_at_its_size(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 10_000, segment_bytes=200)
    for i in range(10):
        log.append(rows(i, 1, pad="x" * 40), i)
    sizes = [p.stat().st_size for p in log.segments()]
    assert len(sizes) > 1 and all(size <= 200 for size in sizes)
    log.close()
    assert [r["t"] for r in HistoryLog(tmp_path, 10_000).load(10)] == list(range(10))


def test_one_append_larger_than_a_segment_is_written_whole(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 10_000, segment_bytes=50)
    log.append(rows(0, 5), 5)
    assert len(log.segments()) == 1
    log.close()
    assert len(list(HistoryLog(tmp_path, 10_000).load(5))) == 5


def test_prune_deletes_whole_segments_older_than_the_window(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 1_000, segment_bytes=100)
    for i in range(6):
        log.append(rows(i * 1_000, 1, pad="y" * 50), i * 1_000)
    assert len(log.segments()) == 6
    log.prune(5_500)  # cutoff 4_500: the segments whose newest row is at 0 .. 4_000 go
    assert [p.name for p in log.segments()] == ["000000000006.jsonl"]
    log.close()
    assert [r["t"] for r in HistoryLog(tmp_path, 1_000).load(5_500)] == [5_000]


def test_segments_found_at_start_are_pruned_by_their_newest_row(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 1_000, segment_bytes=100)
    for i in range(3):
        log.append(rows(i * 1_000, 1, pad="y" * 50), 0)  # (now_ms older than the rows: the rows' time counts)
    log.close()
    again = HistoryLog(tmp_path, 1_000)
    assert [r["t"] for r in again.load(2_500)] == [2_000]  # (segments out of the window are not read)
    again.prune(2_500)
    assert len(again.segments()) == 1


def test_the_directory_never_holds_more_than_max_bytes(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 10**9, max_bytes=1_000, segment_bytes=300)
    for i in range(100):
        log.append(rows(i, 1, pad="z" * 60), i)
        assert log.total_bytes() <= 1_000
        assert sum(p.stat().st_size for p in log.segments()) == log.total_bytes()
    log.close()
    kept = [r["t"] for r in HistoryLog(tmp_path, 10**9).load(100)]
    assert kept == list(range(kept[0], 100)) and len(kept) >= 6  # the newest rows, in order


def test_a_torn_tail_and_garbled_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 10_000)
    log.append(rows(0, 3), 3)
    log.close()
    [segment] = log.segments()
    data = segment.read_bytes()
    first, second, third = data.splitlines(keepends=True)
    segment.write_bytes(first + b"\xff\xfe not json\n" + b"[1, 2]\n" + second + third[: len(third) // 2])
    again = HistoryLog(tmp_path, 10_000)
    assert list(again.load(3)) == rows(0, 2)
    assert again.skipped_lines == 3  # invalid UTF-8 and JSON, not an object, the torn last line
    again.append(rows(3, 1), 4)  # appends go to a new segment: the torn line does not swallow them
    again.close()
    assert list(HistoryLog(tmp_path, 10_000).load(4)) == [*rows(0, 2), *rows(3, 1)]


def test_an_unreadable_segment_is_skipped_and_counted(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 10_000)
    log.append(rows(0, 1), 0)
    log.close()
    (tmp_path / "000000000002.jsonl").mkdir()  # (a directory where a segment should be: not one of them)
    (tmp_path / "notes.txt").write_text("not a segment")
    again = HistoryLog(tmp_path, 10_000)
    assert list(again.load(0)) == rows(0, 1)
    log.segments()[0].chmod(0)
    try:
        readable = True
        try:
            log.segments()[0].read_bytes()
        except PermissionError:
            readable = False
        third = HistoryLog(tmp_path, 10_000)
        assert list(third.load(0)) == ([] if not readable else rows(0, 1))
        assert third.unreadable_segments == (0 if readable else 1)
    finally:
        log.segments()[0].chmod(0o644)


def test_rows_that_are_not_json_are_left_out(tmp_path: Path) -> None:
    log = HistoryLog(tmp_path, 10_000)
    log.append([{"t": 1, "bad": object()}, *rows(2, 1)], 2)
    log.close()
    assert list(HistoryLog(tmp_path, 10_000).load(2)) == rows(2, 1)
