"""The pieces around Spark that need no JVM: what a cluster's executors are sent, the master check, and the
progress lines (against a stand-in status tracker)."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regroup
from regroup.lab import executor_env, session
from regroup.lab.progress import Progress


def test_every_package_directory_is_a_regular_package() -> None:
    """A directory of modules without ``__init__.py`` is a namespace package, which Python does not import from
    a zip (what a cluster's executors were sent before: ``No module named 'regroup.assignors'``)."""
    root = Path(regroup.__file__).parent
    folders = {p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    assert folders and all((folder / "__init__.py").is_file() for folder in folders), sorted(
        str(f) for f in folders if not (f / "__init__.py").is_file()
    )


def test_the_executor_environment_holds_regroup_and_its_run_time_dependencies_only() -> None:
    files, key = executor_env._contents()
    names = {name for _, name in files}
    for needed in ("regroup/__init__.py", "regroup/assignors/__init__.py", "regroup/lab/runner.py"):
        assert needed in names
    assert "regroup/lab/log4j2.properties" in names and "regroup/sim/scenarios/third-member-joins-eager.json" in names
    tops = {name.split("/")[0] for name in names}
    for package in ("numpy", "ortools", "kio", "re2", "crc32c", "yaml", "mypy_extensions"):
        assert package in tops or f"{package}.py" in tops, package
    for driver_only in ("pyspark", "py4j", "matplotlib", "confluent_kafka"):
        assert driver_only not in tops
    assert not any("__pycache__" in n or n.endswith(".pyc") or n.startswith("..") for n in names)
    assert executor_env._contents()[1] == key  # named by what it holds: the same environment, the same name


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
