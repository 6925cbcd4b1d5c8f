"""The stall watchdog's bookkeeping (``server/watchdog.py``): which steps are stalls, what they are counted and
logged under, lateness that no request explains, stalls the garbage collector explains, the one-line-a-second
limit, and its metric families."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from regroup.network.codec import DecodedRequest
from regroup.server.metrics import exposition
from regroup.server.watchdog import COLLECTOR, LOG_EVERY_S, NO_REQUEST, StallWatchdog

METADATA, HEARTBEAT = 3, 12


def request(api_key: int, correlation_id: int = 7) -> DecodedRequest:
    return DecodedRequest(api_key, 12, correlation_id, "the-client", None, 100)


CONNECTION = SimpleNamespace(connection_id=4, peer="127.0.0.1:5555")


def test_a_step_over_the_threshold_is_a_stall_named_by_its_request(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = StallWatchdog(100)
    assert watchdog.notable_s == 0.025
    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        watchdog.request_step(0.05, request(HEARTBEAT), CONNECTION)  # notable, not a stall
        watchdog.request_step(0.4, request(METADATA), CONNECTION)
    assert watchdog.stalls == {"Metadata": 1}
    assert watchdog.longest_s == 0.4
    [line] = caplog.messages
    assert line == (
        "event loop held 400 ms by Metadata v12 correlation_id=7 client_id='the-client' connection=4 "
        "peer=127.0.0.1:5555 (threshold 100 ms)"
    )


def test_lateness_no_request_explains_is_a_stall_of_none(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = StallWatchdog(100)
    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        watchdog.late(0.01, time.perf_counter())  # on time: nothing
        watchdog.request_step(0.03, request(HEARTBEAT), CONNECTION)
        watchdog.late(0.3, time.perf_counter())
    assert watchdog.stalls == {NO_REQUEST: 1}
    assert "no single request over the threshold (the slowest request step: 30 ms, Heartbeat v12" in caplog.text
    # a stall a request step already reported is not counted again by the lateness it caused
    due = time.perf_counter()
    watchdog.request_step(0.2, request(METADATA), CONNECTION)
    watchdog.late(0.2, due)
    assert watchdog.stalls == {NO_REQUEST: 1, "Metadata": 1}


def test_at_most_one_line_a_second_and_the_next_says_how_many_were_not_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    watchdog = StallWatchdog(100)
    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        for _ in range(5):
            watchdog.request_step(0.2, request(METADATA), CONNECTION)
        now[0] += 1.5
        watchdog.request_step(0.2, request(METADATA), CONNECTION)
    assert watchdog.stalls == {"Metadata": 6}
    assert len(caplog.messages) == 2
    assert caplog.messages[1].endswith("(and 4 stall(s) not logged since the previous line)")


def test_a_line_naming_no_request_never_hides_the_next_request_line(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoding thread holding the interpreter's lock while it reads a large request, and then the request's
    own step: both within a second, both logged; each kind keeps its own one-line-a-second limit."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    watchdog = StallWatchdog(100)
    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        watchdog.late(0.3, time.perf_counter())  # by no request: logged
        watchdog.request_step(0.2, request(METADATA), CONNECTION)  # logged too
        watchdog.late(0.3, time.perf_counter() + 1)  # (due after the step) the same kind, within the second
        watchdog.request_step(0.2, request(METADATA, 8), CONNECTION)  # the same kind, within the second
        now[0] += 1.5
        watchdog.late(0.3, time.perf_counter() + 1)
    assert watchdog.stalls == {NO_REQUEST: 3, "Metadata": 2}
    first, second, third = caplog.messages
    assert "no single request over the threshold" in first
    assert "by Metadata v12 correlation_id=7 " in second
    assert "no single request over the threshold" in third
    assert third.endswith("(and 1 stall(s) not logged since the previous line)")


def test_metric_families() -> None:
    watchdog = StallWatchdog(250)
    text = exposition(watchdog.families())
    assert 'regroup_event_loop_stalls_total{api="none"} 0' in text
    assert "regroup_event_loop_stall_threshold_seconds 0.25" in text
    watchdog.request_step(0.5, request(METADATA), CONNECTION)
    text = exposition(watchdog.families())
    assert 'regroup_event_loop_stalls_total{api="Metadata"} 1' in text
    assert "regroup_event_loop_longest_turn_seconds 0.5" in text
    assert "# HELP regroup_event_loop_longest_turn_seconds " in text


def test_a_stall_of_none_says_how_much_of_it_the_loops_thread_computed(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = StallWatchdog(100)
    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        watchdog.late(0.3, time.perf_counter(), (0.04, 0.33))
    assert "the loop's thread computed 40 of the 330 ms since the check before" in caplog.text


def test_the_monitor_tells_a_loop_that_waited_for_another_thread_from_one_that_computed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Another thread holding the interpreter's lock (a switch interval of 200 ms here) keeps the loop from
    running: the stall's line says the loop's thread computed little of it; a loop computing itself, most."""

    def spin(seconds: float) -> None:
        ends = time.perf_counter() + seconds
        while time.perf_counter() < ends:
            pass

    def computed(line: str) -> tuple[int, int]:
        part = line.split("the loop's thread computed ", 1)[1]
        cpu, _, rest = part.partition(" of the ")
        return int(cpu), int(rest.split(" ms", 1)[0])

    async def run() -> None:
        watchdog = StallWatchdog(20)
        watchdog.start()
        await asyncio.sleep(0.03)
        spinner = threading.Thread(target=spin, args=(0.5,))
        before = sys.getswitchinterval()
        sys.setswitchinterval(0.2)
        try:
            spinner.start()
            await asyncio.sleep(0.45)  # the other thread holds the lock in slices of 200 ms
        finally:
            spinner.join()
            sys.setswitchinterval(before)
        await asyncio.sleep(1.1)  # (past the one-line-a-second limit)
        spin(0.15)  # the loop's own work, by no request
        await asyncio.sleep(0.03)
        await watchdog.close()

    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if "computed" in r.getMessage()]
    assert len(lines) >= 2
    waited_cpu, waited_wall = computed(lines[0])
    assert waited_wall >= 100 and waited_cpu <= 30
    own_cpu, own_wall = computed(lines[-1])
    assert own_wall >= 100 and own_cpu >= 100  # (its 150 ms of spinning, however busy the machine)


def test_the_monitor_notices_a_blocked_loop() -> None:
    async def block() -> StallWatchdog:
        watchdog = StallWatchdog(20)
        watchdog.start()
        await asyncio.sleep(0.03)
        time.sleep(0.15)  # the loop held, by no request
        await asyncio.sleep(0.03)
        await watchdog.close()
        return watchdog

    watchdog = asyncio.run(block())
    assert watchdog.stalls[NO_REQUEST] == 1
    assert watchdog.longest_s >= 0.1


def test_lateness_the_collector_explains_is_a_stall_of_gc(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = StallWatchdog(100)
    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        watchdog.gc.paused_s[2] += 0.2  # collections since the last check: most of the lateness
        watchdog.gc.last_generation = 2
        watchdog.late(0.3, time.perf_counter() - 1)
        time.sleep(LOG_EVERY_S)
        watchdog.gc.paused_s[0] += 0.01  # a little: not the collector's
        watchdog.late(0.3, time.perf_counter() - 1)
    assert watchdog.stalls == {COLLECTOR: 1, NO_REQUEST: 1}
    first, second = caplog.messages
    assert first == (
        "event loop held at least 300 ms by the garbage collector (200 ms collecting since the previous check, the "
        "last a generation 2 collection) (threshold 100 ms)"
    )
    assert "no single request over the threshold" in second


def test_a_step_a_collection_ended_inside_says_so(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = StallWatchdog(100)
    watchdog.gc.last_end, watchdog.gc.last_s, watchdog.gc.last_generation = time.perf_counter(), 0.15, 2
    with caplog.at_level(logging.WARNING, "regroup.server.watchdog"):
        watchdog.request_step(0.4, request(METADATA), CONNECTION)
    assert watchdog.stalls == {"Metadata": 1}
    assert caplog.messages[0].endswith(
        "peer=127.0.0.1:5555 (150 ms of it a generation 2 collection) (threshold 100 ms)"
    )


def test_the_monitor_names_a_full_collection_and_counts_the_collector() -> None:
    heap = [[i] for i in range(1_500_000)]  # containers the collector walks: a full collection of tens of ms

    async def collect() -> tuple[StallWatchdog, str]:
        watchdog = StallWatchdog(20)
        watchdog.start()
        await asyncio.sleep(0.03)
        started = time.perf_counter()
        gc.collect()  # on the loop, by no request
        assert time.perf_counter() - started >= 0.02, "the collection was too quick to be a stall"
        await asyncio.sleep(0.03)
        text = exposition(watchdog.families())
        await watchdog.close()
        return watchdog, text

    watchdog, text = asyncio.run(collect())
    del heap
    assert watchdog.stalls[COLLECTOR] == 1 and watchdog.stalls[NO_REQUEST] == 0
    assert watchdog.gc.collections[2] >= 1 and watchdog.gc.longest_s >= 0.02
    assert 'regroup_event_loop_stalls_total{api="gc"} 1' in text
    assert 'regroup_gc_collections_total{generation="2"}' in text
    assert "# TYPE regroup_gc_pause_seconds_total counter" in text
    assert "regroup_gc_longest_pause_seconds " in text
    collections = sum(watchdog.gc.collections)
    gc.collect()  # not counted once closed
    assert sum(watchdog.gc.collections) == collections
