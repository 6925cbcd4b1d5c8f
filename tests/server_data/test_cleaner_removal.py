"""Retention's file deletions off the event loop (``server/log_cleaner.py``, ``DroppedSegments``): the cleaning
pass takes expired segments out of the log on the loop and removes their files on a worker thread afterwards.

- while the files wait for the worker, the log no longer shows them: the log start offset has moved, a read
  below it is OFFSET_OUT_OF_RANGE and no dropped segment's file is opened; once the pass ends they are gone;
- a crash between "dropped in memory" and "file removed" (none, some or all removed) leaves a log that opens
  with every record it kept, and the next pass deletes what is left;
- a removal that fails stops there, so what is left always continues into the log without a hole;
- the files are removed from the directory they were dropped from, even if it was renamed and a new one
  made under its name (a topic deleted and created again).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from regroup.server.log_cleaner import LogCleaner
from regroup.server.topics import TopicStore
from regroup.storage import partition_log
from regroup.storage.partition_log import DroppedSegments, OffsetOutOfRange, PartitionLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.retention import enforce_retention
from tests.server_data.batches import BASE_TS, make_batch

NOW = BASE_TS + 100_000
BATCHES = 6


def _fill(plog: PartitionLog) -> None:
    """``BATCHES`` one-record batches, one per segment (segment.bytes below two batches), timestamps 0..5 s."""
    for b in range(BATCHES):
        plog.append(make_batch([b"v%d" % b], timestamps=[BASE_TS + b * 1000]), sync=False)


def _log(path: Path) -> PartitionLog:
    batch = make_batch([b"v0"], timestamps=[BASE_TS])
    return PartitionLog.open(path, fsync=FsyncPolicy.ALWAYS, segment_bytes=len(batch) + 1)


def _segment_files(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".log"))


# ---------------------------------------------------------------------- the pass


def test_dropped_segments_are_not_read_and_their_files_go_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.NEVER)
    store.create_topic("t", 1, {"retention.ms": "96000", "segment.bytes": str(len(make_batch([b"v0"])) + 1)})
    plog = store.partition("t", 0)
    assert plog is not None
    _fill(plog)
    directory = plog.directory
    before = _segment_files(directory)
    assert len(before) == BATCHES  # one batch per segment, the last one in the active segment

    entered, release = threading.Event(), threading.Event()
    real_remove = DroppedSegments.remove

    def held(self: DroppedSegments) -> int:
        entered.set()
        assert release.wait(30)
        return real_remove(self)

    monkeypatch.setattr(DroppedSegments, "remove", held)
    opened: list[Path] = []
    real_open = partition_log._Segment.open_read

    def open_read(seg: partition_log._Segment) -> int:
        opened.append(seg.path)
        return real_open(seg)

    monkeypatch.setattr(partition_log._Segment, "open_read", open_read)

    async def main() -> None:
        cleaner = LogCleaner(store, store.configs.policy)
        pass_ = asyncio.get_running_loop().create_task(cleaner.run_async(lambda: NOW))
        assert await asyncio.to_thread(entered.wait, 30)
        # on the worker now, held: the log already lost the expired segments, the files are all still there
        assert _segment_files(directory) == before
        assert plog.log_start_offset == 4  # batches 0..3 are older than 96 s
        with pytest.raises(OffsetOutOfRange):
            plog.read(3, 1 << 20)
        assert plog.read(4, 1 << 20) != b""
        assert plog.offset_for_timestamp(0) == (BASE_TS + 4000, 4)
        dropped = {directory / name for name in before[:4]}
        assert not dropped & set(opened), opened
        release.set()
        report = await pass_
        assert report.segments_deleted == 4 and not report.failures
        assert _segment_files(directory) == before[4:]

    try:
        asyncio.run(main())
    finally:
        release.set()
        store.close()
    with TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.NEVER) as again:
        reopened = again.partition("t", 0)
        assert reopened is not None and reopened.log_start_offset == 4 and reopened.log_end_offset == BATCHES


def test_the_synchronous_pass_removes_the_files_itself(tmp_path: Path) -> None:
    with TopicStore.open(tmp_path / "d", fsync=FsyncPolicy.NEVER) as store:
        store.create_topic("t", 1, {"retention.ms": "96000", "segment.bytes": str(len(make_batch([b"v0"])) + 1)})
        plog = store.partition("t", 0)
        assert plog is not None
        _fill(plog)
        report = LogCleaner(store, store.configs.policy).run_once(NOW)
        assert report.segments_deleted == 4
        assert len(_segment_files(plog.directory)) == 2


# ---------------------------------------------------------------------- crash between drop and removal


@pytest.mark.parametrize("removed", [0, 1, 3])
def test_a_crash_before_the_files_are_removed_leaves_a_log_that_opens(tmp_path: Path, removed: int) -> None:
    path = tmp_path / "p0"
    plog = _log(path)
    _fill(plog)
    done = enforce_retention(plog, NOW, retention_ms=96_000, retention_bytes=-1, remove=False)
    assert len(done.dropped) == 4 and plog.log_start_offset == 4
    for dropped in done.dropped[:removed]:  # the worker got this far, oldest first; then the process died
        dropped.unlink()
    # (the dropped log is abandoned as a killed process leaves it: not closed)
    reopened = _log(path)
    assert reopened.log_start_offset == removed  # the files left are older segments again, whole
    assert reopened.log_end_offset == BATCHES
    for offset in range(removed, BATCHES):
        assert reopened.read(offset, 1 << 20) != b""
    again = enforce_retention(reopened, NOW, retention_ms=96_000, retention_bytes=-1)
    assert again.segments_deleted == 4 - removed and reopened.log_start_offset == 4
    assert len(_segment_files(path)) == 2
    reopened.close()


def test_a_failed_removal_stops_so_no_hole_is_left(tmp_path: Path) -> None:
    path = tmp_path / "p0"
    plog = _log(path)
    _fill(plog)
    done = enforce_retention(plog, NOW, retention_ms=96_000, retention_bytes=-1, remove=False)
    names = [p.name for p in done.dropped]
    blocker = path / names[1]  # the second cannot be removed: a directory (not empty) stands in its place
    blocker.unlink()
    blocker.mkdir()
    (blocker / "x").write_bytes(b"")
    dropped = DroppedSegments.open(path, done.dropped)
    with pytest.raises(OSError):
        dropped.remove()
    left = sorted(os.listdir(path))
    assert names[0] not in left and names[1] in left and names[2] in left and names[3] in left
    with pytest.raises(OSError):
        os.fstat(dropped.dir_fd)  # the directory was closed all the same


def test_removal_follows_the_directory_it_was_dropped_from(tmp_path: Path) -> None:
    path = tmp_path / "p0"
    plog = _log(path)
    _fill(plog)
    done = enforce_retention(plog, NOW, retention_ms=96_000, retention_bytes=-1, remove=False)
    dropped = DroppedSegments.open(path, done.dropped)
    plog.close()
    os.rename(path, tmp_path / "trash")  # the topic deleted ...
    fresh = _log(path)  # ... and created again: a new first segment under the same name
    fresh.append(make_batch([b"new"]))
    fresh_files = _segment_files(path)
    assert done.dropped[0].name in fresh_files
    kept = [n for n in _segment_files(tmp_path / "trash") if n not in {p.name for p in done.dropped}]
    assert dropped.remove() == 4
    assert _segment_files(path) == fresh_files  # untouched
    assert _segment_files(tmp_path / "trash") == kept and len(kept) == 2
    fresh.close()
