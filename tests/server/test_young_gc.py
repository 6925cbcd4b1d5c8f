"""The young-only collector of ``regroup serve`` (``server/young_gc.py``): the thresholds it sets and restores,
survivors frozen after each collection, cycles among them kept until a reclamation and freed by it, and the
reclamation's rule (the heap's smallest over the window, against what the last one left)."""

from __future__ import annotations

import asyncio
import gc
import mmap
import os
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from regroup.server import young_gc
from regroup.server.app import Server, ServerConfig
from regroup.server.metrics import exposition
from regroup.server.young_gc import NEVER, YoungCollector, freeze_young, heap_pages, young_count
from regroup.storage.record_log import FsyncPolicy


class Node:
    """A container that can sit in a reference cycle and be watched through a weak reference."""

    def __init__(self) -> None:
        self.other: object = None


@pytest.fixture
def collector() -> Iterator[YoungCollector]:
    before = gc.get_threshold()
    young = YoungCollector(5_000, window=3)
    young.install()
    try:
        yield young
    finally:
        young.uninstall()
        gc.set_threshold(*before)


def _in_a_generation(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


def test_install_sets_young_collections_only_and_uninstall_restores(collector: YoungCollector) -> None:
    assert gc.get_threshold() == (5_000, NEVER, NEVER)
    collector.uninstall()
    assert gc.get_threshold() != (5_000, NEVER, NEVER)
    assert gc.get_freeze_count() == 0  # thawed


def test_a_collections_survivors_are_frozen(collector: YoungCollector) -> None:
    survivor = Node()
    assert _in_a_generation(survivor)
    gc.collect(0)
    assert not _in_a_generation(survivor)  # moved out of every generation's walk
    assert gc.is_tracked(survivor)


def test_freeze_young_freezes_the_young_objects_only_while_a_collector_is_installed(
    collector: YoungCollector,
) -> None:
    """What a large request decoded aside leaves (``Dispatcher.plan_aside``): frozen at once, out of the next young
    collection's walk; without a collector installed (the simulator, the lab, tests), nothing is frozen."""
    young = Node()
    assert _in_a_generation(young)
    assert freeze_young()
    assert not _in_a_generation(young) and gc.is_tracked(young)
    collector.uninstall()
    other = Node()
    assert not freeze_young()
    assert _in_a_generation(other)


def test_a_frozen_cycle_waits_for_the_reclamation_which_frees_it(collector: YoungCollector) -> None:
    node = Node()
    node.other = node  # a cycle: reference counting alone never frees it
    gone = weakref.ref(node)
    gc.collect(0)  # it survives (still referenced), so it is frozen
    del node
    gc.collect(0)
    gc.collect(1)
    assert gone() is not None  # young collections never see it again
    found = collector.reclaim()
    assert gone() is None and found >= 1
    assert collector.reclamations == 1 and collector.reclaimed == found
    assert gc.get_freeze_count() > 0 and collector.baseline > 0  # the survivors frozen again, the heap noted


def test_a_frozen_object_is_still_freed_by_reference_counting(collector: YoungCollector) -> None:
    node = Node()
    gone = weakref.ref(node)
    gc.collect(0)
    del node
    assert gone() is None


def test_reclaims_when_the_heaps_smallest_over_the_window_doubled(
    collector: YoungCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: list[int] = []
    real = young_gc.heap_pages

    def noted() -> int:
        return counts.pop(0) if counts else real()

    monkeypatch.setattr(young_gc, "heap_pages", noted)
    collector.baseline = 1_000
    counts[:] = [1_000, 50_000, 1_100]  # a peak (a rebalance's parked requests): the fewest did not double
    assert [collector.check() for _ in range(3)] == [False, False, False]
    counts[:] = [2_500, 2_100, 3_000]  # then the window's fewest is over twice the baseline
    assert [collector.check() for _ in range(3)] == [False, False, True]
    assert collector.reclamations == 1 and collector.baseline > 3_000  # what the reclamation left (the real heap)
    counts[:] = [10**9]
    assert not collector.check()  # the window starts again


def test_checks_do_nothing_when_not_installed() -> None:
    young = YoungCollector(5_000, window=1)
    assert not young.check() and young.reclaim() == 0 and not young.measure()


def test_a_young_generation_grown_while_frozen_objects_died_is_frozen_by_its_size(
    collector: YoungCollector,
) -> None:
    """The collector's own trigger counts allocations net of every container freed, frozen ones included: a
    rebalance's parked requests replaced by the next one's keep that count low while the young generation grows
    past its threshold. ``measure`` counts the young generation itself and freezes it, uncollected."""
    old = [Node() for _ in range(15_000)]
    gc.collect(0)  # (frozen)
    assert not collector.measure()  # a young generation within the limit: left alone
    new: list[Node] = []
    for _ in range(12_000):  # each new object in place of a frozen one: the net count does not move
        new.append(Node())
        old.pop()
    count, young = gc.get_count()[0], len(gc.get_objects(0))
    assert count < collector.young_threshold < collector.young_limit < young
    collections = gc.get_stats()[0]["collections"]
    assert collector.measure() and collector.sized_freezes == 1
    assert gc.get_stats()[0]["collections"] == collections  # frozen without a collection's walk
    assert len(gc.get_objects(0)) < collector.young_limit
    assert all(not _in_a_generation(node) for node in new[:10])


def test_a_measure_after_a_collection_does_not_count(
    collector: YoungCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collection's end froze the young generation: the next ``measure`` skips its count (what was allocated
    since is younger than one cadence of the server's calls), the one after counts again; without a collection
    between them every call counts."""
    counted: list[int] = []
    real = young_gc.young_count
    monkeypatch.setattr(young_gc, "young_count", lambda: counted.append(1) or real())
    gc.collect(0)
    counted.clear()  # (the collection's start counted: that is the start callback's check)
    assert not collector.measure() and counted == []
    assert not collector.measure() and counted == [1]
    assert not collector.measure() and counted == [1, 1]
    gc.collect(0)
    counted.clear()
    assert not collector.measure() and counted == []
    assert not collector.measure() and counted == [1]


def test_a_young_collection_of_a_generation_grown_past_the_limit_freezes_it_first(collector: YoungCollector) -> None:
    """A young collection that begins (the collector's own trigger, between two ``measure``) with the young
    generation grown past ``young_limit`` freezes it first and walks none of it; one within the limit still
    collects, and frees a cycle that died young."""
    seen: list[int] = []

    def at_start(phase: str, info: dict[str, object]) -> None:
        if phase == "start" and info["generation"] == 0:
            seen.append(len(gc.get_objects(0)))

    gc.callbacks.append(at_start)  # (after the collector's own: it sees what the collection will walk)
    try:
        gc.collect(0)
        small = Node()
        small.other = small  # a cycle, unreachable once the name is gone
        dead = weakref.ref(small)
        del small
        gc.collect(0)
        assert dead() is None and collector.sized_freezes == 0
        old = [Node() for _ in range(collector.young_limit + 5_000)]
        gc.collect(0)  # (frozen)
        grown: list[Node] = []
        for _ in range(collector.young_limit + 2_000):  # each in place of a frozen one: the net count stays low
            grown.append(Node())
            old.pop()
        assert len(gc.get_objects(0)) > collector.young_limit
        seen.clear()
        gc.collect(0)
        assert collector.sized_freezes == 1
        assert seen and seen[0] < collector.young_limit // 10  # (the callback's own list, at most)
        assert all(not _in_a_generation(node) for node in grown[:10])
    finally:
        gc.callbacks.remove(at_start)


def test_counting_the_young_generation_never_breaks_a_tuple_another_thread_builds() -> None:
    """Another thread building tuples from iterators (``tuple(genexpr)``: resized in place, which needs it
    referenced once) while this one counts the young generation over and over, with thread switches as often as
    the interpreter allows: no build fails (a count that held the objects across a switch broke thousands)."""
    failures: list[BaseException] = []
    stop = threading.Event()

    def build() -> None:
        while not stop.is_set():
            try:
                tuple(x for x in range(200))
            except SystemError as exc:
                failures.append(exc)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    builder = threading.Thread(target=build)
    builder.start()
    try:
        counted = [young_count() for _ in range(100_000)]
    finally:
        stop.set()
        builder.join()
        sys.setswitchinterval(before)
    assert failures == [] and min(counted) >= 0


def test_the_metrics_name_the_frozen_objects_and_the_reclamations(collector: YoungCollector) -> None:
    collector.reclaim()
    text = exposition(collector.families())
    [pages] = [int(line.split()[1]) for line in text.splitlines() if line.startswith("regroup_heap_pages ")]
    assert abs(pages - heap_pages()) < heap_pages() // 10
    assert "regroup_gc_reclamations_total 1" in text
    assert "regroup_gc_reclaimed_objects_total " in text
    assert "regroup_gc_young_freezes_by_size_total 0" in text


@pytest.mark.parametrize("bad", [{"young_threshold": 0}, {"young_threshold": 10, "growth": 1.0}])
def test_settings_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        YoungCollector(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("threshold", [None, 12_345])
def test_a_server_configured_so_collects_young_only_while_it_runs(tmp_path: Path, threshold: int | None) -> None:
    before = gc.get_threshold()

    async def run() -> tuple[tuple[int, int, int], int]:
        server = Server(ServerConfig(port=0, data_dir=tmp_path, fsync=FsyncPolicy.NEVER, gc_young_threshold=threshold))
        await server.start()
        try:
            return gc.get_threshold(), gc.get_freeze_count()
        finally:
            await server.close()

    try:
        seen, frozen = asyncio.run(run())
        if threshold is None:
            assert seen == before and frozen == 0
        else:
            assert seen == (threshold, NEVER, NEVER) and frozen > 0
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0  # as found, once closed
    finally:
        gc.set_threshold(*before)


def test_a_running_server_counts_its_young_generation_often_and_checks_its_heap_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from regroup.server import app

    checks: list[int] = []
    measures: list[int] = []
    monkeypatch.setattr(app, "RECLAIM_CHECK_S", 0.05)
    monkeypatch.setattr(app, "YOUNG_CHECK_S", 0.005)
    monkeypatch.setattr(YoungCollector, "check", lambda self: checks.append(1) or False)
    monkeypatch.setattr(YoungCollector, "measure", lambda self: measures.append(1) or False)
    before = gc.get_threshold()

    async def run() -> None:
        server = Server(ServerConfig(port=0, data_dir=tmp_path, fsync=FsyncPolicy.NEVER, gc_young_threshold=10_000))
        await server.start()
        try:
            await asyncio.sleep(0.3)
        finally:
            await server.close()

    try:
        asyncio.run(run())
    finally:
        gc.set_threshold(*before)
    assert len(measures) >= 15
    assert 2 <= len(checks) <= len(measures) // 3


def test_the_heap_is_measured_by_the_resident_pages_which_follow_what_is_allocated() -> None:
    """The reclamation's measure: the process's resident pages (the second field of ``/proc/self/statm``), which
    grow with what the interpreter allocates and fall when it is freed."""
    with open("/proc/self/statm", "rb") as statm:
        resident = int(statm.read().split()[1])
    before = heap_pages()
    assert abs(before - resident) < resident // 10
    page = os.sysconf("SC_PAGE_SIZE")
    held = mmap.mmap(-1, 64 << 20)  # (as the interpreter's allocator maps its arenas)
    held.write(b"x" * (64 << 20))  # written: resident
    grown = heap_pages()
    assert grown - before >= 48 * (1 << 20) // page
    held.close()
    assert heap_pages() - before < 16 * (1 << 20) // page


def test_a_reading_that_fails_repeats_the_last_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of descriptors, say: the rule must not compare a reading of another kind (or none) with the last."""
    known = heap_pages()
    monkeypatch.setattr(young_gc, "_STATM", "/proc/self/no-such-file")
    assert heap_pages() == known
