"""A compaction's swap in steps (``compaction.apply_steps``, ``PartitionLog.start_rewrite``): the file work —
writing and fsyncing the new segment, fsyncing the directory and removing the segments it replaces — is handed
to the caller to run on another thread; the log changes in memory (with the renames that go with it) only
between two pieces of work.

- a crash after any piece of work (the new file written but not swapped in; swapped in, replaced files not yet
  removed; removed, not yet renamed to its final name; done) reopens as a log with exactly the records a
  reader saw at that moment;
- a reader during the swap — with a handle cache so small that every read opens its file again — always sees
  a whole log, before or after, and never a segment whose file is gone;
- a segment being swapped in is neither dropped (retention, DeleteRecords) nor replaced until it is settled;
- a removal that fails leaves the ``.swap`` file, which the next open finishes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from regroup.storage import compaction
from regroup.storage.handles import HandleCache
from regroup.storage.partition_log import DroppedSegments, PartitionLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.retention import enforce_retention
from tests.server_data.batches import BASE_TS, make_batch
from tests.unit.storage.test_compaction import _records

NOW = BASE_TS + 10**9
Records = list[tuple[int, bytes | None, bytes | None]]


def _open(path: Path, handles: HandleCache | None = None) -> PartitionLog:
    return PartitionLog.open(path, fsync=FsyncPolicy.ALWAYS, segment_bytes=300, handles=handles)


def _filled(path: Path, handles: HandleCache | None = None) -> PartitionLog:
    """A log whose older segments hold many superseded records (keys k0..k2 written over and over)."""
    plog = _open(path, handles)
    for i in range(40):
        plog.append(make_batch([b"v%d" % i], keys=[b"k%d" % (i % 3)], timestamps=[BASE_TS + i]))
    assert len(plog.older_segments()) >= 6
    return plog


def _files(path: Path) -> list[str]:
    return sorted(os.listdir(path))


Steps = Generator[compaction.FileWork, None, compaction.CompactionResult]


def _steps(plog: PartitionLog) -> tuple[compaction.CompactionPlan, Steps]:
    planned = compaction.plan(plog.older_segments(), NOW, delete_retention_ms=10**12, group_bytes=700)
    assert len(planned.groups) >= 2
    return planned, compaction.apply_steps(plog, planned)


def _drive(plog: PartitionLog, between: Callable[[str], None]) -> compaction.CompactionResult:
    """Run the steps, calling ``between(what just happened)`` after each piece of work and after each change
    made on the caller's thread."""
    _, steps = _steps(plog)
    try:
        work = next(steps)
        while True:
            between(f"before {getattr(work, '__name__', '?')}")
            work()
            between(f"after {getattr(work, '__name__', '?')}")
            work = next(steps)
    except StopIteration as done:
        between("end")
        result: compaction.CompactionResult = done.value
        return result


def test_a_crash_after_any_step_reopens_with_what_a_reader_saw(tmp_path: Path) -> None:
    plog = _filled(tmp_path / "live")
    before = _records(plog)
    crashes: list[tuple[str, Path, Records]] = []
    seen: set[str] = set()

    def crash_here(what: str) -> None:
        copy = tmp_path / f"crash{len(crashes)}"
        shutil.copytree(plog.directory, copy)  # the disk as a crash would leave it (the data is fsynced)
        crashes.append((what, copy, _records(plog)))
        seen.update(n.rsplit(".", 1)[1] for n in _files(copy))

    result = _drive(plog, crash_here)
    after = _records(plog)
    assert result.segments_written >= 2 and after != before
    assert {"cleaned", "swap"} <= seen  # each step's file was there at some crash point
    states = set()
    for what, copy, expected in crashes:
        reopened = _open(copy)
        assert _records(reopened) == expected, what
        assert not [n for n in _files(copy) if n.endswith((".swap", ".cleaned"))], what
        reopened.close()
        states.add(tuple(expected))
    assert tuple(before) in states and tuple(after) in states
    plog.close()
    final = _open(tmp_path / "live")
    assert _records(final) == after
    final.close()


def test_readers_during_the_swap_see_a_whole_log_and_open_only_files_that_exist(tmp_path: Path) -> None:
    plog = _filled(tmp_path / "live", handles=HandleCache(1))  # every read of another segment reopens its file
    before = _records(plog)
    views: list[Records] = []

    def read(what: str) -> None:
        views.append(_records(plog))  # raises if a segment's file is gone, or the batches leave a hole

    _drive(plog, read)
    after = _records(plog)
    groups = len([v for i, v in enumerate(views) if i == 0 or v != views[i - 1]])
    assert groups >= 3  # before, and after each group swapped in
    first, last = views[0], views[-1]
    assert first == before and last == after
    keys_before = {k: v for _, k, v in before}
    for view in views:  # every view is a whole compacted-or-not log: the latest value of each key is there
        assert {k: v for _, k, v in view} == keys_before
        offsets = [o for o, _, _ in view]
        assert offsets == sorted(offsets) and set(offsets) >= {o for o, _, _ in after}
    plog.close()


def test_a_segment_being_swapped_in_is_not_dropped_nor_replaced_until_settled(tmp_path: Path) -> None:
    plog = _filled(tmp_path / "p")
    planned = compaction.plan(plog.older_segments(), NOW, delete_retention_ms=10**12, group_bytes=10**6)
    (bases, data), *_ = planned.groups
    assert bases[0] == 0
    rewrite = plog.start_rewrite(bases, data)
    rewrite.write()
    removal = plog.swap_rewrite(0, rewrite)
    oldest = plog.older_segments()[0]
    assert oldest.path.name.endswith(".swap") and not plog.can_drop_oldest
    with pytest.raises(ValueError):
        plog.drop_oldest_segment()
    end = plog.older_segments()[0].end
    done = enforce_retention(plog, NOW, retention_ms=0, retention_bytes=-1, remove=False)
    assert done.segments_deleted == 0 and not done.dropped
    start, dropped = plog.move_log_start(end)  # the log start moves; the segment stays until settled
    assert (start, dropped) == (end, [])
    with pytest.raises(ValueError):
        plog.replace_segments(0, 1, data)
    removal.remove()
    plog.settle_rewrite(rewrite)
    assert plog.older_segments()[0].path.name.endswith(".log") and plog.can_drop_oldest
    assert plog.drop_below_start() == [tmp_path / "p" / f"{0:020d}.log"]
    plog.close()


def test_a_removal_that_fails_leaves_the_swap_which_the_next_open_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = _filled(tmp_path / "p")
    planned, steps = _steps(plog)

    def failing(self: DroppedSegments) -> int:
        os.close(self.dir_fd)
        raise OSError("disk says no")

    monkeypatch.setattr(DroppedSegments, "remove", failing)
    with pytest.raises(OSError, match="disk says no"):
        compaction.apply(plog, planned)
    steps.close()
    shown = _records(plog)  # the swapped-in segment is read from its .swap file meanwhile
    assert [n for n in _files(plog.directory) if n.endswith(".swap")]
    plog.close()
    monkeypatch.undo()
    reopened = _open(tmp_path / "p")
    assert _records(reopened) == shown
    assert not [n for n in _files(tmp_path / "p") if n.endswith((".swap", ".cleaned"))]
    reopened.close()


def test_a_group_changed_while_its_file_was_written_is_discarded(tmp_path: Path) -> None:
    plog = _filled(tmp_path / "p")
    _, steps = _steps(plog)
    write = next(steps)
    write()
    plog.advance_log_start(plog.older_segments()[-1].end)  # a DeleteRecords removes the newest group's segments
    discard = next(steps)
    assert getattr(discard, "__name__", "") == "discard"
    assert [n for n in _files(plog.directory) if n.endswith(".cleaned")]
    discard()
    assert not [n for n in _files(plog.directory) if n.endswith(".cleaned")]
    steps.close()
    plog.close()
