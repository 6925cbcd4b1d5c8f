"""The simulator's own account of every record a share group delivered, kept apart from the coordinator's share
partitions so that the safety checks hold the coordinator to it, and written to the event log record by record.

A record is AVAILABLE (never delivered, or released), HELD by one member until its lock's deadline, ACCEPTED or
ARCHIVED (rejected, or released at the delivery count limit); the last two are final. The ledger follows what
the endpoint saw the coordinator do (acquisitions, acknowledgements and their outcome, a member's records
released when its share session closed or its connection dropped) and the passing of time: a lock lapses at its
deadline (the acquisition's time + the lock duration the coordinator answered), as the coordinator's timer does.

The checks (docs/simulator.md, "Share members"): a record is never held by two members at once (nor acquired
again by its holder while its lock lasts); a final record is never delivered or acknowledged again; an
acknowledgement the coordinator accepts comes from the member holding every record it names, within the lock,
and one it refuses names a record the member does not hold; a delivery count is the number of deliveries;
nothing is acquired outside ``[start, log end)``; and, when the scenario says the run ends quietly, every record
from each share partition's start to its log end is accepted or archived by the end.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Final

from regroup.client.types import TopicPartition
from regroup.protocol.share_fetch import ACCEPT, ACK_TYPE_NAMES, RELEASE, AckRanges
from regroup.sim.checks import SafetyChecker
from regroup.sim.eventlog import EventLog

AVAILABLE: Final = 0
HELD: Final = 1
ACCEPTED: Final = 2
ARCHIVED: Final = 4


def record_label(tp: TopicPartition, offset: int) -> str:
    return f"{tp[0]}-{tp[1]} offset {offset}"


class _Record:
    __slots__ = ("count", "deadline", "holder", "state")

    def __init__(self) -> None:
        self.state = AVAILABLE
        self.holder = ""  # member id, while HELD
        self.deadline = 0
        self.count = 0  # deliveries so far

    @property
    def final(self) -> bool:
        return self.state == ACCEPTED or self.state == ARCHIVED


class _Partition:
    """One share partition: its start offset, and the records delivered at least once that are not below
    ``floor`` (every offset below it is final, and forgotten)."""

    __slots__ = ("floor", "records", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.floor = start
        self.records: dict[int, _Record] = {}

    def compact(self) -> None:
        records = self.records
        while True:
            rec = records.get(self.floor)
            if rec is None or not rec.final:
                return
            del records[self.floor]
            self.floor += 1


class ShareLedger:
    def __init__(
        self, log: EventLog, checker: SafetyChecker, delivery_limit: int, name_of: Callable[[str], str]
    ) -> None:
        self.log = log
        self.checker = checker
        self.delivery_limit = delivery_limit
        self.name_of = name_of  # member id -> scenario member name
        self.partitions: dict[TopicPartition, _Partition] = {}
        #: lock deadlines: (deadline, topic, partition, offset), lazily cleaned
        self._locks: list[tuple[int, str, int, int]] = []

    # ------------------------------------------------------------------------------------- changes
    def started(self, t: int, tp: TopicPartition, start: int, how: str) -> None:
        """The share partition ``tp`` starts at offset ``start``."""
        if tp in self.partitions:
            return
        self.partitions[tp] = _Partition(start)
        self.log.emit(t, "share_partition", topic=tp[0], partition=tp[1], state="started", value=start, detail=how)

    def expire(self, t: int) -> None:
        """Locks whose deadline is at or before ``t`` lapse: their records go back."""
        locks = self._locks
        while locks and locks[0][0] <= t:
            deadline, topic, partition, offset = heappop(locks)
            part = self.partitions.get((topic, partition))
            rec = None if part is None else part.records.get(offset)
            if part is not None and rec is not None and rec.state == HELD and rec.deadline == deadline:
                self._release(t, (topic, partition), part, offset, rec, "lock")

    def acquired(
        self, t: int, member_id: str, tp: TopicPartition, runs: AckRanges, deadline: int, log_end: int
    ) -> None:
        """The coordinator acquired ``runs`` ((first, last, delivery count), ...) of ``tp`` for ``member_id``."""
        name = self.name_of(member_id)
        part = self.partitions.get(tp)
        if part is None:
            self.checker.violation(
                t, ("share-unstarted", tp), f"records of {tp[0]}-{tp[1]} delivered before it started"
            )
            part = self.partitions[tp] = _Partition(runs[0][0] if runs else 0)
        for first, last, count in runs:
            for offset in range(first, last + 1):
                if self._acquire(t, name, member_id, tp, part, offset, count, deadline, log_end):
                    heappush(self._locks, (deadline, tp[0], tp[1], offset))
                self.log.emit(
                    t,
                    "share_acquired",
                    member=name,
                    member_id=member_id,
                    generation=count,
                    topic=tp[0],
                    partition=tp[1],
                    value=offset,
                )

    def _acquire(
        self,
        t: int,
        name: str,
        member_id: str,
        tp: TopicPartition,
        part: _Partition,
        offset: int,
        count: int,
        deadline: int,
        end: int,
    ) -> bool:
        """Check and record one acquisition; False when the record is below the floor (final, forgotten)."""
        what = record_label(tp, offset)
        if offset < part.start or offset >= end:
            self.checker.violation(
                t, ("share-range", tp, offset), f"{what} acquired by {name} outside [{part.start}, {end})"
            )
        if offset < part.floor:
            self.checker.violation(t, ("share-final", tp, offset), f"{what} delivered to {name} after it was final")
            return False
        rec = part.records.get(offset)
        if rec is None:
            rec = part.records[offset] = _Record()
        if rec.state == HELD:
            holder = self.name_of(rec.holder)
            self.checker.violation(
                t, ("share-held", tp, offset, t), f"{what} acquired by {name} while {holder} holds it"
            )
        elif rec.final:
            self.checker.violation(t, ("share-final", tp, offset), f"{what} delivered to {name} after it was final")
        if count != rec.count + 1:
            self.checker.violation(
                t,
                ("share-count", tp, offset, t),
                f"{what} delivered to {name} with delivery count {count}, its delivery number {rec.count + 1}",
            )
        rec.state = HELD
        rec.holder = member_id
        rec.count = count
        rec.deadline = deadline
        return True

    def acknowledged(self, t: int, member_id: str, tp: TopicPartition, ranges: AckRanges, error: str) -> None:
        """The coordinator answered ``member_id``'s acknowledgement of ``ranges`` of ``tp`` with ``error``."""
        name = self.name_of(member_id)
        part = self.partitions.get(tp)
        held_all = True
        for first, last, ack_type in ranges:
            for offset in range(first, last + 1):
                self.log.emit(
                    t,
                    "share_acknowledged",
                    member=name,
                    member_id=member_id,
                    error=error,
                    state=ACK_TYPE_NAMES.get(ack_type, str(ack_type)),
                    topic=tp[0],
                    partition=tp[1],
                    value=offset,
                )
                rec = None if part is None or offset < part.floor else part.records.get(offset)
                holds = rec is not None and rec.state == HELD and rec.holder == member_id and rec.deadline > t
                held_all = held_all and holds
                if error != "NONE":
                    continue
                what = record_label(tp, offset)
                if not holds:
                    final = part is not None and (offset < part.floor or (rec is not None and rec.final))
                    why = "after it was final" if final else "while not holding it"
                    self.checker.violation(t, ("share-ack", tp, offset, t), f"{what} acknowledged by {name} {why}")
                    continue
                assert part is not None and rec is not None
                if ack_type == ACCEPT:
                    rec.state = ACCEPTED
                elif ack_type == RELEASE:
                    self._back(t, tp, rec, offset, "release")
                else:  # REJECT, GAP
                    rec.state = ARCHIVED
                rec.holder = ""
        if part is not None and error == "NONE":
            part.compact()
        if error == "INVALID_RECORD_STATE" and held_all and ranges:
            self.checker.violation(
                t,
                ("share-refused", tp, t),
                f"acknowledgement of {tp[0]}-{tp[1]} by {name} refused, though it holds every record it names",
            )

    def released_member(self, t: int, member_id: str, why: str) -> int:
        """Every record ``member_id`` holds goes back (its share session closed, or its connection dropped);
        how many."""
        released = 0
        for tp in sorted(self.partitions):
            part = self.partitions[tp]
            for offset in sorted(part.records):
                rec = part.records[offset]
                if rec.state == HELD and rec.holder == member_id:
                    self._release(t, tp, part, offset, rec, why)
                    released += 1
        return released

    def _release(self, t: int, tp: TopicPartition, part: _Partition, offset: int, rec: _Record, why: str) -> None:
        self.log.emit(
            t,
            "share_released",
            member=self.name_of(rec.holder),
            member_id=rec.holder,
            generation=rec.count,
            state=why,
            topic=tp[0],
            partition=tp[1],
            value=offset,
        )
        self._back(t, tp, rec, offset, why)
        rec.holder = ""
        part.compact()

    def _back(self, t: int, tp: TopicPartition, rec: _Record, offset: int, why: str) -> None:
        """A record released: available again, or archived at the delivery count limit."""
        if rec.count < self.delivery_limit:
            rec.state = AVAILABLE
            return
        rec.state = ARCHIVED
        self.log.emit(
            t,
            "share_archived",
            member=self.name_of(rec.holder),
            member_id=rec.holder,
            generation=rec.count,
            topic=tp[0],
            partition=tp[1],
            value=offset,
            detail=why,
        )

    # ------------------------------------------------------------------------------------- reading
    def undone(self, tp: TopicPartition, log_end: int) -> tuple[int, int | None]:
        """How many records of ``[start, log_end)`` are not final, and the first of them (None: none)."""
        part = self.partitions.get(tp)
        if part is None:
            return 0, None
        first: int | None = None
        count = 0
        for offset in range(part.floor, log_end):
            rec = part.records.get(offset)
            if rec is None or not rec.final:
                count += 1
                if first is None:
                    first = offset
        return count, first
