"""``regroup serve --config FILE``: Kafka's ``server.properties``, read with Kafka's own setting names.

This module owns two things:

- **The file format**, Java's ``java.util.Properties.load``: ``key=value``, ``key: value`` or ``key value``;
  leading whitespace skipped; ``#`` and ``!`` comment lines; a line ending in an odd number of backslashes
  continues on the next one (whose leading whitespace is dropped); the escapes ``\\t \\n \\r \\f \\uXXXX``, and
  a backslash before any other character stands for that character; a key given twice keeps its last value.
  The file is read as UTF-8 (a byte-order mark is skipped), or as ISO-8859-1 (what Kafka's loader reads) when it
  is not UTF-8.
- **The mapping** of Kafka's names onto regroup's settings (``server_settings``), with values checked as
  Kafka's ``ConfigDef`` checks them (integers, ``true``/``false`` in any case, lists split at commas, values
  trimmed) and the ranges ``regroup serve``'s flags have. A bad value is a one-line :class:`PropertiesError`
  naming the setting; the value of a password, key or JAAS setting is never shown, only ``(hidden)``. A name
  regroup does not support is one warning line naming it (the caller logs them, once, at start, on this
  module's logger ``regroup.server.properties``).

What a file may set:

- The settings of ``regroup serve``'s flags under their Kafka names (``FLAG_SETTINGS``): ``num.partitions``,
  ``log.dirs`` (or ``log.dir``; one directory only), ``message.max.bytes``, ``socket.request.max.bytes``, ...;
  ``log.segment.bytes`` has no flag. A flag given on the command line overrides the file.
- ``listeners``: ``NAME://host:port`` entries, comma-separated (``[::1]`` for IPv6, port 0 for any free port).
  Names are case-insensitive (upper-cased, as Kafka does); an empty host binds every IPv4 interface
  (``0.0.0.0``: Kafka's wildcard). ``listener.security.protocol.map`` (``NAME:PROTOCOL`` pairs; by default each
  of PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL maps to itself) gives each name its protocol; an unmapped name
  is an error. ``advertised.listeners`` (names among the listeners' names, never ``0.0.0.0``) sets what a
  listener tells clients; a listener it does not name, or one advertised with an empty host, advertises its
  own address (this machine's name for a wildcard). Without ``listeners`` the broker has one PLAINTEXT listener
  on ``--host``:``--port`` (127.0.0.1:9092), as without a file. With ``listeners``, ``--host`` and ``--port``
  given on the command line replace the FIRST listener's host and port, ``--advertised-host`` and
  ``--advertised-port`` its advertised ones.
- Per listener, Kafka's ``ssl.*`` and ``sasl.*`` settings, each overridable for one listener by the prefix
  ``listener.name.<listener name in lower case>.`` (the prefixed value wins, as in Kafka), and, per mechanism,
  ``listener.name.<l>.<mechanism>.sasl.jaas.config`` and ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``.
  A TLS listener needs a key store; ``sasl.enabled.mechanisms`` names only PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
  and OAUTHBEARER, and PLAIN needs users (``user_NAME="password"`` in its JAAS config). SCRAM's credentials are
  managed with AlterUserScramCredentials; OAUTHBEARER validates Kafka's unsecured tokens (the
  ``unsecuredValidator*`` JAAS options) or, with ``sasl.oauthbearer.jwks.endpoint.url`` (a ``file:`` URL only),
  signed JWTs against that key set (``sasl.oauthbearer.expected.issuer``, ``...expected.audience``,
  ``...clock.skew.seconds``, ``...sub.claim.name``, ``...scope.claim.name``).
- ``broker.rack``: the rack of this broker, hence of every replica (one node: every partition has its one
  replica here). Metadata and DescribeCluster report it, and KIP-848 groups' server-side assignors match it
  against the members' ``client.rack``. Trimmed, as Kafka trims it; empty means no rack.
- ``authorizer.class.name`` (Kafka's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` or
  ``kafka.security.authorizer.AclAuthorizer``; empty: no authorization), ``super.users`` (``User:a;User:b``),
  ``allow.everyone.if.no.acl.found``, ``connections.max.reauth.ms``.

Decisions where a single regroup node differs from a Kafka cluster:

- ``sasl.enabled.mechanisms`` defaults to ``PLAIN`` (Kafka's default, GSSAPI, is not available here).
- ``process.roles``, ``controller.quorum.voters``, ``controller.quorum.bootstrap.servers``,
  ``inter.broker.listener.name``, ``security.inter.broker.protocol``, ``sasl.mechanism.inter.broker.protocol``,
  ``sasl.mechanism.controller.protocol``, ``ssl.protocol``, ``ssl.endpoint.identification.algorithm`` and the
  thread and socket-buffer sizes (``TUNING_ONLY``) are accepted without effect and without a warning: one node
  talks to no other broker or controller. Listeners named in ``controller.listener.names`` are not opened.
- ``node.id`` / ``broker.id``: regroup is always node 0; another number is a warning (both given and
  different is an error, as in Kafka).
- Settings regroup fixes (``PINNED``: replication factors and minimum in-sync replicas of 1, 7 days'
  retention, ``log.cleanup.policy=delete``) are accepted silently when they hold regroup's value, otherwise
  one warning.
- ``ssl.keystore.type`` / ``ssl.truststore.type``: PEM or PKCS12 (JKS cannot be read: convert it); unset, a
  location ending in ``.p12`` or ``.pfx`` means PKCS12, anything else PEM. ``ssl.truststore.password`` is not
  needed and ignored. On a SASL_SSL listener ``ssl.client.auth`` counts only listener-prefixed, as in Kafka (an
  unprefixed value other than ``none`` is then a warning).
- Kafka lets each mechanism of a listener have its own ``connections.max.reauth.ms``; regroup keeps one per
  listener, so the mechanisms of one listener must agree.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

from regroup.network.listeners import (
    LISTENER_PREFIX,
    SASL_MECHANISMS,
    SECRET_SETTINGS,
    ListenerConfig,
    OAuthSettings,
    SecurityProtocol,
    TlsSettings,
)
from regroup.security.jaas import JaasEntry, JaasError, parse_jaas_entry, plain_users
from regroup.security.principal import SslPrincipalMapper, parse_principal

__all__ = [
    "AUTHORIZERS",
    "FLAG_SETTINGS",
    "PropertiesError",
    "ServerSettings",
    "is_secret",
    "load_properties",
    "parse_properties",
    "server_settings",
]

log = logging.getLogger(__name__)

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
HIDDEN: Final = "(hidden)"
#: the authorizers ``authorizer.class.name`` may name (Kafka's KRaft and ZooKeeper-era ACL authorizers)
AUTHORIZERS: Final = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
DEFAULT_SASL_MECHANISMS: Final = ("PLAIN",)
#: Kafka's OAUTHBEARER server callback handlers: the JWT validator (needs a JWKS) and the unsecured one
_OAUTH_VALIDATOR: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_OAUTH_HANDLERS: Final = {
    _OAUTH_VALIDATOR: True,
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler": True,
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler": (
        False
    ),
}
_WHITESPACE: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LISTENER_RE: Final = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_INTEGER_RE: Final = re.compile(r"[+-]?[0-9]+")


class PropertiesError(ValueError):
    """A configuration file that cannot be read or holds a bad value: one line, never a secret."""


# ------------------------------------------------------------------------------------------- the file format


def load_properties(path: Path) -> dict[str, str]:
    """The settings of the ``.properties`` file at ``path``; raises :class:`PropertiesError`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PropertiesError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def parse_properties(text: str) -> dict[str, str]:
    """The settings of ``text`` in Java's ``.properties`` format, later keys overriding earlier ones."""
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key(line)
        props[_unescape(key, number)] = _unescape(value, number)
    return props


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(number of its first line, text) of each logical line: comments and blank lines dropped, continued
    lines joined."""
    natural = re.split(r"\r\n|\r|\n", text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        number, line = i + 1, natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i].lstrip(_WHITESPACE)
            i += 1
        out.append((number, line))
    return out


def _continues(line: str) -> bool:
    """Whether ``line`` ends in an odd number of backslashes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_key(line: str) -> tuple[str, str]:
    """The raw key and value of a logical line: the key ends at the first unescaped ``=``, ``:`` or whitespace;
    whitespace and at most one ``=`` or ``:`` separate it from the value."""
    n, i, escaped, has_separator = len(line), 0, False, False
    value_start = n
    while i < n:
        c = line[i]
        if not escaped and c in "=:":
            value_start, has_separator = i + 1, True
            break
        if not escaped and c in _WHITESPACE:
            value_start = i + 1
            break
        escaped = not escaped if c == "\\" else False
        i += 1
    j = value_start
    while j < n:
        c = line[j]
        if c not in _WHITESPACE:
            if has_separator or c not in "=:":
                break
            has_separator = True
        j += 1
    return line[:i], line[j:]


def _unescape(raw: str, number: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break  # a lone backslash at the end of the file
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i : i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"line {number}: malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):  # Java's UTF-16 pairs: one character each
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


# ------------------------------------------------------------------------------------------- values


_SECRET_SETTINGS: Final = frozenset(SECRET_SETTINGS)


def is_secret(name: str) -> bool:
    """Whether ``name`` (possibly listener- or mechanism-prefixed) holds a password, a key or a JAAS config
    (Kafka's PASSWORD settings): its value is never shown."""
    return any(name == s or name.endswith("." + s) for s in _SECRET_SETTINGS) or "password" in name


def _shown(name: str, raw: str) -> str:
    return HIDDEN if is_secret(name) else repr(raw.strip())


def _bad(name: str, raw: str, why: str) -> PropertiesError:
    return PropertiesError(f"invalid value {_shown(name, raw)} for {name}: {why}")


def _integer(name: str, raw: str, low: int, high: int, kind: str = "INT") -> int:
    text = raw.strip()
    if not _INTEGER_RE.fullmatch(text):
        raise _bad(name, raw, f"not a number of type {kind}")
    value = int(text)
    bounds = (INT_MIN, INT_MAX) if kind == "INT" else (LONG_MIN, LONG_MAX)
    if not bounds[0] <= value <= bounds[1]:
        raise _bad(name, raw, f"not a number of type {kind}")
    if value < low:
        raise _bad(name, raw, f"must be at least {low}")
    if value > high:
        raise _bad(name, raw, f"must be at most {high}")
    return value


def _int(low: int = INT_MIN, high: int = INT_MAX) -> Callable[[str, str], Any]:
    return lambda name, raw: _integer(name, raw, low, high)


def _long(low: int = LONG_MIN, high: int = LONG_MAX) -> Callable[[str, str], Any]:
    return lambda name, raw: _integer(name, raw, low, high, "LONG")


def _boolean(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise _bad(name, raw, "expected value to be either true or false")
    return text == "true"


def _list(raw: str) -> list[str]:
    """Kafka's LIST: trimmed, split at commas (with the whitespace around them); empty items are dropped."""
    return [item for item in re.split(r"\s*,\s*", raw.strip()) if item]


def _one_of(*choices: str, case_insensitive: bool = False) -> Callable[[str, str], Any]:
    def parse(name: str, raw: str) -> str:
        text = raw.strip().lower() if case_insensitive else raw.strip()
        if text not in choices:
            raise _bad(name, raw, f"must be one of {', '.join(choices)}")
        return text

    return parse


def _assignors(name: str, raw: str) -> str:
    return ",".join(_list(raw))  # checked with the --consumer-assignors flag's rules by the caller


def _log_dirs(name: str, raw: str) -> str:
    dirs = _list(raw)
    if len(dirs) != 1:
        raise _bad(name, raw, "regroup keeps its logs in exactly one directory")
    return dirs[0]


#: the settings a ``regroup serve`` flag also sets, Kafka name -> parser of the file's value (the flags'
#: ranges). The values are what the flag's option holds (``group.consumer.assignors``: the comma-separated
#: names; ``log.dirs``: the directory).
FLAG_SETTINGS: Final[Mapping[str, Callable[[str, str], Any]]] = {
    "num.partitions": _int(1),
    "auto.create.topics.enable": _boolean,
    "message.max.bytes": _int(0),
    "socket.request.max.bytes": _int(1),
    "connections.max.idle.ms": _long(1),
    "max.connections": _int(1),
    "max.connections.per.ip": _int(1),
    "log.dirs": _log_dirs,
    "log.retention.check.interval.ms": _long(1),
    "group.initial.rebalance.delay.ms": _int(0),
    "group.consumer.heartbeat.interval.ms": _int(1),
    "group.consumer.session.timeout.ms": _int(1),
    "group.consumer.max.size": _int(1),
    "group.consumer.assignors": _assignors,
    "group.consumer.migration.policy": _one_of(
        "disabled", "upgrade", "downgrade", "bidirectional", case_insensitive=True
    ),
    "group.consumer.assignor.offload.enable": _boolean,
    "group.consumer.assignment.interval.ms": _int(0),
    "group.consumer.min.assignment.interval.ms": _int(0),
    "group.consumer.max.assignment.interval.ms": _int(0),
    "transaction.max.timeout.ms": _int(1),
    "transactional.id.expiration.ms": _int(1),
    "group.share.enable": _boolean,
    "group.share.heartbeat.interval.ms": _int(1),
    "group.share.session.timeout.ms": _int(1),
    "group.share.max.size": _int(1, 1000),
    "group.share.record.lock.duration.ms": _int(1000, 3_600_000),
    "group.share.min.record.lock.duration.ms": _int(1000, 30_000),
    "group.share.max.record.lock.duration.ms": _int(30_000, 3_600_000),
    "group.share.assignment.interval.ms": _int(0),
    "group.share.min.assignment.interval.ms": _int(0),
    "group.share.max.assignment.interval.ms": _int(0),
    "group.share.delivery.count.limit": _int(2, 10),
    "group.share.partition.max.record.locks": _int(100, 10_000),
    "group.share.max.share.sessions": _int(1),
}

#: accepted without effect and without a warning (see the module doc)
TUNING_ONLY: Final = frozenset(
    {
        "process.roles",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.mechanism.controller.protocol",
        "ssl.protocol",
        "ssl.endpoint.identification.algorithm",
        "num.network.threads",
        "num.io.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        "background.threads",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "socket.listen.backlog.size",
    }
)

#: settings regroup fixes: accepted silently when the file gives this value (as Kafka parses it)
PINNED: Final[Mapping[str, int | str]] = {
    "node.id": 0,
    "broker.id": 0,
    "default.replication.factor": 1,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "min.insync.replicas": 1,
    "log.retention.hours": 168,
    "log.retention.minutes": 7 * 24 * 60,
    "log.retention.ms": 7 * 24 * 3600 * 1000,
    "log.retention.bytes": -1,
    "log.cleanup.policy": "delete",
}

#: per-listener settings, each overridable with ``listener.name.<l>.``
_TLS_SETTINGS: Final = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.truststore.password",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "ssl.principal.mapping.rules",
        "ssl.protocol",
        "ssl.endpoint.identification.algorithm",
    }
)
_OAUTH_SETTINGS: Final = frozenset(
    {
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.scope.claim.name",
    }
)
_LISTENER_SETTINGS: Final = _TLS_SETTINGS | _OAUTH_SETTINGS | {"sasl.enabled.mechanisms", "connections.max.reauth.ms"}
_CALLBACK_HANDLER: Final = "sasl.server.callback.handler.class"  # OAUTHBEARER's validators only
#: per listener and mechanism: ``listener.name.<l>.<mechanism>.<setting>``
_MECHANISM_SETTINGS: Final = frozenset({"sasl.jaas.config", "connections.max.reauth.ms", _CALLBACK_HANDLER})
_GLOBAL_SETTINGS: Final = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "log.dir",
        "log.segment.bytes",
    }
)
#: simple checks of per-listener settings, applied to every value given (used or not), as Kafka's ConfigDef
_CHECKS: Final[Mapping[str, Callable[[str, str], Any]]] = {
    "ssl.client.auth": _one_of("none", "requested", "required"),
    "connections.max.reauth.ms": _long(),
    "sasl.oauthbearer.clock.skew.seconds": _int(0),
}


# ------------------------------------------------------------------------------------------- the mapping


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """What a configuration file sets."""

    #: Kafka name -> value, for the settings a ``regroup serve`` flag also sets (``FLAG_SETTINGS``)
    flag_values: dict[str, Any] = field(default_factory=dict)
    #: ``ServerConfig`` fields no flag sets: ``listeners``, ``authorizer``, ``super_users``,
    #: ``allow_everyone_if_no_acl_found``, ``segment_bytes``, ``broker_rack`` (only those the file gives)
    fields: dict[str, Any] = field(default_factory=dict)
    #: one line per setting regroup does not support, naming it (never its value)
    warnings: tuple[str, ...] = ()
    #: the Kafka names the file set that regroup applies (DescribeConfigs shows them as STATIC_BROKER_CONFIG)
    configured: frozenset[str] = frozenset()


class _Reader:
    """The settings of one file as they are consumed: which names were used, the warnings so far."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = props
        self.used: set[str] = set()
        self.warnings: list[str] = []

    def raw(self, name: str) -> str | None:
        if name in self.props:
            self.used.add(name)
            return self.props[name]
        return None

    def listener_raw(self, listener: str, name: str) -> tuple[str, str] | None:
        """(the name given, its value) of ``name`` for ``listener``: the listener-prefixed form first."""
        for key in (_prefix(listener) + name, name):
            value = self.raw(key)
            if value is not None:
                return key, value
        return None


def _prefix(listener: str) -> str:
    return f"{LISTENER_PREFIX}{listener.lower()}."


def server_settings(props: Mapping[str, str]) -> ServerSettings:
    """Map a file's settings (``load_properties``) onto regroup's; raises :class:`PropertiesError`."""
    reader = _Reader(props)
    flag_values: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    configured: set[str] = set()
    for name, parse in FLAG_SETTINGS.items():
        raw = reader.raw(name)
        if raw is not None:
            flag_values[name] = parse(name, raw)
            configured.add(name)
    if "log.dirs" not in flag_values:
        raw = reader.raw("log.dir")
        if raw is not None:
            flag_values["log.dirs"] = _log_dirs("log.dir", raw)
            configured |= {"log.dir", "log.dirs"}
    raw = reader.raw("log.segment.bytes")
    if raw is not None:
        fields["segment_bytes"] = _integer("log.segment.bytes", raw, 14, INT_MAX)
        configured.add("log.segment.bytes")
    raw = reader.raw("broker.rack")
    if raw is not None:
        fields["broker_rack"] = raw.strip() or None
    _authorization(reader, fields)
    _node_identity(reader)
    _pinned(reader)
    for name in TUNING_ONLY:
        reader.raw(name)
    for key, raw in props.items():
        base = _unprefixed(key)
        if base in _CHECKS:
            _CHECKS[base](key, raw)
    listeners = _listeners(reader)
    if listeners:
        fields["listeners"] = listeners
    for key in props:
        if key in reader.used:
            if key not in TUNING_ONLY and key not in PINNED:
                configured.add(key)
        elif key.startswith(LISTENER_PREFIX):
            reader.warnings.append(f"{key}: no listener or setting of that name regroup supports; ignored")
        elif key == "sasl.jaas.config":
            reader.warnings.append(
                f"{key}: a broker's JAAS config must be prefixed with listener.name.<listener>.<mechanism>.; ignored"
            )
        elif key in _LISTENER_SETTINGS or key in _GLOBAL_SETTINGS:
            configured.add(key)  # a valid setting no listener of this file uses
        else:
            reader.warnings.append(f"{key}: not supported by regroup; ignored")
    return ServerSettings(
        flag_values=flag_values,
        fields=fields,
        warnings=tuple(reader.warnings),
        configured=frozenset(configured),
    )


def _unprefixed(key: str) -> str:
    """``key`` without a ``listener.name.<l>.`` (and mechanism) prefix, for the simple value checks."""
    if not key.startswith(LISTENER_PREFIX):
        return key
    for base in _CHECKS:
        if key.endswith("." + base):
            return base
    return key


def _authorization(reader: _Reader, fields: dict[str, Any]) -> None:
    raw = reader.raw("authorizer.class.name")
    if raw is not None:
        name = raw.strip()
        if name and name not in AUTHORIZERS:
            raise _bad("authorizer.class.name", raw, f"regroup's authorizer is Kafka's {' or '.join(AUTHORIZERS)}")
        fields["authorizer"] = name or None
    raw = reader.raw("super.users")
    if raw is not None:
        users = set()
        for item in raw.split(";"):
            if item.strip():
                try:
                    parse_principal(item.strip())
                except ValueError:
                    raise _bad("super.users", raw, "expected principals Type:name separated by ';'") from None
                users.add(item.strip())
        fields["super_users"] = frozenset(users)
    raw = reader.raw("allow.everyone.if.no.acl.found")
    if raw is not None:
        fields["allow_everyone_if_no_acl_found"] = _boolean("allow.everyone.if.no.acl.found", raw)


def _node_identity(reader: _Reader) -> None:
    ids = {}
    for name in ("node.id", "broker.id"):
        raw = reader.raw(name)
        if raw is not None:
            ids[name] = _integer(name, raw, -1, INT_MAX)
    if len(ids) == 2 and ids["node.id"] != ids["broker.id"]:
        raise PropertiesError("node.id and broker.id must have the same value")


def _pinned(reader: _Reader) -> None:
    for name, fixed in PINNED.items():
        raw = reader.raw(name)
        if raw is None:
            continue
        if isinstance(fixed, int):
            value: int | str = _integer(name, raw, LONG_MIN, LONG_MAX, "LONG")
        else:
            value = ",".join(_list(raw))
        if value != fixed:
            what = "regroup is always node 0" if name in ("node.id", "broker.id") else f"regroup always uses {fixed}"
            reader.warnings.append(f"{name}: not supported ({what}); ignored")


# ------------------------------------------------------------------------------------------- listeners


@dataclass(frozen=True, slots=True)
class _Endpoint:
    name: str
    host: str
    port: int


def _endpoints(name: str, raw: str) -> list[_Endpoint]:
    out = []
    for entry in _list(raw):
        match = _LISTENER_RE.fullmatch(entry)
        if match is None:
            raise _bad(name, raw, f"cannot parse {entry!r} as NAME://host:port")
        listener, host, port_text = match.groups()
        if not listener.strip():
            raise _bad(name, raw, "a listener name is empty")
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise _bad(name, raw, f"port {port} outside 0..65535")
        out.append(_Endpoint(listener.strip().upper(), host, port))
    return out


def _protocol_map(reader: _Reader) -> dict[str, SecurityProtocol]:
    raw = reader.raw("listener.security.protocol.map")
    if raw is None:
        return {p.value: p for p in SecurityProtocol}
    mapping: dict[str, SecurityProtocol] = {}
    for entry in _list(raw):
        listener, colon, protocol = entry.rpartition(":")
        if not colon or not listener.strip():
            raise _bad("listener.security.protocol.map", raw, f"{entry!r} is not NAME:PROTOCOL")
        try:
            mapping_protocol = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise _bad(
                "listener.security.protocol.map", raw, f"invalid security protocol {protocol.strip()!r}"
            ) from None
        key = listener.strip().upper()
        if key in mapping:
            raise _bad("listener.security.protocol.map", raw, f"listener {key} appears twice")
        mapping[key] = mapping_protocol
    return mapping


def _check_ports(endpoints: list[_Endpoint], raw: str) -> None:
    """Kafka's rule: distinct names; distinct ports (0 excepted) unless one is IPv4 and the other IPv6."""
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise _bad("listeners", raw, "each listener must have a different name")
    by_port: dict[int, list[_Endpoint]] = {}
    for e in endpoints:
        if e.port != 0:
            by_port.setdefault(e.port, []).append(e)
    for port, same in by_port.items():
        if len(same) == 1:
            continue
        versions = sorted(_ip_version(e.host) for e in same)
        if versions != [4, 6]:
            raise _bad(
                "listeners", raw, f"listeners on port {port}: two may share a port only if one is IPv4, the other IPv6"
            )


def _ip_version(host: str) -> int:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return 0


def _listeners(reader: _Reader) -> tuple[ListenerConfig, ...]:
    protocols = _protocol_map(reader)
    controllers = {n.upper() for n in _list(reader.props.get("controller.listener.names", ""))}
    raw = reader.raw("listeners")
    advertised_raw = reader.raw("advertised.listeners")
    if raw is None:
        if advertised_raw is not None:
            raise PropertiesError("advertised.listeners needs listeners")
        return ()
    endpoints = [e for e in _endpoints("listeners", raw) if e.name not in controllers]
    if not endpoints:
        raise _bad("listeners", raw, "no listener (other than a controller listener) to open")
    _check_ports(endpoints, raw)
    advertised: dict[str, _Endpoint] = {}
    if advertised_raw is not None:
        for e in _endpoints("advertised.listeners", advertised_raw):
            if e.name in controllers:
                continue
            if e.name in advertised:
                raise _bad("advertised.listeners", advertised_raw, "each listener must have a different name")
            if e.name not in {x.name for x in endpoints}:
                raise _bad("advertised.listeners", advertised_raw, f"{e.name} is not one of the listeners")
            if e.host == "0.0.0.0":
                raise _bad("advertised.listeners", advertised_raw, "the meta-address 0.0.0.0 cannot be advertised")
            if e.port == 0:
                raise _bad("advertised.listeners", advertised_raw, "port 0 cannot be advertised")
            advertised[e.name] = e
    out = []
    for e in endpoints:
        protocol = protocols.get(e.name)
        if protocol is None:
            raise PropertiesError(
                f"no security protocol defined for listener {e.name} (listener.security.protocol.map)"
            )
        adv = advertised.get(e.name)
        config = ListenerConfig(
            name=e.name,
            host=e.host or "0.0.0.0",
            port=e.port,
            protocol=protocol,
            advertised_host=(adv.host or None) if adv else None,
            advertised_port=adv.port if adv else None,
            tls=_tls(reader, e.name, protocol) if protocol.tls else None,
        )
        if protocol.sasl:
            config = _sasl(reader, config)
        out.append(config)
    _claim_listener_settings(reader, [e.name for e in endpoints])
    return tuple(out)


def _claim_listener_settings(reader: _Reader, names: list[str]) -> None:
    """Mark the valid global and listener-prefixed settings as used, so that only unknown names warn."""
    for key in reader.props:
        for listener in names:
            prefix = _prefix(listener)
            if not key.startswith(prefix):
                continue
            rest = key[len(prefix) :]
            mechanism, _, setting = rest.partition(".")
            if (
                rest in _LISTENER_SETTINGS
                or (
                    mechanism.upper() in SASL_MECHANISMS
                    and setting in _MECHANISM_SETTINGS
                    and (setting != _CALLBACK_HANDLER or mechanism == "oauthbearer")
                )
                or (mechanism == "oauthbearer" and setting in _OAUTH_SETTINGS)
            ):
                reader.used.add(key)


# ------------------------------------------------------------------------------------------- TLS


def _store_type(reader: _Reader, listener: str, kind: str, location: Path | None) -> str:
    given = reader.listener_raw(listener, f"ssl.{kind}.type")
    if given is None:
        return "PKCS12" if location is not None and location.suffix.lower() in (".p12", ".pfx") else "PEM"
    name, raw = given
    value = raw.strip().upper()
    if value not in ("PEM", "PKCS12"):
        raise _bad(name, raw, "regroup reads PEM and PKCS12 stores (convert a JKS store with keytool)")
    return value


def _text(reader: _Reader, listener: str, name: str) -> str | None:
    given = reader.listener_raw(listener, name)
    return None if given is None or not given[1].strip() else given[1].strip()


def _path(reader: _Reader, listener: str, name: str) -> Path | None:
    text = _text(reader, listener, name)
    return None if text is None else Path(text)


def _tls(reader: _Reader, listener: str, protocol: SecurityProtocol) -> TlsSettings:
    where = f"listener {listener} ({protocol.value})"
    location = _path(reader, listener, "ssl.keystore.location")
    keystore_type = _store_type(reader, listener, "keystore", location)
    password = _text(reader, listener, "ssl.keystore.password")
    key_password = _text(reader, listener, "ssl.key.password")
    chain = _text(reader, listener, "ssl.keystore.certificate.chain")
    key = _text(reader, listener, "ssl.keystore.key")
    # Kafka's DefaultSslEngineFactory rules for a key store
    if key is not None:
        if keystore_type != "PEM":
            raise PropertiesError(f"{where}: ssl.keystore.key can be given only with ssl.keystore.type PEM")
        if chain is None:
            raise PropertiesError(f"{where}: ssl.keystore.key is given without ssl.keystore.certificate.chain")
        if location is not None:
            raise PropertiesError(f"{where}: both ssl.keystore.location and ssl.keystore.key are given")
    elif chain is not None:
        raise PropertiesError(f"{where}: ssl.keystore.certificate.chain is given without ssl.keystore.key")
    elif location is None:
        raise PropertiesError(
            f"{where} needs a key store: ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key"
        )
    if keystore_type == "PEM" and password is not None:
        raise PropertiesError(
            f"{where}: ssl.keystore.password cannot be given for a PEM key store (only ssl.key.password)"
        )
    if keystore_type == "PKCS12" and password is None:
        raise PropertiesError(f"{where}: the PKCS12 key store needs ssl.keystore.password")
    trust_location = _path(reader, listener, "ssl.truststore.location")
    truststore_type = _store_type(reader, listener, "truststore", trust_location)
    trust_certs = _text(reader, listener, "ssl.truststore.certificates")
    _text(reader, listener, "ssl.truststore.password")  # not needed: accepted and ignored
    if trust_certs is not None:
        if truststore_type != "PEM":
            raise PropertiesError(f"{where}: ssl.truststore.certificates can be given only with PEM trust stores")
        if trust_location is not None:
            raise PropertiesError(f"{where}: both ssl.truststore.location and ssl.truststore.certificates are given")
    client_auth = _client_auth(reader, listener, protocol)
    if client_auth != "none" and trust_location is None and trust_certs is None:
        raise PropertiesError(
            f"{where}: ssl.client.auth={client_auth} needs a trust store (ssl.truststore.location or "
            "ssl.truststore.certificates)"
        )
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    given = reader.listener_raw(listener, "ssl.enabled.protocols")
    if given is not None:
        protocols = tuple(_list(given[1]))
        unknown = [p for p in protocols if p not in ("TLSv1.2", "TLSv1.3")]
        if unknown or not protocols:
            raise _bad(given[0], given[1], "regroup supports TLSv1.2 and TLSv1.3")
    given = reader.listener_raw(listener, "ssl.cipher.suites")
    suites = tuple(_list(given[1])) if given is not None else ()
    rules = "DEFAULT"
    given = reader.listener_raw(listener, "ssl.principal.mapping.rules")
    if given is not None:
        rules = given[1].strip() or "DEFAULT"
        try:
            SslPrincipalMapper(rules)
        except ValueError as exc:
            raise _bad(given[0], given[1], str(exc)) from None
    return TlsSettings(
        keystore_type=keystore_type,
        keystore_location=location,
        keystore_password=password,
        certificate_chain_pem=chain,
        key_pem=key,
        key_password=key_password,
        truststore_type=truststore_type,
        truststore_location=trust_location,
        truststore_certificates_pem=trust_certs,
        client_auth=client_auth,
        enabled_protocols=protocols,
        cipher_suites=suites,
        principal_mapping_rules=rules,
    )


def _client_auth(reader: _Reader, listener: str, protocol: SecurityProtocol) -> str:
    prefixed = _prefix(listener) + "ssl.client.auth"
    if protocol is SecurityProtocol.SASL_SSL:
        # Kafka: on SASL_SSL listeners only the listener-prefixed ssl.client.auth counts
        raw = reader.raw(prefixed)
        if raw is not None:
            return str(_CHECKS["ssl.client.auth"](prefixed, raw))
        unprefixed = reader.raw("ssl.client.auth")
        if unprefixed is not None and unprefixed.strip() != "none":
            reader.warnings.append(
                f"ssl.client.auth: applies to SSL listeners only; SASL_SSL listener {listener} needs {prefixed}"
            )
        return "none"
    given = reader.listener_raw(listener, "ssl.client.auth")
    return "none" if given is None else str(_CHECKS["ssl.client.auth"](*given))


# ------------------------------------------------------------------------------------------- SASL


def _sasl(reader: _Reader, config: ListenerConfig) -> ListenerConfig:
    listener, prefix = config.name, _prefix(config.name)
    where = f"listener {listener} ({config.protocol.value})"
    given = reader.listener_raw(listener, "sasl.enabled.mechanisms")
    mechanisms = tuple(_list(given[1])) if given is not None else DEFAULT_SASL_MECHANISMS
    if given is not None:
        if not mechanisms:
            raise _bad(given[0], given[1], "names no mechanism")
        for mechanism in mechanisms:
            if mechanism not in SASL_MECHANISMS:
                raise _bad(given[0], given[1], f"{mechanism} is not supported ({', '.join(SASL_MECHANISMS)})")
    jaas: dict[str, JaasEntry] = {}
    for mechanism in mechanisms:
        name = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
        raw = reader.raw(name)
        if raw is not None:
            try:
                jaas[mechanism] = parse_jaas_entry(raw.strip())
            except JaasError as exc:
                raise PropertiesError(f"invalid value {HIDDEN} for {name}: {exc}") from None
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        users = plain_users(jaas["PLAIN"]) if "PLAIN" in jaas else {}
        if not users:
            raise PropertiesError(
                f'{where}: PLAIN is enabled but {prefix}plain.sasl.jaas.config names no user (user_NAME="password")'
            )
    oauth = _oauth(reader, listener, jaas.get("OAUTHBEARER")) if "OAUTHBEARER" in mechanisms else OAuthSettings()
    return ListenerConfig(
        name=config.name,
        host=config.host,
        port=config.port,
        protocol=config.protocol,
        advertised_host=config.advertised_host,
        advertised_port=config.advertised_port,
        tls=config.tls,
        sasl_mechanisms=mechanisms,
        plain_users=users,
        oauth=oauth,
        max_reauth_ms=_reauth(reader, listener, mechanisms),
    )


def _reauth(reader: _Reader, listener: str, mechanisms: tuple[str, ...]) -> int:
    values: dict[str, int] = {}
    for mechanism in mechanisms:
        own = f"{_prefix(listener)}{mechanism.lower()}.connections.max.reauth.ms"
        raw = reader.raw(own)
        given = (own, raw) if raw is not None else reader.listener_raw(listener, "connections.max.reauth.ms")
        value = 0 if given is None else int(_CHECKS["connections.max.reauth.ms"](*given))
        values[mechanism] = max(value, 0)  # Kafka: not positive means no session lifetime
    distinct = set(values.values())
    if len(distinct) > 1:
        raise PropertiesError(
            f"listener {listener}: regroup takes one connections.max.reauth.ms per listener, but its mechanisms "
            f"have {', '.join(f'{m}={v}' for m, v in values.items())}"
        )
    return distinct.pop() if distinct else 0


def _oauth_raw(reader: _Reader, listener: str, name: str) -> tuple[str, str] | None:
    """An OAUTHBEARER setting of ``listener``: Kafka reads ``listener.name.<l>.oauthbearer.<name>`` first, then
    the listener-prefixed and the global forms."""
    key = f"{_prefix(listener)}oauthbearer.{name}"
    value = reader.raw(key)
    return (key, value) if value is not None else reader.listener_raw(listener, name)


def _oauth_text(reader: _Reader, listener: str, name: str) -> str | None:
    given = _oauth_raw(reader, listener, name)
    return None if given is None or not given[1].strip() else given[1].strip()


def _oauth(reader: _Reader, listener: str, jaas: JaasEntry | None) -> OAuthSettings:
    jwks_path = None
    given = _oauth_raw(reader, listener, "sasl.oauthbearer.jwks.endpoint.url")
    if given is not None and given[1].strip():
        jwks_path = _file_url(*given)
    handler_name = f"{_prefix(listener)}oauthbearer.{_CALLBACK_HANDLER}"
    handler = reader.raw(handler_name)
    if handler is not None and handler.strip():
        secured = _OAUTH_HANDLERS.get(handler.strip())
        if secured is None:
            raise _bad(handler_name, handler, f"regroup has Kafka's {_OAUTH_VALIDATOR} and the unsecured validator")
        if secured and jwks_path is None:
            raise PropertiesError(f"{handler_name}: the JWT validator needs sasl.oauthbearer.jwks.endpoint.url")
        if not secured and jwks_path is not None:
            raise PropertiesError(
                f"{handler_name}: the unsecured validator takes no sasl.oauthbearer.jwks.endpoint.url"
            )
    issuer = _oauth_text(reader, listener, "sasl.oauthbearer.expected.issuer")
    given = _oauth_raw(reader, listener, "sasl.oauthbearer.expected.audience")
    audience = tuple(_list(given[1])) if given is not None else ()
    given = _oauth_raw(reader, listener, "sasl.oauthbearer.clock.skew.seconds")
    skew = 30 if given is None else int(_CHECKS["sasl.oauthbearer.clock.skew.seconds"](*given))
    sub_claim = _oauth_text(reader, listener, "sasl.oauthbearer.sub.claim.name") or "sub"
    scope_claim = _oauth_text(reader, listener, "sasl.oauthbearer.scope.claim.name") or "scope"
    options = jaas.options if jaas is not None else {}
    jaas_name = f"{_prefix(listener)}oauthbearer.sasl.jaas.config"
    unsecured_skew = 0
    text = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
    if text:
        if not _INTEGER_RE.fullmatch(text) or not 0 <= int(text) <= INT_MAX:
            raise PropertiesError(
                f"invalid value {HIDDEN} for {jaas_name}: unsecuredValidatorAllowableClockSkewMs must be a "
                "non-negative integer"
            )
        unsecured_skew = int(text)
    return OAuthSettings(
        jwks_path=jwks_path,
        expected_issuer=issuer,
        expected_audience=audience,
        clock_skew_s=skew,
        sub_claim=sub_claim,
        scope_claim=scope_claim,
        unsecured_required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
        unsecured_clock_skew_ms=unsecured_skew,
        unsecured_principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
        unsecured_scope_claim=options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
    )


def _file_url(name: str, raw: str) -> Path:
    url = urlparse(raw.strip())
    if url.scheme.lower() != "file":
        raise _bad(name, raw, "only file: URLs are supported (a JWKS file on this machine)")
    if url.netloc not in ("", "localhost") or not url.path:
        raise _bad(name, raw, "expected file:/path or file:///path")
    return Path(unquote(url.path))
