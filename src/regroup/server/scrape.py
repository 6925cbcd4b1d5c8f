"""One metrics scrape: the request metrics plus what is read from the server's state at scrape time —
connections, groups by state and type (the coordinator's own ListGroups answer, so every group type it
knows is included), group members by group type, share groups' lag, rebalances, the coordinator log, the
topics and the stall watchdog's counts."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from regroup.server.errors import CoordinatorUnavailable
from regroup.server.failures import FailureLog
from regroup.server.metrics import Family, RequestMetrics, exposition
from regroup.server.rebalances import RebalanceLog
from regroup.server.runtime import CoordinatorRuntime
from regroup.server.topics import TopicStore
from regroup.server.watchdog import StallWatchdog
from regroup.server.young_gc import YoungCollector
from regroup.storage.coordinator_log import CoordinatorLog

log = logging.getLogger("regroup.server.metrics")


@dataclass(slots=True)
class ScrapeSources:
    requests: RequestMetrics
    runtime: CoordinatorRuntime
    rebalances: RebalanceLog
    coordinator_log: CoordinatorLog
    topics: TopicStore
    records_at_start: int
    failures: FailureLog | None = None
    watchdog: StallWatchdog | None = None
    young_gc: YoungCollector | None = None
    connections_open: int = 0
    connections_opened: int = 0
    connections_refused: dict[str, int] = field(default_factory=dict)  # reason -> count


async def scrape(src: ScrapeSources) -> str:
    families = src.requests.families()
    failures = Family(
        "regroup_request_failures_total",
        "counter",
        "Requests not served normally, per API and kind: a handler exception (answered UNKNOWN_SERVER_ERROR), "
        "over_limit (an identifier over its limit, answered INVALID_REQUEST), no_error_response (connection closed).",
    )
    if src.failures is not None:
        for (api, kind), n in sorted(src.failures.counts.items()):
            failures.add(n, {"api": api, "kind": kind})
    families.append(failures)
    families.append(Family("regroup_connections", "gauge", "Open Kafka client connections.").add(src.connections_open))
    families.append(
        Family("regroup_connections_opened_total", "counter", "Kafka client connections accepted.").add(
            src.connections_opened
        )
    )
    refused = Family(
        "regroup_connections_refused_total",
        "counter",
        "Kafka client connections closed at once for a connection limit, by limit.",
    )
    for reason in ("max_connections", "max_connections_per_ip", "open_files"):
        refused.add(src.connections_refused.get(reason, 0), {"reason": reason})
    families.append(refused)
    families.extend(await _groups(src.runtime))
    families.append(await _share_lag(src.runtime, src.topics))
    families.append(
        Family("regroup_rebalances_started_total", "counter", "Classic groups entering PreparingRebalance.").add(
            src.rebalances.rebalances_started
        )
    )
    families.append(
        Family("regroup_rebalances_completed_total", "counter", "Classic groups reaching Stable.").add(
            src.rebalances.rebalances_completed
        )
    )
    families.extend(_coordinator_log(src))
    topics = src.topics.topics()
    families.append(Family("regroup_topics", "gauge", "Topics in the embedded partition log.").add(len(topics)))
    families.append(
        Family("regroup_partitions", "gauge", "Partitions in the embedded partition log.").add(
            sum(t.partitions for t in topics.values())
        )
    )
    families.append(
        Family("regroup_open_segment_files", "gauge", "Segment files of the partition logs open right now.").add(
            src.topics.open_files
        )
    )
    if src.watchdog is not None:
        families.extend(src.watchdog.families())
    if src.young_gc is not None:
        families.extend(src.young_gc.families())
    return exposition(families)


async def _groups(runtime: CoordinatorRuntime) -> list[Family]:
    groups = Family("regroup_groups", "gauge", "Groups by state, group type and protocol type.")
    counts = runtime.coordinator.group_counts()  # (a plain read: ListGroups' rows, counted, not sorted or built)
    for (state, group_type, protocol_type), n in sorted(counts.items()):
        groups.add(n, {"state": state, "type": group_type, "protocol_type": protocol_type})
    members = runtime.coordinator.members_by_type()
    family = Family("regroup_group_members", "gauge", "Members of groups, by group type.")
    for group_type, n in sorted(members.items()):
        family.add(n, {"type": group_type})
    return [groups, family]


#: the share partitions one core call of the share lag reads (a group of 10,000 partitions was one step of the
#: event loop of about 14 ms at every scrape); the loop gets a turn between two calls
LAG_PARTITIONS_PER_CALL = 500


async def _share_lag(runtime: CoordinatorRuntime, topics: TopicStore) -> Family:
    """KIP-1226's share lag, summed per share group and topic: records between each share partition's start
    offset and its log end that are not acknowledged or archived yet. A partition whose log was never opened has
    no records (its log end is 0, and it is not opened for the scrape)."""
    family = Family(
        "regroup_share_group_lag",
        "gauge",
        "Records of a share group's partitions of a topic not yet acknowledged or archived (KIP-1226's lag).",
    )
    names = {info.topic_id: info.name for info in topics.topics().values()}

    def log_end(tp: tuple[uuid.UUID, int]) -> int | None:
        name = names.get(tp[0])
        plog = False if name is None else topics.opened_partition(name, tp[1])
        if plog is True:
            return 0
        return None if plog is False else int(plog.log_end_offset)

    try:
        for group_id in runtime.coordinator.share_group_ids():
            partitions: list[tuple[uuid.UUID, int]] = []

            def listed(c: Any, key: Any, now: int, group_id: str = group_id, out: list[Any] = partitions) -> Any:
                out.extend(c.share_partitions(group_id))
                return c.describe_share_group_offsets(group_id, {}, key, now)

            await asyncio.sleep(0)
            await runtime.call(listed)
            per_topic: Counter[str] = Counter()
            for start in range(0, len(partitions), LAG_PARTITIONS_PER_CALL):
                await asyncio.sleep(0)
                chunk = partitions[start : start + LAG_PARTITIONS_PER_CALL]

                def op(c: Any, key: Any, now: int, group_id: str = group_id, chunk: list[Any] = chunk) -> Any:
                    ends = {tp: end for tp in chunk if (end := log_end(tp)) is not None}
                    return c.describe_share_group_offsets(group_id, ends, key, now)

                found = await runtime.call(op)
                for (topic_id, _), (_, lag) in found.items() if isinstance(found, dict) else ():
                    per_topic[names[topic_id]] += lag
            for topic, lag in sorted(per_topic.items()):
                family.add(lag, {"group": group_id, "topic": topic})
    except CoordinatorUnavailable:
        pass  # shutting down
    return family


def _coordinator_log(src: ScrapeSources) -> list[Family]:
    record_log = src.coordinator_log.log
    families = [
        Family(
            "regroup_coordinator_records_appended_total",
            "counter",
            "Records (group metadata, offset commits, tombstones) appended to the coordinator log since start.",
        ).add(record_log.next_offset - src.records_at_start),
        Family(
            "regroup_coordinator_work_aside_total",
            "counter",
            "Pieces of work the coordinator ran on its worker thread (large consumer groups' target computations).",
        ).add(src.runtime.asides_landed),
        Family(
            "regroup_coordinator_work_aside_seconds_total",
            "counter",
            "Seconds the coordinator's worker thread spent on that work.",
        ).add(src.runtime.aside_seconds),
    ]
    try:
        size = record_log.size_bytes
    except OSError as exc:  # a segment removed by a snapshot between listing and stat
        log.debug("coordinator log size unavailable: %s", exc)
    else:
        families.append(
            Family(
                "regroup_coordinator_log_bytes", "gauge", "Bytes of the coordinator log's segments and snapshots."
            ).add(size)
        )
    return families
