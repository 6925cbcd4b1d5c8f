"""Work on the event loop cut into slices of a few milliseconds, the loop given a turn between two: a handler
or a background round that walks thousands of partitions asks ``tick()`` before each one."""

from __future__ import annotations

import asyncio
import time

__all__ = ["TimeSlices"]


class TimeSlices:
    """Slices of ``slice_s`` seconds: ``tick()`` gives the loop a turn once the current slice is over."""

    __slots__ = ("_began", "slice_s", "yielded")

    def __init__(self, slice_s: float) -> None:
        self.slice_s = slice_s
        self._began = time.perf_counter()
        #: whether the loop ran other work since the slices began
        self.yielded = False

    async def tick(self) -> bool:
        """Give the loop a turn if this slice is over; whether it was."""
        if time.perf_counter() - self._began < self.slice_s:
            return False
        self.before_turn()
        await asyncio.sleep(0)
        self.restart()
        return True

    def before_turn(self) -> None:
        """What a subclass does before the loop gets its turn (nothing here)."""

    def restart(self) -> None:
        """The loop ran other work (a turn, or an await): a new slice begins."""
        self._began = time.perf_counter()
        self.yielded = True
