"""The Spark session the lab runs on: master (``local[*]`` by default), quiet logs, no UI, few shuffle
partitions, extra Spark settings from the command line, and a stop that really ends the JVM. Tests create one
session for the whole run with ``start("local[1]")``.

On a local master the Python workers run this interpreter. On any other master (``spark://``, ``yarn``,
``k8s://``) the executors get regroup and its run-time dependencies as a packed archive
(``executor_env``) through ``spark.archives``, unpacked into each executor's working directory and put on its
Python workers' path; the executors run ``python3`` (or ``spark.pyspark.python`` / ``PYSPARK_PYTHON``).

The JVM's own output (its start-up lines, Spark's logs when ``spark.log.level`` asks for them, the Python
workers' stderr) goes to ``log_file`` when one is given (the command's ``DIR/spark.log``), not to the terminal.

``Interrupts`` turns Ctrl-C into a cancellation of the running Spark jobs (PySpark's own handler raises in the
middle of a call to the JVM, and every layer then prints its traceback), so the command can stop Spark and say
one line. While Spark starts and stops, Ctrl-C is held back (``deferred_sigint``) and handled once that is done:
PySpark's launcher ignores SIGINT in the JVM it starts, so an interrupted start would leave that JVM running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
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
    log_file: Path | None = None,
) -> SparkSession:
    """A new session (or the running one) on ``master``; ``conf``: more Spark settings (they win); ``log_file``:
    where the JVM's stdout and stderr go (None: this process's)."""
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
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    spark: SparkSession | None = None
    try:
        with deferred_sigint():
            if SparkContext._gateway is None:  # the JVM, started as PySpark starts it, its output where we want it
                launch = SparkConf(loadDefaults=False).setAll(list(settings.items()))
                with contextlib.ExitStack() as files:
                    popen: dict[str, Any] = {}
                    if log_file is not None:
                        log = files.enter_context(log_file.open("ab"))
                        popen = {"stdout": log, "stderr": log}
                    gateway = launch_gateway(  # type: ignore[no-untyped-call]
                        launch.setMaster(master).setAppName(app), popen_kwargs=popen
                    )
                SparkContext._gateway = gateway
                SparkContext._jvm = gateway.jvm
            builder = SparkSession.builder.master(master).appName(app)
            for key, value in settings.items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            # Spark's own errors (a failed task's stack trace, ...) stay quiet: the command reports a failure in
            # one line; ``--conf spark.log.level=WARN`` shows them
            spark.sparkContext.setLogLevel(settings.get("spark.log.level", "FATAL"))
    except KeyboardInterrupt:  # held back during the start, delivered as it ended
        if spark is not None:
            stop(spark)
        raise
    return spark


def executor_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """``spark.archives`` and the executors' ``PYTHONPATH`` that ship this environment (merged with what
    ``conf`` already sets for them)."""
    from regroup.lab import executor_env

    shipped = f"{executor_env.archive()}#{executor_env.ALIAS}"
    archives = ",".join(a for a in (conf.get("spark.archives"), shipped) if a)
    path = ":".join(p for p in (executor_env.ALIAS, conf.get("spark.executorEnv.PYTHONPATH")) if p)
    return {"spark.archives": archives, "spark.executorEnv.PYTHONPATH": path}


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Ctrl-C (SIGINT) is held back while the block runs and delivered after it, to the handler that was in
    place before (PySpark's ``SparkContext`` installs its own, which calls the JVM from inside the signal handler,
    in the middle of the main thread's call to it). On the main thread only; elsewhere the block just runs."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    interrupted = False
    try:
        yield
    finally:
        # a Ctrl-C that came meanwhile waits, blocked: take it here and raise it ourselves, so it is neither
        # lost nor left to whatever handler a library installed in the block
        interrupted = signal.SIGINT in signal.sigpending() and signal.sigtimedwait({signal.SIGINT}, 0) is not None
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if interrupted:
        raise KeyboardInterrupt


def stop(spark: SparkSession) -> None:
    """Stop Spark and the JVM pyspark started for it (nothing is left running); Ctrl-C meanwhile is handled
    once it has stopped."""
    with deferred_sigint():
        _stop(spark)


def _stop(spark: SparkSession) -> None:
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
