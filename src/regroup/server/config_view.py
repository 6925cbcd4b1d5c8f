"""Configurations as the admin APIs show them: every entry of a topic or of the broker with its value, source,
synonyms, type and documentation — what DescribeConfigs and CreateTopics (v5+) answer, as Kafka's
``ConfigHelper`` builds them.

A shell module without I/O. A topic's entry is its override (source DYNAMIC_TOPIC_CONFIG) or else the broker's
value behind it (STATIC_BROKER_CONFIG when a ``regroup serve`` flag set it, DEFAULT_CONFIG otherwise); its
synonyms are the override, then the broker setting (``message.max.bytes`` for ``max.message.bytes``, ...).
Topic entries are never read-only; every broker entry is (see :mod:`regroup.server.broker_configs`). A group's
entry is its own setting (source GROUP_CONFIG) or else the broker's value for groups without one
(DEFAULT_CONFIG), as Kafka's ``ConfigHelper.createGroupConfigEntry``; never read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from regroup.coordinator.config import CoordinatorConfig
from regroup.server.broker_configs import BrokerConfigEntry
from regroup.server.group_configs import GROUP_KEYS, group_defaults
from regroup.storage.topic_config import (
    TOPIC_KEYS,
    BrokerLogDefaults,
    ConfigError,
    ConfigSource,
    ConfigType,
    validate_topic_configs,
)

__all__ = [
    "Described",
    "describe_broker",
    "describe_group",
    "describe_loggers",
    "describe_topic",
    "topic_configs_of_request",
]


@dataclass(frozen=True, slots=True)
class Described:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    type: ConfigType
    doc: str
    #: (name, value, source), the entry's own source first
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]
    sensitive: bool = False


def describe_topic(
    defaults: BrokerLogDefaults, overrides: Mapping[str, str], names: Iterable[str] | None = None
) -> list[Described]:
    """Every configuration of a topic with ``overrides`` (or only ``names``, those that exist), by name."""
    wanted = sorted(TOPIC_KEYS) if names is None else sorted(set(names) & TOPIC_KEYS.keys())
    out = []
    for name in wanted:
        key = TOPIC_KEYS[name]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if key.synonym is not None:
            broker_source = ConfigSource.STATIC_BROKER_CONFIG if defaults.is_set(name) else ConfigSource.DEFAULT_CONFIG
            synonyms.append((key.synonym, defaults.value_of(name), broker_source))
        value = overrides.get(name, defaults.value_of(name))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(Described(name, value, source, False, key.type, key.doc, tuple(synonyms)))
    return out


def describe_group(
    config: CoordinatorConfig, overrides: Mapping[str, str], names: Iterable[str] | None = None
) -> list[Described]:
    """Every configuration of a group with ``overrides`` (or only ``names``, those that exist), by name."""
    wanted = sorted(GROUP_KEYS) if names is None else sorted(set(names) & GROUP_KEYS.keys())
    defaults = group_defaults(config)
    out = []
    for name in wanted:
        key = GROUP_KEYS[name]
        own = name in overrides
        value = overrides[name] if own else defaults[name]
        source = ConfigSource.GROUP_CONFIG if own else ConfigSource.DEFAULT_CONFIG
        out.append(Described(name, value, source, False, key.type, key.doc, ((name, value, source),)))
    return out


def describe_loggers(levels: Mapping[str, str], names: Iterable[str] | None = None) -> list[Described]:
    """The broker's loggers (resource BROKER_LOGGER): each one's level, never read-only, without synonyms."""
    wanted = list(levels) if names is None else [n for n in levels if n in set(names)]
    source = ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
    return [Described(name, levels[name], source, False, ConfigType.STRING, "", ()) for name in wanted]


def describe_broker(entries: Mapping[str, BrokerConfigEntry], names: Iterable[str] | None = None) -> list[Described]:
    """The broker's entries (read-only); a sensitive one (a password, key or JAAS configuration) has a null
    value, in its synonym too, and ``is_sensitive``, as Kafka answers them."""
    wanted = sorted(entries) if names is None else sorted(set(names) & entries.keys())
    out = []
    for name in wanted:
        e = entries[name]
        value = None if e.sensitive else e.value
        out.append(
            Described(name, value, e.source, True, e.type, e.doc, ((name, value, e.source),), sensitive=e.sensitive)
        )
    return out


def topic_configs_of_request(pairs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """The checked, normalised overrides of a CreateTopics entry (a name given twice: the last value counts);
    raises :class:`ConfigError`."""
    given: dict[str, str | None] = {}
    for name, value in pairs:
        given[name] = value
    nulls = sorted(name for name, value in given.items() if value is None)
    if nulls:
        raise ConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
    return validate_topic_configs(given)
