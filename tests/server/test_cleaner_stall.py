"""The cleaning pass over 10,000 partitions does not stall ``regroup serve``'s event loop: with
``--stall-warn-ms 50`` and a pass every 200 ms, the passes that roll and compact a compacted topic of 1,000
partitions and delete the expired segments of 9,000 others (``retention.ms`` lowered over the wire once the
server runs) leave the watchdog's stall counters where they were (``server/log_cleaner.py`` gives the loop
back after every partition and between two swapped groups). The data dir is written beforehand with the store
itself, so that the server opens 10,000 partitions with segments."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server.conftest import ServerProcess, assert_clean_log, free_port
from tests.server.test_metrics import Samples, scrape
from tests.server.wire import WireClient
from tests.server_data.batches import make_batch

#: latency-bound: run alone, after the parallel run (`make unit`)
pytestmark = pytest.mark.serial

TOPICS, PARTITIONS, SEGMENTS = 10, 1_000, 3
INCREMENTAL_ALTER_CONFIGS, SET = 44, 0


def _build(topics_dir: Path) -> None:
    now = int(time.time() * 1000)
    with TopicStore.open(topics_dir, fsync=FsyncPolicy.NEVER) as store:
        for t in range(TOPICS):
            configs = (
                {"cleanup.policy": "compact", "segment.ms": "100"}
                if t == 0
                else {"retention.ms": "-1", "retention.bytes": "-1"}
            )
            store.create_topic(f"c{t}", PARTITIONS, configs)
            for p in range(PARTITIONS):
                plog = store.partition(f"c{t}", p)
                assert plog is not None
                for s in range(SEGMENTS):
                    plog.append(make_batch([b"v%d" % s] * 2, keys=[b"a", b"b"], timestamps=[now, now]), sync=False)
                    if s < SEGMENTS - 1:
                        plog.roll_active()


def _stalls(samples: Samples) -> dict[str, float]:
    return {
        dict(labels).get("api", ""): count
        for (name, labels), count in samples.items()
        if name == "regroup_event_loop_stalls_total"
    }


def _log_files(topics_dir: Path, topics: range) -> int:
    return sum(1 for t in topics for _ in (topics_dir / "topics" / f"c{t}").glob("*/*.log"))


def test_cleaning_passes_over_10_000_partitions_do_not_stall_the_loop(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topics_dir = data / "topics"
    _build(topics_dir)
    assert _log_files(topics_dir, range(1, TOPICS)) == (TOPICS - 1) * PARTITIONS * SEGMENTS
    metrics_port = free_port()
    args = ["--fsync", "never", "--stall-warn-ms", "50", "--log-retention-check-interval-ms", "200",
            "--metrics-port", str(metrics_port)]  # fmt: skip
    server = ServerProcess(data, tmp_path / "server.log", args)
    server.start()
    try:
        time.sleep(1.0)  # (the first periodic passes: the compacted topic's active segments start their age)
        _, samples = scrape(metrics_port)
        before = _stalls(samples)
        with WireClient(server.port, timeout=30) as admin:
            answer = admin.call(INCREMENTAL_ALTER_CONFIGS, 1, resources=[
                {"resource_type": 2, "resource_name": f"c{t}",
                 "configs": [{"name": "retention.ms", "value": "1", "config_operation": SET}]}
                for t in range(1, TOPICS)
            ], validate_only=False)  # fmt: skip
        assert [int(r.error_code) for r in answer.responses] == [0] * (TOPICS - 1)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _log_files(topics_dir, range(1, TOPICS)) > (TOPICS - 1) * PARTITIONS:
            time.sleep(0.2)
        assert _log_files(topics_dir, range(1, TOPICS)) == (TOPICS - 1) * PARTITIONS, "expired segments left"
        time.sleep(1.0)  # (another whole pass, with nothing left to do)
        _, samples = scrape(metrics_port)
        after = _stalls(samples)
    finally:
        server.kill()
    assert_clean_log(server)
    log = server.log()
    assert "segments_deleted=" in log and "compacted=" in log, log[-3000:]
    lines = [line for line in log.splitlines() if "log cleaning" in line]
    assert any(" compacted=0 " not in line for line in lines), lines[-5:]  # the compacted topic was compacted
    grown = {api: count - before.get(api, 0.0) for api, count in after.items() if count != before.get(api, 0.0)}
    assert grown == {}, f"stalls counted while cleaning: {grown}\n" + "\n".join(
        line for line in log.splitlines() if "regroup.server.watchdog" in line
    )
