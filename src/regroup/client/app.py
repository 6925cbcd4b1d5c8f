"""The application around a simulated consumer: its poll loop, the cost of its rebalance callbacks, and the
client library's timing of heartbeats (which members share none of: each process keeps its own phase).

An application calls ``poll()``, processes the records it got, and polls again. Rebalance work happens only
where the real client does it: a member's rebalance callbacks (and, in the classic protocol, its JoinGroup)
wait for the application's next poll, and a member busy with a batch holds the work up until the batch is
done. This module owns the arithmetic of that loop; the members (``classic_member``, ``consumer_member``)
decide what waits for it.

* ``AppModel``: the settings, each with Kafka's default where Kafka has one (docs/simulator.md, "The
  application model").
* ``PollLoop``: when the application polls next. While the member owns partitions, every poll returns
  ``max_poll_records`` records (a group under load: records are waiting) and the application spends their
  processing time before the next poll; while it owns nothing it waits inside ``poll()``, so rebalance work
  is taken up at once. Batch ends are computed arithmetically, never one event per record or per batch: a
  run of back-to-back batches is a start time and a sequence of durations, extended only as far as someone
  asks.

Nothing here reads a clock or imports ``random``: the driver injects a seeded random source (``Draws``).
"""

from __future__ import annotations

import math
from typing import Final, Protocol

#: processing-time distributions (per record, in milliseconds)
DISTRIBUTIONS: Final = ("fixed", "uniform", "exponential", "lognormal")
#: client libraries whose placement of rebalance work the members follow
CLIENTS: Final = ("java", "librdkafka")
#: heartbeat phases: ``drift`` as real processes have them, ``aligned`` (every member restarts its heartbeat
#: timer exactly at each JoinGroup response, with no drift: the simulator's behaviour before the model)
HEARTBEAT_PHASES: Final = ("drift", "aligned")
#: how late a heartbeat goes out after its timer expires, at most: the Java client's heartbeat thread checks
#: its timer every ``retry.backoff.ms`` (100 ms); librdkafka's main loop sends it 0-4 ms late (measured
#: against ``regroup serve`` on an idle machine: 3,002-3,003 ms between heartbeats at a 3,000 ms interval;
#: under load it reached 3,038 ms, docs/lab.md)
HEARTBEAT_LATENESS_MS: Final = {"java": 100, "librdkafka": 4}
#: a new process's first request goes out 0-50 ms after it starts by default (connecting, finding the
#: coordinator: 10-30 ms against ``regroup serve`` on loopback), unless phases are aligned
STARTUP_MS: Final = 50
#: sums of this many draws or fewer are drawn one by one; longer ones from their normal approximation
_EXACT_SUM: Final = 12
#: later than any time (the loop's "no end" marker)
_NEVER: Final = 2**62


class Draws(Protocol):
    """The random source a member is given (``random.Random``'s methods it uses)."""

    def random(self) -> float: ...

    def gammavariate(self, alpha: float, beta: float) -> float: ...

    def lognormvariate(self, mu: float, sigma: float) -> float: ...

    def gauss(self, mu: float, sigma: float) -> float: ...


class AppModel:
    """One application's settings (immutable by convention: built once per scenario member).

    ``processing`` is the per-record processing time: ``("fixed", x)``, ``("uniform", lo, hi)``,
    ``("exponential", mean)`` or ``("lognormal", median, sigma)``, in milliseconds.
    """

    __slots__ = (
        "assign_ms",
        "client",
        "commit_on_revoke",
        "heartbeat_phase",
        "max_poll_records",
        "processing",
        "revoke_ms",
        "startup_ms",
    )

    def __init__(
        self,
        *,
        max_poll_records: int = 500,
        processing: tuple[object, ...] = ("fixed", 1.0),
        commit_on_revoke: bool = True,
        revoke_ms: int = 0,
        assign_ms: int = 0,
        client: str = "java",
        heartbeat_phase: str = "drift",
        startup_ms: int = STARTUP_MS,
    ) -> None:
        self.max_poll_records: Final[int] = max_poll_records
        self.processing: Final[tuple[object, ...]] = processing
        self.commit_on_revoke: Final[bool] = commit_on_revoke
        self.revoke_ms: Final[int] = revoke_ms
        self.assign_ms: Final[int] = assign_ms
        self.client: Final[str] = client
        self.heartbeat_phase: Final[str] = heartbeat_phase
        self.startup_ms: Final[int] = startup_ms
        check(self)

    # ------------------------------------------------------------------------------------ heartbeats
    @property
    def aligned(self) -> bool:
        return self.heartbeat_phase == "aligned"

    @property
    def lateness_ms(self) -> int:
        """How late a heartbeat may go out after its timer expires (0 when phases are aligned)."""
        return 0 if self.aligned else HEARTBEAT_LATENESS_MS[self.client]

    @property
    def librdkafka(self) -> bool:
        return self.client == "librdkafka"

    # ------------------------------------------------------------------------------------ processing
    def per_record_bounds(self) -> tuple[float, float]:
        """The least and the most one record can take (``inf``: unbounded)."""
        kind = self.processing[0]
        if kind == "fixed":
            x = _num(self.processing[1])
            return x, x
        if kind == "uniform":
            return _num(self.processing[1]), _num(self.processing[2])
        return 0.0, math.inf

    def batch_ms(self, draws: Draws | None) -> float:
        """The processing time of one full batch (``max_poll_records`` records)."""
        return self.records_ms(self.max_poll_records, draws)

    def records_ms(self, n: int, draws: Draws | None) -> float:
        """The processing time of ``n`` records (a sum of ``n`` draws, as ``batch_ms`` draws it)."""
        p = self.processing
        kind = p[0]
        if kind == "fixed" or draws is None:
            return n * self.mean_ms()
        if kind == "exponential":
            return draws.gammavariate(float(n), _num(p[1]))
        if kind == "uniform":
            lo, hi = _num(p[1]), _num(p[2])
            if n <= _EXACT_SUM:
                return sum(lo + (hi - lo) * draws.random() for _ in range(n))
            value = draws.gauss(n * (lo + hi) / 2, math.sqrt(n) * (hi - lo) / math.sqrt(12.0))
            return min(max(value, n * lo), n * hi)
        median, sigma = _num(p[1]), _num(p[2])
        if n <= _EXACT_SUM:
            return sum(draws.lognormvariate(math.log(median), sigma) for _ in range(n))
        mean = median * math.exp(sigma * sigma / 2)
        variance = (math.exp(sigma * sigma) - 1) * mean * mean
        return max(draws.gauss(n * mean, math.sqrt(n * variance)), 0.0)

    def mean_ms(self) -> float:
        """The mean processing time of one record."""
        p = self.processing
        kind = p[0]
        if kind == "fixed" or kind == "exponential":
            return _num(p[1])
        if kind == "uniform":
            return (_num(p[1]) + _num(p[2])) / 2
        return _num(p[1]) * math.exp(_num(p[2]) ** 2 / 2)

    def random(self) -> bool:
        """Whether a run draws random numbers for this application (its seed then matters)."""
        return not self.aligned or self.processing[0] != "fixed"

    def describe(self) -> dict[str, object]:
        """The settings as a scenario file writes them."""
        return {
            "max_poll_records": self.max_poll_records,
            "processing_ms": processing_json(self.processing),
            "commit_on_revoke": self.commit_on_revoke,
            "revoke_ms": self.revoke_ms,
            "assign_ms": self.assign_ms,
            "client": self.client,
            "heartbeat_phase": self.heartbeat_phase,
            "startup_ms": self.startup_ms,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AppModel) and self.describe() == other.describe()

    def __hash__(self) -> int:
        return hash(
            (
                self.max_poll_records,
                self.processing,
                self.commit_on_revoke,
                self.revoke_ms,
                self.assign_ms,
                self.client,
                self.heartbeat_phase,
                self.startup_ms,
            )
        )

    def __repr__(self) -> str:
        return f"AppModel({self.describe()})"


def _num(value: object) -> float:
    assert isinstance(value, int | float)
    return float(value)


def processing_json(processing: tuple[object, ...]) -> object:
    """A processing time as a scenario file writes it: a number, or ``{"distribution": ...}``."""
    kind = processing[0]
    if kind == "fixed":
        return processing[1]
    if kind == "uniform":
        return {"distribution": "uniform", "min": processing[1], "max": processing[2]}
    if kind == "exponential":
        return {"distribution": "exponential", "mean": processing[1]}
    return {"distribution": "lognormal", "median": processing[1], "sigma": processing[2]}


def check(app: AppModel) -> None:
    """Raise ValueError for settings no application can have."""
    if app.max_poll_records < 1:
        raise ValueError("max_poll_records must be >= 1")
    if app.revoke_ms < 0 or app.assign_ms < 0:
        raise ValueError("callback times must not be negative")
    if app.startup_ms < 0:
        raise ValueError("startup_ms must not be negative")
    if app.client not in CLIENTS:
        raise ValueError(f"client must be one of {', '.join(CLIENTS)}")
    if app.heartbeat_phase not in HEARTBEAT_PHASES:
        raise ValueError(f"heartbeat_phase must be one of {', '.join(HEARTBEAT_PHASES)}")
    p = app.processing
    if not p or p[0] not in DISTRIBUTIONS:
        raise ValueError(f"processing distribution must be one of {', '.join(DISTRIBUTIONS)}")
    sizes = {"fixed": 2, "uniform": 3, "exponential": 2, "lognormal": 3}
    if len(p) != sizes[str(p[0])] or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in p[1:]):
        raise ValueError(f"processing {p[0]} takes {sizes[str(p[0])] - 1} number(s)")
    values = [_num(v) for v in p[1:]]
    if any(v < 0 or not math.isfinite(v) for v in values):
        raise ValueError("processing times must be finite and not negative")
    if p[0] == "uniform" and values[0] > values[1]:
        raise ValueError("processing uniform: min must not exceed max")
    if p[0] in ("exponential", "lognormal") and values[0] <= 0:
        raise ValueError(f"processing {p[0]}: the {'mean' if p[0] == 'exponential' else 'median'} must be > 0")


#: the application of a member that says nothing (Kafka's defaults and a typical application, see the docs)
DEFAULT_APP: Final = AppModel()
#: an application that polls continuously and whose callbacks cost nothing, with aligned heartbeats: the
#: simulator's members before the application model (tests of protocol details use it)
INSTANT_APP: Final = AppModel(processing=("fixed", 0.0), commit_on_revoke=False, heartbeat_phase="aligned")


class PollLoop:
    """When the application polls. The loop is either idle (inside ``poll()``: any time is a poll) or running
    back-to-back batches from ``start``: polls at ``start``, ``start + d0``, ``start + d0 + d1``, ... (rounded
    to whole milliseconds). ``stop(t)`` (the member owns nothing from t on) lets the batch in hand at t
    finish; after that poll the loop idles.

    Durations are drawn in order and only the last two polls are kept, so asking about later and later times
    costs one step per batch passed, once; with a fixed processing time the polls are computed directly."""

    __slots__ = ("_acc", "_app", "_draws", "_end", "_last", "_prev", "_start", "_step", "overrun_at", "running")

    def __init__(self, app: AppModel, draws: Draws | None) -> None:
        self._app = app
        self._draws = draws
        #: a fixed batch time, or -1.0 when batch times are drawn
        self._step = app.batch_ms(None) if app.processing[0] == "fixed" else -1.0
        self.running = False
        self._start = 0
        self._prev = 0  # the poll before ``_last``
        self._last = 0  # the latest poll computed
        self._acc = 0.0  # ``_last - _start``, unrounded
        self._end = _NEVER  # the poll after which the loop idles (``stop``)
        #: the first time a batch outlasted the poll interval given to ``advance`` (-1: none found)
        self.overrun_at = -1

    @property
    def busy(self) -> bool:
        """Whether batches run (time between polls is spent processing)."""
        return self.running and self._step != 0.0

    def start(self, now_ms: int) -> None:
        """The application polled at ``now_ms`` and got a batch (it owns partitions): batches run from here."""
        self.running = self._step != 0.0
        self._start = self._prev = self._last = now_ms
        self._acc = 0.0
        self._end = _NEVER
        self.overrun_at = -1

    def stop(self, now_ms: int) -> None:
        """The member owns nothing from ``now_ms`` on: the batch in hand is finished, then the loop idles."""
        if self.running and self._end == _NEVER:
            self._end = self.advance(now_ms)

    def idle(self) -> None:
        self.running = False
        self._end = _NEVER

    def next_poll(self, now_ms: int) -> int:
        """The first poll at or after ``now_ms`` (``now_ms`` itself when the loop is idle)."""
        if not self.running:
            return now_ms
        if now_ms >= self._end:
            self.idle()
            return now_ms
        return self.advance(now_ms)

    def advance(self, now_ms: int, poll_interval_ms: int = 0) -> int:
        """Compute the polls up to the first one at or after ``now_ms`` and return it. With a
        ``poll_interval_ms``, a batch longer than that sets ``overrun_at`` (its poll + the interval)."""
        last = self._last
        if last >= now_ms:
            return last
        step = self._step
        if step > 0:
            k = max(math.ceil((now_ms - self._start) / step - 1e-9), 1)
            self._acc = k * step
            last = self._start + int(self._acc + 0.5)
            if last < now_ms:  # (rounding)
                k += 1
                self._acc += step
                last = self._start + int(self._acc + 0.5)
            self._prev = self._start + int((k - 1) * step + 0.5)
            self._last = last
            if poll_interval_ms > 0 and last - self._prev > poll_interval_ms and self.overrun_at < 0:
                self.overrun_at = self._prev + poll_interval_ms
            return last
        while last < now_ms:
            self._acc += self._app.batch_ms(self._draws)
            nxt = max(self._start + int(self._acc + 0.5), last)
            if poll_interval_ms > 0 and nxt - last > poll_interval_ms and self.overrun_at < 0:
                self.overrun_at = last + poll_interval_ms
            self._prev, last = last, nxt
        self._last = last
        return last

    def overran(self, now_ms: int, poll_interval_ms: int) -> bool:
        """Whether a batch running by ``now_ms`` has outlasted ``poll_interval_ms`` (``max.poll.interval.ms``);
        True once per overrun (it is consumed)."""
        if not self.running:
            return False
        self.advance(now_ms, poll_interval_ms)
        overrun = self.overrun_at
        if overrun < 0 or overrun > now_ms:
            return False
        self.overrun_at = -1
        return True

    @property
    def last_poll(self) -> int:
        """The latest poll computed (the next batch, not yet drawn, starts there)."""
        return self._last

    def can_outlast(self, poll_interval_ms: int) -> bool:
        """Whether a batch may take longer than ``poll_interval_ms``."""
        return self._app.max_poll_records * self._app.per_record_bounds()[1] > poll_interval_ms


class AppThread:
    """The application thread of one member: its poll loop, and the callback it may be inside of (user work
    until ``ready_ms``, or a synchronous commit it waits for). A member runs its poll-bound rebalance work
    only when ``at_poll(now)``; ``in_poll`` is set while that work runs, and ``leave_poll`` ends the poll
    (its batch starts then, when the member owns partitions)."""

    __slots__ = ("app", "commit_id", "draws", "in_poll", "loop", "ready_ms", "work_after_commit")

    def __init__(self, app: AppModel, draws: Draws | None) -> None:
        self.app = app
        self.draws = draws
        self.loop = PollLoop(app, draws)
        self.ready_ms = -1  # inside a callback's user work until then
        self.commit_id: int | None = None  # waiting for this OffsetCommit inside a callback
        self.work_after_commit = 0
        self.in_poll = False

    def at_poll(self, now_ms: int) -> bool:
        """Whether the application is inside ``poll()`` at ``now_ms`` with nothing else to finish first."""
        if self.commit_id is not None or now_ms < self.ready_ms:
            return False
        return self.in_poll or self.loop.next_poll(now_ms) <= now_ms

    def free(self, now_ms: int) -> bool:
        """No callback work or commit pending."""
        return self.commit_id is None and now_ms >= self.ready_ms

    def next_ready(self, now_ms: int) -> int | None:
        """When work waiting for the application can run (None: when a commit answer arrives)."""
        if self.commit_id is not None:
            return None
        if self.ready_ms > now_ms:
            return self.ready_ms
        if self.in_poll:
            return now_ms
        return self.loop.next_poll(now_ms)

    def callback(self, commit_id: int | None, now_ms: int, work_ms: int) -> bool:
        """A callback that commits (``commit_id``: wait for its answer) and then works ``work_ms``. True when
        the application is busy with it after ``now_ms``."""
        if commit_id is not None:
            self.commit_id = commit_id
            self.work_after_commit = work_ms
            return True
        if work_ms > 0:
            self.ready_ms = now_ms + work_ms
            return True
        return False

    def answered(self, request_id: int, now_ms: int) -> bool:
        """An OffsetCommit answered (or timed out): True if a callback was waiting for it."""
        if request_id != self.commit_id:
            return False
        self.commit_id = None
        self.ready_ms = now_ms + self.work_after_commit
        return True

    def leave_poll(self, now_ms: int, owns: bool) -> None:
        """The poll returns: a batch when the member owns partitions, else the application waits in poll."""
        self.in_poll = False
        if owns:
            self.loop.start(now_ms)
        else:
            self.loop.idle()

    def reset(self) -> None:
        """The process stops (or starts over): nothing pending."""
        self.commit_id = None
        self.ready_ms = -1
        self.in_poll = False

    def startup_ms(self) -> int:
        """How long after its start a process sends its first request (0 when phases are aligned)."""
        if self.app.aligned or self.draws is None:
            return 0
        return int(self.draws.random() * self.app.startup_ms)

    def late_ms(self) -> int:
        """How late the next heartbeat goes out after its timer expires."""
        lateness = self.app.lateness_ms
        if lateness <= 0 or self.draws is None:
            return 0
        return int(self.draws.random() * lateness)
