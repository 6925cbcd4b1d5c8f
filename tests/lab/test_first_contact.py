"""What a new user meets first, run as a user runs it (subprocesses): without Java every lab command that starts
Spark says what to install, and ``lab report`` and a small ``lab analyze`` need no Java at all; without the ``lab``
extra the server, the assignors and the simulator work and ``regroup lab`` says what to install; Ctrl-C during a
sweep, while Spark starts or while it runs, prints one line and leaves no process behind; a failed Spark job is one
line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import failures, preflight
from tests.lab.logs import eager_story
from tests.lab.test_cli import REGROUP, ROOT

#: the commands that start Spark (an analyze given a master does)
SPARK_COMMANDS = (
    ("sweep", "examples/lab/quick.yaml", "--out", "OUT"),
    ("analyze", "some.jsonl", "--out", "OUT", "--master", "local[1]"),
)
LAB_COMMANDS = (*SPARK_COMMANDS, ("report", "OUT"))


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def one_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", SPARK_COMMANDS, ids=[c[0] for c in SPARK_COMMANDS])
def test_without_java_every_lab_command_says_what_to_install(tmp_path: Path, command: tuple[str, ...]) -> None:
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    no_java = _env(PATH=str(Path(sys.executable).parent), JAVA_HOME=None)  # the venv's scripts, and nothing else
    line = one_line(subprocess.run([str(REGROUP), "lab", *args], env=no_java, cwd=ROOT, **_RUN), 2)
    assert line == f"regroup: {preflight.JAVA_HINT} (no java on the PATH)"
    assert not (tmp_path / "out").exists()
    with_bad_home = _env(JAVA_HOME=str(tmp_path))
    line = one_line(subprocess.run([str(REGROUP), "lab", *args], env=with_bad_home, cwd=ROOT, **_RUN), 2)
    assert line == f"regroup: {preflight.JAVA_HINT} (JAVA_HOME={tmp_path} has no bin/java)"


def test_report_and_a_small_analysis_need_no_java_and_start_no_spark(tmp_path: Path) -> None:
    (tmp_path / "story.jsonl").write_text(eager_story().text(), encoding="utf-8")
    no_java = _env(PATH=str(Path(sys.executable).parent), JAVA_HOME=None)
    out = tmp_path / "out"
    for args in (("analyze", "story.jsonl", "--out", str(out), "--measure-from-ms", "50"), ("report", str(out))):
        proc = subprocess.run([str(REGROUP), "lab", *args], env=no_java, cwd=tmp_path, **_RUN)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"{out / 'report.html'}\n"
        assert all(line.startswith("regroup lab: ") for line in proc.stderr.splitlines()), proc.stderr
    analyzed = subprocess.run(
        [str(REGROUP), "lab", "analyze", "story.jsonl", "--out", str(out)], env=no_java, cwd=tmp_path, **_RUN
    ).stderr.splitlines()
    assert analyzed[0] == "regroup lab: analyze: 1 files, in this process"
    assert re.fullmatch(r"regroup lab: analyze: 1/1 files analysed in \d+\.\d s", analyzed[1])
    assert re.fullmatch(r"regroup lab: done in \d+\.\d s of wall time in all", analyzed[-1])
    assert not (out / "spark.log").exists()
    meta = json.loads((out / "lab.json").read_text(encoding="utf-8"))
    assert meta["master"] == "none (in this process)" and re.fullmatch(r"\d+\.\d s", meta["analysed in"])


@pytest.mark.skipif(preflight.java_problem() is not None, reason="the lab checks for Java first")
def test_a_spark_setting_that_is_not_key_value_is_one_line(tmp_path: Path) -> None:
    args = ["sweep", "examples/lab/quick.yaml", "--out", str(tmp_path / "out"), "--conf", "spark.executor.memory"]
    line = one_line(subprocess.run([str(REGROUP), "lab", *args], cwd=ROOT, **_RUN), 2)
    assert line == "regroup: --conf 'spark.executor.memory': must be KEY=VALUE"


def test_java_versions_are_read_as_java_prints_them() -> None:
    assert preflight.java_major('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment') == 17
    assert preflight.java_major('openjdk version "21" 2023-09-19') == 21
    assert preflight.java_major('java version "1.8.0_402"\nJava(TM) SE Runtime Environment') == 8
    assert preflight.java_major('openjdk version "11.0.22" 2024-01-16') == 11
    assert preflight.java_major("no version here") is None


_RUN: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 300}

#: runs the command line with the lab extra's modules made unimportable, as after ``pip install regroup``
_WITHOUT_EXTRA = """
import sys
from importlib.abc import MetaPathFinder

class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j", "matplotlib", "confluent_kafka", "pyarrow"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NotInstalled())
from regroup.cli.main import main
code = main(sys.argv[1:])
extra = ("pyspark", "matplotlib", "pyarrow")
assert not any(m.split(".")[0] in extra for m in sys.modules), "the lab extra was imported"
sys.exit(code)
"""


def without_extra(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _WITHOUT_EXTRA, *args], cwd=cwd, **_RUN)


def test_without_the_lab_extra_the_rest_works_and_the_lab_says_what_to_install(tmp_path: Path) -> None:
    events = str(tmp_path / "e.jsonl")
    proc = without_extra("simulate", "third-member-joins-eager", "--summary-json", "--events", events)
    assert proc.returncode == 0, proc.stderr
    assert '"rebalances"' in proc.stdout and (tmp_path / "e.jsonl").stat().st_size > 0
    proc = without_extra("strategies")
    assert proc.returncode == 0 and "cooperative-sticky" in proc.stdout.split(), proc.stderr
    proc = without_extra("serve", "--help")
    assert proc.returncode == 0 and "--consumer-assignors" in proc.stdout, proc.stderr
    for command in LAB_COMMANDS:
        args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
        line = one_line(without_extra("lab", *args), 2)
        assert line == f"regroup: {preflight.EXTRA_HINT} (missing: pyspark, matplotlib, pyarrow)"


# --------------------------------------------------------------------------------------------- with Spark
def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
@pytest.mark.skipif(preflight.java_problem() is not None, reason="the lab needs Java")
@pytest.mark.parametrize(
    "when",
    [
        "regroup lab: starting Spark",  # while the JVM starts (PySpark's launcher has it ignore SIGINT)
        " tasks (~",  # while the sweep's tasks run
    ],
    ids=["while-spark-starts", "while-tasks-run"],
)
def test_ctrl_c_ends_a_sweep_with_one_line_and_leaves_nothing_running(tmp_path: Path, when: str) -> None:
    grid = tmp_path / "long.yaml"  # long enough that Ctrl-C comes while the sweep runs
    grid.write_text(
        "members: [10, 20]\ntopics: [4]\npartitions: [64]\nchurn: [{pattern: rolling, events: 6}]\n"
        "strategies: [range, cooperative-sticky]\nprotocols: [eager, cooperative]\nseeds: {count: 20}\n"
        "settings: {jitter_ms: 2}\n",
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [str(REGROUP), "lab", "sweep", str(grid), "--out", str(tmp_path / "out"), "--master", "local[2]"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        assert proc.stderr is not None
        before: list[str] = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"the sweep ended before it was interrupted: {before}"
            before.append(line)
            if when in line:
                break
        while not _descendants(proc.pid) and time.monotonic() < deadline:  # (the JVM is being launched)
            time.sleep(0.05)
        family = _descendants(proc.pid)
        assert family, "Spark's JVM runs as a child of the command"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        after = proc.stderr.read()
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert after.splitlines() == ["regroup: interrupted"], after
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in family if _alive(pid)]


def test_a_failed_job_is_one_line(spark: Any) -> None:
    """A task that raises: what the command prints is the worker's exception, not the stack traces."""

    def boom(x: int) -> int:
        raise ValueError(f"no run for {x}")

    with pytest.raises(Exception) as caught:
        spark.sparkContext.parallelize([7], 1).map(boom).collect()
    assert failures.one_line(caught.value) == "ValueError: no run for 7"


def test_java_side_failures_are_reduced_to_their_cause() -> None:
    lost = (
        "org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 4 times, "
        "most recent failure: Lost task 1.3 in stage 0.0 (TID 4) (127.0.0.1 executor 0): java.io.IOException: "
        'Cannot run program "/nowhere/python": error=2, No such file or directory\n\tat java.base/java.lang.Pr'
    )
    assert failures.one_line(RuntimeError(lost)) == (
        'java.io.IOException: Cannot run program "/nowhere/python": error=2, No such file or directory'
    )
    worker = (
        'An exception was thrown from the Python worker:\nTraceback (most recent call last):\n  File "x.py", '
        "line 1, in <module>\n    import regroup.assignors\nModuleNotFoundError: No module named 'regroup.assignors'"
        " SQLSTATE: 38000\n\tat org.apache.spark.api.python.BasePythonRunner"
    )
    assert failures.one_line(RuntimeError(worker)) == "ModuleNotFoundError: No module named 'regroup.assignors'"
