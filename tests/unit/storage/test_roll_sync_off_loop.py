"""A roll and a handle-cache eviction fsync nothing on the caller's thread (``PartitionLog._roll``,
``PartitionLog._settle``): the log's next fsync (``begin_sync`` on a worker thread, or an inline one) settles
the roll — the old segment fsynced, only then the new one renamed from ``.rolling`` to ``.log``, only then the
directory fsynced — and reports write-back through the descriptor kept at eviction.

- a roll with a slow fsync returns without fsyncing; the fsyncs run where the owner runs ``PendingSync.run``,
  old segment first, then the rename, then the directory, then the new segment;
- under ``ALWAYS`` records after the roll are read only once that is done;
- a crash after any step — the process killed (the page cache survives) or the power lost (only what was
  fsynced, and only names made durable by a directory fsync, in either state a rename may leave) — reopens
  without refusing and with every record a reader saw (under ``ALWAYS``) or that a finished fsync covered;
- ``open`` settles a ``.rolling`` file: renamed after a whole segment, removed after a torn one, refused after
  a damaged one (changing nothing);
- an evicted active segment with unsynced appends is not fsynced on eviction: its next fsync runs on the kept
  descriptor, without reopening the file.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from regroup.storage import partition_log
from regroup.storage.format import CorruptLogError
from regroup.storage.handles import HandleCache
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch

BATCH = make_batch([b"x" * 200])
SEGMENT = len(BATCH) * 2  # two batches a segment: the third append rolls


def _open(path: Path, policy: FsyncPolicy = FsyncPolicy.ALWAYS, **kwargs: object) -> PartitionLog:
    return PartitionLog.open(path, fsync=policy, segment_bytes=SEGMENT, **kwargs)  # type: ignore[arg-type]


def _names(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def _offsets(plog: PartitionLog) -> list[int]:
    """Every offset readable from the log start (each batch here holds one record)."""
    out: list[int] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20)
        assert data, offset
        pos = 0
        while pos < len(data):
            base = int.from_bytes(data[pos : pos + 8], "big")
            size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
            out.append(base)
            pos += size
        offset = out[-1] + 1
    return out


class Disk:
    """Watches the log's file primitives: the thread and order of each, and what a power loss would keep —
    each file's content up to its last fsync (by inode) and the names its directory's last fsync saw."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> None:
        self.events: list[tuple[str, str, threading.Thread]] = []  # (what, file name, thread)
        self.synced: dict[int, int] = {}  # inode -> bytes on disk
        self.names: dict[str, dict[str, int]] = {}  # directory -> {name: inode} at its last fsync
        self.after: Callable[[str], None] = lambda what: None
        self.delay = delay
        real_file, real_dir, real_rename = (
            partition_log._fsync_file,
            partition_log._fsync_dir,
            partition_log.rename_once,
        )

        def fsync_file(fd: int) -> None:
            if self.delay:
                time.sleep(self.delay)
            real_file(fd)
            st = os.fstat(fd)
            self.synced[st.st_ino] = st.st_size
            self._event("fsync", self._name_of(fd))

        def fsync_dir(directory: Path) -> None:
            if self.delay:
                time.sleep(self.delay)
            real_dir(directory)
            self.names[str(directory)] = {e.name: e.inode() for e in os.scandir(directory)}
            self._event("fsync-dir", directory.name)

        def rename(src: Path, dst: Path) -> None:
            real_rename(src, dst)
            self._event("rename", src.name)

        monkeypatch.setattr(partition_log, "_fsync_file", fsync_file)
        monkeypatch.setattr(partition_log, "_fsync_dir", fsync_dir)
        monkeypatch.setattr(partition_log, "rename_once", rename)

    def _name_of(self, fd: int) -> str:
        try:
            return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return str(os.fstat(fd).st_ino)

    def _event(self, what: str, name: str) -> None:
        self.events.append((what, name, threading.current_thread()))
        self.after(f"{what} {name}")

    def power_loss(self, directory: Path, into: Path, *, renamed: bool) -> None:
        """The directory as a power loss could leave it: each name the last directory fsync saw (or, with
        ``renamed``, the names as they are now: a creation or rename may reach the disk before its directory's
        fsync), each file cut to what its fsyncs made durable."""
        now = {e.name: e.inode() for e in os.scandir(directory)}
        keep = now if renamed else self.names.get(str(directory), {})
        into.mkdir(parents=True)
        by_inode = {i: n for n, i in now.items()}
        for name, inode in keep.items():
            source = by_inode.get(inode)
            if source is None:  # (removed since: a power loss may keep it, cut as fsynced)
                continue
            data = (directory / source).read_bytes()[: self.synced.get(inode, 0)]
            (into / name).write_bytes(data)


def _sync_on_a_worker(plog: PartitionLog) -> threading.Thread:
    """The partition's next fsync, run on a thread of its own as the group commit runs it; that thread."""
    pending = plog.begin_sync()
    assert pending is not None
    worker = threading.Thread(target=pending.run)
    worker.start()
    worker.join()
    plog.finish_sync(pending, None)
    return worker


#: what the partition's first fsync does first, for a partition directory its first append created: the parent
#: directory's fsync (the new directory's name), then the directory's (the first segment's name)
CREATED = ["fsync-dir", "fsync-dir"]


def created_on(thread: threading.Thread) -> list[tuple[str, threading.Thread]]:
    return [(what, thread) for what in CREATED]


# ---------------------------------------------------------------------- the first append off the caller's thread


@pytest.mark.parametrize("policy", [FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL])
@pytest.mark.parametrize("made", [False, True])
def test_a_first_append_leaves_its_directory_fsyncs_to_the_first_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy, made: bool
) -> None:
    """The first append creates the partition's directory and first segment without an fsync; the partition's
    first fsync (here on a worker) makes their names durable first: the parent's fsync for a new directory, the
    directory's for the segment. A directory made before (CreateTopics makes them) needs only its own."""
    path = tmp_path / "topic-0"
    if made:
        path.mkdir()
    plog = _open(path, policy, fsync_interval_ms=3_600_000)
    plog.defer_interval_sync = True
    disk = Disk(monkeypatch, delay=0.05)
    started = time.perf_counter()
    plog.append(BATCH, sync=False)
    assert disk.events == [] and time.perf_counter() - started < 0.04
    assert _names(path) == [f"{0:020d}.log"]
    assert plog.log_end_offset == (0 if policy is FsyncPolicy.ALWAYS else 1)  # (ALWAYS: read once on disk)
    worker = _sync_on_a_worker(plog)
    directories = ["topic-0"] if made else [tmp_path.name, "topic-0"]
    assert [(what, name, t) for what, name, t in disk.events] == [
        *(("fsync-dir", name, worker) for name in directories),
        ("fsync", f"{0:020d}.log", worker),
    ]
    assert plog.log_end_offset == 1
    plog.append(BATCH, sync=False)
    plog.sync()  # the names are durable already: the segment's fsync alone
    assert [what for what, _, _ in disk.events][len(directories) + 1 :] == ["fsync"]
    plog.close()


@pytest.mark.parametrize("told", [True, False])
def test_files_made_on_another_thread_are_made_durable_by_the_first_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, told: bool
) -> None:
    """A never-written partition's files made by ``make_files`` on another thread (a Produce to many new
    partitions has the topic store's worker make them): the first append writes to them, and the first fsync
    makes both names durable, the new directory's in its parent too, as for files the append made itself;
    also when the log was not told (another append found them made)."""
    path = tmp_path / "topic-0"
    plog = _open(path, FsyncPolicy.ALWAYS)
    files = plog.unmade_files()
    assert files == (path, path / f"{0:020d}.log")
    maker = threading.Thread(target=partition_log.make_files, args=files)
    maker.start()
    maker.join()
    assert _names(path) == [f"{0:020d}.log"]
    if told:
        plog.files_made()
        assert plog.unmade_files() is None
    disk = Disk(monkeypatch)
    plog.append(BATCH, sync=False)
    worker = _sync_on_a_worker(plog)
    assert [(what, name, t) for what, name, t in disk.events] == [
        ("fsync-dir", tmp_path.name, worker),
        ("fsync-dir", "topic-0", worker),
        ("fsync", f"{0:020d}.log", worker),
    ]
    plog.close()
    assert _reopened(path) == [0]


def test_files_are_not_made_for_a_topic_gone_meanwhile(tmp_path: Path) -> None:
    """The parent is not made again: a topic deleted (its directory renamed away) while its partitions' files
    were to be made leaves nothing behind."""
    topic = tmp_path / "topics" / "t"
    topic.mkdir(parents=True)
    plog = _open(topic / "0", FsyncPolicy.NEVER)
    files = plog.unmade_files()
    assert files is not None
    topic.rename(tmp_path / "trash")
    with pytest.raises(FileNotFoundError):
        partition_log.make_files(*files)
    assert not (tmp_path / "topics" / "t").exists() and list((tmp_path / "trash").iterdir()) == []
    plog.close()
    assert plog.unmade_files() is None


def test_a_first_append_fsyncs_its_directory_on_close_and_nothing_under_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = Disk(monkeypatch)
    never = _open(tmp_path / "never", FsyncPolicy.NEVER)
    never.append(BATCH)
    never.close()
    assert disk.events == []
    closed = _open(tmp_path / "closed", FsyncPolicy.INTERVAL, fsync_interval_ms=3_600_000)
    closed.append(BATCH)
    assert disk.events == []
    closed.close()
    assert [what for what, _, _ in disk.events] == [*CREATED, "fsync"]
    assert _reopened(tmp_path / "closed") == [0] and _reopened(tmp_path / "never") == [0]


# ---------------------------------------------------------------------- the roll off the caller's thread


@pytest.mark.parametrize("policy", [FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL])
def test_a_roll_with_a_slow_fsync_does_not_fsync_on_the_calling_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy
) -> None:
    plog = _open(tmp_path / "p", policy, fsync_interval_ms=3_600_000)
    plog.defer_interval_sync = True
    plog.append(BATCH, sync=False)  # (the first append creates the directory: fsynced with the first fsync)
    plog.append(BATCH, sync=False)
    disk = Disk(monkeypatch, delay=0.05)
    caller = threading.current_thread()
    started = time.perf_counter()
    plog.append(BATCH, sync=False)  # rolls
    took = time.perf_counter() - started
    assert plog.segment_count == 2 and disk.events == [], disk.events
    assert took < 0.04  # no 50 ms fsync was waited for
    assert _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.rolling"]
    assert policy is FsyncPolicy.ALWAYS or plog.sync_due  # under INTERVAL a roll is due for its fsync at once
    worker = _sync_on_a_worker(plog)
    assert [(what, t) for what, _, t in disk.events] == [
        *created_on(worker),
        ("fsync", worker),
        ("rename", worker),
        ("fsync-dir", worker),
        ("fsync", worker),
    ]
    assert all(t is not caller for _, _, t in disk.events)
    assert [name for _, name, _ in disk.events][len(CREATED) : len(CREATED) + 2] == [
        f"{0:020d}.log",
        f"{2:020d}.rolling",
    ]
    assert _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.log"]
    assert plog.log_end_offset == 3 and plog.durable(3) and not plog.sync_due
    plog.close()
    reopened = _open(tmp_path / "p")
    assert _offsets(reopened) == [0, 1, 2] and reopened.segment_count == 2
    reopened.close()


def test_records_after_a_roll_are_read_once_the_old_segment_is_on_disk(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p")
    plog.append(BATCH, sync=False)
    plog.append(BATCH, sync=False)
    before = plog.begin_sync()  # under way while the segment rolls
    assert before is not None and before.target == 2
    plog.append(BATCH, sync=False)  # rolls
    assert plog.log_end_offset == 0 and plog.written_end == 3
    before.run()
    plog.finish_sync(before, None)
    assert plog.log_end_offset == 2 and not plog.durable(3)  # the roll is not settled by an fsync begun before it
    assert _offsets(plog) == [0, 1]
    roll = plog.begin_sync()
    assert roll is not None and roll.target == 3 and roll.old_fd >= 0
    roll.run()
    plog.finish_sync(roll, None)
    assert plog.log_end_offset == 3 and _offsets(plog) == [0, 1, 2]
    plog.close()


def test_a_failed_roll_fsync_fails_the_log_and_reads_stay_below_the_roll(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p")
    for _ in range(3):
        plog.append(BATCH, sync=False)
    pending = plog.begin_sync()
    assert pending is not None
    pending.run()
    plog.finish_sync(pending, OSError(5, "Input/output error"))
    assert plog.failed and plog.log_end_offset == 0
    plog.close()


def test_an_inline_fsync_settles_the_roll_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = _open(tmp_path / "p")
    plog.append(BATCH, sync=False)
    plog.append(BATCH, sync=False)
    disk = Disk(monkeypatch)
    plog.append(BATCH)  # rolls, then fsyncs here (sync=True under ALWAYS): the creation and the roll settled first
    assert [w for w, _, _ in disk.events] == [*CREATED, "fsync", "rename", "fsync-dir", "fsync"]
    assert plog.log_end_offset == 3 and _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.log"]
    plog.close()


def test_a_segment_full_again_before_its_roll_is_settled_grows_and_rolls_after_the_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = _open(tmp_path / "p")
    plog.group_commit = True  # (its owner fsyncs it soon, off this thread)
    for _ in range(3):
        plog.append(BATCH, sync=False)  # the third rolls: its segment starts as .rolling
    assert plog.roll_waits
    disk = Disk(monkeypatch)
    for _ in range(3):
        plog.append(BATCH, sync=False)  # the new segment full: it takes them past its size, fsyncing nothing
    assert disk.events == [] and plog.segment_count == 2
    assert _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.rolling"]
    pending = plog.begin_sync()
    assert pending is not None and not plog.roll_waits  # (the fsync handed out settles it)
    pending.run()
    plog.finish_sync(pending, None)
    assert [w for w, _, _ in disk.events] == [*CREATED, "fsync", "rename", "fsync-dir", "fsync"]
    assert plog.log_end_offset == 6 and not plog.roll_waits
    plog.append(BATCH, sync=False)  # the roll waited for (the segment whole on disk: no .rolling), no fsync here
    assert plog.segment_count == 3 and len(disk.events) == 6
    assert _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.log", f"{6:020d}.log"]
    plog.sync()
    plog.close()
    assert _reopened(tmp_path / "p") == list(range(7))


def test_a_segment_full_again_while_the_fsync_settling_its_roll_runs_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = _open(tmp_path / "p")  # (no group commit: the fsync handed out is what settles the roll)
    for _ in range(3):
        plog.append(BATCH, sync=False)
    pending = plog.begin_sync()
    assert pending is not None and plog.roll_unsettled and not plog.roll_waits
    disk = Disk(monkeypatch)
    for _ in range(2):
        plog.append(BATCH, sync=False)  # full again while it runs: grows, nothing fsynced here
    assert disk.events == [] and plog.segment_count == 2
    pending.run()
    plog.finish_sync(pending, None)
    assert not plog.roll_unsettled and plog.log_end_offset == 3  # (what the fsync covered)
    plog.sync()
    plog.close()
    assert _reopened(tmp_path / "p") == list(range(5))


@pytest.mark.parametrize("group_commit", [False, True])
def test_a_segment_full_again_before_its_roll_is_settled_settles_it_on_the_spot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group_commit: bool
) -> None:
    """Without a group commit (an owner fsyncing inline) as soon as the segment is full again; with one once it
    has grown to twice its size (the disk far behind)."""
    plog = _open(tmp_path / "p")
    plog.group_commit = group_commit
    before = 2 + (partition_log.UNSETTLED_ROLL_GROWTH * 2 if group_commit else 2)  # (two batches a segment)
    for _ in range(before):
        plog.append(BATCH, sync=False)
    disk = Disk(monkeypatch)
    assert disk.events == [] and plog.segment_count == 2
    plog.append(BATCH, sync=False)  # the second roll: the first one is settled here (old segment, rename, directory)
    assert [w for w, _, _ in disk.events] == ["fsync", "rename", "fsync-dir"]
    assert [n for _, n, _ in disk.events][:2] == [f"{0:020d}.log", f"{2:020d}.rolling"]
    assert _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.log", f"{before:020d}.rolling"]
    assert plog.log_end_offset == 0  # (nothing after offset 1 was fsynced yet: read once the next fsync ends)
    plog.sync()
    synced = [w for w, _, _ in disk.events][3:]
    assert plog.log_end_offset == before + 1 and synced == [*CREATED, "fsync", "rename", "fsync-dir", "fsync"]
    plog.close()
    assert _reopened(tmp_path / "p") == list(range(before + 1))


def test_the_segment_before_an_unsettled_roll_is_not_dropped(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p")
    for _ in range(3):
        plog.append(BATCH, sync=False)
    assert not plog.can_drop_oldest and not plog.roll_active()
    with pytest.raises(ValueError):
        plog.drop_oldest_segment()
    plog.sync()
    assert plog.can_drop_oldest
    plog.close()


# ---------------------------------------------------------------------- crashes


def _reopened(path: Path) -> list[int]:
    plog = _open(path)
    try:
        return _offsets(plog)
    finally:
        plog.close()


@pytest.mark.parametrize("policy", [FsyncPolicy.ALWAYS, FsyncPolicy.INTERVAL])
def test_a_crash_after_any_step_reopens_with_what_was_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy
) -> None:
    live = tmp_path / "live"
    plog = _open(live, policy, fsync_interval_ms=3_600_000)
    plog.defer_interval_sync = True
    disk = Disk(monkeypatch)
    crashes: list[tuple[str, Path, Path, Path, int, int, int]] = []
    durable_end = [0]  # the end a finished fsync covered (INTERVAL: all it promises after a power loss)

    def crash(what: str) -> None:
        n = len(crashes)
        killed = tmp_path / f"kill{n}"
        shutil.copytree(live, killed)  # kill -9: the page cache survives
        lost, lost_renamed = tmp_path / f"power{n}", tmp_path / f"power{n}r"
        disk.power_loss(live, lost, renamed=False)
        disk.power_loss(live, lost_renamed, renamed=True)
        crashes.append((what, killed, lost, lost_renamed, plog.written_end, plog.log_end_offset, durable_end[0]))

    disk.after = crash
    for i in range(8):  # rolls at offsets 2 and 4 with the segment before not on disk yet, at 6 with it
        plog.append(BATCH, sync=False)
        crash(f"append {i}")
        if i % 3 != 2:
            continue
        pending = plog.begin_sync()
        assert pending is not None
        pending.run()  # a crash after each of its steps
        plog.finish_sync(pending, None)
        durable_end[0] = pending.target
        crash(f"synced {i}")
    disk.after = lambda what: None
    steps = {what.split(" ")[0] for what, *_ in crashes}
    assert steps >= {"append", "fsync", "rename", "fsync-dir", "synced"}, steps
    assert sum(what.startswith("rename") for what, *_ in crashes) == 2
    written = plog.written_end
    plog.close()
    for what, killed, lost, lost_renamed, end, visible, durable in crashes:
        # a kill -9 loses nothing written (under INTERVAL every append was acknowledged)
        assert _reopened(killed) == list(range(end)), what
        # a power loss: never refused; what a reader saw (ALWAYS) or a finished fsync covered (INTERVAL) is there
        must = visible if policy is FsyncPolicy.ALWAYS else durable
        for image in (lost, lost_renamed):
            offsets = _reopened(image)
            assert offsets == list(range(len(offsets))), (what, image.name, offsets)
            assert len(offsets) >= must, (what, image.name, offsets, must)
            assert not [n for n in _names(image) if n.endswith(".rolling")], (what, image.name)
    assert _reopened(live) == list(range(written))


# ---------------------------------------------------------------------- recovery of a .rolling file


def _rolled(path: Path) -> None:
    """A log killed right after a roll: ``0.log`` whole (offsets 0, 1), ``2.rolling`` holding offset 2."""
    plog = _open(path)
    for _ in range(3):
        plog.append(BATCH, sync=False)
    assert _names(path) == [f"{0:020d}.log", f"{2:020d}.rolling"]
    # (abandoned as a killed process leaves it)


def test_open_renames_a_rolling_segment_after_a_whole_one(tmp_path: Path) -> None:
    _rolled(tmp_path / "p")
    assert _reopened(tmp_path / "p") == [0, 1, 2]
    assert _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.log"]


def test_open_removes_a_rolling_segment_after_a_torn_one(tmp_path: Path) -> None:
    _rolled(tmp_path / "p")
    first = tmp_path / "p" / f"{0:020d}.log"
    first.write_bytes(first.read_bytes()[: len(BATCH) + 30])  # the power went: its tail never reached the disk
    assert _reopened(tmp_path / "p") == [0]
    assert _names(tmp_path / "p") == [f"{0:020d}.log"]


def test_open_refuses_a_rolling_segment_after_a_damaged_one_changing_nothing(tmp_path: Path) -> None:
    _rolled(tmp_path / "p")
    first = tmp_path / "p" / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF  # inside the first batch: the second is intact after it
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError, match="damage"):
        _open(tmp_path / "p")
    assert _names(tmp_path / "p") == [f"{0:020d}.log", f"{2:020d}.rolling"]
    assert first.read_bytes() == bytes(data)


def test_a_reader_opens_a_rolling_segment_renamed_meanwhile(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p", policy=FsyncPolicy.INTERVAL, handles=HandleCache(1))
    plog.defer_interval_sync = True  # (its owner fsyncs it)
    for _ in range(3):
        plog.append(BATCH, sync=False)
    pending = plog.begin_sync()
    assert pending is not None
    plog.read(0, 1 << 20)  # the older segment takes the cache's one place: the active one is closed
    pending.run()  # renames 2.rolling to 2.log on "another thread"
    assert _offsets(plog) == [0, 1, 2]  # the active segment, reopened by its old name, is found under the new one
    plog.finish_sync(pending, None)
    plog.close()


# ---------------------------------------------------------------------- eviction from the handle cache


def test_an_evicted_active_segment_is_fsynced_by_its_next_fsync_not_on_eviction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handles = HandleCache(1)
    kwargs = {"fsync_interval_ms": 3_600_000, "handles": handles}
    a, b = _open(tmp_path / "a", FsyncPolicy.ALWAYS, **kwargs), _open(tmp_path / "b", FsyncPolicy.ALWAYS, **kwargs)
    b.append(BATCH)  # (b's directory created, and its append fsynced, before the watch starts)
    a.append(BATCH, sync=False)
    disk = Disk(monkeypatch, delay=0.05)
    started = time.perf_counter()
    b.append(BATCH, sync=False)  # takes a's place in the cache: a's descriptor closes with an append unsynced
    assert disk.events == [] and time.perf_counter() - started < 0.04
    opened = handles.opened
    pending = a.begin_sync()
    assert pending is not None and handles.opened == opened  # the kept descriptor: a's file is not reopened
    worker = threading.Thread(target=pending.run)
    worker.start()
    worker.join()
    a.finish_sync(pending, None)
    assert [(w, t) for w, _, t in disk.events] == [*created_on(worker), ("fsync", worker)]
    assert a.log_end_offset == 1
    a.close()
    b.close()  # b's own unsynced append: fsynced on close
    assert len(disk.events) == len(CREATED) + 2
    reopened = _open(tmp_path / "b")
    assert _offsets(reopened) == [0, 1]
    reopened.close()


def test_an_evicted_active_segment_is_fsynced_by_an_inline_sync_and_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handles = HandleCache(1)
    a = _open(tmp_path / "a", FsyncPolicy.INTERVAL, fsync_interval_ms=3_600_000, handles=handles)
    b = _open(tmp_path / "b", FsyncPolicy.INTERVAL, fsync_interval_ms=3_600_000, handles=handles)
    b.append(BATCH)
    b.sync()
    a.append(BATCH)
    disk = Disk(monkeypatch)
    b.append(BATCH)  # evicts a
    assert disk.events == []
    opened = handles.opened
    a.sync()  # through the kept descriptor alone: a is not reopened (b keeps its place in the cache)
    assert [w for w, _, _ in disk.events] == [*CREATED, "fsync"] and handles.opened == opened
    a.sync()  # nothing left
    assert len(disk.events) == len(CREATED) + 1
    a.append(BATCH)  # reopens a (evicting b, synced: nothing kept for it)
    b.read(0, 1 << 20)  # evicts a again
    a.close()  # the kept descriptor is fsynced and closed
    assert len(disk.events) == len(CREATED) + 2
    b.close()
    reopened = _open(tmp_path / "a")
    assert _offsets(reopened) == [0, 1]
    reopened.close()


# ---------------------------------------------------------------------- descriptors and close


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")


@needs_proc
def test_no_descriptor_is_left_open_on_any_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every duplicate the log takes (of the previous segment at a roll, of the active one at an eviction, for a
    PendingSync) is closed: by the fsync that settles it, by close, or when taking one more fails."""
    before = _fds()
    handles = HandleCache(1)
    a = _open(tmp_path / "a", handles=handles)
    b = _open(tmp_path / "b", handles=handles)
    # a roll settled by a PendingSync; an eviction settled by the next
    for _ in range(3):
        a.append(BATCH, sync=False)
    pending = a.begin_sync()
    assert pending is not None
    pending.run()
    a.finish_sync(pending, None)
    a.append(BATCH, sync=False)
    b.append(BATCH)  # evicts a: a keeps a duplicate
    pending = a.begin_sync()
    assert pending is not None
    pending.run()
    a.finish_sync(pending, None)
    # taking the previous segment's duplicate fails: the kept one stays with the log (closed by close)
    a.append(BATCH, sync=False)  # rolls after a whole segment
    pending = a.begin_sync()
    assert pending is not None
    pending.run()
    a.finish_sync(pending, None)
    for _ in range(2):
        a.append(BATCH, sync=False)  # the second rolls after a segment not fsynced: <6>.rolling
    assert "00000000000000000006.rolling" in _names(tmp_path / "a")
    b.append(BATCH)  # evicts a again
    real_dup = os.dup
    monkeypatch.setattr(partition_log.os, "dup", lambda fd: (_ for _ in ()).throw(OSError(24, "EMFILE")))
    with pytest.raises(OSError):
        a.begin_sync()
    monkeypatch.setattr(partition_log.os, "dup", real_dup)
    opened = handles.opened
    unfinished = a.begin_sync()  # a PendingSync begun and never finished, on the kept descriptor: no reopen
    assert unfinished is not None and handles.opened == opened
    a.append(BATCH, sync=False)  # a roll and an eviction left to close
    b.append(BATCH)
    a.close()
    b.close()
    unfinished.run()  # (closes its own duplicates)
    assert _fds() == before
    reopened = _open(tmp_path / "a")
    assert _offsets(reopened) == list(range(8))
    reopened.close()


def test_close_settles_an_unsettled_roll(tmp_path: Path) -> None:
    plog = _open(tmp_path / "p")
    for _ in range(3):
        plog.append(BATCH, sync=False)  # the third rolls, the first segment not fsynced: <2>.rolling
    assert any(n.endswith(".rolling") for n in _names(tmp_path / "p"))
    plog.close()
    assert not any(n.endswith(".rolling") for n in _names(tmp_path / "p"))
    reopened = _open(tmp_path / "p")
    assert _offsets(reopened) == [0, 1, 2]
    reopened.close()


@needs_proc
def test_closing_a_failed_log_with_an_unsettled_roll_leaves_what_open_settles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _fds()
    plog = _open(tmp_path / "p")
    for _ in range(3):
        plog.append(BATCH, sync=False)
    with monkeypatch.context() as m:
        m.setattr(partition_log, "_fsync_file", lambda fd: (_ for _ in ()).throw(OSError(5, "EIO")))
        with pytest.raises(OSError):
            plog.sync()  # the old segment's fsync fails: the log refuses from now on
    plog.close()  # no fsync on a failed log: the .rolling file stays, every descriptor goes
    assert "00000000000000000002.rolling" in _names(tmp_path / "p") and _fds() == before
    reopened = _open(tmp_path / "p")  # (the previous segment is whole: renamed)
    assert _offsets(reopened) == [0, 1, 2]
    assert "00000000000000000002.log" in _names(tmp_path / "p")
    reopened.close()


@needs_proc
@pytest.mark.parametrize("how", ["closing", "out of descriptors"])
def test_an_eviction_to_give_descriptors_back_fsyncs_on_the_spot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """When the cache closes handles to free descriptors (it closes, or an open failed with EMFILE), keeping a
    duplicate would free none: the unsynced active segment is fsynced there, as before."""
    handles = HandleCache(2)
    a = _open(tmp_path / "a", FsyncPolicy.INTERVAL, fsync_interval_ms=3_600_000, handles=handles)
    b = _open(tmp_path / "b", FsyncPolicy.INTERVAL, fsync_interval_ms=3_600_000, handles=handles)
    a.append(BATCH)
    b.append(BATCH)
    disk = Disk(monkeypatch)
    before = _fds()
    if how == "closing":
        handles.close()  # both given back
        freed = 2
    else:
        failures = [OSError(24, "EMFILE")]

        def opener() -> int:
            if failures:
                raise failures.pop()
            return os.open(tmp_path / "a", os.O_RDONLY)

        handles.get("other", opener)  # the older half given back (a's), then opened
        handles.forget("other")
        freed = 1
    assert [w for w, _, _ in disk.events] == [*CREATED, "fsync"] * freed  # on the spot
    assert _fds() == before - freed  # no duplicate kept
    a.close()
    b.close()
    assert [w for w, _, _ in disk.events] == [*CREATED, "fsync"] * 2  # (what was not fsynced there, at close)
