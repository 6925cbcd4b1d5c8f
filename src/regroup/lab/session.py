"""The Spark session the lab runs on: master (``local[*]`` by default), quiet logs, no UI, few shuffle
partitions, the regroup package shipped to executors when the master is not local, and a stop that really
ends the JVM. Tests create one session for the whole run with ``start("local[1]")``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def start(master: str = DEFAULT_MASTER, app: str = "regroup-lab", shuffle_partitions: int = 4) -> SparkSession:
    """A new session (or the running one) on ``master``."""
    if is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname warning on a laptop
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this interpreter
    log_config = resources.files("regroup.lab") / "log4j2.properties"
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log_config}")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local(master):
        spark.sparkContext.addPyFile(str(package_zip()))
    return spark


def package_zip() -> Path:
    """The regroup package as a zip for ``addPyFile`` (its dependencies must be installed on executors)."""
    root = Path(__file__).resolve().parents[1]
    target = Path(tempfile.mkdtemp(prefix="regroup-lab-")) / "regroup.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, Path("regroup") / path.relative_to(root))
    return target


def stop(spark: SparkSession) -> None:
    """Stop Spark and the JVM pyspark started for it (nothing is left running)."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
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
