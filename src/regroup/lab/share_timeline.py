"""A real run's share-group timeline, in the simulator's event schema, from what the real share members wrote
(``lab.real_share_member``): ``regroup serve`` logs no record-level share rows, so the rows the share summary reads
(``sim.share_summary``) are rebuilt from the clients' side.

Per member process: ``subscription`` when it subscribed; ``share_acquired`` for every record a poll returned
(``generation`` = the delivery count the broker gave), at the time the broker acquired it, taken as one link
latency before the poll returned (not before the poll started); ``share_acknowledged`` (``accept``) for the
records of a poll when the next poll (or the close's ``commit_sync``) sends their acknowledgement, one link
latency after it started, with the error the acknowledgement callback reported for the record (``NONE`` when it
reported none, as for a crashed process's last acknowledgements); ``member_state`` ``Left`` when it closed,
``Crashed`` when it was killed.

A crashed process whose last poll was still waiting for its answer had records acquired for it that it never saw.
They show up later at a delivery count one higher than the deliveries seen: each such missing delivery is added
as an acquisition by that process at its crash (as the simulator logs an acquisition for a request that was on
its way when the process died). At the scenario's end every share partition gets its ``share_partition``
``final`` row with its log end offset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regroup.model.eventlog import FIELDS

Record = tuple[str, int, int]  # topic, partition, offset


@dataclass(frozen=True, slots=True)
class ShareProcessLog:
    """What one real share member process wrote (``lines``, times in scenario ms) and how it ended."""

    member: str
    incarnation: int
    topics: tuple[str, ...]
    lines: tuple[Mapping[str, Any], ...]
    crashed_ms: int | None = None


def row(t: int, kind: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    out.update(t=t, type=kind, **fields)
    return out


def process_rows(log: ShareProcessLog, one_way_ms: int) -> tuple[list[dict[str, Any]], bool]:
    """The rows of one process, and whether its last poll was unanswered when it crashed."""
    name = log.member
    errors = _ack_errors(log.lines)
    rows: list[dict[str, Any]] = []
    pending: list[Record] = []  # the last poll's records, to be acknowledged by the next one
    polled_at = 0
    waiting = False
    for line in log.lines:
        kind, t = line["kind"], int(line["t"])
        if kind == "subscribed":
            rows.append(row(t, "subscription", member=name, state="share", detail=",".join(log.topics),
                            value=log.incarnation))  # fmt: skip
        elif kind in ("poll", "commit"):
            for topic, partition, offset in pending:
                error = errors.get((topic, partition, offset), "NONE")
                rows.append(row(t + one_way_ms, "share_acknowledged", member=name, state="accept", error=error,
                                topic=topic, partition=partition, value=offset))  # fmt: skip
            pending = []
            polled_at, waiting = t, kind == "poll"
        elif kind == "records":
            at = max(polled_at + one_way_ms, t - one_way_ms)
            for topic, partition, offset, count in line["records"]:
                rows.append(row(at, "share_acquired", member=name, generation=count, topic=topic,
                                partition=partition, value=offset))  # fmt: skip
                pending.append((topic, partition, offset))
            waiting = False
        elif kind == "closed":
            rows.append(row(t, "member_state", member=name, state="Left"))
    if log.crashed_ms is not None:
        rows.append(row(log.crashed_ms, "member_state", member=name, state="Crashed"))
    return rows, log.crashed_ms is not None and waiting


def _ack_errors(lines: Sequence[Mapping[str, Any]]) -> dict[Record, str]:
    """The records whose acknowledgement the broker refused, with the error the callback gave."""
    out: dict[Record, str] = {}
    for line in lines:
        if line["kind"] == "acked" and line.get("error"):
            for topic, partition, offset in line["records"]:
                out[(topic, partition, offset)] = str(line["error"])
    return out


def fill_unseen(rows: list[dict[str, Any]], crashes: Sequence[tuple[int, str]]) -> list[dict[str, Any]]:
    """Acquisitions no process saw, added for the crashed processes (``crashes``: (crash time, member) of those
    whose last poll was unanswered): before each delivery whose count says deliveries are missing, they go to the
    last such process that crashed before it, at its crash."""
    seen: dict[Record, int] = {}
    added: list[dict[str, Any]] = []
    for r in sorted((r for r in rows if r["type"] == "share_acquired"), key=lambda r: r["t"]):
        key = (r["topic"], r["partition"], r["value"])
        before = seen.get(key, 0)
        earlier = [c for c in crashes if c[0] <= r["t"]]
        if r["generation"] - 1 > before and earlier:
            at, member = max(earlier)
            for count in range(before + 1, r["generation"]):
                added.append(row(at, "share_acquired", member=member, generation=count, topic=key[0],
                                 partition=key[1], value=key[2]))  # fmt: skip
        seen[key] = max(before + 1, r["generation"])
    return added


def share_rows(logs: Sequence[ShareProcessLog], one_way_ms: int) -> list[dict[str, Any]]:
    """Every process's rows and the unseen acquisitions, unsorted."""
    rows: list[dict[str, Any]] = []
    crashes: list[tuple[int, str]] = []
    for log in logs:
        mine, waiting = process_rows(log, one_way_ms)
        rows += mine
        if waiting and log.crashed_ms is not None:
            crashes.append((log.crashed_ms, log.member))
    return rows + fill_unseen(rows, crashes)


def final_rows(ends: Mapping[tuple[str, int], int], at_ms: int) -> list[dict[str, Any]]:
    """Each share partition's log end offset at the end (``at_ms``)."""
    return [
        row(at_ms, "share_partition", topic=topic, partition=partition, state="final", value=end)
        for (topic, partition), end in sorted(ends.items())
    ]
