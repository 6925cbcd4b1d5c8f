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
  slowest notable request step since the previous wake, if any.

At most one line per ``LOG_EVERY_S``; the stalls in between are counted, and the next line says how many were
not logged. The metrics: ``regroup_event_loop_stalls_total`` (by the API of the request that held the loop,
``none`` when no single request did), ``regroup_event_loop_longest_turn_seconds`` and the threshold itself.
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
from regroup.server.metrics import Family

__all__ = ["DEFAULT_STALL_WARN_MS", "LOG_EVERY_S", "StallWatchdog"]

log = logging.getLogger("regroup.server.watchdog")

DEFAULT_STALL_WARN_MS = 100
#: the least time between two stall lines
LOG_EVERY_S = 1.0
#: the ``api`` label of a stall no single request explains
NO_REQUEST = "none"


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
        self._last_line = -LOG_EVERY_S
        self._unlogged = 0
        self._monitor: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ what the connections report

    def request_step(self, seconds: float, request: DecodedRequest, connection: Any) -> None:
        """A step of ``request``'s handling on ``connection`` held the loop ``seconds`` (at least ``notable_s``)."""
        if seconds > self.longest_s:
            self.longest_s = seconds
        if seconds < self.threshold_s:
            if self._slowest is None or seconds > self._slowest[0]:
                self._slowest = (seconds, _describe(request, connection))
            return
        self._explained_until = time.perf_counter()
        name = api_name(request.api_key)
        self.stalls[name] += 1
        self._log("event loop held %d ms by %s", seconds, _describe(request, connection))

    # ------------------------------------------------------------------ the lateness monitor

    def start(self) -> None:
        """Run the lateness monitor on the running loop (until ``close``)."""
        if self._monitor is None:
            self._monitor = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await monitor

    async def _watch(self) -> None:
        interval = self.threshold_s / 4
        clock = time.perf_counter
        while True:
            expected = clock() + interval
            await asyncio.sleep(interval)
            self.late(clock() - expected, expected)

    def late(self, seconds: float, since: float) -> None:
        """The monitor woke ``seconds`` after it was due at ``since`` (``time.perf_counter``)."""
        if seconds > self.longest_s:
            self.longest_s = seconds
        slowest, self._slowest = self._slowest, None
        if seconds < self.threshold_s or self._explained_until >= since:
            return  # no stall, or one a request step over the threshold already reported
        self.stalls[NO_REQUEST] += 1
        detail = f"no request step took {round(self.notable_s * 1000)} ms or more"
        if slowest is not None:
            detail = f"the slowest request step: {round(slowest[0] * 1000)} ms, {slowest[1]}"
        self._log("event loop held at least %d ms, no single request over the threshold (%s)", seconds, detail)

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
        ]

    # ------------------------------------------------------------------ internals

    def _log(self, message: str, seconds: float, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last_line < LOG_EVERY_S:
            self._unlogged += 1
            return
        self._last_line = now
        unlogged, self._unlogged = self._unlogged, 0
        suffix = f" (and {unlogged} stall(s) not logged since the previous line)" if unlogged else ""
        threshold_ms = round(self.threshold_s * 1000)
        log.warning(message + " (threshold %d ms)%s", round(seconds * 1000), *args, threshold_ms, suffix)


def _describe(request: DecodedRequest, connection: Any) -> str:
    return (
        f"{api_name(request.api_key)} v{request.api_version} correlation_id={request.correlation_id} "
        f"client_id={request.client_id!r} connection={getattr(connection, 'connection_id', '?')} "
        f"peer={getattr(connection, 'peer', '?')}"
    )
