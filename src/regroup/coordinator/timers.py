"""The coordinator's timers, soft state: each is scheduled with a deadline and is what to do when it comes
due (a ``Timer``: its key, and ``fire``, which captures what it needs, such as the member epoch a revocation
timeout was armed at). Scheduling a timer whose key is scheduled replaces it; expiry hands the due timers
back in deadline order (ties in scheduling order), and the facade fires each as a write of its own. Each
group type declares its own timers (``classic/timers.py``, ``consumer/timers.py``): nothing here dispatches
on a key."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Final, Protocol

from regroup.coordinator.journal import Journal

if TYPE_CHECKING:
    from regroup.coordinator.context import Ctx
    from regroup.coordinator.groups import Groups

#: An entry is ``deadline * 2**64 + n`` (n: the scheduling count), so one int orders by (deadline, n).
_ORDER: Final = 2**64
#: the disowned heap entries above which, when they are most of the heap, it is rebuilt without them
COMPACT_AT: Final = 1_024


class Timer(Protocol):
    """What a timer does when it comes due."""

    @property
    def key(self) -> Hashable:
        """Its identity: a timer scheduled with the key of another replaces it."""

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        """Act at the deadline (the group may have changed or gone since: check first)."""


def is_paced(timer: Timer) -> bool:
    """Whether ``timer`` is the next chunk of work cut into chunks (a large group's parked answers, its member
    listing, its assignment's storing): fired only by ``GroupCoordinator.advance``, never before a request, so
    that a driver calling ``advance`` once per turn of its loop does one chunk a turn, however many requests the
    turn handles (each chunk schedules the next a millisecond on). A timer says so with a ``paced`` attribute."""
    return bool(getattr(timer, "paced", False))


class Timers:
    """Most rescheduling moves a deadline later (each heartbeat extends its member's session), so the heap
    is lazy: it holds one entry per key that is never later than the key's current entry. Moving a deadline
    later only records the new entry; moving it earlier pushes the new entry and disowns the old one. When
    an outdated entry comes due, it is replaced by its key's current entry. So ``next_deadline`` is the top
    entry's time: never later than the earliest deadline, and earlier only by an outdated entry (asking
    then, ``pop_due`` returns nothing and renews it); each key is renewed at most once per deadline it
    outlives, instead of pushing a heap entry for every heartbeat. Entries disowned (their key cancelled, or its
    deadline moved earlier) leave the heap as they reach its top, or all together once they are most of it
    (``_compact``): a group of 10,000 members leaving at once disowns 10,000 entries, which one by one took
    about 5 ms to pop."""

    def __init__(self) -> None:
        self._entry: dict[Hashable, int] = {}  # key -> its current entry
        self._timer: dict[Hashable, Timer] = {}  # key -> what to do
        self._queued: dict[Hashable, int] = {}  # key -> the heap entry standing for it (<= its current entry)
        self._key: dict[int, Hashable] = {}  # heap entry standing for a key -> that key (others are disowned)
        self._heap: list[int] = []
        self._disowned = 0  # heap entries no key owns
        self._seq = 0
        #: the running operation's undo journal: a refused operation's timer changes are taken back
        self.journal: Journal | None = None

    def schedule(self, timer: Timer, deadline_ms: int) -> None:
        key = timer.key
        entry = deadline_ms * _ORDER + self._seq
        self._seq += 1
        journal = self.journal
        if journal is not None and journal.active:
            journal.undo(self._restorer(key))
        self._set(key, entry, timer)

    def schedule_all(self, timers: Iterable[tuple[Timer, int]]) -> None:
        """``schedule`` each ``(timer, deadline_ms)`` in order, with one undo entry for them all (a rebalance of
        many members restarts every member's session at once)."""
        keyed = [(timer.key, timer, deadline_ms) for timer, deadline_ms in timers]
        journal = self.journal
        if journal is not None and journal.active:
            entries, actions = self._entry, self._timer
            before = [(key, entries.get(key), actions.get(key)) for key, _, _ in keyed]

            def restore() -> None:
                for key, entry, timer in before:  # (each as it was before the batch: a key twice, alike)
                    if entry is None or timer is None:
                        self._cancel(key)
                    else:
                        self._set(key, entry, timer)

            journal.undo(restore)
        seq = self._seq
        for key, timer, deadline_ms in keyed:
            self._set(key, deadline_ms * _ORDER + seq, timer)
            seq += 1
        self._seq = seq

    def extend(self, key: Hashable, deadline_ms: int) -> bool:
        """Move ``key``'s deadline to ``deadline_ms``, keeping what it does: the same as scheduling its timer
        again (``schedule``), without a new timer. False, and nothing changed, when ``key`` is not scheduled."""
        timer = self._timer.get(key)
        if timer is None:
            return False
        self.schedule(timer, deadline_ms)
        return True

    def _restorer(self, key: Hashable) -> Callable[[], None]:
        """How to put ``key`` back as it is now (scheduled or not)."""
        entry, timer = self._entry.get(key), self._timer.get(key)

        def restore() -> None:
            if entry is None or timer is None:
                self._cancel(key)
            else:
                self._set(key, entry, timer)

        return restore

    def _set(self, key: Hashable, entry: int, timer: Timer) -> None:
        self._entry[key] = entry
        self._timer[key] = timer
        queued = self._queued.get(key)
        if queued is not None:
            if queued <= entry:
                return  # (replaced by ``entry`` when it reaches the top)
            del self._key[queued]
            self._disowned += 1
        self._queue(key, entry)

    def _queue(self, key: Hashable, entry: int) -> None:
        self._queued[key] = entry
        self._key[entry] = key
        heappush(self._heap, entry)

    def cancel(self, key: Hashable) -> None:
        journal = self.journal
        if journal is not None and journal.active and key in self._entry:
            journal.undo(self._restorer(key))
        self._cancel(key)

    def _cancel(self, key: Hashable) -> None:
        if self._entry.pop(key, None) is not None:
            del self._timer[key]
            del self._key[self._queued.pop(key)]
            self._disowned += 1

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entry.get(key)
        return None if entry is None else entry // _ORDER

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entry

    def scheduled(self) -> dict[Hashable, tuple[int, Timer]]:
        """Every scheduled timer by key: its deadline and itself."""
        return {key: (entry // _ORDER, self._timer[key]) for key, entry in self._entry.items()}

    def _drop_disowned(self) -> None:
        if self._disowned > COMPACT_AT and 2 * self._disowned > len(self._heap):
            self._compact()
            return
        heap, owners = self._heap, self._key
        while heap and heap[0] not in owners:
            heappop(heap)
            self._disowned -= 1

    def _compact(self) -> None:
        """The heap without its disowned entries (a filter and ``heapify``: linear, in C for the most part)."""
        owners, heap = self._key, self._heap
        heap[:] = [entry for entry in heap if entry in owners]  # (in place: callers hold the list)
        heapify(heap)
        self._disowned = 0

    def next_deadline(self) -> int | None:
        """When to call ``pop_due`` next: at or before the earliest deadline (None: no deadlines)."""
        self._drop_disowned()
        return self._heap[0] // _ORDER if self._heap else None

    def pop_due(self, now_ms: int, *, paced: bool = True) -> Timer | None:
        """Remove and return the earliest timer due at ``now_ms``, or None; with ``paced`` False, the earliest that is
        not paced (``is_paced``), the paced ones due left where they are."""
        heap, owners = self._heap, self._key
        passed: list[tuple[int, Hashable]] = []  # paced timers due, taken off the heap while looking past them
        try:
            while True:
                self._drop_disowned()
                if not heap or heap[0] // _ORDER > now_ms:
                    return None
                top = heappop(heap)
                key = owners.pop(top)
                current = self._entry[key]
                if current != top:
                    self._queue(key, current)  # (outdated: its key's deadline moved later)
                elif not paced and is_paced(self._timer[key]):
                    passed.append((top, key))
                else:
                    del self._entry[key]
                    del self._queued[key]
                    return self._timer.pop(key)
        finally:
            for top, key in passed:  # (the same entries again: their order among the others is unchanged)
                heappush(heap, top)
                owners[top] = key
