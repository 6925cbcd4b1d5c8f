"""The cleaning pass on the event loop (``server/log_cleaner.py``) does what the straightforward pass does —
for each topic in the store's order, for each opened partition in index order: ``segment.ms`` roll, retention
by ``retention.ms`` and ``retention.bytes`` (``cleanup.policy`` delete), compaction (compact) planned and
swapped in whole — now that it lists a topic's partitions when it reaches the topic and gives the loop back
between the groups a compaction swaps in: the same files, the same log start offsets, the same report, the
same calls in the same order, over random topics, policies and segments. A failure in one partition is
reported and the pass goes on; a group whose segments a DeleteRecords removed between two swaps is left for
the next pass, and a topic deleted in the middle of its compaction ends it quietly."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.server import log_cleaner
from regroup.server.log_cleaner import CleaningReport, LogCleaner
from regroup.server.topics import TopicStore
from regroup.storage import compaction
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.retention import enforce_retention, maybe_roll
from tests.server_data.batches import BASE_TS, make_batch

NOW = BASE_TS + 100_000
LATER = NOW + 10_000

policies = st.fixed_dictionaries(
    {
        "cleanup.policy": st.sampled_from(["delete", "compact", "compact,delete"]),
        "retention.ms": st.sampled_from(["-1", "50000", "99990", "604800000"]),
        "retention.bytes": st.sampled_from(["-1", "400", "2000"]),
        "segment.bytes": st.sampled_from(["200", "400", "100000"]),
        "segment.ms": st.sampled_from(["5000", "604800000"]),
        "delete.retention.ms": st.sampled_from(["0", "86400000"]),
    }
)
topic_specs = st.lists(
    st.tuples(policies, st.integers(1, 3), st.lists(st.integers(0, 12), min_size=1, max_size=3)), max_size=4
)


def _store(path: Path) -> TopicStore:
    return TopicStore.open(path, fsync=FsyncPolicy.NEVER)


def _build(path: Path, specs: list[tuple[dict[str, str], int, list[int]]]) -> None:
    """Topics ``t0``... with ``specs`` (configs, partitions, batches per partition — 0: never opened), keyed
    records over a few keys, some tombstones, timestamps spread over the last 100 s."""
    with _store(path) as store:
        for t, (configs, partitions, batches) in enumerate(specs):
            name = f"t{t}"
            store.create_topic(name, partitions, configs)
            for p in range(partitions):
                count = batches[p % len(batches)]
                if not count:
                    continue
                plog = store.partition(name, p)
                assert plog is not None
                for b in range(count):
                    ts = BASE_TS + b * 8_000
                    keys = [b"k%d" % ((b + i) % 3) for i in range(3)]
                    values: list[bytes | None] = [None if (b + i) % 5 == 4 else b"v%03d" % b for i in range(3)]
                    plog.append(make_batch(values, keys=keys, timestamps=[ts, ts + 1, ts + 2]), sync=False)


def _state(path: Path) -> dict[str, object]:
    """Every partition's files (name -> bytes) and log start offset."""
    out: dict[str, object] = {}
    with _store(path) as store:
        for (topic, p), plog in sorted(store.loaded_partitions()):
            files = {f.name: f.read_bytes() for f in sorted(plog.directory.iterdir())}
            out[f"{topic}/{p}"] = (files, plog.log_start_offset, plog.log_end_offset)
    return out


def _straightforward(store: TopicStore, now_ms: int) -> CleaningReport:
    """The pass as plainly as it reads: whole topics listed first, every compaction applied in one go."""
    report = CleaningReport()
    for topic in list(store.topics()):
        for plog in store.opened_partitions(topic):
            policy = store.configs.policy(topic)
            if maybe_roll(plog, now_ms, policy.segment_ms):
                report.rolled += 1
            if policy.delete:
                done = enforce_retention(
                    plog, now_ms, retention_ms=policy.retention_ms, retention_bytes=policy.retention_bytes
                )
                report.segments_deleted += done.segments_deleted
                report.bytes_deleted += done.bytes_deleted
            if policy.compact and plog.older_segments():
                _, result = compaction.compact(
                    plog,
                    now_ms,
                    delete_retention_ms=policy.delete_retention_ms,
                    min_lag_ms=policy.min_compaction_lag_ms,
                    group_bytes=policy.segment_bytes,
                )
                if result.segments_written:
                    report.compacted += 1
                    report.records_removed += result.records_removed
                    report.bytes_compacted_away += result.bytes_before - result.bytes_after
    return report


def _record_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []

    def spy(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(plog: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append((name, str(plog.directory)))
            return fn(plog, *args, **kwargs)

        return wrapped

    monkeypatch.setattr(log_cleaner, "maybe_roll", spy("roll", maybe_roll))
    monkeypatch.setattr(log_cleaner, "enforce_retention", spy("retain", enforce_retention))
    monkeypatch.setattr(compaction, "apply_steps", spy("swap", compaction.apply_steps))
    return calls


def _expected_calls(store: TopicStore, compacts: set[str]) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    for topic in store.topics():
        policy = store.configs.policy(topic)
        for plog in store.opened_partitions(topic):
            calls.append(("roll", str(plog.directory)))
            if policy.delete:
                calls.append(("retain", str(plog.directory)))
            if str(plog.directory) in compacts:
                calls.append(("swap", str(plog.directory)))
    return calls


@settings(max_examples=25, deadline=None)
@given(topic_specs)
def test_the_pass_on_the_loop_does_what_the_straightforward_pass_does(
    specs: list[tuple[dict[str, str], int, list[int]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _build(root / "built", specs)
        for copy in ("reference", "sync", "loop"):
            shutil.copytree(root / "built", root / copy)
        with _store(root / "reference") as store:
            reference = [_straightforward(store, NOW), _straightforward(store, LATER)]
        with _store(root / "sync") as store:
            cleaner = LogCleaner(store, store.configs.policy)
            sync = [cleaner.run_once(NOW), cleaner.run_once(LATER)]
        with _store(root / "loop") as store:
            cleaner = LogCleaner(store, store.configs.policy)
            loop = [asyncio.run(cleaner.run_async(lambda: NOW)), asyncio.run(cleaner.run_async(lambda: LATER))]
        assert loop == sync
        assert loop[0] == reference[0]  # (a second pass compacts only what was rolled since: not the reference's)
        assert _state(root / "loop") == _state(root / "sync")
        first = root / "first"
        shutil.copytree(root / "built", first)
        with _store(first) as store:
            _straightforward(store, NOW)
        shutil.copytree(root / "built", root / "first-loop")
        with _store(root / "first-loop") as store:
            asyncio.run(LogCleaner(store, store.configs.policy).run_async(lambda: NOW))
        assert _state(root / "first-loop") == _state(first)


def test_calls_come_in_the_store_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = {"segment.bytes": "200", "retention.ms": "-1", "segment.ms": "5000"}
    _build(tmp_path, [({**spec, "cleanup.policy": "compact"}, 3, [8, 0, 6]), ({**spec}, 2, [5]),
                      ({**spec, "cleanup.policy": "compact,delete"}, 2, [9, 1])])  # fmt: skip
    calls = _record_calls(monkeypatch)
    with _store(tmp_path) as store:
        compacts = {
            str(plog.directory)
            for topic in store.topics()
            if store.configs.policy(topic).compact
            for plog in store.opened_partitions(topic)
            if plog.older_segments()
        }
        report = asyncio.run(LogCleaner(store, store.configs.policy).run_async(lambda: NOW))
        assert not report.failures and report.compacted >= 2
        assert calls == _expected_calls(store, compacts)


def test_a_failing_partition_is_reported_and_the_pass_goes_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = {"segment.bytes": "200", "retention.ms": "50000"}
    _build(tmp_path, [(spec, 3, [6])])
    with _store(tmp_path) as store:
        broken = store.opened_partitions("t0")[1].directory

        def flaky(plog: Any, *args: Any, **kwargs: Any) -> Any:
            if plog.directory == broken:
                raise OSError("disk says no")
            return enforce_retention(plog, *args, **kwargs)

        monkeypatch.setattr(log_cleaner, "enforce_retention", flaky)
        report = asyncio.run(LogCleaner(store, store.configs.policy).run_async(lambda: NOW))
        assert len(report.failures) == 1 and "disk says no" in report.failures[0]
        assert report.segments_deleted > 0
        kept = {str(p.directory): p.log_start_offset for p in store.opened_partitions("t0")}
        assert kept[str(broken)] == 0 and all(v > 0 for k, v in kept.items() if k != str(broken))


def _compacted_topic(tmp_path: Path) -> None:
    spec = {"cleanup.policy": "compact", "segment.bytes": "200", "delete.retention.ms": "0"}
    _build(tmp_path, [(spec, 1, [12])])


def test_a_group_whose_segments_went_between_two_swaps_waits(tmp_path: Path) -> None:
    _compacted_topic(tmp_path)
    with _store(tmp_path) as store:
        plog = store.opened_partitions("t0")[0]
        planned = compaction.plan(plog.older_segments(), NOW, delete_retention_ms=0, group_bytes=200)
        assert len(planned.groups) >= 2
        oldest_group = planned.groups[0][0]
        steps = compaction.apply_steps(plog, planned)
        swapped = 0
        with pytest.raises(StopIteration) as finished:
            while True:
                work = next(steps)
                if getattr(work, "__name__", "") == "write":  # the groups before it are swapped in
                    if swapped == len(planned.groups) - 1:  # a DeleteRecords removes the oldest group's first segment
                        plog.advance_log_start(planned.groups[1][0][0])
                    swapped += 1
                work()
        result: compaction.CompactionResult = finished.value.value
        assert result.segments_written == len(planned.groups) - 1
        assert oldest_group[0] not in [span.base for span in plog.older_segments()]


def test_a_topic_deleted_during_its_compaction_ends_it_quietly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _compacted_topic(tmp_path)
    swapped: list[int] = []
    with _store(tmp_path) as store:
        real = PartitionLog.settle_rewrite

        def deleting(plog: PartitionLog, rewrite: Any) -> None:
            real(plog, rewrite)
            if not swapped:  # the newest group is in; while the loop has the turn, DeleteTopics
                swapped.append(1)
                store.delete_topic("t0")
                assert plog.closed

        monkeypatch.setattr(PartitionLog, "settle_rewrite", deleting)
        report = asyncio.run(LogCleaner(store, store.configs.policy).run_async(lambda: NOW))
        assert swapped == [1] and report.failures == [] and report.compacted == 1
