"""Topic configuration checks and normalisation (Kafka's ``ConfigDef`` rules) and the policy they amount to."""

from __future__ import annotations

import pytest

from regroup.storage.topic_config import (
    TOPIC_KEYS,
    BrokerLogDefaults,
    ConfigError,
    LogPolicy,
    normalise,
    validate_topic_configs,
)


@pytest.mark.parametrize(
    ("name", "given", "stored"),
    [
        ("retention.ms", " 1000 ", "1000"),
        ("retention.ms", "-1", "-1"),
        ("cleanup.policy", "compact , delete", "compact,delete"),
        ("cleanup.policy", "", ""),
        ("preallocate", "TRUE", "true"),
        ("min.cleanable.dirty.ratio", "0.25", "0.25"),
        ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
        ("leader.replication.throttled.replicas", "0:0, 1:0", "0:0,1:0"),
    ],
)
def test_values_are_normalised(name: str, given: str, stored: str) -> None:
    assert normalise(name, given) == stored


@pytest.mark.parametrize(
    ("name", "given", "why"),
    [
        ("retention.ms", "-2", "at least -1"),
        ("retention.ms", "1e3", "LONG"),
        ("segment.bytes", "13", "at least 14"),
        ("segment.bytes", str(2**31), "INT"),
        ("cleanup.policy", "compact,forever", "one of"),
        ("message.timestamp.type", "logappendtime", "one of"),
        ("min.cleanable.dirty.ratio", "1.5", "between"),
        ("min.cleanable.dirty.ratio", "nan", "between"),
        ("preallocate", "yes", "true or false"),
        ("remote.storage.enable", "true", "Tiered Storage"),
        ("no.such.config", "1", "Unknown topic config name"),
    ],
)
def test_bad_values_are_refused_with_a_message(name: str, given: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        normalise(name, given)


def test_checks_across_configs() -> None:
    with pytest.raises(ConfigError, match=r"min\.compaction\.lag\.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_every_default_passes_its_own_check() -> None:
    for key in TOPIC_KEYS.values():
        if key.default is not None:
            assert key.check(key.default) is not None


def test_policy_follows_overrides_then_broker_defaults() -> None:
    broker = BrokerLogDefaults(message_max_bytes=3_000_000, segment_bytes=1000)
    assert LogPolicy.of({}, broker).max_message_bytes == 3_000_000
    policy = LogPolicy.of({"max.message.bytes": "10", "cleanup.policy": "compact"}, broker)
    assert policy.max_message_bytes == 10 and policy.compact and not policy.delete and policy.segment_bytes == 1000
    assert LogPolicy.of({"cleanup.policy": ""}).delete is False
    assert broker.is_set("max.message.bytes") and not BrokerLogDefaults().is_set("max.message.bytes")
