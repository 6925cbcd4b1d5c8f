"""The broker's configuration as DescribeConfigs shows it for resource BROKER "0": Kafka's name for each
setting ``regroup serve`` has, its value, and whether a flag set it.

A shell module without I/O. Every entry is read-only: this broker's settings come from its flags and cannot be
changed while it runs (AlterConfigs on the broker is refused). An entry's source is STATIC_BROKER_CONFIG when
its value differs from the built-in default (a flag set it), DEFAULT_CONFIG otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from regroup.coordinator.config import CoordinatorConfig
from regroup.server.group_configs import Ranges
from regroup.storage.topic_config import ConfigSource, ConfigType

__all__ = ["BrokerConfigEntry", "broker_config_entries"]


@dataclass(frozen=True, slots=True)
class BrokerConfigEntry:
    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    doc: str


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def broker_config_entries(settings: Any) -> dict[str, BrokerConfigEntry]:
    """The entries for a ``ServerConfig`` (duck-typed: this module does not import the app)."""
    defaults = type(settings)()
    coordinator: CoordinatorConfig = settings.coordinator
    base = CoordinatorConfig()
    ranges, base_ranges = Ranges.of(coordinator), Ranges.of(base)
    rows: list[tuple[str, Any, Any, ConfigType, str]] = [
        ("node.id", 0, 0, ConfigType.INT, "The id of this broker (the only one of its cluster)."),
        ("broker.id", 0, 0, ConfigType.INT, "The id of this broker (the only one of its cluster)."),
        ("log.dirs", str(settings.data_dir), str(defaults.data_dir), ConfigType.STRING,
         "Where topics and the coordinator's log are kept (--data-dir)."),
        ("message.max.bytes", settings.message_max_bytes, defaults.message_max_bytes, ConfigType.INT,
         "Largest record batch a producer may append, for topics without max.message.bytes (--message-max-bytes)."),
        ("num.partitions", settings.default_partitions, defaults.default_partitions, ConfigType.INT,
         "Partitions of a topic created automatically or without a partition count (--num-partitions)."),
        ("auto.create.topics.enable", settings.auto_create_topics, defaults.auto_create_topics, ConfigType.BOOLEAN,
         "Whether Metadata creates a topic a client asks for and does not exist (--[no-]auto-create-topics)."),
        ("default.replication.factor", 1, 1, ConfigType.INT, "Replicas of each partition (one broker)."),
        ("socket.request.max.bytes", settings.max_frame_bytes, defaults.max_frame_bytes, ConfigType.INT,
         "Largest request accepted; a bigger one closes the connection (--max-frame-bytes)."),
        ("connections.max.idle.ms", settings.connections_max_idle_ms, defaults.connections_max_idle_ms,
         ConfigType.LONG, "Connections idle longer than this are closed (--connections-max-idle-ms)."),
        ("max.connections", settings.max_connections, defaults.max_connections, ConfigType.INT,
         "Most client connections open at once (--max-connections)."),
        ("max.connections.per.ip", settings.max_connections_per_ip, defaults.max_connections_per_ip,
         ConfigType.INT, "Most client connections from one address (--max-connections-per-ip)."),
        ("log.retention.check.interval.ms", settings.log_retention_check_interval_ms,
         defaults.log_retention_check_interval_ms, ConfigType.LONG,
         "How often retention, segment.ms and compaction run (--log-retention-check-interval-ms)."),
        ("log.segment.bytes", settings.segment_bytes, defaults.segment_bytes, ConfigType.INT,
         "Segment size of topics without segment.bytes."),
        ("log.retention.ms", 7 * 24 * 3600 * 1000, 7 * 24 * 3600 * 1000, ConfigType.LONG,
         "Retention by time of topics without retention.ms."),
        ("log.retention.bytes", -1, -1, ConfigType.LONG, "Retention by size of topics without retention.bytes."),
        ("log.cleanup.policy", "delete", "delete", ConfigType.LIST, "cleanup.policy of topics without one."),
        ("log.message.timestamp.type", "CreateTime", "CreateTime", ConfigType.STRING,
         "message.timestamp.type of topics without one."),
        ("log.cleaner.delete.retention.ms", 86_400_000, 86_400_000, ConfigType.LONG,
         "delete.retention.ms of topics without one."),
        ("group.initial.rebalance.delay.ms", coordinator.group_initial_rebalance_delay_ms,
         base.group_initial_rebalance_delay_ms, ConfigType.INT,
         "How long a new classic group waits for more members before its first rebalance "
         "(--initial-rebalance-delay-ms)."),
        ("group.min.session.timeout.ms", coordinator.group_min_session_timeout_ms, base.group_min_session_timeout_ms,
         ConfigType.INT, "Shortest session timeout a classic member may ask for."),
        ("group.max.session.timeout.ms", coordinator.group_max_session_timeout_ms, base.group_max_session_timeout_ms,
         ConfigType.INT, "Longest session timeout a classic member may ask for."),
        ("group.max.size", coordinator.group_max_size, base.group_max_size, ConfigType.INT,
         "Most members of a classic group."),
        ("offsets.retention.minutes", coordinator.offsets_retention_ms // 60_000, base.offsets_retention_ms // 60_000,
         ConfigType.INT, "How long an empty group's committed offsets are kept."),
        ("offsets.retention.check.interval.ms", coordinator.offsets_retention_check_interval_ms,
         base.offsets_retention_check_interval_ms, ConfigType.LONG, "How often expired offsets are removed."),
        ("group.consumer.heartbeat.interval.ms", coordinator.consumer_group_heartbeat_interval_ms,
         base.consumer_group_heartbeat_interval_ms, ConfigType.INT,
         "How often KIP-848 members heartbeat (--consumer-heartbeat-interval-ms)."),
        ("group.consumer.session.timeout.ms", coordinator.consumer_group_session_timeout_ms,
         base.consumer_group_session_timeout_ms, ConfigType.INT,
         "A silent KIP-848 member is fenced after this (--consumer-session-timeout-ms)."),
        ("group.consumer.min.session.timeout.ms", ranges.consumer_session[0], base_ranges.consumer_session[0],
         ConfigType.INT, "Shortest consumer.session.timeout.ms a group may be given."),
        ("group.consumer.max.session.timeout.ms", ranges.consumer_session[1], base_ranges.consumer_session[1],
         ConfigType.INT, "Longest consumer.session.timeout.ms a group may be given."),
        ("group.consumer.min.heartbeat.interval.ms", ranges.consumer_heartbeat[0], base_ranges.consumer_heartbeat[0],
         ConfigType.INT, "Shortest consumer.heartbeat.interval.ms a group may be given."),
        ("group.consumer.max.heartbeat.interval.ms", ranges.consumer_heartbeat[1], base_ranges.consumer_heartbeat[1],
         ConfigType.INT, "Longest consumer.heartbeat.interval.ms a group may be given."),
        ("group.consumer.max.size", coordinator.consumer_group_max_size, base.consumer_group_max_size,
         ConfigType.INT, "Most members of a consumer group (--consumer-max-size)."),
        ("group.consumer.assignors", coordinator.consumer_group_assignors, base.consumer_group_assignors,
         ConfigType.LIST, "Server-side assignors, the first the default (--consumer-assignors)."),
        ("group.consumer.migration.policy", coordinator.consumer_group_migration_policy,
         base.consumer_group_migration_policy, ConfigType.STRING,
         "Online conversion between classic and consumer groups (--migration-policy)."),
    ]  # fmt: skip
    entries = {}
    for name, value, default, kind, doc in rows:
        source = ConfigSource.DEFAULT_CONFIG if value == default else ConfigSource.STATIC_BROKER_CONFIG
        entries[name] = BrokerConfigEntry(name, _text(value), source, kind, doc)
    return dict(sorted(entries.items()))
