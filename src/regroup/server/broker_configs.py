"""The broker's configuration as DescribeConfigs shows it for resource BROKER "0": Kafka's name for each
setting ``regroup serve`` has, its effective value, and whether the configuration file or a flag set it.

A shell module without I/O. Every entry is read-only: this broker's settings come from its flags and its
configuration file and cannot be changed while it runs (AlterConfigs on the broker is refused). An entry's
source is STATIC_BROKER_CONFIG when the file or a flag set it (``ServerConfig.configured``; for a
``ServerConfig`` built in code, also when its value differs from the built-in default), DEFAULT_CONFIG
otherwise, as Kafka's ``ConfigHelper`` tells a ``server.properties`` setting from a default.

The security settings are per listener (``network/listeners.py``): an unprefixed ``ssl.*``/``sasl.*`` entry
shows the value of the first listener it applies to that has no ``listener.name.<l>.`` override of it (else
Kafka's default), and each listener-prefixed setting the file gave is an entry of its own with that listener's
value. Passwords, keys and JAAS configurations are sensitive: their value is never shown (Kafka's PASSWORD
settings; ``config_view.describe_broker`` answers them as null with ``is_sensitive``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from regroup.coordinator.config import CoordinatorConfig
from regroup.network.listeners import (
    LISTENER_PREFIX,
    SASL_MECHANISMS,
    SECRET_SETTINGS,
    ListenerConfig,
    SecurityProtocol,
    TlsSettings,
)
from regroup.server.group_configs import Ranges
from regroup.storage.topic_config import ConfigSource, ConfigType

__all__ = ["SENSITIVE", "BrokerConfigEntry", "broker_config_entries"]

#: Kafka's PASSWORD settings regroup reads: never shown
SENSITIVE: Final = SECRET_SETTINGS
#: Kafka's default listener.security.protocol.map: each protocol's name maps to itself
DEFAULT_PROTOCOL_MAP: Final = ",".join(f"{p.value}:{p.value}" for p in SecurityProtocol)


@dataclass(frozen=True, slots=True)
class BrokerConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str
    #: a password, key or JAAS configuration: DescribeConfigs answers its value as null
    sensitive: bool = False


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _tls(listener: ListenerConfig) -> TlsSettings:
    return listener.tls or TlsSettings()


def _is_tls(listener: ListenerConfig) -> bool:
    return listener.tls is not None


def _is_ssl(listener: ListenerConfig) -> bool:  # Kafka: ssl.client.auth without prefix is for SSL listeners only
    return listener.tls is not None and listener.protocol is SecurityProtocol.SSL


def _is_sasl(listener: ListenerConfig) -> bool:
    return listener.protocol.sasl


def _has_oauth(listener: ListenerConfig) -> bool:
    return listener.protocol.sasl and "OAUTHBEARER" in listener.sasl_mechanisms


def _jwks_url(listener: ListenerConfig) -> str | None:
    path = listener.oauth.jwks_path
    return None if path is None else (path.as_uri() if path.is_absolute() else f"file:{path}")


#: per-listener settings: name -> (type, Kafka's default, which listeners it applies to, their value, doc)
_PER_LISTENER: Final[
    dict[str, tuple[ConfigType, Any, Callable[[ListenerConfig], bool], Callable[[ListenerConfig], Any], str]]
] = {
    "sasl.enabled.mechanisms": (ConfigType.LIST, "PLAIN", _is_sasl, lambda lc: lc.sasl_mechanisms,
        "SASL mechanisms of the SASL listeners (PLAIN by default: regroup has no GSSAPI)."),
    "connections.max.reauth.ms": (ConfigType.LONG, 0, _is_sasl, lambda lc: lc.max_reauth_ms,
        "Longest SASL session before the client must re-authenticate (0: as long as its credential lasts)."),
    "ssl.client.auth": (ConfigType.STRING, "none", _is_ssl, lambda lc: _tls(lc).client_auth,
        "Whether TLS listeners ask clients for a certificate: none, requested or required."),
    "ssl.enabled.protocols": (ConfigType.LIST, "TLSv1.2,TLSv1.3", _is_tls, lambda lc: _tls(lc).enabled_protocols,
        "TLS versions the TLS listeners accept."),
    "ssl.cipher.suites": (ConfigType.LIST, "", _is_tls, lambda lc: _tls(lc).cipher_suites,
        "TLS 1.2 cipher suites the TLS listeners accept (empty: OpenSSL's defaults)."),
    "ssl.keystore.type": (ConfigType.STRING, "PEM", _is_tls, lambda lc: _tls(lc).keystore_type,
        "Format of the key store: PEM or PKCS12."),
    "ssl.keystore.location": (ConfigType.STRING, None, _is_tls, lambda lc: _tls(lc).keystore_location,
        "The key store file."),
    "ssl.truststore.type": (ConfigType.STRING, "PEM", _is_tls, lambda lc: _tls(lc).truststore_type,
        "Format of the trust store: PEM or PKCS12."),
    "ssl.truststore.location": (ConfigType.STRING, None, _is_tls, lambda lc: _tls(lc).truststore_location,
        "The trust store file: the certificates client certificates are checked against."),
    "ssl.principal.mapping.rules": (ConfigType.STRING, "DEFAULT", _is_tls,
        lambda lc: _tls(lc).principal_mapping_rules, "Rules mapping a client certificate's DN to a principal."),
    "sasl.oauthbearer.jwks.endpoint.url": (ConfigType.STRING, None, _has_oauth, _jwks_url,
        "The JWKS file OAUTHBEARER tokens are verified against (absent: Kafka's unsecured tokens)."),
    "sasl.oauthbearer.expected.issuer": (ConfigType.STRING, None, _has_oauth,
        lambda lc: lc.oauth.expected_issuer, "The issuer (iss) OAUTHBEARER tokens must have."),
    "sasl.oauthbearer.expected.audience": (ConfigType.LIST, "", _has_oauth,
        lambda lc: lc.oauth.expected_audience, "Audiences (aud) of which OAUTHBEARER tokens must name one."),
    "sasl.oauthbearer.clock.skew.seconds": (ConfigType.INT, 30, _has_oauth, lambda lc: lc.oauth.clock_skew_s,
        "Clock difference allowed when checking a token's times."),
    "sasl.oauthbearer.sub.claim.name": (ConfigType.STRING, "sub", _has_oauth, lambda lc: lc.oauth.sub_claim,
        "The claim naming a token's principal."),
    "sasl.oauthbearer.scope.claim.name": (ConfigType.STRING, "scope", _has_oauth,
        lambda lc: lc.oauth.scope_claim, "The claim holding a token's scopes."),
}  # fmt: skip
_SENSITIVE_DOCS: Final = {
    "ssl.keystore.password": "Password of a PKCS12 key store.",
    "ssl.key.password": "Passphrase of the private key.",
    "ssl.keystore.key": "The private key, PEM text.",
    "ssl.keystore.certificate.chain": "The certificate chain, PEM text.",
    "ssl.truststore.password": "Password of the trust store (not needed).",
    "ssl.truststore.certificates": "Trusted certificates, PEM text.",
    "sasl.jaas.config": "JAAS login module configuration, per listener and mechanism.",
}


def _listeners(settings: Any) -> tuple[ListenerConfig, ...]:
    configured: tuple[ListenerConfig, ...] = tuple(settings.listeners)
    if configured:
        return configured
    return (
        ListenerConfig(
            name="PLAINTEXT",
            host=settings.host,
            port=settings.port,
            advertised_host=settings.advertised_host,
            advertised_port=settings.advertised_port,
        ),
    )


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _prefix(listener: ListenerConfig) -> str:
    return f"{LISTENER_PREFIX}{listener.name.lower()}."


def _security_entries(settings: Any, configured: frozenset[str]) -> Iterable[BrokerConfigEntry]:
    listeners = _listeners(settings)

    def source(name: str) -> ConfigSource:
        return ConfigSource.STATIC_BROKER_CONFIG if name in configured else ConfigSource.DEFAULT_CONFIG

    yield BrokerConfigEntry(
        "listeners",
        ",".join(f"{lc.name}://{_address(lc.host, lc.port)}" for lc in listeners),
        source("listeners"),
        ConfigType.STRING,
        "Where the broker listens: NAME://host:port, comma-separated (--host and --port without one).",
    )
    advertised = None
    if "advertised.listeners" in configured:
        advertised = ",".join(
            f"{lc.name}://{_address(lc.advertised_host or lc.host, lc.advertised_port or lc.port)}" for lc in listeners
        )
    yield BrokerConfigEntry(
        "advertised.listeners",
        advertised,
        source("advertised.listeners"),
        ConfigType.STRING,
        "What the broker tells clients to connect to, per listener (absent: the listeners).",
    )
    protocol_map = DEFAULT_PROTOCOL_MAP
    if "listener.security.protocol.map" in configured:
        protocol_map = ",".join(f"{lc.name}:{lc.protocol.value}" for lc in listeners)
    yield BrokerConfigEntry(
        "listener.security.protocol.map",
        protocol_map,
        source("listener.security.protocol.map"),
        ConfigType.STRING,
        "Each listener's security protocol: NAME:PROTOCOL pairs.",
    )
    for name, (kind, default, applies, value_of, doc) in _PER_LISTENER.items():
        users = [lc for lc in listeners if applies(lc) and _prefix(lc) + name not in configured]
        value = value_of(users[0]) if users and name in configured else default
        yield BrokerConfigEntry(name, _text(value), source(name), kind, doc)
    for name in SENSITIVE:
        yield BrokerConfigEntry(name, None, source(name), ConfigType.PASSWORD, _SENSITIVE_DOCS[name], sensitive=True)
    yield BrokerConfigEntry(
        "authorizer.class.name",
        settings.authorizer or "",
        source("authorizer.class.name"),
        ConfigType.STRING,
        "The ACL authorizer (Kafka's StandardAuthorizer or AclAuthorizer); empty: no authorization.",
    )
    yield BrokerConfigEntry(
        "super.users",
        ";".join(sorted(settings.super_users)) or None,
        source("super.users"),
        ConfigType.LIST,
        "Principals every ACL check allows, separated by ';'.",
    )
    yield BrokerConfigEntry(
        "allow.everyone.if.no.acl.found",
        _text(bool(settings.allow_everyone_if_no_acl_found)),
        source("allow.everyone.if.no.acl.found"),
        ConfigType.BOOLEAN,
        "Whether a resource without ACLs is open to everyone.",
    )
    yield from _prefixed_entries(listeners, configured)


def _prefixed_entries(listeners: tuple[ListenerConfig, ...], configured: frozenset[str]) -> Iterable[BrokerConfigEntry]:
    """An entry for each listener-prefixed setting given, with that listener's value."""
    static = ConfigSource.STATIC_BROKER_CONFIG
    for name in sorted(n for n in configured if n.startswith(LISTENER_PREFIX)):
        listener = next((lc for lc in listeners if name.startswith(_prefix(lc))), None)
        if listener is None:
            continue
        rest = name[len(_prefix(listener)) :]
        mechanism, _, setting = rest.partition(".")
        base = setting if mechanism.upper() in SASL_MECHANISMS else rest
        if base in SENSITIVE:
            yield BrokerConfigEntry(name, None, static, ConfigType.PASSWORD, _SENSITIVE_DOCS[base], sensitive=True)
        elif base in _PER_LISTENER:
            kind, _, applies, value_of, doc = _PER_LISTENER[base]
            shown = applies(listener) or (base.startswith("ssl.") and _is_tls(listener))
            if shown or base == "connections.max.reauth.ms":
                yield BrokerConfigEntry(name, _text(value_of(listener)), static, kind, doc)


def broker_config_entries(settings: Any) -> dict[str, BrokerConfigEntry]:
    """The entries for a ``ServerConfig`` (duck-typed: this module does not import the app)."""
    defaults = type(settings)()
    coordinator: CoordinatorConfig = settings.coordinator
    base: CoordinatorConfig = defaults.coordinator
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
        ("broker.rack", settings.broker_rack, defaults.broker_rack, ConfigType.STRING,
         "The rack of this broker and of every replica; KIP-848 assignors match it to client.rack."),
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
        ("group.consumer.assignor.offload.enable", coordinator.consumer_group_assignor_offload_members is not None,
         base.consumer_group_assignor_offload_members is not None, ConfigType.BOOLEAN,
         "Whether a consumer group of --consumer-assignor-offload-members or more has its target computed on a "
         "worker thread (--[no-]consumer-assignor-offload)."),
        ("group.consumer.assignment.interval.ms", coordinator.consumer_group_assignment_interval_ms,
         base.consumer_group_assignment_interval_ms, ConfigType.INT,
         "Least time between two target computations of a consumer group (--consumer-assignment-interval-ms)."),
        ("group.consumer.min.assignment.interval.ms", ranges.consumer_assignment[0],
         base_ranges.consumer_assignment[0], ConfigType.INT,
         "Shortest consumer.assignment.interval.ms a group may be given."),
        ("group.consumer.max.assignment.interval.ms", ranges.consumer_assignment[1],
         base_ranges.consumer_assignment[1], ConfigType.INT,
         "Longest consumer.assignment.interval.ms a group may be given."),
        ("group.consumer.migration.policy", coordinator.consumer_group_migration_policy,
         base.consumer_group_migration_policy, ConfigType.STRING,
         "Online conversion between classic and consumer groups (--migration-policy)."),
    ]  # fmt: skip
    configured: frozenset[str] = frozenset(settings.configured)
    entries = {}
    for name, value, default, kind, doc in rows:
        static = name in configured or value != default
        source = ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG
        entries[name] = BrokerConfigEntry(name, _text(value), source, kind, doc)
    for entry in _security_entries(settings, configured):
        entries[entry.name] = entry
    return dict(sorted(entries.items()))
