"""The console's "what if" replays (docs/operations.md, "HTTP API and dashboard"): a window of one group's
rebalance history replayed under other strategies and protocols by ``regroup lab replay`` (docs/lab.md,
"Replaying recorded churn"), run as a child process so that the server neither imports the lab nor spends its
event loop on a simulation.

For each replay, under ``<data dir>/replays/<replay id>/``: ``events.jsonl``, the group's rows of the history up
to the window's end (the rows before the window tell the lab who was in the group when it starts, and the
topics), written off the event loop; ``output.log``, the child's output; ``out/``, what ``lab replay`` writes
(``replay.json``, ``report.html``). The child is ``python -m regroup lab replay ... --no-spark``: the
alternatives are simulated in the child itself, which needs no Java and costs a fraction of a second of CPU per
alternative for a group of a few members; ``spark`` asks for ``--master local[1]`` instead (Java 17 and the lab
extra), one worker thread so as to leave the broker its cores.

At most ``max_running`` replays run at once (the next is refused: 429), one runs for at most ``timeout_s``, and
at most ``max_kept`` are kept (the oldest finished one's directory is removed when a new one starts). Replays live
as long as the process: the directories a previous process left are removed at start, and the children still
running are killed (their whole process group) when the server stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from regroup.console.view import ReplayRefused, ReplayRequest, ReplayState
from regroup.model.eventlog import detail_fields
from regroup.storage.history_log import read_rows

__all__ = ["Replays"]

log = logging.getLogger("regroup.server.replays")

DIRECTORY: Final = "replays"
EVENTS: Final = "events.jsonl"
OUTPUT: Final = "output.log"
OUT: Final = "out"
RESULT: Final = "replay.json"
REPORT: Final = "report.html"
MAX_RUNNING: Final = 2
MAX_KEPT: Final = 16
TIMEOUT_S: Final = 600.0
#: how much of a failed child's output is read to find its last line
_TAIL_BYTES: Final = 4096

#: the history's segment files, once every row handed so far is written to them (``HistoryFeed.settled_segments``)
Segments = Callable[[], Awaitable[list[Path]]]


@dataclass(slots=True)
class _Replay:
    request: ReplayRequest
    replay_id: str
    directory: Path
    status: str = "running"
    error: str | None = None
    result: dict[str, Any] | None = None
    process: asyncio.subprocess.Process | None = None
    task: asyncio.Task[None] | None = None

    def state(self) -> ReplayState:
        return ReplayState(
            replay_id=self.replay_id, group_id=self.request.group_id, since_ms=self.request.since_ms,
            until_ms=self.request.until_ms, status=self.status, error=self.error, result=self.result,
        )  # fmt: skip


class Replays:
    """``console.view.ReplayService`` over the history's segment files (``segments``: ``HistoryFeed.segments``).
    ``open()`` before serving (removes what a previous process left), ``close()`` when stopping."""

    def __init__(
        self,
        data_dir: Path,
        segments: Segments,
        *,
        max_running: int = MAX_RUNNING,
        max_kept: int = MAX_KEPT,
        timeout_s: float = TIMEOUT_S,
        python: str = sys.executable,
    ) -> None:
        self.directory = data_dir / DIRECTORY
        self._segments = segments
        self._max_running = max_running
        self._max_kept = max(max_kept, max_running)
        self._timeout_s = timeout_s
        self._python = python
        #: replay id -> replay, oldest first
        self._replays: dict[str, _Replay] = {}
        self._closed = False

    def open(self) -> None:
        """Remove the replays a previous process left (nobody can ask for them any more). Blocking: at start."""
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------------------------------ the service
    async def start(self, request: ReplayRequest) -> ReplayState:
        if self._closed:
            raise ReplayRefused(503, "the server is stopping")
        running = sum(1 for r in self._replays.values() if r.status == "running")
        if running >= self._max_running:
            raise ReplayRefused(429, f"{running} replays are running already: try again when one has finished")
        replay_id = f"{secrets.token_hex(6)}"
        replay = _Replay(request, replay_id, self.directory / replay_id)
        self._replays[replay_id] = replay  # (counted as running from now on)
        try:
            await self._forget_oldest()
            paths = await self._segments()
            rows = await asyncio.to_thread(_write_window, paths, request, replay.directory)
            if rows == 0:
                raise ReplayRefused(
                    400, f"the history has no rows of group {request.group_id!r} up to {request.until_ms}"
                )
            replay.process = await self._spawn(replay)
        except ReplayRefused:
            await self._discard(replay)
            raise
        except OSError as exc:
            await self._discard(replay)
            log.warning("replay of group %r not started: %s", request.group_id, exc)
            raise ReplayRefused(503, f"cannot start the replay: {exc.strerror or exc}") from None
        replay.task = asyncio.get_running_loop().create_task(self._watch(replay))
        log.info(
            "replay %s of group %r started: %d rows, window %d to %d ms",
            replay_id, request.group_id, rows, request.since_ms, request.until_ms,
        )  # fmt: skip
        return replay.state()

    async def state(self, group_id: str, replay_id: str) -> ReplayState | None:
        replay = self._replays.get(replay_id)
        return None if replay is None or replay.request.group_id != group_id else replay.state()

    async def report(self, group_id: str, replay_id: str) -> bytes | None:
        replay = self._replays.get(replay_id)
        if replay is None or replay.request.group_id != group_id or replay.status != "done":
            return None
        try:
            return await asyncio.to_thread((replay.directory / OUT / REPORT).read_bytes)
        except OSError:
            return None

    async def close(self) -> None:
        """Kill every child still running (its process group) and wait for the watchers."""
        self._closed = True
        for replay in self._replays.values():
            if replay.process is not None and replay.process.returncode is None:
                _kill(replay.process)
        tasks = [r.task for r in self._replays.values() if r.task is not None and not r.task.done()]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=5.0)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------------------------------ internals
    def arguments(self, replay: _Replay) -> list[str]:
        """The child's command line."""
        request = replay.request
        args = [
            self._python, "-m", "regroup", "lab", "replay", str(replay.directory / EVENTS),
            f"--group={request.group_id}",  # (one argument: a group id may start with a dash)
            "--since-ms", str(request.since_ms), "--until-ms", str(request.until_ms),
            "--out", str(replay.directory / OUT),
        ]  # fmt: skip
        if request.strategies:
            args += ["--strategies", *request.strategies]
        if request.protocols:
            args += ["--protocols", *request.protocols]
        args += ["--master", "local[1]"] if request.spark else ["--no-spark"]
        return args

    async def _spawn(self, replay: _Replay) -> asyncio.subprocess.Process:
        output = await asyncio.to_thread((replay.directory / OUTPUT).open, "wb")
        try:
            return await asyncio.create_subprocess_exec(
                *self.arguments(replay),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=replay.directory,
                start_new_session=True,  # (its own process group: a Spark JVM is killed with it)
            )
        finally:
            output.close()

    async def _watch(self, replay: _Replay) -> None:
        process = replay.process
        assert process is not None
        try:
            code = await asyncio.wait_for(process.wait(), self._timeout_s)
        except TimeoutError:
            _kill(process)
            await process.wait()
            replay.status, replay.error = "failed", f"the replay took longer than {self._timeout_s:.0f} s"
            return
        except asyncio.CancelledError:
            replay.status, replay.error = "failed", "the server stopped"
            raise
        if self._closed:
            replay.status, replay.error = "failed", "the server stopped"
            return
        if code == 0:
            try:
                replay.result = await asyncio.to_thread(_read_result, replay.directory / OUT / RESULT)
            except (OSError, ValueError) as exc:
                replay.status, replay.error = "failed", f"cannot read {RESULT}: {exc}"
                return
            replay.status = "done"
            log.info("replay %s of group %r done", replay.replay_id, replay.request.group_id)
            return
        why = await asyncio.to_thread(_last_line, replay.directory / OUTPUT)
        replay.status, replay.error = "failed", why or f"the replay exited with code {code}"
        log.info("replay %s of group %r failed: %s", replay.replay_id, replay.request.group_id, replay.error)

    async def _forget_oldest(self) -> None:
        """Remove the oldest finished replays while more than ``max_kept`` are kept."""
        finished = [r for r in self._replays.values() if r.status != "running"]
        while len(self._replays) > self._max_kept and finished:
            await self._discard(finished.pop(0))

    async def _discard(self, replay: _Replay) -> None:
        self._replays.pop(replay.replay_id, None)
        await asyncio.to_thread(shutil.rmtree, replay.directory, True)


def _write_window(paths: Sequence[Path], request: ReplayRequest, directory: Path) -> int:
    """Write the group's rows up to the window's end into ``directory/events.jsonl``; how many (off the loop)."""
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    with (directory / EVENTS).open("wb") as out:
        for row in read_rows(paths):
            t = row.get("t")
            detail = row.get("detail")
            if type(t) is not int or t > request.until_ms or not isinstance(detail, str):
                continue
            if detail_fields(detail).get("group") != request.group_id:
                continue
            out.write(orjson.dumps(row) + b"\n")
            count += 1
    return count


def _read_result(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return doc


def _last_line(path: Path) -> str | None:
    """The last line of a child's output (the lab's one-line error), at most 300 characters."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:300] if lines else None


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
