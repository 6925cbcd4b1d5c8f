"""Which client connections the server lets in, and what happens when it cannot accept at all.

* **Limits.** At most ``max_connections`` Kafka connections open in total and ``max_connections_per_ip``
  from one client address (Kafka's ``max.connections`` and ``max.connections.per.ip``). A connection over
  a limit is closed as soon as it is accepted, before anything is read, as Kafka does.
* **File descriptors.** Every connection is a file descriptor, and so is every segment file the partition
  log holds open (at most its handle cache's capacity, ``--max-open-segment-files``). A server that let
  connections take the last descriptors would fail its next log append or topic creation, so the total
  limit is also capped at the open-file limit minus a reserve: ``FD_RESERVE`` (or a quarter of a smaller
  limit) for the process itself (listeners, the event loop, the coordinator log, metrics scrapes) plus the
  segment files (``log_files``). At start the soft limit is raised towards the hard limit when
  ``max_connections`` needs it; if that is not enough, a warning says what the cap is.
* **Refusals** are counted per reason (the metrics' ``regroup_connections_refused_total``) and logged at
  INFO at most once per client address per ``log_interval_s``, with the number refused since the last line,
  so a client retrying in a loop cannot flood the log.
* **accept() out of descriptors.** When ``accept()`` itself fails with EMFILE or ENFILE (descriptors taken
  by something the limits do not count), asyncio stops accepting on that listener, retries after a second
  and reports the error to the loop's exception handler, whose default logs a traceback at ERROR every
  time. ``AcceptErrors`` replaces that one report with a WARNING at most once per interval (counting the
  others); the retry stays asyncio's, so the loop never spins and accepting resumes once descriptors free up.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

log = logging.getLogger("regroup.network.admission")

DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_MAX_CONNECTIONS_PER_IP = 5_000  # half the total: one host, leaking or not, never takes all
FD_RESERVE = 256
DEFAULT_LOG_INTERVAL_S = 60.0
_ACCEPT_FAILED = "socket.accept() out of system resource"  # asyncio's message (base_events / selector_events)
_MAX_TRACKED = 4096  # addresses remembered for the log's rate limit


class RateLimit:
    """At most one event per key per ``interval_s``: ``check(key)`` returns None to stay silent, or the number
    of events suppressed since the key's last line. Remembers a bounded number of keys."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._keys: dict[str, list[float]] = {}  # key -> [time of the last line, events suppressed since]

    def check(self, key: str) -> int | None:
        now = self._clock()
        entry = self._keys.get(key)
        if entry is not None and now - entry[0] < self.interval_s:
            entry[1] += 1
            return None
        suppressed = 0 if entry is None else int(entry[1])
        if entry is None and len(self._keys) >= _MAX_TRACKED:
            self._forget(now)
        self._keys[key] = [now, 0]
        return suppressed

    def _forget(self, now: float) -> None:
        """Drop the keys whose interval is over (their suppressed counts are lost), or all of them."""
        stale = [k for k, (at, _) in self._keys.items() if now - at >= self.interval_s]
        for key in stale:
            del self._keys[key]
        if len(self._keys) >= _MAX_TRACKED:
            self._keys.clear()


def fd_limit(wanted: int) -> int:
    """The soft open-file limit; when it is below ``wanted``, first raised to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
        else:
            log.info("raised the open-file limit from %d to %d (hard limit %s)", soft, target, hard)
            soft = target
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


class Admission:
    """Counts open connections (in total and per client address) and decides who gets in."""

    def __init__(
        self,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP,
        *,
        log_files: int = 0,
        open_files: int | None = None,
        log_interval_s: float = DEFAULT_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.log_files = log_files  # segment files the partition log may hold open
        wanted = max_connections + FD_RESERVE + log_files
        self.open_files = fd_limit(wanted) if open_files is None else open_files
        self.reserve = min(FD_RESERVE, self.open_files // 4)
        self.open = 0
        self.per_ip: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()  # reason -> connections refused
        self._log = RateLimit(log_interval_s, clock)
        room = self.fd_room
        if room < max_connections:
            log.warning(
                "the open-file limit %d leaves room for %d connections (%d descriptors kept for the process, %d "
                "for segment files), fewer than --max-connections %d; raise it with ulimit -n",
                self.open_files,
                room,
                self.reserve,
                log_files,
                max_connections,
            )

    @property
    def fd_room(self) -> int:
        """How many connections the open-file limit leaves after the reserve and the open segment files."""
        return max(0, self.open_files - self.reserve - self.log_files)

    def admit(self, host: str) -> bool:
        """Count a connection from ``host`` in and return True, or count a refusal and return False."""
        if self.open >= self.max_connections:
            return self._refuse(host, "max_connections", f"{self.open} open (--max-connections)")
        if self.per_ip[host] >= self.max_connections_per_ip:
            return self._refuse(
                host, "max_connections_per_ip", f"{self.per_ip[host]} open from it (--max-connections-per-ip)"
            )
        if self.open >= self.fd_room:
            return self._refuse(
                host,
                "open_files",
                f"{self.open} open, the open-file limit {self.open_files} leaves room for no more "
                f"({self.log_files} segment files, {self.reserve} kept for the process)",
            )
        self.open += 1
        self.per_ip[host] += 1
        return True

    def release(self, host: str) -> None:
        """An admitted connection from ``host`` closed."""
        self.open -= 1
        left = self.per_ip[host] - 1
        if left > 0:
            self.per_ip[host] = left
        else:
            del self.per_ip[host]

    def _refuse(self, host: str, reason: str, why: str) -> bool:
        self.refused[reason] += 1
        suppressed = self._log.check(host)
        if suppressed is not None:
            more = f" ({suppressed} more refused since the last line)" if suppressed else ""
            log.info("refusing connection from %s: %s%s", host or "?", why, more)
        return False


class AcceptErrors:
    """The event loop's exception handler: accept() out of descriptors becomes a rate-limited WARNING (no
    traceback); everything else goes to the handler installed before (asyncio's default if none)."""

    def __init__(
        self,
        previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None,
        interval_s: float = DEFAULT_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.previous = previous
        self.failures = 0
        self._log = RateLimit(interval_s, clock)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILED:
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self.failures += 1
        suppressed = self._log.check("accept")
        if suppressed is not None:
            exc = context.get("exception")
            more = f"; {suppressed} more since the last line" if suppressed else ""
            log.warning(
                "cannot accept connections: %s; retrying every second until descriptors free up%s",
                getattr(exc, "strerror", None) or exc,
                more,
            )
