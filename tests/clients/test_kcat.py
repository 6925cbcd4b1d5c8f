"""kcat (librdkafka's command-line client, Debian package ``kcat``) against ``regroup serve``: metadata
listing, producing from stdin, and the balanced consumer (``-G``: a consumer group with librdkafka's
default strategies) reading a topic to its end, committing on exit, and resuming from the committed
offsets the next time. Skipped when ``kcat`` is not on the PATH (``apt-get install kcat``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter

import pytest

from tests.clients.harness import SESSION_MS, Inspector, batch, produce
from tests.server.conftest import ServerProcess

pytest.importorskip("kafka")  # the records are produced and the offsets checked with kafka-python

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (Debian/Ubuntu: apt-get install kcat)")

PARTITIONS = 3
TOPIC, GROUP = "kcat-topic", "kcat-group"
TIMEOUT_S = 30


def kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    result = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited with {result.returncode}:\n{result.stderr}"
    return result.stdout


def consume_in_group(bootstrap: str) -> list[tuple[int, str]]:
    """One balanced-consumer run of kcat: join GROUP, read from the committed offsets (earliest when there
    are none) to the end of every partition, exit (committing its positions and leaving the group). Not
    ``-o beginning``: in ``-G`` mode kcat applies ``-o`` to every assigned partition, ignoring commits."""
    out = kcat(
        "-b", bootstrap, "-G", GROUP, "-e", "-q", "-f", "%p %s\\n", "-X", "auto.offset.reset=earliest",
        "-X", f"session.timeout.ms={SESSION_MS}", "-X", "heartbeat.interval.ms=200",
        TOPIC,
    )  # fmt: skip
    return [(int(p), v) for p, v in (line.split(" ", 1) for line in out.splitlines())]


def test_kcat_metadata_produce_and_balanced_consumer(server: ServerProcess) -> None:
    bootstrap = f"127.0.0.1:{server.port}"
    inspector = Inspector(bootstrap, TOPIC, PARTITIONS)
    inspector.create_topic()
    records = batch("a", 30, PARTITIONS)
    produce("kafka-python", bootstrap, TOPIC, records)

    metadata = json.loads(kcat("-b", bootstrap, "-L", "-J", "-t", TOPIC))
    assert [b["id"] for b in metadata["brokers"]] == [0]
    (topic,) = metadata["topics"]
    assert topic["topic"] == TOPIC
    assert sorted(p["partition"] for p in topic["partitions"]) == list(range(PARTITIONS))

    first = consume_in_group(bootstrap)
    assert Counter(first) == Counter((p, v.decode()) for p, v in records)
    assert inspector.committed(GROUP) == inspector.end_offsets() == dict.fromkeys(range(PARTITIONS), 10)
    assert inspector.group(GROUP).state == "Empty"

    kcat("-b", bootstrap, "-P", "-t", TOPIC, "-p", "1", stdin="b-0\nb-1\nb-2\n")  # librdkafka as producer
    second = consume_in_group(bootstrap)  # resumes from the committed offsets: only the new records
    assert second == [(1, "b-0"), (1, "b-1"), (1, "b-2")]
    assert inspector.committed(GROUP) == {0: 10, 1: 13, 2: 10}
    assert consume_in_group(bootstrap) == []  # everything committed: a fresh run reads nothing
