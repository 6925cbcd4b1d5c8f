"""Work on the event loop cut into slices of a few milliseconds, the loop given a turn between two: a handler
or a background round that walks thousands of partitions asks ``tick()`` before each one. A handler's slices
(``HeldSlices``) hold its connection's later requests from the first turn given away until ``release``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

__all__ = ["HeldSlices", "TimeSlices"]


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
        await self.turn()
        return True

    async def turn(self) -> None:
        """Give the loop a turn now, whatever is left of this slice."""
        self.before_turn()
        await asyncio.sleep(0)
        self.restart()

    def before_turn(self) -> None:
        """What a subclass does before the loop gets its turn (nothing here)."""

    def restart(self) -> None:
        """The loop ran other work (a turn, or an await): a new slice begins."""
        self._began = time.perf_counter()
        self.yielded = True


class HeldSlices(TimeSlices):
    """A request's work cut into slices (a Produce's appends, a ListOffsets' reads, a ShareFetch's partitions);
    from the first turn given to the loop until ``release`` the connection's later requests are held
    (``Session.hold``), so that they see all of its work, as in Kafka, which handles a connection's requests one
    at a time. ``ctx``: the request's context (its ``session``, None outside a connection). Used as a context
    manager, it releases them at the end of the block, however it ends."""

    __slots__ = ("_ctx", "_release")

    def __init__(self, slice_s: float, ctx: Any) -> None:
        super().__init__(slice_s)
        self._ctx = ctx
        self._release: Callable[[], None] | None = None

    def __enter__(self) -> HeldSlices:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def before_turn(self) -> None:
        self.hold()

    def hold(self) -> None:
        session = self._ctx.session
        if self._release is None and session is not None:  # (None: a handler called outside a connection)
            session.hold()
            self._release = session.release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()
