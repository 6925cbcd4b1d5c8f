"""The share-group part of a real run (``lab.real_run``): what a real run of share members can play, the share group
set up before time 0 (its ``share.auto.offset.reset``), each member process's config (``lab.real_share_member``),
and the run's share timeline (``lab.share_timeline``) from the processes' output.

The real run plays share members with confluent-kafka's ``ShareConsumer`` in implicit acknowledgement mode, so
every record is accepted: a scenario whose members release or reject records is refused, and so is a share group
that starts at the log end (``latest``), whose start offsets the clients' side cannot tell.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from regroup.lab.share_timeline import ShareProcessLog, final_rows, share_rows
from regroup.sim.scenario import MemberSpec, Scenario

#: the coordinator's share-group settings and the ``regroup serve`` flag of each
SHARE_SERVE_FLAGS: Final = {
    "share_group_heartbeat_interval_ms": "--share-heartbeat-interval-ms",
    "share_group_session_timeout_ms": "--share-session-timeout-ms",
    "share_group_record_lock_duration_ms": "--share-record-lock-duration-ms",
    "share_group_delivery_count_limit": "--share-delivery-count-limit",
    "share_group_partition_max_record_locks": "--share-partition-max-record-locks",
    "share_group_max_size": "--share-max-size",
    "share_group_assignment_interval_ms": "--share-assignment-interval-ms",
}


def refusal(scenario: Scenario) -> str | None:
    """Why a real run cannot play the scenario's share members (None: it can)."""
    if scenario.share.auto_offset_reset != "earliest":
        return "share.auto_offset_reset: a real run starts share groups at the log start (earliest)"
    for member in scenario.members:
        if member.release_fraction > 0 or member.reject_fraction > 0:
            return f"members {member.name}: a real run's share members accept every record (no release or reject)"
    return None


def prepare_group(bootstrap: str, group_id: str, logger: logging.Logger | None = None) -> None:
    """The share group starts at the log start: its ``share.auto.offset.reset`` set before any member joins."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, **({"logger": logger} if logger else {"log_level": 4})}
    admin = AdminClient(config)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("GROUP", group_id, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def member_config(scenario: Scenario, member: MemberSpec, bootstrap: str, seed: str, go_file: Path,
                  out: Path) -> dict[str, Any]:  # fmt: skip
    """The config of one real share member process."""
    app = member.app
    return {
        "bootstrap": bootstrap,
        "group": scenario.share_group_id,
        "client_id": member.name,
        "topics": list(member.topics),
        "fetch_max_wait_ms": member.fetch_max_wait_ms,
        "app": {
            "max_poll_records": app.max_poll_records,
            "processing": list(app.processing),
            "client": "librdkafka",
            "heartbeat_phase": app.heartbeat_phase,
        },
        "seed": seed,
        "go_file": str(go_file),
        "out": str(out),
    }


def process_log(member: MemberSpec, incarnation: int, out: Path, crashed_ms: int | None,
                ms: Callable[[float], int]) -> ShareProcessLog:  # fmt: skip
    """A process's output with its times in scenario ms (``ms``: wall-clock ms to scenario ms)."""
    lines = []
    if out.exists():
        for text in out.read_text(encoding="utf-8").splitlines():
            line = json.loads(text)
            lines.append({**line, "t": ms(line["t"])})
    return ShareProcessLog(member.name, incarnation, tuple(member.topics), tuple(lines), crashed_ms)


def timeline_rows(logs: Sequence[ShareProcessLog], scenario: Scenario, ends: dict[tuple[str, int], int],
                  notes: list[str]) -> list[dict[str, Any]]:  # fmt: skip
    """The share rows of a real run up to the scenario's end, with every partition's final log end offset."""
    network = scenario.network
    rows = share_rows(logs, network.latency_ms + network.jitter_ms // 2)
    for log in logs:
        notes += [f"{log.member}: {line.get('detail')}" for line in log.lines if line["kind"] == "error"]
    return [r for r in rows if r["t"] <= scenario.duration_ms] + final_rows(ends, scenario.duration_ms)
