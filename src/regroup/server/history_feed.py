"""The server's rebalance history: the group events' rows (``server/events.py``) folded into every group's
timeline (``regroup.history.Timelines``) and kept on disk (``storage/history_log.HistoryLog``, under the data
directory's ``history/``) for ``--history-window``, so the timeline outlives a restart: at start the rows of the
window are read back and folded before any new row. Rows are encoded as they come (a run of ``group_assignment``
rows comes with its lines made: ``sink_run``) and appended once per turn of the event loop, however many one call
produced; a periodic task forgets what left the window, in memory and on disk. A failing disk stops the
history's writes (logged once), never the server. Once ``start`` ran, the appends and the removal of old files are
done on the fold thread (below), in order with the folds: a 10,000-member rebalance's lines are megabytes, whose
write held the loop for 5-14 ms.

Once ``start`` ran, the rows are folded on a thread of their own (``_Folder``), in order: one row can cost the
fold tens of milliseconds (a 10,000-partition group's rebalance closes 10,000 ownership intervals at once), and
the interpreter hands its lock back to the event loop within the thread switch interval (``regroup serve`` sets
0.2 ms), so the loop is never held that long. Whoever reads the timelines (``timeline``) first waits until every
row handed so far is folded, so a read sees them all; the fold and the reads share a lock. A turn's rows are
handed to the thread together, once the turn ends (one lock and one wake-up a turn, not one a row). The console reads
through ``timeline_settled``, which waits and reads on a worker thread: a read right after a large rebalance
does not hold the loop while the fold catches up."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from regroup.history import Timelines
from regroup.server.assignment_run import Piece
from regroup.server.member_run import MemberPiece
from regroup.storage.history_log import HistoryLog

__all__ = ["DEFAULT_WINDOW_MS", "HistoryFeed"]

log = logging.getLogger("regroup.server.history")

DEFAULT_WINDOW_MS: Final = 24 * 3_600_000
PRUNE_INTERVAL_S: Final = 60.0
DIRECTORY: Final = "history"
#: rows waiting for the fold thread past which a new one waits until they are folded (memory stays bounded)
MAX_UNFOLDED: Final = 200_000

#: what the fold thread does next: fold a row, fold a run's piece, forget what left the window at a time, or work
#: on the history's files (a function called there)
Fold = tuple[str, Any]


class _Folder:
    """A thread folding rows into ``timelines`` in the order they were handed (``put``), under ``lock``."""

    def __init__(self, timelines: Timelines) -> None:
        self.timelines = timelines
        self.lock = threading.Lock()
        self._waiting: collections.deque[Fold] = collections.deque()
        self._changed = threading.Condition()
        self._handed = 0
        self._folded = 0
        self._stopping = False
        self._idle = False  # the fold thread is waiting for work
        self._settling = 0  # readers waiting in ``settle``
        self._thread = threading.Thread(target=self._run, name="regroup-history-fold", daemon=True)
        self._thread.start()

    def put(self, works: list[Fold]) -> None:
        """Fold ``works`` after what was handed before them."""
        with self._changed:
            self._waiting.extend(works)
            self._handed += len(works)
            if self._idle:  # (only the fold thread waits for work; a reader waits only while it settles)
                self._changed.notify_all()
            crowded = len(self._waiting) > MAX_UNFOLDED
        if crowded:
            self.settle()

    def settle(self) -> None:
        """Wait until everything handed so far is folded."""
        with self._changed:
            handed = self._handed
            self._settling += 1
            try:
                self._changed.wait_for(lambda: self._folded >= handed or not self._thread.is_alive())
            finally:
                self._settling -= 1

    def stop(self) -> None:
        """Fold what is waiting, then end the thread."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                self._idle = True
                self._changed.wait_for(lambda: bool(self._waiting) or self._stopping)
                self._idle = False
                if not self._waiting:
                    return
                work = self._waiting.popleft()
            try:
                if work[0] == "disk":
                    work[1]()  # (outside the timelines' lock: the readers need not wait for the disk)
                else:
                    with self.lock:
                        _fold(self.timelines, work)
            except Exception:  # (the timelines never raise on a row; anything else must not end the fold)
                log.exception("rebalance history: a row could not be folded, or its lines written")
            with self._changed:
                self._folded += 1
                if self._settling or self._folded == self._handed:  # (a reader settling may go on)
                    self._changed.notify_all()


def _fold(timelines: Timelines, work: Fold) -> None:
    kind, item = work
    if kind == "row":
        timelines.observe(item)
    elif kind == "run":
        if isinstance(item, MemberPiece):
            for row in item.rows():
                timelines.observe(row)
        else:
            timelines.observe_assignments(item.row(0), item.rows)
    else:
        timelines.prune(item)


class HistoryFeed:
    """``sink`` and ``sink_run`` for ``GroupEvents.add_sink``; ``timeline`` for the console; ``start()`` the
    pruning task after ``load``; ``close()`` flushes and closes the files."""

    def __init__(self, data_dir: Path, window_ms: int, clock: Callable[[], int]) -> None:
        self.timelines = Timelines(window_ms)
        self._log: HistoryLog | None = HistoryLog(data_dir / DIRECTORY, window_ms)
        self._clock = clock
        #: the lines not appended yet (a row's, or a piece's), and the newest time of their rows
        self._pending: list[bytes] = []
        self._pending_newest = 0
        self._flush_scheduled = False
        self._pruner: asyncio.Task[None] | None = None
        #: the fold thread, from ``start`` to ``close`` (else rows are folded as they are handed)
        self._folder: _Folder | None = None
        #: what this turn handed for the fold thread, handed over together at the turn's end
        self._unhanded: list[Fold] = []
        #: held while the history's files are written, pruned or listed (by the fold thread once it runs)
        self._files = threading.Lock()

    def load(self) -> int:
        """Fold the rows kept on disk within the window (before any new row); how many there were."""
        if self._log is None:
            return 0
        now = self._clock()
        count = 0
        for row in self._log.load(now):
            self.timelines.observe(row)
            count += 1
        self.timelines.prune(now)
        if self._log.skipped_lines or self._log.unreadable_segments:
            log.warning(
                "rebalance history: skipped %d unreadable lines and %d unreadable files in %s",
                self._log.skipped_lines,
                self._log.unreadable_segments,
                self._log.directory,
            )
        return count

    def _hand(self, work: Fold) -> None:
        if self._folder is None:
            _fold(self.timelines, work)
            return
        self._unhanded.append(work)
        if len(self._unhanded) == 1:
            try:
                asyncio.get_running_loop().call_soon(self._hand_over)
            except RuntimeError:  # (no running loop)
                self._hand_over()

    def _hand_over(self) -> None:
        """Give the fold thread what was handed since the last time (on the loop's thread)."""
        works, self._unhanded = self._unhanded, []
        if works and self._folder is not None:
            self._folder.put(works)

    def sink(self, row: Mapping[str, Any]) -> None:
        self._hand(("row", row))
        if self._log is None:
            return
        try:
            line = orjson.dumps(row) + b"\n"
        except TypeError:
            return  # (not JSON: not kept)
        t = row.get("t")
        self._keep(line, t if type(t) is int else 0)

    def sink_run(self, piece: Piece | MemberPiece) -> None:
        """The rows of a run's ``piece``: as ``sink`` of each, with the lines the piece made."""
        self._hand(("run", piece))
        if self._log is not None:
            self._keep(("\n".join(piece.lines) + "\n").encode(), piece.t)

    def _keep(self, data: bytes, t: int) -> None:
        self._pending.append(data)
        if t > self._pending_newest:
            self._pending_newest = t
        if not self._flush_scheduled:
            self._flush_scheduled = True
            with contextlib.suppress(RuntimeError):  # (no running loop: flushed at close)
                asyncio.get_running_loop().call_soon(self.flush)

    def timeline(self, group_id: str, since_ms: int | None, until_ms: int | None) -> dict[str, Any] | None:
        """The group's timeline once every row handed so far is folded (waiting for the fold thread)."""
        self._hand_over()
        return self._settled_read(group_id, since_ms, until_ms)

    def _settled_read(self, group_id: str, since_ms: int | None, until_ms: int | None) -> dict[str, Any] | None:
        """``timeline`` once the rows given to the fold thread are folded (any thread)."""
        folder = self._folder
        if folder is None:
            return self.timelines.timeline(group_id, since_ms, until_ms)
        folder.settle()
        with folder.lock:
            return self.timelines.timeline(group_id, since_ms, until_ms)

    async def timeline_settled(
        self, group_id: str, since_ms: int | None, until_ms: int | None
    ) -> dict[str, Any] | None:
        """``timeline`` for the console: the wait for the fold and the read (a large group's timeline is
        thousands of intervals) on a worker thread, the event loop free meanwhile."""
        if self._folder is None:
            return self.timelines.timeline(group_id, since_ms, until_ms)
        self._hand_over()
        return await asyncio.to_thread(self._settled_read, group_id, since_ms, until_ms)

    def segments(self) -> list[Path]:
        """The history's segment files, oldest first, every row handed so far written to them (empty when the
        history is not kept on disk); read them with ``storage.history_log.read_rows``. Waits for the fold thread's
        appends: ``settled_segments`` waits on a worker thread."""
        self.flush()
        self._hand_over()
        if self._folder is not None:
            self._folder.settle()
        return self._listed()

    async def settled_segments(self) -> list[Path]:
        """``segments``, the wait for the fold thread's appends on a worker thread (the event loop free meanwhile)."""
        self.flush()
        self._hand_over()
        if self._folder is not None:
            await asyncio.to_thread(self._folder.settle)
        return self._listed()

    def _listed(self) -> list[Path]:
        with self._files:  # (the fold thread may be appending what was handed since)
            history = self._log
            return [] if history is None else history.segments()

    def flush(self) -> None:
        """Append the lines kept since the last flush: on the fold thread once it runs, else now."""
        self._flush_scheduled = False
        lines, self._pending = self._pending, []
        newest, self._pending_newest = self._pending_newest, 0
        if not lines or self._log is None:
            return
        newest = max(newest, self._clock())
        if self._folder is None:
            self._append(lines, newest)
        else:
            self._hand(("disk", functools.partial(self._append, lines, newest)))

    def _append(self, lines: list[bytes], newest: int) -> None:
        """(the fold thread once it runs) Append ``lines``; a failing disk ends the history's files."""
        with self._files:
            history = self._log
            if history is None:
                return
            try:
                history.append_lines(lines, newest)
            except OSError as exc:
                log.warning("rebalance history: cannot write %s, no longer kept on disk: %s", history.directory, exc)
                with contextlib.suppress(OSError):
                    history.close()
                self._log = None

    def start(self) -> None:
        """Fold the rows handed from now on on the fold thread, and forget what leaves the window periodically."""
        if self._folder is None:
            self._folder = _Folder(self.timelines)
        self._pruner = asyncio.get_running_loop().create_task(self._prune_forever())

    async def _prune_forever(self) -> None:
        while True:
            await asyncio.sleep(PRUNE_INTERVAL_S)
            self.prune()

    def prune(self) -> None:
        now = self._clock()
        self._hand(("prune", now))
        if self._folder is None:
            self._prune_files(now)
        else:
            self._hand(("disk", functools.partial(self._prune_files, now)))

    def _prune_files(self, now: int) -> None:
        """(the fold thread once it runs) Delete the files whose rows all left the window."""
        with self._files:
            history = self._log
            if history is None:
                return
            try:
                history.prune(now)
            except OSError as exc:
                log.warning("rebalance history: cannot prune %s: %s", history.directory, exc)

    async def close(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pruner
            self._pruner = None
        self.flush()
        self._hand_over()
        folder, self._folder = self._folder, None
        if folder is not None:
            folder.stop()  # (it appends what was handed before it ends)
        self.flush()
        if self._log is not None:
            self._log.close()
            self._log = None
