"""Coordinator settings, with Kafka's broker defaults."""

from __future__ import annotations

from dataclasses import dataclass

MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = MAX_INT32
    new_member_join_timeout_ms: int = 300_000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
