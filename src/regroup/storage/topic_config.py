"""Topic configurations: every name Kafka's topics know, each value's type and check, the defaults, the broker
setting each one falls back to, and the log policy a topic's configuration amounts to.

A shell module without I/O (the topic store keeps each topic's overrides in ``config.json``, see
``docs/topic-data.md``). The names, types, defaults and accepted values follow Kafka's ``LogConfig``; a
value is checked and normalised like Kafka's ``ConfigDef`` (numbers trimmed and range-checked, lists split on
commas and trimmed, booleans case-insensitive), and a bad one raises :class:`ConfigError` with a message
saying which value and why. Configurations the partition log honours are marked ``honoured``; the others are
stored and described as given, changing nothing.

:class:`LogPolicy` is what the partition log and its cleaning pass need of a topic's configuration: retention
by time and by size, compaction and the tombstone retention, the largest batch, the timestamp type, the
segment size and age.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MESSAGE_MAX_BYTES",
    "TOPIC_KEYS",
    "BrokerLogDefaults",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigType",
    "LogPolicy",
    "normalise",
    "validate_topic_configs",
]

DEFAULT_MESSAGE_MAX_BYTES = 1024 * 1024 + 12  # Kafka's message.max.bytes (1048588)
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024  # the partition log's own default (Kafka's is 1 GiB)
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
WEEK_MS = 7 * 24 * 3600 * 1000
DAY_MS = 24 * 3600 * 1000


class ConfigError(ValueError):
    """An unknown configuration name or a value that does not pass its check (Kafka's INVALID_CONFIG)."""


class ConfigType(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigType`` ids."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource`` ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


Check = Callable[[str], str]  # the normalised value, or raises ValueError with the reason


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One topic configuration: its type, default (as a string; ``None`` = no value), the check its values
    pass, a line of documentation, the broker setting it falls back to, and whether the log honours it."""

    name: str
    type: ConfigType
    default: str | None
    check: Check
    doc: str
    synonym: str | None = None
    honoured: bool = False


# ---------------------------------------------------------------------- value checks


def _integer(low: int, high: int, at_least: int | None = None, at_most: int | None = None) -> Check:
    def check(text: str) -> str:
        try:
            value = int(text.strip())
        except ValueError:
            kind = "INT" if high == INT_MAX else "LONG"
            raise ValueError(f"Not a number of type {kind}") from None
        if not low <= value <= high:
            raise ValueError("Not a number of type " + ("INT" if high == INT_MAX else "LONG"))
        if at_least is not None and value < at_least:
            raise ValueError(f"Value must be at least {at_least}")
        if at_most is not None and value > at_most:
            raise ValueError(f"Value must be no more than {at_most}")
        return str(value)

    return check


def _int(at_least: int | None = None, at_most: int | None = None) -> Check:
    return _integer(-(2**31), INT_MAX, at_least, at_most)


def _long(at_least: int | None = None) -> Check:
    return _integer(-(2**63), LONG_MAX, at_least)


def _double(low: float, high: float) -> Check:
    def check(text: str) -> str:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError("Not a number of type DOUBLE") from None
        if math.isnan(value) or not low <= value <= high:
            raise ValueError(f"Value must be between {low} and {high}")
        return repr(value)

    return check


def _boolean(text: str) -> str:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")
    return value


def _one_of(*allowed: str) -> Check:
    def check(text: str) -> str:
        value = text.strip()
        if value not in allowed:
            raise ValueError(f"String must be one of: {', '.join(allowed)}")
        return value

    return check


def _list_of(*allowed: str) -> Check:
    def check(text: str) -> str:
        items = [item.strip() for item in text.split(",")] if text.strip() else []
        for item in items:
            if item not in allowed:
                raise ValueError(f"String must be one of: {', '.join(allowed)}")
        return ",".join(items)

    return check


def _replica_list(text: str) -> str:
    """Throttled replicas: ``*`` or ``partition:broker`` pairs."""
    items = [item.strip() for item in text.split(",")] if text.strip() else []
    if items == ["*"]:
        return "*"
    for item in items:
        partition, _, broker = item.partition(":")
        if not (partition.strip().isdigit() and broker.strip().isdigit()):
            raise ValueError(
                "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],..."
            )
    return ",".join(items)


def _anything(text: str) -> str:
    return text


def _no_remote_storage(text: str) -> str:
    value = _boolean(text)
    if value == "true":
        raise ValueError("Tiered Storage functionality is disabled in the broker")
    return value


def _message_format(text: str) -> str:
    value = text.strip()
    if not value or not value[0].isdigit():
        raise ValueError("Version `" + value + "` is not a valid version")
    return value


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# ---------------------------------------------------------------------- the topic configurations

TOPIC_KEYS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        ConfigKey("cleanup.policy", ConfigType.LIST, "delete", _list_of("compact", "delete"),
                  "delete: whole old segments are deleted by retention.ms and retention.bytes; compact: only the "
                  "latest record of each key is kept in the segments before the active one; both: both.",
                  "log.cleanup.policy", honoured=True),
        ConfigKey("compression.type", ConfigType.STRING, "producer", _one_of(*_COMPRESSION),
                  "Compression of stored batches; this broker keeps the producer's (producer).", "compression.type"),
        ConfigKey("compression.gzip.level", ConfigType.INT, "-1", _int(-1, 9), "Level of gzip compression.",
                  "compression.gzip.level"),
        ConfigKey("compression.lz4.level", ConfigType.INT, "9", _int(1, 17), "Level of lz4 compression.",
                  "compression.lz4.level"),
        ConfigKey("compression.zstd.level", ConfigType.INT, "3", _int(-131072, 22), "Level of zstd compression.",
                  "compression.zstd.level"),
        ConfigKey("delete.retention.ms", ConfigType.LONG, str(DAY_MS), _long(0),
                  "How long a tombstone (a record with a null value) is kept in a compacted topic, counted from its "
                  "timestamp, so that consumers reading from the start still see the deletion.",
                  "log.cleaner.delete.retention.ms", honoured=True),
        ConfigKey("file.delete.delay.ms", ConfigType.LONG, "60000", _long(0),
                  "Delay before a deleted segment's file is removed (this broker removes it at once).",
                  "log.segment.delete.delay.ms"),
        ConfigKey("flush.messages", ConfigType.LONG, str(LONG_MAX), _long(1),
                  "Messages between forced fsyncs (this broker follows --fsync instead).",
                  "log.flush.interval.messages"),
        ConfigKey("flush.ms", ConfigType.LONG, str(LONG_MAX), _long(0),
                  "Time between forced fsyncs (this broker follows --fsync instead).", "log.flush.interval.ms"),
        ConfigKey("follower.replication.throttled.replicas", ConfigType.LIST, "", _replica_list,
                  "Replicas whose replication is throttled on the follower side (no replication here)."),
        ConfigKey("index.interval.bytes", ConfigType.INT, "4096", _int(0),
                  "Bytes between offset index entries (this broker indexes every batch in memory).",
                  "log.index.interval.bytes"),
        ConfigKey("leader.replication.throttled.replicas", ConfigType.LIST, "", _replica_list,
                  "Replicas whose replication is throttled on the leader side (no replication here)."),
        ConfigKey("local.retention.bytes", ConfigType.LONG, "-2", _long(-2),
                  "Local retention by size with tiered storage (no tiered storage here).",
                  "log.local.retention.bytes"),
        ConfigKey("local.retention.ms", ConfigType.LONG, "-2", _long(-2),
                  "Local retention by time with tiered storage (no tiered storage here).", "log.local.retention.ms"),
        ConfigKey("max.compaction.lag.ms", ConfigType.LONG, str(LONG_MAX), _long(1),
                  "Longest a record may stay uncompacted (the cleaning pass here compacts every older segment).",
                  "log.cleaner.max.compaction.lag.ms"),
        ConfigKey("max.message.bytes", ConfigType.INT, str(DEFAULT_MESSAGE_MAX_BYTES), _int(0),
                  "Largest record batch a producer may append to this topic, in bytes; larger ones are refused "
                  "with MESSAGE_TOO_LARGE.", "message.max.bytes", honoured=True),
        ConfigKey("message.downconversion.enable", ConfigType.BOOLEAN, "true", _boolean,
                  "Down-conversion for old consumers (only v2 batches are stored and served here).",
                  "log.message.downconversion.enable"),
        ConfigKey("message.format.version", ConfigType.STRING, "3.0-IV1", _message_format,
                  "Deprecated record format version (always v2 here).", "log.message.format.version"),
        ConfigKey("message.timestamp.after.max.ms", ConfigType.LONG, str(LONG_MAX), _long(0),
                  "How far a record's timestamp may lie in the future (not checked here).",
                  "log.message.timestamp.after.max.ms"),
        ConfigKey("message.timestamp.before.max.ms", ConfigType.LONG, str(LONG_MAX), _long(0),
                  "How far a record's timestamp may lie in the past (not checked here).",
                  "log.message.timestamp.before.max.ms"),
        ConfigKey("message.timestamp.difference.max.ms", ConfigType.LONG, str(LONG_MAX), _long(0),
                  "Deprecated: see message.timestamp.before.max.ms.", "log.message.timestamp.difference.max.ms"),
        ConfigKey("message.timestamp.type", ConfigType.STRING, "CreateTime", _one_of("CreateTime", "LogAppendTime"),
                  "CreateTime keeps the producer's timestamps; LogAppendTime stamps every batch with the broker's "
                  "clock when it is appended.", "log.message.timestamp.type", honoured=True),
        ConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", _double(0.0, 1.0),
                  "Share of uncompacted log before compaction runs (the cleaning pass here compacts whenever an "
                  "older segment is new).", "log.cleaner.min.cleanable.ratio"),
        ConfigKey("min.compaction.lag.ms", ConfigType.LONG, "0", _long(0),
                  "Records younger than this are not compacted.", "log.cleaner.min.compaction.lag.ms",
                  honoured=True),
        ConfigKey("min.insync.replicas", ConfigType.INT, "1", _int(1),
                  "Replicas that must acknowledge an acks=all produce (one broker here).", "min.insync.replicas"),
        ConfigKey("preallocate", ConfigType.BOOLEAN, "false", _boolean,
                  "Preallocate segment files (not done here).", "log.preallocate"),
        ConfigKey("remote.log.copy.disable", ConfigType.BOOLEAN, "false", _boolean,
                  "Stop copying to tiered storage (no tiered storage here)."),
        ConfigKey("remote.log.delete.on.disable", ConfigType.BOOLEAN, "false", _boolean,
                  "Delete tiered data when tiered storage is disabled (no tiered storage here)."),
        ConfigKey("remote.storage.enable", ConfigType.BOOLEAN, "false", _no_remote_storage,
                  "Tiered storage (not available here: only false is accepted)."),
        ConfigKey("retention.bytes", ConfigType.LONG, "-1", _long(),
                  "Most bytes a partition keeps before its oldest segments are deleted (-1: no limit). The active "
                  "segment is never deleted.", "log.retention.bytes", honoured=True),
        ConfigKey("retention.ms", ConfigType.LONG, str(WEEK_MS), _long(-1),
                  "Segments whose newest record is older than this are deleted (-1: no limit). The active segment is "
                  "never deleted.", "log.retention.ms", honoured=True),
        ConfigKey("segment.bytes", ConfigType.INT, str(DEFAULT_SEGMENT_BYTES), _int(14),
                  "A new segment starts before an append that would grow the active one past this size.",
                  "log.segment.bytes", honoured=True),
        ConfigKey("segment.index.bytes", ConfigType.INT, "10485760", _int(4),
                  "Size of the offset index files (the index lives in memory here).", "log.index.size.max.bytes"),
        ConfigKey("segment.jitter.ms", ConfigType.LONG, "0", _long(0),
                  "Random jitter subtracted from segment.ms (not applied here).", "log.roll.jitter.ms"),
        ConfigKey("segment.ms", ConfigType.LONG, str(WEEK_MS), _long(1),
                  "The cleaning pass starts a new segment once the active one's first record is older than this, so "
                  "that retention can reach its records.", "log.roll.ms", honoured=True),
        ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", _boolean,
                  "Whether an out-of-sync replica may become leader (one replica here).",
                  "unclean.leader.election.enable"),
    )
}  # fmt: skip


def normalise(name: str, value: str | None) -> str:
    """``value`` of topic configuration ``name`` checked and normalised; :class:`ConfigError` otherwise."""
    key = TOPIC_KEYS.get(name)
    if key is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    if value is None:
        raise ConfigError(f"Null value not supported for topic configs: {name}")
    try:
        return key.check(value)
    except ValueError as exc:
        raise ConfigError(f"Invalid value {value} for configuration {name}: {exc}") from None


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """A whole set of topic overrides, each checked and normalised, plus the checks across them (Kafka's
    ``LogConfig.validate``); raises :class:`ConfigError`."""
    out = {name: normalise(name, value) for name, value in configs.items()}
    merged = {name: out.get(name, key.default) for name, key in TOPIC_KEYS.items()}
    min_lag, max_lag = int(merged["min.compaction.lag.ms"] or 0), int(merged["max.compaction.lag.ms"] or 0)
    if min_lag > max_lag:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        )
    return out


@dataclass(frozen=True, slots=True)
class BrokerLogDefaults:
    """The broker settings a topic without overrides gets (``regroup serve`` flags)."""

    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    segment_bytes: int = DEFAULT_SEGMENT_BYTES

    def value_of(self, topic_key: str) -> str | None:
        """The broker's value behind topic configuration ``topic_key``, as a string."""
        if topic_key == "max.message.bytes":
            return str(self.message_max_bytes)
        if topic_key == "segment.bytes":
            return str(self.segment_bytes)
        key = TOPIC_KEYS.get(topic_key)
        return key.default if key is not None else None

    def is_set(self, topic_key: str) -> bool:
        """Whether the broker's value differs from the built-in default (a flag set it)."""
        if topic_key == "max.message.bytes":
            return self.message_max_bytes != DEFAULT_MESSAGE_MAX_BYTES
        if topic_key == "segment.bytes":
            return self.segment_bytes != DEFAULT_SEGMENT_BYTES
        return False


@dataclass(frozen=True, slots=True)
class LogPolicy:
    """What the partition log and the cleaning pass do for one topic."""

    retention_ms: int = WEEK_MS
    retention_bytes: int = -1
    compact: bool = False
    delete: bool = True
    delete_retention_ms: int = DAY_MS
    min_compaction_lag_ms: int = 0
    max_message_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    log_append_time: bool = False
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = WEEK_MS

    @classmethod
    def of(cls, overrides: Mapping[str, str], broker: BrokerLogDefaults | None = None) -> LogPolicy:
        """The policy of a topic with the (already normalised) ``overrides`` on a broker with ``broker``."""
        broker = broker or BrokerLogDefaults()

        def value(name: str) -> str:
            found = overrides.get(name)
            if found is None:
                found = broker.value_of(name)
            return found or ""

        policies = set(value("cleanup.policy").split(",")) - {""}
        return cls(
            retention_ms=int(value("retention.ms")),
            retention_bytes=int(value("retention.bytes")),
            compact="compact" in policies,
            delete="delete" in policies,
            delete_retention_ms=int(value("delete.retention.ms")),
            min_compaction_lag_ms=int(value("min.compaction.lag.ms")),
            max_message_bytes=int(value("max.message.bytes")),
            log_append_time=value("message.timestamp.type") == "LogAppendTime",
            segment_bytes=int(value("segment.bytes")),
            segment_ms=int(value("segment.ms")),
        )
