"""The share-group metrics of ``regroup lab validate``: what a KIP-932 share group's timeline says about its queue,
computed the same way from the simulator's log and from a real run's timeline (``lab.share_timeline``), both
through the simulator's share summary (``sim.share_summary``), over the whole scenario (0 to its duration):

* ``accepted``: records accepted by the end;
* ``records_per_member_s``: accepted records per second of a member's running time, the mean over the share
  members that ran (as the lab's ``share_records_per_member_s``);
* ``redeliveries``: deliveries at a delivery count of 2 or more;
* ``delayed_records``: records a crashed member held that were delivered again, and ``delay_mean_ms``, their
  mean delay from the crash to the new delivery;
* ``drained_ms``: when the last record of the initial backlog (``share.backlog`` in every partition the share
  members read) was accepted; None when some were not by the end.

A metric that does not apply to a timeline is None (no crash: no delay; a backlog not drained: no drain time).
``drained_ms`` is censored at the end: when some runs drained the backlog and others did not, those count the
scenario's duration (``CENSORED``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from regroup.sim.eventlog import ERROR, PARTITION, STATE, TOPIC, TYPE, VALUE, Row, T
from regroup.sim.scenario import Scenario
from regroup.sim.summary import summarize_rows

SHARE_METRICS: Final = (
    "accepted",
    "records_per_member_s",
    "redeliveries",
    "delayed_records",
    "delay_mean_ms",
    "drained_ms",
)
#: metrics whose None means "not by the scenario's end" where other runs reached them
CENSORED: Final = frozenset({"drained_ms"})


def share_partitions(scenario: Scenario) -> list[tuple[str, int]]:
    """The partitions the scenario's share members read."""
    topics = sorted({t for m in scenario.members if m.protocol == "share" for t in m.topics})
    return [(t, p) for t in topics for p in range(scenario.topics.get(t, 0))]


def drained_ms(rows: Sequence[Row], backlog: int, partitions: Sequence[tuple[str, int]]) -> int | None:
    """When the last of the ``backlog`` first records of every partition in ``partitions`` was first accepted
    (None: no backlog, or some of it not accepted)."""
    if backlog <= 0 or not partitions:
        return None
    wanted = set(partitions)
    accepted: dict[tuple[str, int, int], int] = {}
    for e in rows:
        if e[TYPE] != "share_acknowledged" or e[STATE] != "accept" or e[ERROR] != "NONE" or e[VALUE] >= backlog:
            continue
        if (e[TOPIC], e[PARTITION]) in wanted:
            accepted.setdefault((e[TOPIC], e[PARTITION], e[VALUE]), e[T])
    if len(accepted) < backlog * len(wanted):
        return None
    return max(accepted.values())


def share_measure(rows: Sequence[Row], scenario: Scenario) -> dict[str, float | None]:
    """The share metrics of one timeline (rows)."""
    summary = summarize_rows(list(rows), 0, details=False).share
    if summary is None:
        return dict.fromkeys(SHARE_METRICS)
    crash = summary.delayed_by_crash
    rates = [m.records_per_s for m in summary.members.values() if m.running_ms > 0]
    drained = drained_ms(rows, scenario.share.backlog, share_partitions(scenario))
    return {
        "accepted": float(summary.accepted),
        "records_per_member_s": round(sum(rates) / len(rates), 2) if rates else None,
        "redeliveries": float(summary.redeliveries),
        "delayed_records": float(crash.records),
        "delay_mean_ms": crash.mean_delay_ms if crash.records else None,
        "drained_ms": None if drained is None else float(drained),
    }
