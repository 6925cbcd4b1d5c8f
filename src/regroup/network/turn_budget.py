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

What connections leave for a later turn waits in one queue (``later``), taken in order once per turn of the
loop with a budget of its own: one request of each connection in turn (``Connection._turn``) until the budget is
spent, the rest where they stand for the next turn, and a connection that still has requests after its turn
goes to the back. So a turn does about ``seconds`` of the waiting work however many connections wait, and a
connection with one request waiting waits for one request of each connection ahead of it, not for their
backlogs.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

__all__ = ["SECONDS_PER_LOOP_TURN", "Later", "TurnBudget"]

#: the request handling all connections together do in one turn of the loop before the rest waits a turn
SECONDS_PER_LOOP_TURN = 0.005


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
    queue of connections waiting for a later turn (``later``)."""

    __slots__ = ("_ends", "_loop", "_queue", "_taking", "seconds")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float = SECONDS_PER_LOOP_TURN) -> None:
        self._loop = loop
        self.seconds = seconds
        self._ends: float | None = None
        self._queue: collections.deque[Later] = collections.deque()
        self._taking = False  # the queue's next turn is scheduled

    def ends(self, now: float) -> float:
        """When this turn's shared budget runs out (``time.perf_counter`` seconds); the first call of a turn
        opens it at ``now``."""
        ends = self._ends
        if ends is None:
            ends = self._ends = now + self.seconds
            self._loop.call_soon(self._renew)
        return ends

    def later(self, turn: Callable[[], None]) -> Later:
        """Call ``turn`` in a later turn of the loop, in order behind the connections already waiting."""
        waiting = Later(turn)
        self._queue.append(waiting)
        if not self._taking:
            self._taking = True
            self._loop.call_soon(self._take_turns)
        return waiting

    def _renew(self) -> None:
        self._ends = None

    def _take_turns(self) -> None:
        """The waiting connections' turn: in order, with a budget of its own, at least one of them."""
        self._taking = False
        self._ends = None
        queue, clock = self._queue, time.perf_counter
        while queue:
            waiting = queue.popleft()
            if waiting.cancelled:
                continue
            waiting.turn()
            ends = self._ends
            if ends is not None and clock() >= ends:
                break
        if queue and not self._taking:
            self._taking = True
            self._loop.call_soon(self._take_turns)
