"""The rebalance history's fold thread (``server/history_feed.py``): once started, rows are folded off the event
loop's thread, in the order handed, a read of the timeline sees every row handed before it, a fold that computes
for long never holds the loop, and closing folds what was still waiting."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from regroup.history import Timelines
from regroup.server.history_feed import HistoryFeed

WINDOW_MS = 86_400_000


def _state(t: int, state: str, generation: int) -> dict[str, Any]:
    return {
        "t": t,
        "type": "group_state",
        "state": state,
        "generation": generation,
        "detail": "group=g type=classic protocol=range",
    }


def test_rows_are_folded_off_the_loop_in_order_and_a_read_sees_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded_on: list[int] = []
    real = Timelines.observe

    def observe(self: Timelines, row: Any) -> None:
        folded_on.append(threading.get_ident())
        real(self, row)

    monkeypatch.setattr(Timelines, "observe", observe)

    async def run() -> dict[str, Any] | None:
        feed = HistoryFeed(tmp_path, WINDOW_MS, lambda: 10_000)
        feed.start()
        try:
            for i, state in enumerate(["PreparingRebalance", "CompletingRebalance", "Stable"] * 50):
                feed.sink(_state(1_000 + i, state, i // 3 + 1))
            return feed.timeline("g", None, None)
        finally:
            await feed.close()

    timeline = asyncio.run(run())
    assert timeline is not None and len(timeline["rebalances"]) == 50  # every row folded before the read
    assert len(folded_on) == 150 and threading.get_ident() not in folded_on


def test_a_long_fold_never_holds_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def observe(self: Timelines, row: Any) -> None:
        ends = time.perf_counter() + 0.3
        while time.perf_counter() < ends:  # computing, the interpreter's lock held but for switches
            pass

    monkeypatch.setattr(Timelines, "observe", observe)

    async def run() -> float:
        feed = HistoryFeed(tmp_path, WINDOW_MS, lambda: 10_000)
        feed.start()
        longest = 0.0

        async def tick() -> None:
            nonlocal longest
            ends = time.perf_counter() + 0.5
            last = time.perf_counter()
            while (now := time.perf_counter()) < ends:
                longest = max(longest, now - last)
                last = now
                await asyncio.sleep(0)

        ticking = asyncio.get_running_loop().create_task(tick())
        try:
            await asyncio.sleep(0.05)
            feed.sink(_state(1_000, "PreparingRebalance", 0))
            await ticking
        finally:
            await feed.close()
        return longest

    assert asyncio.run(run()) < 0.1  # (folded on the loop: one turn of 300 ms)


def test_closing_folds_what_waits(tmp_path: Path) -> None:
    async def run() -> HistoryFeed:
        feed = HistoryFeed(tmp_path, WINDOW_MS, lambda: 10_000)
        feed.start()
        for i, state in enumerate(["PreparingRebalance", "CompletingRebalance", "Stable"] * 20):
            feed.sink(_state(1_000 + i, state, i // 3 + 1))
        await feed.close()
        return feed

    feed = asyncio.run(run())
    timeline = feed.timeline("g", None, None)  # (closed: read as it is)
    assert timeline is not None and len(timeline["rebalances"]) == 20


def test_the_consoles_read_waits_for_the_fold_without_holding_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Timelines.observe

    def observe(self: Timelines, row: Any) -> None:
        ends = time.perf_counter() + 0.1
        while time.perf_counter() < ends:
            pass
        real(self, row)

    monkeypatch.setattr(Timelines, "observe", observe)

    async def run() -> tuple[float, dict[str, Any] | None]:
        feed = HistoryFeed(tmp_path, WINDOW_MS, lambda: 10_000)
        feed.start()
        longest = 0.0
        reading = True

        async def tick() -> None:
            nonlocal longest
            last = time.perf_counter()
            while True:
                now = time.perf_counter()
                longest = max(longest, now - last)
                last = now
                if not reading:
                    return
                await asyncio.sleep(0)

        ticking = asyncio.get_running_loop().create_task(tick())
        try:
            await asyncio.sleep(0.01)
            for i, state in enumerate(["PreparingRebalance", "CompletingRebalance", "Stable"]):
                feed.sink(_state(1_000 + i, state, 1))
            timeline = await feed.timeline_settled("g", None, None)  # (three 100 ms folds to wait for)
            reading = False
            await ticking
        finally:
            await feed.close()
        return longest, timeline

    longest, timeline = asyncio.run(run())
    assert timeline is not None and len(timeline["rebalances"]) == 1
    assert longest < 0.1  # (the synchronous read on the loop: one turn of about 300 ms)


def test_a_read_is_not_starved_by_rows_handed_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = Timelines.observe

    def observe(self: Timelines, row: Any) -> None:
        time.sleep(0.002)  # (a fold a little slower than the rows come)
        real(self, row)

    monkeypatch.setattr(Timelines, "observe", observe)

    async def run() -> float:
        feed = HistoryFeed(tmp_path, WINDOW_MS, lambda: 10_000)
        feed.start()
        try:
            feed.sink(_state(1_000, "PreparingRebalance", 0))
            reading = asyncio.ensure_future(feed.timeline_settled("g", None, None))
            began = time.perf_counter()
            i = 0
            while not reading.done() and time.perf_counter() - began < 5:
                i += 1
                feed.sink(_state(1_000 + i, "PreparingRebalance", 0))  # the backlog never empties
                await asyncio.sleep(0.001)
            took = time.perf_counter() - began
            assert reading.done()
            return took
        finally:
            await feed.close()

    assert asyncio.run(run()) < 2.0  # (answered once the rows handed before it are folded)


def test_the_history_files_are_written_and_pruned_off_the_loop_and_listed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once started, a turn's lines are appended, and old files removed, on the fold thread; the files listed
    (``settled_segments``, for a replay) hold every row handed before the listing, and closing appends the rest."""
    from regroup.storage.history_log import HistoryLog, read_rows

    written_on: list[int] = []
    pruned_on: list[int] = []
    append, prune = HistoryLog.append_lines, HistoryLog.prune

    def append_lines(self: HistoryLog, lines: Any, newest_ms: int) -> None:
        written_on.append(threading.get_ident())
        time.sleep(0.05)  # (a slow disk: the listing must still wait for it)
        append(self, lines, newest_ms)

    def pruned(self: HistoryLog, now_ms: int) -> None:
        pruned_on.append(threading.get_ident())
        prune(self, now_ms)

    monkeypatch.setattr(HistoryLog, "append_lines", append_lines)
    monkeypatch.setattr(HistoryLog, "prune", pruned)

    async def run() -> tuple[int, int]:
        feed = HistoryFeed(tmp_path, WINDOW_MS, lambda: 10_000)
        feed.start()
        try:
            for i in range(30):
                feed.sink(_state(1_000 + i, "Stable", i + 1))
            await asyncio.sleep(0)  # (the turn's end: its lines handed to the fold thread)
            feed.prune()
            listed = sum(1 for _ in read_rows(await feed.settled_segments()))
            for i in range(30, 40):
                feed.sink(_state(1_000 + i, "Stable", i + 1))
        finally:
            await feed.close()
        return listed, sum(1 for _ in read_rows(HistoryLog(tmp_path / "history", WINDOW_MS).segments()))

    listed, kept = asyncio.run(run())
    assert listed == 30 and kept == 40
    assert written_on and threading.get_ident() not in written_on
    assert pruned_on and threading.get_ident() not in pruned_on
