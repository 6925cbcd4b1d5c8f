"""The share members' part of the run summary, computed from the event log alone (its ``share_*`` rows and the
share members' ``subscription`` and ``member_state`` rows, in log order):

* ``records``: the records of the share partitions' logs at the end, from where each started (a partition that
  never started counts from offset 0); ``undone``: those neither accepted, rejected nor archived at the end;
* ``delivered``: records acquired at least once; ``deliveries``: acquisitions; ``redeliveries``: acquisitions at a
  delivery count of 2 or more;
* ``accepted``, ``released``, ``rejected``: acknowledgements the coordinator took, by type; ``archived``: records
  archived at the delivery count limit (released, or their lock lapsed, once too often);
* ``delayed_by_crash``: records a member's process held when it crashed (or acquired for it afterwards, by a
  request that was on its way) that were delivered again later, and how long after the crash (``min_delay_ms``,
  ``max_delay_ms``, ``mean_delay_ms``);
* ``members``: per share member, records acquired and accepted, the time its processes ran and the accepted
  records per second of that time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from regroup.sim.eventlog import ERROR, GENERATION, MEMBER, PARTITION, STATE, TOPIC, TYPE, VALUE, Row, T

#: the event types only share groups write
SHARE_TYPES: Final = frozenset(
    {"share_acquired", "share_acknowledged", "share_released", "share_archived", "share_partition"}
)
_STOPPED: Final = frozenset({"Left", "Crashed", "Failed"})


@dataclass
class CrashDelay:
    records: int = 0
    min_delay_ms: int = 0
    max_delay_ms: int = 0
    mean_delay_ms: float = 0.0


@dataclass
class MemberThroughput:
    acquired: int = 0
    accepted: int = 0
    running_ms: int = 0
    records_per_s: float = 0.0


@dataclass
class ShareSummary:
    records: int = 0
    delivered: int = 0
    deliveries: int = 0
    redeliveries: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    archived: int = 0
    undone: int = 0
    delayed_by_crash: CrashDelay = field(default_factory=CrashDelay)
    members: dict[str, MemberThroughput] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize_share(rows: Sequence[Row], end_ms: int) -> ShareSummary:
    """The share summary of the share rows of a log (``end_ms``: the time of the log's last event)."""
    out = ShareSummary()
    starts: dict[Any, int] = {}
    ends: dict[Any, int] = {}
    delivered: set[Any] = set()
    final: set[Any] = set()
    held_by: dict[str, set[Any]] = {}  # member -> records it holds
    holder: dict[Any, str] = {}
    crashed_at: dict[Any, int] = {}  # record -> when the process holding it crashed
    delays: list[int] = []
    started_at: dict[str, int] = {}  # member -> when its running process started
    dead: dict[str, int] = {}  # member -> when its last process crashed (until the next one starts)
    for e in rows:
        kind = e[TYPE]
        member: str = e[MEMBER] or ""  # (a partition's rows name no member)
        if kind == "subscription":
            started_at[member] = e[T]
            dead.pop(member, None)
            out.members.setdefault(member, MemberThroughput())
            continue
        if kind == "member_state":
            if e[STATE] in _STOPPED and member in started_at:
                out.members[member].running_ms += e[T] - started_at.pop(member)
            if e[STATE] == "Crashed":
                dead[member] = e[T]
                for record in sorted(held_by.pop(member, set())):
                    crashed_at[record] = e[T]
                    holder.pop(record, None)
            continue
        tp = (e[TOPIC], e[PARTITION])
        if kind == "share_partition":
            (starts if e[STATE] == "started" else ends)[tp] = e[VALUE]
            continue
        record = (tp, e[VALUE])
        if kind == "share_acquired":
            out.deliveries += 1
            delivered.add(record)
            if e[GENERATION] > 1:
                out.redeliveries += 1
            out.members.setdefault(member, MemberThroughput()).acquired += 1
            _let_go(record, holder, held_by)
            crash = crashed_at.pop(record, None)
            if crash is not None:
                delays.append(e[T] - crash)
            if member in dead:
                crashed_at[record] = dead[member]
            else:
                holder[record] = member
                held_by.setdefault(member, set()).add(record)
        elif kind == "share_acknowledged":
            if e[ERROR] != "NONE":
                continue
            _let_go(record, holder, held_by)
            state = e[STATE]
            if state == "accept":
                out.accepted += 1
                final.add(record)
                out.members.setdefault(member, MemberThroughput()).accepted += 1
            elif state == "release":
                out.released += 1
            else:
                out.rejected += 1
                final.add(record)
        elif kind == "share_released":
            _let_go(record, holder, held_by)
        elif kind == "share_archived":
            out.archived += 1
            final.add(record)
    for member, since in started_at.items():
        out.members[member].running_ms += end_ms - since
    for stats in out.members.values():
        if stats.running_ms > 0:
            stats.records_per_s = round(stats.accepted * 1000 / stats.running_ms, 2)
    out.members = dict(sorted(out.members.items()))
    for tp, end in ends.items():
        start = starts.get(tp, 0)
        out.records += max(end - start, 0)
        out.undone += sum(1 for offset in range(start, end) if (tp, offset) not in final)
    out.delivered = len(delivered)
    if delays:
        out.delayed_by_crash = CrashDelay(
            records=len(delays),
            min_delay_ms=min(delays),
            max_delay_ms=max(delays),
            mean_delay_ms=round(sum(delays) / len(delays), 1),
        )
    return out


def _let_go(record: Any, holder: dict[Any, str], held_by: dict[str, set[Any]]) -> None:
    """``record`` is no longer held by whoever held it."""
    previous = holder.pop(record, None)
    if previous is not None:
        held_by.get(previous, set()).discard(record)
