"""The pauses of the interpreter's cyclic garbage collector, timed as they happen (``gc.callbacks``), for the stall
watchdog and the metrics.

A collection holds the interpreter's lock from start to end, whichever thread runs it, so the event loop waits
for it too. A young generation's collection is short; a full one (generation 2) walks every object the
collector tracks that was not frozen at start (``ServerConfig.freeze_loaded``) and can take tens of
milliseconds on a large heap: a turn of the loop no request explains. The watchdog asks how much of the time
since its last wake went to collections, to name them as the cause of such a stall.

The callback runs on the collecting thread with the lock held (collections never overlap), and costs about a
microsecond per collection."""

from __future__ import annotations

import gc
import time
from typing import Any

__all__ = ["GcPauses"]

GENERATIONS = 3


class GcPauses:
    """Collections since ``install``: their count and time per generation, the longest, and the last one."""

    __slots__ = (
        "_began",
        "_installed",
        "collections",
        "last_end",
        "last_generation",
        "last_s",
        "longest_s",
        "paused_s",
    )

    def __init__(self) -> None:
        self.collections = [0] * GENERATIONS
        #: seconds spent collecting, per generation
        self.paused_s = [0.0] * GENERATIONS
        self.longest_s = 0.0
        #: the last collection: when it ended (``time.perf_counter``), how long it took, its generation
        self.last_end = 0.0
        self.last_s = 0.0
        self.last_generation = 0
        self._began = 0.0
        self._installed = False

    @property
    def total_s(self) -> float:
        """Seconds spent collecting since ``install``, all generations."""
        return sum(self.paused_s)

    def install(self) -> None:
        if not self._installed:
            gc.callbacks.append(self._on_collection)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._on_collection)
            self._installed = False

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._began = now
            return
        generation = min(int(info.get("generation", 0)), GENERATIONS - 1)
        took = now - self._began
        self.collections[generation] += 1
        self.paused_s[generation] += took
        if took > self.longest_s:
            self.longest_s = took
        self.last_end, self.last_s, self.last_generation = now, took, generation
