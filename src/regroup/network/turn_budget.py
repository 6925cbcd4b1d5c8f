"""One budget of request handling per turn of the event loop, shared by every connection of a server.

Each connection already stops handling its own requests after ``SECONDS_PER_TURN`` of one turn and leaves
the rest for a later one. That bounds one connection, not a turn: when hundreds of connections have data at
once (the members of a large classic group all sending their JoinGroup or SyncGroup), the loop calls each
one's ``data_received`` in the same turn and the turn lasts as long as all of their work together, while a
heartbeat that arrived meanwhile waits for the next read of the sockets.

``TurnBudget.ends`` gives the end of the current turn's shared budget: the first connection to handle a
request in a turn opens it (``seconds`` from then) and schedules its renewal with ``call_soon``, which runs
before the loop next reads its sockets. A connection handles requests until the earlier of its own and the
shared end, then leaves the rest for a later turn; it always handles at least one request when it gets its
turn, so a connection that arrives after the budget is spent (the heartbeat) is answered in its first turn.

What connections leave for a later turn waits (``later``), taken once per turn of the loop within the same budget
(opened by whoever handles a request first in the turn, the reads or the queue, and renewed only when the renewal
that opening scheduled runs: the queue's turn follows the reads of the same turn in uvloop's order and precedes them
in asyncio's, and either way the two share one budget, so that what the loop handles between two reads of its
sockets is about one budget, not one for the reads and another for the queue), a short turn (``QUEUED_TURN_S``: a
few JoinGroups, a hundred heartbeats) for each connection in turn until the budget is spent, the rest where they
stand for the next turn. A connection that still has requests after such a turn goes to the back of a second line,
served after the first, and so does one whose next request is a classic rebalance's (``connection.REBALANCE_APIS``:
the members of a large group sending their JoinGroups and SyncGroups over hundreds of connections): so a connection
with one request left over (a healthy member whose heartbeat and commit came together) is taken in the next turn,
before the backlogs of the busy ones and before a rebalance's requests, which share the rest of the loop in turn
(one of them at least in every turn, however long the first line). A turn does about ``seconds`` of the waiting work
however many connections wait.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

__all__ = ["QUEUED_TURN_S", "SECONDS_PER_LOOP_TURN", "Later", "TurnBudget"]

#: the request handling all connections together do in one turn of the loop before the rest waits a turn (the
#: rest of a turn, the answers of parked requests, the event rows' hand-out and the history's append, adds a few
#: milliseconds: the turn stays under the stall watchdog's 10 ms)
SECONDS_PER_LOOP_TURN = 0.002
#: the handling one waiting connection gets when its turn in the queue comes (one request at least)
QUEUED_TURN_S = 0.0005


class Later:
    """A connection's place in the queue of ``TurnBudget.later``; ``cancel`` gives it up."""

    __slots__ = ("cancelled", "turn")

    def __init__(self, turn: Callable[[], None]) -> None:
        self.turn = turn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TurnBudget:
    """The shared end of this turn's request handling (``ends``), renewed once per turn of the loop, and the
    connections waiting for a later turn (``later``): those new to the wait first, then those back again."""

    __slots__ = ("_again", "_ends", "_loop", "_new", "_taking", "seconds")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float = SECONDS_PER_LOOP_TURN) -> None:
        self._loop = loop
        self.seconds = seconds
        self._ends: float | None = None
        self._new: collections.deque[Later] = collections.deque()
        self._again: collections.deque[Later] = collections.deque()
        self._taking = False  # the queue's next turn is scheduled

    def ends(self, now: float) -> float:
        """When this turn's shared budget runs out (``time.perf_counter`` seconds); the first call of a turn
        opens it at ``now``."""
        ends = self._ends
        if ends is None:
            ends = self._ends = now + self.seconds
            self._loop.call_soon(self._renew)
        return ends

    def later(self, turn: Callable[[], None], *, again: bool = False) -> Later:
        """Call ``turn`` in a later turn of the loop, behind the connections already waiting in its line: the
        first, or with ``again`` (the connection had a turn from this queue and still has requests) the second."""
        waiting = Later(turn)
        (self._again if again else self._new).append(waiting)
        if not self._taking:
            self._taking = True
            self._loop.call_soon(self._take_turns)
        return waiting

    def _renew(self) -> None:
        self._ends = None

    def _take_turns(self) -> None:
        """The waiting connections' turn, within this turn's budget (opened here if nobody opened it yet): the
        first line in order, then the second, until the budget is spent (at least one connection)."""
        self._taking = False
        clock = time.perf_counter
        again_served = False
        try:
            for line in (self._new, self._again):
                while line:
                    waiting = line.popleft()
                    if waiting.cancelled:
                        continue
                    waiting.turn()
                    again_served = again_served or line is self._again
                    ends = self._ends
                    if ends is not None and clock() >= ends:
                        break
                else:
                    continue
                break
            while self._again and not again_served:  # (the second line gets a turn in every turn of the loop)
                waiting = self._again.popleft()
                if not waiting.cancelled:
                    waiting.turn()
                    again_served = True
        finally:  # (also should a turn raise: the others still get theirs)
            if (self._new or self._again) and not self._taking:
                self._taking = True
                self._loop.call_soon(self._take_turns)
