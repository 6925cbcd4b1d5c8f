"""The state of one share partition (KIP-932), as plain data: which offsets of one topic partition a share group
has finished with, and which it has handed out, to whom, how often and until when.

The share-partition start offset (SPSO) is the first offset not yet done: every offset below it was
acknowledged or archived. The in-flight window ``[SPSO, SPEO)`` runs up to one past the highest offset ever
acquired (the end offset, SPEO); each offset in it has a state (Kafka's wire codes: AVAILABLE, ACQUIRED,
ACKNOWLEDGED, ARCHIVED), a delivery count and, while acquired, its holder and lock deadline. Offsets from SPEO up
to the log end are implicitly AVAILABLE and were never delivered.

The window is kept as parallel per-offset lists, so memory follows the window, never the log. Nothing here
reads a clock: every operation that needs the time takes ``now_ms``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from regroup.protocol.share_fetch import ACCEPT, GAP, REJECT, RELEASE, RENEW

# --- record states (Kafka's wire codes) ---
AVAILABLE: Final = 0
ACQUIRED: Final = 1
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4

#: the states a persisted state batch may carry (locks are not durable)
PERSISTED_STATES: Final = frozenset({AVAILABLE, ACKNOWLEDGED, ARCHIVED})

MAX_ACK_TYPE: Final = RENEW

#: no lock held (the deadline of an offset that is not ACQUIRED)
NO_DEADLINE: Final = -1


class ShareError(enum.IntEnum):
    """What ``acknowledge`` answers: Kafka's error codes."""

    NONE = 0
    #: a malformed acknowledgement: bad range, bad types, batches out of order or overlapping
    INVALID_REQUEST = 42
    #: an offset acknowledged is not currently acquired by the member acknowledging it
    INVALID_RECORD_STATE = 121
    #: the group has no state for the partition (never fetched from it)
    UNKNOWN_TOPIC_OR_PARTITION = 3


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of consecutive offsets acquired by one call, all at the same delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """Acknowledgement types for ``[first_offset, last_offset]``: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted run of offsets with the same state and delivery count."""

    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class InFlight:
    """One offset of the window as it stands (``member_id`` and ``deadline_ms`` only while ACQUIRED)."""

    offset: int
    state: int
    delivery_count: int
    member_id: str | None
    deadline_ms: int | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The whole state of a share partition, comparable with ``==``."""

    start_offset: int
    end_offset: int
    in_flight: tuple[InFlight, ...]


def _is_done(state: int) -> bool:
    return state in (ACKNOWLEDGED, ARCHIVED)


class SharePartition:
    """One (share group, topic partition): the SPSO and the in-flight window above it."""

    def __init__(self, start_offset: int, *, delivery_limit: int = 5, max_in_flight: int = 2000) -> None:
        if start_offset < 0:
            raise ValueError(f"start_offset must be >= 0, got {start_offset}")
        if delivery_limit < 1:
            raise ValueError(f"delivery_limit must be >= 1, got {delivery_limit}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self._start = start_offset
        self._delivery_limit = delivery_limit
        self._max_in_flight = max_in_flight
        # one entry per offset of [start, start + len): index i is offset start + i
        self._states: list[int] = []
        self._counts: list[int] = []
        self._holders: list[str | None] = []
        self._deadlines: list[int] = []

    # --- reading ---

    @property
    def start_offset(self) -> int:
        """The SPSO: every offset below it is acknowledged or archived."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The SPEO: one past the last offset of the in-flight window (equal to the SPSO when it is empty)."""
        return self._start + len(self._states)

    @property
    def delivery_limit(self) -> int:
        return self._delivery_limit

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    def acquired_count(self) -> int:
        """How many offsets are ACQUIRED, by anyone."""
        return self._states.count(ACQUIRED)

    def held_by(self, member_id: str) -> int:
        """How many offsets ``member_id`` holds."""
        holders = self._holders
        return sum(1 for i, state in enumerate(self._states) if state == ACQUIRED and holders[i] == member_id)

    def next_deadline(self) -> int | None:
        """The earliest lock deadline, or None when nothing is acquired."""
        deadlines = [self._deadlines[i] for i, state in enumerate(self._states) if state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def lag(self, log_end: int) -> int:
        """How many offsets of ``[SPSO, log_end)`` are neither acknowledged nor archived."""
        span = log_end - self._start
        if span <= 0:
            return 0
        done = sum(1 for state in self._states[:span] if _is_done(state))
        return span - done

    def in_flight(self) -> tuple[InFlight, ...]:
        """Every offset of the window, in order."""
        return tuple(self._entry(i) for i in range(len(self._states)))

    def snapshot(self) -> Snapshot:
        return Snapshot(self._start, self.end_offset, self.in_flight())

    def _entry(self, i: int) -> InFlight:
        state = self._states[i]
        held = state == ACQUIRED
        return InFlight(
            self._start + i,
            state,
            self._counts[i],
            self._holders[i] if held else None,
            self._deadlines[i] if held else None,
        )

    # --- acquiring ---

    def next_available(self, log_end: int) -> int | None:
        """The offset ``acquire`` would take first with ``log_end``: the lowest AVAILABLE one in the window, else
        the SPEO if the window may grow below ``log_end``; None when nothing can be acquired."""
        states = self._states
        for i in range(max(min(len(states), log_end - self._start), 0)):
            if states[i] == AVAILABLE:
                return self._start + i
        end = self.end_offset
        return end if end < min(log_end, self._start + self._max_in_flight) else None

    def acquire(
        self, member_id: str, log_end: int, max_records: int, now_ms: int, lock_ms: int, min_offset: int = 0
    ) -> list[Acquired]:
        """Lock up to ``max_records`` AVAILABLE offsets in ``[min_offset, log_end)`` for ``member_id`` until
        ``now_ms + lock_ms``, lowest first: those in the window, then new ones past the SPEO as long as the window
        stays within ``max_in_flight``. Returns the offsets taken as runs of equal delivery count. (The shell
        passes the offsets its read of the log covers, so that every offset acquired is one it returns.)"""
        if max_records < 1:
            raise ValueError(f"max_records must be >= 1, got {max_records}")
        if lock_ms < 0:
            raise ValueError(f"lock_ms must be >= 0, got {lock_ms}")
        deadline = now_ms + lock_ms
        states = self._states
        counts = self._counts
        runs = _Runs()
        taken = 0
        for i in range(max(min_offset - self._start, 0), max(min(len(states), log_end - self._start), 0)):
            if taken == max_records:
                break
            if states[i] != AVAILABLE:
                continue
            states[i] = ACQUIRED
            counts[i] += 1
            self._holders[i] = member_id
            self._deadlines[i] = deadline
            runs.add(self._start + i, self._start + i, counts[i])
            taken += 1
        end = self.end_offset
        grow_to = min(log_end, self._start + self._max_in_flight, end + (max_records - taken))
        if grow_to > end and min_offset <= end:
            grown = grow_to - end
            states.extend([ACQUIRED] * grown)
            counts.extend([1] * grown)
            self._holders.extend([member_id] * grown)
            self._deadlines.extend([deadline] * grown)
            runs.add(end, grow_to - 1, 1)
        return runs.done()

    def archive_acquired(self, runs: Sequence[Acquired], aborted: Sequence[tuple[int, int]]) -> list[Acquired]:
        """Archive the offsets of ``runs`` (what ``acquire`` just returned) that lie in one of the ``aborted``
        ranges (``(first, last)`` offsets of batches of aborted transactions, ascending): under read_committed
        they are not delivered, and keep the delivery their acquisition counted. Returns ``runs`` without them;
        the SPSO moves past the leading offsets now done."""
        kept = _Runs()
        changed = False
        ranges = iter(aborted)
        current = next(ranges, None)
        for run in runs:
            for offset in range(run.first_offset, run.last_offset + 1):
                while current is not None and current[1] < offset:
                    current = next(ranges, None)
                if current is not None and current[0] <= offset and self._holds(offset):
                    self._finish(offset - self._start, ARCHIVED)
                    changed = True
                else:
                    kept.add(offset, offset, run.delivery_count)
        if changed:
            self._advance()
        return kept.done()

    def _holds(self, offset: int) -> bool:
        """Whether ``offset`` is in the window and ACQUIRED."""
        i = offset - self._start
        return 0 <= i < len(self._states) and self._states[i] == ACQUIRED

    # --- acknowledging ---

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now_ms: int, lock_ms: int) -> ShareError:
        """Apply ``member_id``'s acknowledgements, all of them or (on any error) none: ACCEPT acknowledges, GAP and
        REJECT archive, RELEASE makes available again (archives at the delivery limit), RENEW extends the lock to
        ``now_ms + lock_ms``. Every offset named must be ACQUIRED by ``member_id``."""
        if lock_ms < 0:
            raise ValueError(f"lock_ms must be >= 0, got {lock_ms}")
        if _malformed(batches):
            return ShareError.INVALID_REQUEST
        start, end = self._start, self.end_offset
        states, holders = self._states, self._holders
        for batch in batches:
            if batch.first_offset < start or batch.last_offset >= end:
                return ShareError.INVALID_RECORD_STATE
            for i in range(batch.first_offset - start, batch.last_offset - start + 1):
                if states[i] != ACQUIRED or holders[i] != member_id:
                    return ShareError.INVALID_RECORD_STATE
        deadline = now_ms + lock_ms
        for batch in batches:
            base = batch.first_offset - start
            single = len(batch.types) == 1
            for k in range(batch.last_offset - batch.first_offset + 1):
                ack_type = batch.types[0] if single else batch.types[k]
                i = base + k
                if ack_type == ACCEPT:
                    self._finish(i, ACKNOWLEDGED)
                elif ack_type in (GAP, REJECT):
                    self._finish(i, ARCHIVED)
                elif ack_type == RELEASE:
                    self._release(i)
                else:
                    self._deadlines[i] = deadline
        self._advance()
        return ShareError.NONE

    # --- releasing ---

    def release_member(self, member_id: str) -> bool:
        """Give back every offset ``member_id`` holds (it left the group); whether anything changed."""
        holders = self._holders
        changed = False
        for i, state in enumerate(self._states):
            if state == ACQUIRED and holders[i] == member_id:
                self._release(i)
                changed = True
        if changed:
            self._advance()
        return changed

    def expire(self, now_ms: int) -> bool:
        """Give back every offset whose lock deadline is at or before ``now_ms``; whether anything changed."""
        deadlines = self._deadlines
        changed = False
        for i, state in enumerate(self._states):
            if state == ACQUIRED and deadlines[i] <= now_ms:
                self._release(i)
                changed = True
        if changed:
            self._advance()
        return changed

    def reset(self, start_offset: int) -> None:
        """Start over at ``start_offset`` with nothing in flight (AlterShareGroupOffsets, share.auto.offset.reset)."""
        if start_offset < 0:
            raise ValueError(f"start_offset must be >= 0, got {start_offset}")
        self._start = start_offset
        self._states.clear()
        self._counts.clear()
        self._holders.clear()
        self._deadlines.clear()

    def without_locks(self) -> SharePartition:
        """A copy in which every lock was released, as after a restart: what ``from_state`` rebuilds."""
        copy = self.copy()
        changed = False
        for i, state in enumerate(copy._states):
            if state == ACQUIRED:
                copy._release(i)
                changed = True
        if changed:
            copy._advance()
        return copy

    def copy(self) -> SharePartition:
        copy = SharePartition(self._start, delivery_limit=self._delivery_limit, max_in_flight=self._max_in_flight)
        copy._states = list(self._states)
        copy._counts = list(self._counts)
        copy._holders = list(self._holders)
        copy._deadlines = list(self._deadlines)
        return copy

    # --- persisting ---

    def state_batches(self) -> tuple[StateBatch, ...]:
        """The window as maximal runs of equal (state, delivery count), ACQUIRED written as AVAILABLE."""
        out: list[StateBatch] = []
        first = 0
        n = len(self._states)
        while first < n:
            state = _persisted(self._states[first])
            count = self._counts[first]
            last = first
            while last + 1 < n and _persisted(self._states[last + 1]) == state and self._counts[last + 1] == count:
                last += 1
            out.append(StateBatch(self._start + first, self._start + last, state, count))
            first = last + 1
        return tuple(out)

    @classmethod
    def from_state(
        cls,
        start_offset: int,
        batches: Iterable[StateBatch],
        *,
        delivery_limit: int = 5,
        max_in_flight: int = 2000,
    ) -> SharePartition:
        """Rebuild a share partition from its SPSO and persisted state batches (sorted, non-overlapping, at or
        above the SPSO; offsets between batches are AVAILABLE and undelivered). Offsets left AVAILABLE at the
        delivery limit are archived, as releasing their lock would have done. Raises ValueError on bad input."""
        partition = cls(start_offset, delivery_limit=delivery_limit, max_in_flight=max_in_flight)
        next_free = start_offset
        for batch in batches:
            if batch.first_offset > batch.last_offset:
                raise ValueError(f"state batch {batch} has first_offset > last_offset")
            if batch.first_offset < next_free:
                raise ValueError(f"state batch {batch} is below the start offset or overlaps the previous batch")
            if batch.state not in PERSISTED_STATES:
                raise ValueError(f"state batch {batch} has state {batch.state}, not one of 0, 2, 4")
            if batch.delivery_count < 0:
                raise ValueError(f"state batch {batch} has a negative delivery count")
            gap = batch.first_offset - next_free
            size = batch.last_offset - batch.first_offset + 1
            state = batch.state
            if state == AVAILABLE and batch.delivery_count >= delivery_limit:
                state = ARCHIVED
            partition._states.extend([AVAILABLE] * gap + [state] * size)
            partition._counts.extend([0] * gap + [batch.delivery_count] * size)
            next_free = batch.last_offset + 1
        n = len(partition._states)
        partition._holders = [None] * n
        partition._deadlines = [NO_DEADLINE] * n
        partition._trim()
        partition._advance()
        return partition

    # --- internals ---

    def _finish(self, i: int, state: int) -> None:
        self._states[i] = state
        self._holders[i] = None
        self._deadlines[i] = NO_DEADLINE

    def _release(self, i: int) -> None:
        self._finish(i, ARCHIVED if self._counts[i] >= self._delivery_limit else AVAILABLE)

    def _advance(self) -> None:
        """Move the SPSO past the leading done offsets."""
        states = self._states
        k = 0
        n = len(states)
        while k < n and _is_done(states[k]):
            k += 1
        if k:
            del states[:k]
            del self._counts[:k]
            del self._holders[:k]
            del self._deadlines[:k]
            self._start += k

    def _trim(self) -> None:
        """Drop trailing never-delivered AVAILABLE offsets: past the SPEO they are implicit."""
        n = len(self._states)
        while n and self._states[n - 1] == AVAILABLE and self._counts[n - 1] == 0:
            n -= 1
        del self._states[n:]
        del self._counts[n:]
        del self._holders[n:]
        del self._deadlines[n:]


def _persisted(state: int) -> int:
    return AVAILABLE if state == ACQUIRED else state


def _malformed(batches: Sequence[AckBatch]) -> bool:
    previous_last = -1
    for batch in batches:
        first, last = batch.first_offset, batch.last_offset
        if first < 0 or first > last or first <= previous_last:
            return True
        if len(batch.types) != 1 and len(batch.types) != last - first + 1:
            return True
        for ack_type in batch.types:
            if ack_type < GAP or ack_type > MAX_ACK_TYPE:
                return True
        previous_last = last
    return False


class _Runs:
    """Offsets acquired by one call, gathered into maximal runs of consecutive offsets at equal delivery count."""

    def __init__(self) -> None:
        self.runs: list[Acquired] = []
        self.first = -1
        self.last = -1
        self.count = -1

    def add(self, first: int, last: int, count: int) -> None:
        if first == self.last + 1 and count == self.count and self.first >= 0:
            self.last = last
            return
        self._close()
        self.first, self.last, self.count = first, last, count

    def done(self) -> list[Acquired]:
        self._close()
        return self.runs

    def _close(self) -> None:
        if self.first >= 0:
            self.runs.append(Acquired(self.first, self.last, self.count))
            self.first = -1
