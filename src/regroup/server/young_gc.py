"""The cyclic garbage collector kept to young objects in ``regroup serve``: every pause bounded by the young
generation's size, whatever the size of the heap.

CPython's collector is generational, not incremental: a collection of a generation walks every object in it and
the younger ones in one go, holding the interpreter's lock, so the event loop waits for all of it. Survivors of a
young collection go to the middle generation, whose collection walks the survivors of several young ones (the
parked requests of a 10,000-member rebalance: 50–100 ms), and from there to the oldest, whose full collection
walks the whole heap. Yet in this server almost everything that survives a young collection is long-lived state
(groups, members, partition logs, requests parked until answered) and is freed by reference counting when it
goes; garbage held in reference cycles is rare (about 6,000 objects in ten seconds of the heaviest cases, most of
them dying young).

So, once ``install`` ran, every collection's survivors are frozen at its end (``gc.freeze``: moved in constant
time to the permanent generation, which collections never walk), and the thresholds leave only the young
generation's collections: at most ``young_threshold`` net allocations of containers to walk each time. A frozen
object is still freed by reference counting like any other; only garbage in cycles that outlived a young
collection stays. ``check`` (the server calls it about once a second, between turns of the loop) reclaims that:
when the heap (``heap_pages``: the process's resident memory, read from the kernel in under a millisecond, where the
interpreter's count of its allocated blocks walks every pool of its arenas and counting the frozen objects walks
them all), at its smallest over the last ``window`` checks
(transient peaks such as a rebalance's parked requests do not count), is ``growth`` times what was left after the
previous reclamation, everything is thawed, collected once in full and frozen again. Python's own rule would have
run a full collection for a quarter of that growth of its oldest generation.

The young collection's own trigger is a count of container allocations net of every container freed, frozen ones
included: while a 10,000-member rebalance's parked requests are answered and freed and the next one's arrive, the
count stays low and the young generation grows past it (young collections of 40,000 objects and more, up to 76 ms,
seen in ``bench/stall.py``'s classic-joins-10k). So ``measure`` (the server calls it every 20 ms, between turns;
it skips the count once after a collection, whose end froze the young generation) counts the young generation's
objects themselves (``gc.get_objects(0)``: about 0.15 ms at 10,000) and, past
``young_limit`` (twice the threshold), freezes them without collecting them; a young collection that begins with
its generation grown past that limit between two counts freezes it first, and walks nothing (the count in its
start callback costs a tenth of the walk). A young generation grown so is live
objects (a young generation holds only objects not yet freed, and what churns is freed by reference counting):
collecting it, 4–7 ms at 20,000–38,000 objects, found 102 unreachable objects in 17 such collections of a
classic-joins-10k run; freezing it takes no time, and what little garbage it holds waits for the next reclamation.
"""

from __future__ import annotations

import collections
import gc
import logging
import os
import sys
import time
from typing import Any

from regroup.server.metrics import Family

__all__ = ["DEFAULT_GROWTH", "DEFAULT_WINDOW", "NEVER", "YoungCollector", "freeze_young", "heap_pages", "young_count"]

log = logging.getLogger("regroup.server.young_gc")

#: a threshold no count of collections reaches: the middle and oldest generations are never collected on their own
NEVER = 2**30
#: the heap's growth (its smallest over the window, against what the last reclamation left) that reclaims
DEFAULT_GROWTH = 2.0
#: the checks whose fewest frozen objects are compared (about a second apart: the server's own cadence)
DEFAULT_WINDOW = 30


#: where the kernel tells a process its resident memory (Linux); elsewhere the allocator's blocks stand in
_STATM = "/proc/self/statm"
_RESIDENT = os.path.exists(_STATM)
#: the last reading of ``heap_pages`` (what it answers when the file cannot be read: out of descriptors, say)
_last_pages = 0


def heap_pages() -> int:
    """The heap's size as the reclamation's rule compares it: the process's resident pages (``/proc/self/statm``,
    under a millisecond whatever the heap's size), or, without ``/proc``, the interpreter's allocated blocks.
    (Counting the blocks, ``sys.getallocatedblocks()``, reads the header of every pool of every arena: 0.02 ms
    when they are in the caches, but 12–27 ms in a server answering 6,000 commits a second, where once a second
    they are not.)
    A process reads one kind throughout, so the rule only ever compares readings of the same kind; a reading
    that fails repeats the last one."""
    global _last_pages
    if not _RESIDENT:
        return sys.getallocatedblocks()
    try:
        with open(_STATM, "rb") as statm:
            _last_pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return _last_pages


def young_count() -> int:
    """How many objects the young generation holds, counted without letting another thread run while they are
    referenced: the list of them (``gc.get_objects(0)``) is made, measured and freed inside one call of C code.
    (Counted as ``len(gc.get_objects(0))``, the interpreter may hand its lock to another thread between the two
    calls; that thread's tuple being built from an iterator is then in the list, referenced twice, and its
    resize fails with ``SystemError: bad argument to internal function``: thousands a second in a test with two
    threads, and once a ShareGroupHeartbeat failed so in ``bench/stall.py``.)"""
    return next(map(len, map(gc.get_objects, (0,))))


#: the collector installed in this process, if any (``freeze_young``)
_active: YoungCollector | None = None


def freeze_young() -> bool:
    """With a ``YoungCollector`` installed, freeze the young objects now (what its collections do to their
    survivors, without walking them): called once a large request is decoded (a leader's SyncGroup of 10,000
    assignments, an OffsetCommit of 10,000 partitions: tens of thousands of objects that live until it is
    answered, and that the next young collection would walk in one pause of 10–30 ms). Whether it froze."""
    if _active is None:
        return False
    gc.freeze()
    return True


class YoungCollector:
    """Young collections only, their survivors frozen; ``measure`` freezes a young generation grown past
    ``young_limit``, ``check`` reclaims the frozen cycles when they have grown (see the module doc)."""

    __slots__ = (
        "_before",
        "_emptied",
        "_installed",
        "_samples",
        "baseline",
        "growth",
        "reclaimed",
        "reclaiming_s",
        "reclamations",
        "sized_freezes",
        "young_limit",
        "young_threshold",
    )

    def __init__(
        self,
        young_threshold: int,
        *,
        growth: float = DEFAULT_GROWTH,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        if young_threshold < 1:
            raise ValueError("the young generation's threshold must be at least 1")
        if growth <= 1 or window < 1:
            raise ValueError("the growth must be over 1 and the window at least one check")
        self.young_threshold = young_threshold
        #: the young generation's size (objects, counted) past which ``measure`` freezes it at once
        self.young_limit = 2 * young_threshold
        #: young generations ``measure`` froze
        self.sized_freezes = 0
        self.growth = growth
        self._samples: collections.deque[int] = collections.deque(maxlen=window)
        #: the heap's size (``heap_pages``) the last reclamation left (or found at ``install``)
        self.baseline = 0
        #: reclamations done, the objects they found unreachable, and the time they took (seconds)
        self.reclamations = 0
        self.reclaimed = 0
        self.reclaiming_s = 0.0
        self._before: tuple[int, int, int] | None = None
        self._installed = False
        #: a collection ended (freezing the young generation) since ``measure`` last ran
        self._emptied = False

    def install(self) -> None:
        """Freeze what is alive now and collect only the young generation from here on."""
        if self._installed:
            return
        self._before = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(self.young_threshold, NEVER, NEVER)
        gc.callbacks.append(self._on_collection)
        self._installed = True
        self.baseline = heap_pages()
        global _active
        _active = self

    def uninstall(self) -> None:
        """Back to the thresholds found at ``install``; what is frozen is thawed into the oldest generation."""
        if not self._installed:
            return
        gc.callbacks.remove(self._on_collection)
        if self._before is not None:
            gc.set_threshold(*self._before)
        gc.unfreeze()
        self._installed = False
        global _active
        if _active is self:
            _active = None

    def check(self) -> bool:
        """Note the heap's size; reclaim (and say so) when its smallest over the window has grown by ``growth``
        since the last reclamation."""
        if not self._installed:
            return False
        samples = self._samples
        samples.append(heap_pages())
        if len(samples) < (samples.maxlen or 1):
            return False
        if min(samples) < self.growth * self.baseline:
            return False
        self.reclaim()
        return True

    def measure(self) -> bool:
        """Count the young generation's objects and freeze them now, uncollected, when they are over
        ``young_limit`` (whether it did). Not counted when a collection ended since the last call: its end froze
        the young generation, which holds only what was allocated since (a server busy with small requests
        collects every few milliseconds, and a count of 10,000 objects every 20 ms cost it 2–4% of the loop)."""
        if not self._installed:
            return False
        if self._emptied:
            self._emptied = False
            return False
        if young_count() <= self.young_limit:
            return False
        gc.freeze()
        self.sized_freezes += 1
        return True

    def reclaim(self) -> int:
        """Thaw everything, collect it in full (the collection's end freezes what survived), and return how many
        objects were found unreachable (0 when not installed)."""
        if not self._installed:
            return 0
        before = heap_pages()
        began = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        took = time.perf_counter() - began
        self.baseline = heap_pages()
        self._samples.clear()
        self.reclamations += 1
        self.reclaimed += found
        self.reclaiming_s += took
        log.info(
            "garbage collector: reclaimed %d unreachable objects in %.0f ms, the heap %d -> %d pages",
            found,
            took * 1000,
            before,
            self.baseline,
        )
        return found

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            gc.freeze()
            self._emptied = True
        elif info["generation"] == 0 and young_count() > self.young_limit:
            gc.freeze()  # (before it begins: the collection that follows walks an empty young generation)
            self.sized_freezes += 1

    def families(self) -> list[Family]:
        return [
            Family(
                "regroup_heap_pages",
                "gauge",
                "The process's resident memory in pages: the measure whose growth reclaims the cycles among the "
                "objects frozen out of the collector's walks.",
            ).add(heap_pages()),
            Family(
                "regroup_gc_reclamations_total",
                "counter",
                "Full collections of the frozen objects, run when the heap had doubled since the last one.",
            ).add(self.reclamations),
            Family(
                "regroup_gc_young_freezes_by_size_total",
                "counter",
                "Young generations frozen uncollected because, counted (every 20 ms, or as a young collection began), "
                "they held more than twice the threshold (the collector's own trigger counts allocations net of every "
                "container freed).",
            ).add(self.sized_freezes),
            Family(
                "regroup_gc_reclaimed_objects_total",
                "counter",
                "Unreachable objects the reclamations found (garbage held in reference cycles).",
            ).add(self.reclaimed),
        ]
