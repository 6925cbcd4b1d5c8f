"""The pieces around Spark that need no JVM: the package zip shipped to a cluster's executors, the master
check, and the progress lines (against a stand-in status tracker)."""

from __future__ import annotations

import io
import time
import zipfile
from dataclasses import dataclass
from typing import Any

from regroup.lab import session
from regroup.lab.progress import Progress


def test_package_zip_holds_the_whole_package_without_caches() -> None:
    path = session.package_zip()
    names = zipfile.ZipFile(path).namelist()
    assert "regroup/__init__.py" in names and "regroup/lab/metrics.py" in names and "regroup/sim/engine.py" in names
    assert "regroup/lab/log4j2.properties" in names
    assert not any("__pycache__" in n for n in names)


def test_local_masters() -> None:
    assert session.is_local("local") and session.is_local("local[*]") and session.is_local("local[2]")
    assert not session.is_local("spark://head:7077") and not session.is_local("yarn")


@dataclass
class _Stage:  # the fields Spark's StageInfo has
    numTasks: int
    numCompletedTasks: int


class _Tracker:
    def __init__(self) -> None:
        self.done = 0

    def getActiveStageIds(self) -> list[int]:
        return [7]

    def getStageInfo(self, stage_id: int) -> _Stage:
        self.done = min(self.done + 1, 20)
        return _Stage(numTasks=20, numCompletedTasks=self.done)


class _Context:
    def __init__(self) -> None:
        self.tracker = _Tracker()

    def statusTracker(self) -> _Tracker:
        return self.tracker


def test_progress_lines() -> None:
    out = io.StringIO()
    sc: Any = _Context()
    with Progress(sc, "sweep", items=200, interval=0.005, out=out):
        while sc.tracker.done < 20:
            time.sleep(0.01)
    lines = out.getvalue().splitlines()
    assert lines[0] == "regroup lab: sweep: 200 runs"
    assert lines[-1].startswith("regroup lab: sweep: 200/200 runs done in ")
    middle = lines[1:-1]
    assert middle and all(line.startswith("regroup lab: sweep: ") and "/20 tasks (~" in line for line in middle)
    assert len(middle) <= 20  # one line per 5 % at most, here one per completed task


class _TwoStageTracker:
    """A count over a cached DataFrame: 20 tasks, then a final stage of one task."""

    def __init__(self) -> None:
        self.polls = 0

    def getActiveStageIds(self) -> list[int]:
        return [1] if self.polls < 20 else [2]

    def getStageInfo(self, stage_id: int) -> _Stage:
        self.polls += 1
        if stage_id == 1:
            return _Stage(numTasks=20, numCompletedTasks=min(self.polls, 20))
        return _Stage(numTasks=1, numCompletedTasks=0)


def test_progress_ignores_a_final_smaller_stage() -> None:
    out = io.StringIO()
    sc: Any = _Context()
    sc.tracker = _TwoStageTracker()
    with Progress(sc, "sweep", items=200, interval=0.005, out=out):
        while sc.tracker.polls < 40:
            time.sleep(0.01)
    middle = out.getvalue().splitlines()[1:-1]
    assert middle and all("/20 tasks (~" in line for line in middle)  # never "0/1 tasks (~0/200 runs)"
