"""The server's rebalance history: the group events' rows (``server/events.py``) folded into every group's
timeline (``regroup.history.Timelines``) and kept on disk (``storage/history_log.HistoryLog``, under the data
directory's ``history/``) for ``--history-window``, so the timeline outlives a restart: at start the rows of the
window are read back and folded before any new row. Rows are encoded as they come (a run of ``group_assignment``
rows comes with its lines made: ``sink_run``) and appended once per turn of the event loop, however many one call
produced; a periodic task forgets what left the window, in memory and on disk. A failing disk stops the
history's writes (logged once), never the server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from regroup.history import Timelines
from regroup.server.assignment_run import Piece
from regroup.storage.history_log import HistoryLog

__all__ = ["DEFAULT_WINDOW_MS", "HistoryFeed"]

log = logging.getLogger("regroup.server.history")

DEFAULT_WINDOW_MS: Final = 24 * 3_600_000
PRUNE_INTERVAL_S: Final = 60.0
DIRECTORY: Final = "history"


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

    def sink(self, row: Mapping[str, Any]) -> None:
        self.timelines.observe(row)
        if self._log is None:
            return
        try:
            line = orjson.dumps(row) + b"\n"
        except TypeError:
            return  # (not JSON: not kept)
        t = row.get("t")
        self._keep(line, t if type(t) is int else 0)

    def sink_run(self, piece: Piece) -> None:
        """The rows of a run's ``piece``: as ``sink`` of each, with the lines the piece made."""
        self.timelines.observe_assignments(piece.row(0), piece.rows)
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
        return self.timelines.timeline(group_id, since_ms, until_ms)

    def segments(self) -> list[Path]:
        """The history's segment files, oldest first, every row handed so far written to them (empty when the
        history is not kept on disk); read them with ``storage.history_log.read_rows``."""
        self.flush()
        return [] if self._log is None else self._log.segments()

    def flush(self) -> None:
        self._flush_scheduled = False
        lines, self._pending = self._pending, []
        newest, self._pending_newest = self._pending_newest, 0
        if not lines or self._log is None:
            return
        try:
            self._log.append_lines(lines, max(newest, self._clock()))
        except OSError as exc:
            log.warning("rebalance history: cannot write %s, no longer kept on disk: %s", self._log.directory, exc)
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def start(self) -> None:
        self._pruner = asyncio.get_running_loop().create_task(self._prune_forever())

    async def _prune_forever(self) -> None:
        while True:
            await asyncio.sleep(PRUNE_INTERVAL_S)
            self.prune()

    def prune(self) -> None:
        now = self._clock()
        self.timelines.prune(now)
        if self._log is not None:
            try:
                self._log.prune(now)
            except OSError as exc:
                log.warning("rebalance history: cannot prune %s: %s", self._log.directory, exc)

    async def close(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pruner
            self._pruner = None
        self.flush()
        if self._log is not None:
            self._log.close()
            self._log = None
