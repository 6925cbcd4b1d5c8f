"""Kafka's own Java client (``../shared/java``: kafka-clients 4.0) against ``regroup serve``: a transactional
producer commits and aborts, a second instance fences the first (its send gets InvalidProducerEpochException,
which Kafka's client treats as abortable, and its abort ProducerFencedException, fatal — Kafka's answers with
transaction version 1), a read_committed consumer reads the committed records only, and the Admin client's
KIP-664 views list and describe the open transaction and the partition's producer (``java/TxnCheck.java``).
Skipped where Java or the jars are absent."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.clients.java_tools import kafka_classpath
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(180)

SOURCE = Path(__file__).with_name("java") / "TxnCheck.java"


def test_the_java_client_transactions_and_admin_views(tmp_path: Path) -> None:
    classpath = kafka_classpath()
    if classpath is None:
        pytest.skip("Kafka's Java client (../shared/java) or a JDK is not installed")
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), str(SOURCE)], check=True, timeout=120)
    server = ServerProcess(tmp_path / "data", tmp_path / "server.log", [])
    server.start()
    try:
        topic, tid = "java-" + uuid.uuid4().hex[:6], "java-tx-" + uuid.uuid4().hex[:6]
        java = ["java", "-cp", f"{classes}{os.pathsep}{classpath}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
        run = subprocess.run(
            [*java, "TxnCheck", f"127.0.0.1:{server.port}", topic, tid], capture_output=True, text=True, timeout=150
        )
    finally:
        server.kill()
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "listed Ongoing",
        f"described Ongoing [{topic}-0]",
        "producer txnStart=6",  # c0-c2, their COMMIT marker, a0, its ABORT marker: the open one starts at 6
        "zombie send InvalidProducerEpochException",
        "zombie abort ProducerFencedException",
        "read_committed [c0, c1, c2, c3]",
    ], run.stdout + run.stderr
    log = server.log()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
