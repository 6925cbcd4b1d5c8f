"""When a group commit round waits for the clients the round before it answered (the topic store's group commit
of Produce, ``group_sync.py``).

Clients that each keep one request in flight fall into two groups under group commit: those that arrived while a
round's fsync ran wait for it to end and then have a round of their own, during which the clients the first round
answered come back, wait, and have theirs. Each client then waits for about two fsyncs, and each fsync covers half
of them: on a disk whose fsync takes milliseconds, half the throughput one group would have. The groups merge when
the round after one that answered clients, with others already waiting, waits a moment for those it answered
(``RoundGather``): until as many requests have arrived since as the round answered, and no longer than the round
took (``GATHER_MAX_S`` at most). Clients that do not come back at once (producers whose next batch is not ready
yet) would only make the waiting ones wait: a gather that ends by its time with fewer than half the clients back
turns gathering off for the next ``QUIET_ROUNDS`` rounds. (The coordinator log's writer has a wait of its own for
a new wave of batches, ``core_runtime.py``; this one, tried there too, measured no better.)

Plain state over the time and counts its owner passes in: the owner measures its rounds, counts the arrivals and
does the waiting."""

from __future__ import annotations

__all__ = ["GATHER_MAX_S", "QUIET_ROUNDS", "RoundGather"]

#: the longest a round waits for the clients the last one answered
GATHER_MAX_S = 0.010
#: the rounds that do not gather after a gather in which fewer than half the clients answered came back in time
QUIET_ROUNDS = 8


class RoundGather:
    """The gathering between the rounds of one group commit (see the module doc)."""

    __slots__ = ("_expected", "_quiet", "arrived", "gathered", "gathering", "timed_out")

    def __init__(self) -> None:
        self._expected = 0
        self._quiet = 0
        #: requests arrived since the current gather began
        self.arrived = 0
        #: whether a gather is under way (between ``after_round`` returning a wait and ``ended``)
        self.gathering = False
        #: gathers that ended with every client back, and those that ended by their time
        self.gathered = 0
        self.timed_out = 0

    def after_round(self, answered: int, round_s: float, *, waiting: bool) -> float:
        """A round ended that answered ``answered`` requests and took ``round_s`` seconds; ``waiting``: others
        already wait for the next. How long the next round waits for the answered clients (0: it starts now)."""
        if self._quiet:
            self._quiet -= 1
            return 0.0
        if not waiting or answered < 1 or round_s <= 0:
            return 0.0
        self._expected = answered
        self.arrived = 0
        self.gathering = True
        return min(round_s, GATHER_MAX_S)

    def arrive(self) -> bool:
        """A request arrived that the next round covers; whether the gather under way is now complete."""
        if not self.gathering:
            return False
        self.arrived += 1
        return self.arrived >= self._expected

    def ended(self) -> None:
        """The gather is over (complete, or by its time)."""
        if not self.gathering:
            return
        self.gathering = False
        if self.arrived >= self._expected:
            self.gathered += 1
            return
        self.timed_out += 1
        if 2 * self.arrived < self._expected:
            self._quiet = QUIET_ROUNDS
