"""The stall watchdog: notices when the event loop was held longer than ``--stall-warn-ms``, logs which request
held it, and counts the stalls and the longest turn for the metrics.

Everything ``regroup serve`` does runs on one event loop, so a request that computes for 300 ms delays every
other client's heartbeat by 300 ms. Two measurements, both cheap on the hot path:

- **Request steps.** Each connection times the synchronous handling of every request it handles (from the
  end of the previous one: cutting the frame, decoding, the handler up to its first suspension, encoding) with
  the one clock reading per request it takes for its turn budget anyway, and the continuation of a request
  whose handler suspended times each later step (``network/eager.py``). A step at least ``notable_s`` (a
  quarter of the threshold) long is reported here (``request_step``); one over the threshold is a stall,
  logged with the API and version, correlation id, client id, connection and peer.
- **The loop's lateness.** A task wakes every quarter of the threshold and measures how late it woke. A
  turn that held the loop delays it by about that turn (less up to a quarter of the threshold). A lateness
  over the threshold that no request step over the threshold explains is a stall too — many requests in one
  turn, or work outside request handling (a log-cleaning pass, a disk stall) — logged as such, with the
  slowest notable request step since the previous wake, if any, and how much of the time since that wake the
  loop's thread spent computing (``time.thread_time``): a stall it mostly did not compute in was a blocking
  system call on the loop, or the loop waiting for the interpreter's lock (another of the server's threads:
  the history's fold, the log writer encoding a large record) or for one of the machine's cores.
- **The garbage collector.** The interpreter's cyclic collector's pauses are timed as they happen
  (``server/gc_pauses.py``). A stall no request step explains, at least half of which went to collections
  since the monitor's previous wake, is the collector's: counted as ``gc``, and logged with the collections'
  time and the last one's generation. A request step over the threshold that a collection ended inside says
  so in its line.

At most one line per ``LOG_EVERY_S`` for each of two kinds: the stalls a request step explains, and the others
(the collector's, nothing named's). The stalls in between are counted, and the kind's next line says how many were
not logged. Kept apart so that a line naming no request (the decoding thread holding the interpreter's lock while
it reads a large request, say) never hides the line naming the request that held the loop just after it.

The metrics: ``regroup_event_loop_stalls_total`` (by the API of the request that held the loop, ``gc`` when the
collector did, ``none`` when nothing named did), ``regroup_event_loop_longest_turn_seconds``, the threshold itself,
and the collector's collections and time per generation and its longest pause (``regroup_gc_collections_total``,
``regroup_gc_pause_seconds_total``, ``regroup_gc_longest_pause_seconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from typing import Any

from regroup.network.codec import DecodedRequest
from regroup.server.dispatch import api_name
from regroup.server.gc_pauses import GENERATIONS, GcPauses
from regroup.server.metrics import Family

__all__ = ["DEFAULT_STALL_WARN_MS", "LOG_EVERY_S", "StallWatchdog"]

log = logging.getLogger("regroup.server.watchdog")

DEFAULT_STALL_WARN_MS = 100
#: the least time between two stall lines
LOG_EVERY_S = 1.0
#: the ``api`` label of a stall no single request explains
NO_REQUEST = "none"
#: the ``api`` label of a stall the garbage collector explains
COLLECTOR = "gc"
#: the two kinds of line, each rate-limited on its own: stalls a request step explains, and the others
REQUEST_LINE = "request"
LOOP_LINE = "loop"


class StallWatchdog:
    """Stalls of the event loop over ``threshold_ms`` (see the module doc); ``start`` runs the lateness monitor."""

    def __init__(self, threshold_ms: int) -> None:
        if threshold_ms < 1:
            raise ValueError("the stall threshold must be at least 1 ms")
        self.threshold_s = threshold_ms / 1000
        #: request steps at least this long are reported to ``request_step``
        self.notable_s = self.threshold_s / 4
        self.stalls: Counter[str] = Counter()
        #: the longest turn seen: the longest request step or lateness measured, in seconds
        self.longest_s = 0.0
        self._explained_until = 0.0  # (perf_counter) the end of the last request step over the threshold
        self._slowest: tuple[float, str] | None = None  # the slowest notable step since the monitor's last wake
        #: per kind of line (``REQUEST_LINE``, ``LOOP_LINE``): when the last was logged, how many were not since
        self._last_line = {REQUEST_LINE: -LOG_EVERY_S, LOOP_LINE: -LOG_EVERY_S}
        self._unlogged = {REQUEST_LINE: 0, LOOP_LINE: 0}
        self._monitor: asyncio.Task[None] | None = None
        #: the collector's pauses (timed from ``start``), and their total at the monitor's last wake
        self.gc = GcPauses()
        self._gc_at_wake = 0.0

    # ------------------------------------------------------------------ what the connections report

    def request_step(self, seconds: float, request: DecodedRequest, connection: Any) -> None:
        """A step of ``request``'s handling on ``connection`` held the loop ``seconds`` (at least ``notable_s``)."""
        if seconds > self.longest_s:
            self.longest_s = seconds
        if seconds < self.threshold_s:
            if self._slowest is None or seconds > self._slowest[0]:
                self._slowest = (seconds, _describe(request, connection))
            return
        now = self._explained_until = time.perf_counter()
        name = api_name(request.api_key)
        self.stalls[name] += 1
        collector = self.gc
        during = ""
        if collector.last_end >= now - seconds:  # a collection ended inside the step
            during = f" ({round(collector.last_s * 1000)} ms of it a generation {collector.last_generation} collection)"
        self._log(REQUEST_LINE, "event loop held %d ms by %s%s", seconds, _describe(request, connection), during)

    # ------------------------------------------------------------------ the lateness monitor

    def start(self) -> None:
        """Run the lateness monitor on the running loop, and time the collector's pauses (until ``close``)."""
        if self._monitor is None:
            self.gc.install()
            self._gc_at_wake = self.gc.total_s
            self._monitor = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        self.gc.uninstall()
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await monitor

    async def _watch(self) -> None:
        interval = self.threshold_s / 4
        clock, cpu_clock = time.perf_counter, time.thread_time
        woke, computed = clock(), cpu_clock()
        while True:
            expected = clock() + interval
            await asyncio.sleep(interval)
            now, cpu = clock(), cpu_clock()
            self.late(now - expected, expected, (cpu - computed, now - woke))
            woke, computed = now, cpu

    def late(self, seconds: float, since: float, computing: tuple[float, float] | None = None) -> None:
        """The monitor woke ``seconds`` after it was due at ``since`` (``time.perf_counter``); ``computing``: the
        CPU time of the loop's thread since the monitor's previous wake, and the time since then."""
        if seconds > self.longest_s:
            self.longest_s = seconds
        slowest, self._slowest = self._slowest, None
        collected = self.gc.total_s
        collecting_s, self._gc_at_wake = collected - self._gc_at_wake, collected
        if seconds < self.threshold_s or self._explained_until >= since:
            return  # no stall, or one a request step over the threshold already reported
        if collecting_s >= seconds / 2:
            self.stalls[COLLECTOR] += 1
            self._log(
                LOOP_LINE,
                "event loop held at least %d ms by the garbage collector (%d ms collecting since the previous "
                "check, the last a generation %d collection)",
                seconds,
                round(collecting_s * 1000),
                self.gc.last_generation,
            )
            return
        self.stalls[NO_REQUEST] += 1
        detail = f"no request step took {round(self.notable_s * 1000)} ms or more"
        if slowest is not None:
            detail = f"the slowest request step: {round(slowest[0] * 1000)} ms, {slowest[1]}"
        if computing is not None:
            cpu_s, wall_s = computing
            detail += (
                f"; the loop's thread computed {round(cpu_s * 1000)} of the {round(wall_s * 1000)} ms since the "
                "check before, the rest blocked in a system call or waiting for the interpreter's lock (held by "
                "another of the server's threads) or for a core"
            )
        self._log(
            LOOP_LINE, "event loop held at least %d ms, no single request over the threshold (%s)", seconds, detail
        )

    # ------------------------------------------------------------------ metrics

    def families(self) -> list[Family]:
        stalls = Family(
            "regroup_event_loop_stalls_total",
            "counter",
            "Turns of the event loop longer than --stall-warn-ms, by the API of the request that held the loop "
            "(none: no single request did).",
        )
        for api, n in sorted(self.stalls.items()):
            stalls.add(n, {"api": api})
        if not self.stalls:
            stalls.add(0, {"api": NO_REQUEST})
        return [
            stalls,
            Family(
                "regroup_event_loop_longest_turn_seconds",
                "gauge",
                "The longest turn of the event loop measured since start: a request's synchronous handling, or "
                "how late the watchdog's timer woke.",
            ).add(self.longest_s),
            Family(
                "regroup_event_loop_stall_threshold_seconds", "gauge", "The --stall-warn-ms threshold, in seconds."
            ).add(self.threshold_s),
            *self._gc_families(),
        ]

    def _gc_families(self) -> list[Family]:
        collector = self.gc
        collections = Family(
            "regroup_gc_collections_total",
            "counter",
            "Collections of the interpreter's cyclic garbage collector since start, by generation.",
        )
        paused = Family(
            "regroup_gc_pause_seconds_total",
            "counter",
            "Time the interpreter's cyclic garbage collector held the process since start (the event loop "
            "included), by generation.",
        )
        for generation in range(GENERATIONS):
            labels = {"generation": str(generation)}
            collections.add(collector.collections[generation], labels)
            paused.add(collector.paused_s[generation], labels)
        longest = Family(
            "regroup_gc_longest_pause_seconds", "gauge", "The longest collection of the garbage collector since start."
        ).add(collector.longest_s)
        return [collections, paused, longest]

    # ------------------------------------------------------------------ internals

    def _log(self, kind: str, message: str, seconds: float, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last_line[kind] < LOG_EVERY_S:
            self._unlogged[kind] += 1
            return
        self._last_line[kind] = now
        unlogged, self._unlogged[kind] = self._unlogged[kind], 0
        suffix = f" (and {unlogged} stall(s) not logged since the previous line)" if unlogged else ""
        threshold_ms = round(self.threshold_s * 1000)
        log.warning(message + " (threshold %d ms)%s", round(seconds * 1000), *args, threshold_ms, suffix)


def _describe(request: DecodedRequest, connection: Any) -> str:
    return (
        f"{api_name(request.api_key)} v{request.api_version} correlation_id={request.correlation_id} "
        f"client_id={request.client_id!r} connection={getattr(connection, 'connection_id', '?')} "
        f"peer={getattr(connection, 'peer', '?')}"
    )
