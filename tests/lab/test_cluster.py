"""The lab on a real Spark standalone cluster: a master and two workers on 127.0.0.1, started from the installed
PySpark's own ``bin/spark-class``. The workers have Spark and a bare Python of the driver's minor version (a venv
with nothing installed, no ``PYTHONPATH``), so the executors can only run what the lab ships them. The same grid
swept there and on ``local[2]`` gives identical tables; a job whose executors cannot start Python fails with one
line. Skipped only where the lab cannot run at all (no Java)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import preflight
from tests.lab.test_cli import REGROUP, ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(preflight.java_problem() is not None, reason="the lab needs Java"),
]

GRID = """
name: cluster
members: [3, 5]
topics: [1]
partitions: [8]
churn: [{pattern: leave, events: 1}, {pattern: crash, events: 1}]
strategies: [range, cooperative-sticky, uniform]
protocols: [eager, cooperative, consumer]
seeds: [0, 1]
settings: {jitter_ms: 2, tail_ms: 12000}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


class Cluster:
    def __init__(self, folder: Path) -> None:
        import pyspark

        self.folder = folder
        self.spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.bare = folder / "bare-python"  # the workers' Python: this one's minor version, nothing installed
        venv.EnvBuilder(with_pip=False, symlinks=True).create(self.bare)
        keep = ("HOME", "JAVA_HOME", "LANG", "TMPDIR")
        self.env = {k: v for k, v in os.environ.items() if k in keep}
        self.env.update(
            PATH=f"{self.bare / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            SPARK_HOME=str(self.spark_class.parent.parent),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(folder / "logs"),
        )

    def _start(self, name: str, *args: str) -> None:
        log = (self.folder / f"{name}.log").open("wb")
        command = [str(self.spark_class), *args]
        self.procs.append(
            subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        )

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def start(self) -> None:
        master = ("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port))
        self._start("master", *master, "--webui-port", "0")
        _wait(lambda: "I have been elected leader" in self.log("master"), 120, "the Spark master")
        for i in (1, 2):
            work = self.folder / f"work{i}"
            worker = ("org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores", "1")
            self._start(f"worker{i}", *worker, "--memory", "1g", "--webui-port", "0", "--work-dir", str(work))
        _wait(lambda: self.log("master").count("Registering worker") >= 2, 120, "two Spark workers")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("standalone"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _sweep(grid: Path, out: Path, master: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The command as a user on the driver's machine runs it (executors run ``python3``: PYSPARK_PYTHON unset,
    unless ``env`` sets it; the tests' own local session set it in this process)."""
    driver = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    return subprocess.run(
        [str(REGROUP), "lab", "sweep", str(grid), "--out", str(out), "--master", master],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**driver, **env},
    )


def test_the_workers_python_has_none_of_the_dependencies(cluster: Cluster) -> None:
    python = cluster.bare / "bin" / "python3"
    probe = f"import sys; print(sys.version_info[:2] == {tuple(sys.version_info[:2])!r})"
    same = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=cluster.env)
    assert same.stdout == "True\n", same.stderr
    for module in ("numpy", "ortools", "regroup", "yaml"):
        found = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, env=cluster.env)
        assert found.returncode != 0, module


def test_a_sweep_on_a_standalone_cluster_equals_local(spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    grid = tmp_path / "cluster.yaml"
    grid.write_text(GRID, encoding="utf-8")
    on_cluster = _sweep(grid, tmp_path / "cluster", cluster.url)
    assert on_cluster.returncode == 0, on_cluster.stderr
    assert "Traceback" not in on_cluster.stderr
    local = _sweep(grid, tmp_path / "local", "local[2]")
    assert local.returncode == 0, local.stderr
    for table in ("runs", "rebalances"):
        remote_rows = spark.read.parquet(str(tmp_path / "cluster" / table)).collect()
        local_rows = spark.read.parquet(str(tmp_path / "local" / table)).collect()
        assert remote_rows and sorted(map(tuple, remote_rows)) == sorted(map(tuple, local_rows)), table
    # the executors ran in the workers' own directories, from the archive the lab shipped them
    unpacked = [p for i in (1, 2) for p in (cluster.folder / f"work{i}").glob("app-*/*/regroup-env/regroup/lab")]
    assert len({p.parts[-6] for p in unpacked}) == 2, unpacked  # both workers


def test_a_failed_job_on_the_cluster_is_one_line(cluster: Cluster, tmp_path: Path) -> None:
    grid = tmp_path / "cluster.yaml"
    grid.write_text(GRID, encoding="utf-8")
    proc = _sweep(grid, tmp_path / "out", cluster.url, PYSPARK_PYTHON="/nowhere/python3")
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("regroup: ")]
    assert errors == [
        'regroup: the Spark job failed: java.io.IOException: Cannot run program "/nowhere/python3": error=2, '
        "No such file or directory"
    ], proc.stderr
    assert "Traceback" not in proc.stderr and "\tat " not in proc.stderr
