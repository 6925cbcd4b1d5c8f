"""The Spark session the lab runs on: master (``local[*]`` by default), quiet logs, no UI, few shuffle
partitions, extra Spark settings from the command line, and a stop that really ends the JVM. Tests create one
session for the whole run with ``start("local[1]")``.

On a local master the Python workers run this interpreter. On any other master (``spark://``, ``yarn``,
``k8s://``) the executors get regroup and its run-time dependencies as a packed archive
(``executor_env``) through ``spark.archives``, unpacked into each executor's working directory and put on its
Python workers' path; the executors run ``python3`` (or ``spark.pyspark.python`` / ``PYSPARK_PYTHON``).

``Interrupts`` turns Ctrl-C into a cancellation of the running Spark jobs (PySpark's own handler raises in the
middle of a call to the JVM, and every layer then prints its traceback), so the command can stop Spark and say
one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Mapping
from importlib import resources
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def start(
    master: str = DEFAULT_MASTER,
    app: str = "regroup-lab",
    shuffle_partitions: int = 4,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A new session (or the running one) on ``master``; ``conf``: more Spark settings (they win)."""
    log_config = resources.files("regroup.lab") / "log4j2.properties"
    settings: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{log_config}",
        "spark.python.worker.reuse": "true",
    }
    if is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname warning on a laptop
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this interpreter
    else:
        settings.update(executor_settings(conf or {}))
    settings.update(conf or {})
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # Spark's own errors (a failed task's stack trace, ...) stay quiet: the command reports a failure in one line;
    # ``--conf spark.log.level=WARN`` shows them
    spark.sparkContext.setLogLevel(settings.get("spark.log.level", "FATAL"))
    return spark


def executor_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """``spark.archives`` and the executors' ``PYTHONPATH`` that ship this environment (merged with what
    ``conf`` already sets for them)."""
    from regroup.lab import executor_env

    shipped = f"{executor_env.archive()}#{executor_env.ALIAS}"
    archives = ",".join(a for a in (conf.get("spark.archives"), shipped) if a)
    path = ":".join(p for p in (executor_env.ALIAS, conf.get("spark.executorEnv.PYTHONPATH")) if p)
    return {"spark.archives": archives, "spark.executorEnv.PYTHONPATH": path}


def stop(spark: SparkSession) -> None:
    """Stop Spark and the JVM pyspark started for it (nothing is left running)."""
    from pyspark import SparkContext

    with contextlib.suppress(Exception):  # a JVM that is gone already: what follows ends its process
        spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:
        pass
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            proc.stdin.close() if proc.stdin else None
            try:
                proc.wait(timeout=20)
            except Exception:
                proc.kill()
                proc.wait()


class Interrupts:
    """While installed (a ``with`` block on the main thread): Ctrl-C cancels the session's Spark jobs from
    another thread, so the job the command waits for fails as cancelled and the command can stop cleanly;
    ``interrupted`` says it happened. A second Ctrl-C kills the JVM at once."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.interrupted = False
        self._previous: Any = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupted:
            _kill_jvm()
            return
        self.interrupted = True
        threading.Thread(target=self._cancel, name="regroup-lab-cancel", daemon=True).start()

    def _cancel(self) -> None:
        with contextlib.suppress(Exception):  # the JVM is going away anyway
            self.spark.sparkContext.cancelAllJobs()


def _kill_jvm() -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is not None:
        proc.kill()
