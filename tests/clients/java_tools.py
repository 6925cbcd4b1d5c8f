"""Kafka's Java client for the tests that run it: where its jars are (``../shared/java`` beside the repository, or
``REGROUP_KAFKA_JAVA``) and the class path to compile and run a test program against, or None where the jars or
a JDK are missing (the tests then skip)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

KAFKA_JAVA = Path(os.environ.get("REGROUP_KAFKA_JAVA", Path(__file__).resolve().parents[2].parent / "shared" / "java"))


def kafka_classpath() -> str | None:
    """kafka-clients.jar and the jars it needs, joined for ``-cp``; None without them or without java/javac."""
    jars = [KAFKA_JAVA / "kafka-clients.jar", *sorted((KAFKA_JAVA / "lib").glob("*.jar"))]
    if not jars[0].is_file() or shutil.which("java") is None or shutil.which("javac") is None:
        return None
    return os.pathsep.join(str(j) for j in jars)


def java_program(source: Path, out: Path) -> list[str]:
    """Compile ``source`` into ``out`` against Kafka's client and return the ``java`` command that runs its classes
    (its main class still to be named); skips the calling test where the client or a JDK is missing."""
    classpath = kafka_classpath()
    if classpath is None:
        pytest.skip("Kafka's Java client or a JDK is not installed (../shared/java)")
    subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(source)], check=True, timeout=120)
    return ["java", "-cp", f"{out}{os.pathsep}{classpath}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
