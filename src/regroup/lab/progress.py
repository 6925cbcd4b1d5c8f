"""Progress of a long Spark job on stderr: a background thread polls Spark's status tracker and prints
``regroup lab: <what>: <done>/<total> tasks (~<runs> runs), <seconds> s`` when another 5 % of the tasks
are done, or at least every ``10 * interval`` seconds while tasks complete (it polls every ``interval``),
so a 10,000-run sweep is neither silent nor a flood. The last line says what was done and how long the job took
(``108/108 runs simulated in 13.6 s``: the Spark job, not Spark's start-up); ``seconds`` keeps that time."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext


class Progress:
    """``with Progress(sc, "sweep", items=10_000): ...`` prints progress while the block runs."""

    def __init__(
        self,
        sc: SparkContext,
        what: str,
        items: int,
        unit: str = "runs",
        interval: float = 2.0,
        out: IO[str] | None = None,
        done: str = "done",
    ) -> None:
        self.sc, self.what, self.items, self.unit, self.interval = sc, what, items, unit, interval
        self.done = done
        self.seconds: float | None = None
        self.out = out or sys.stderr
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="regroup-lab-progress", daemon=True)
        self._started = 0.0
        self._last_done = -1
        self._last_at = 0.0
        self._largest = 0  # the most tasks seen at once: a smaller stage after it (e.g. a count's final
        # one-task stage over a cached DataFrame) is the job's tail, not its progress

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self.line(f"{self.items} {self.unit}")
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if kind is None:
            self.seconds = round(time.monotonic() - self._started, 1)
            self.line(f"{self.items}/{self.items} {self.unit} {self.done} in {self.seconds:.1f} s")

    def line(self, text: str) -> None:
        say(self.what, text, self.out)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                done, total = self._tasks()
            except Exception:  # the tracker is best effort; progress must never break a job
                continue
            if total == 0 or total < self._largest:
                continue
            self._largest = total
            now = time.monotonic()
            approx = self.items * done // total
            text = f"{done}/{total} tasks (~{approx}/{self.items} {self.unit}), {now - self._started:.0f} s"
            step = (done - self._last_done) / total
            if done != self._last_done and (step >= 0.05 or now - self._last_at >= 10 * self.interval):
                self._last_done, self._last_at = done, now
                self.line(text)

    def _tasks(self) -> tuple[int, int]:
        tracker = self.sc.statusTracker()
        done = total = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return done, total


def say(what: str, text: str, out: IO[str] | None = None) -> None:
    """One progress line: ``regroup lab: <what>: <text>`` on stderr."""
    print(f"regroup lab: {what}: {text}", file=out or sys.stderr, flush=True)
