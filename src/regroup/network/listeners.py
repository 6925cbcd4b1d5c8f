"""What the server listens on: each listener's name, address, security protocol and the settings of its TLS
and SASL (Kafka's ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map`` and the
``ssl.*``, ``sasl.*`` and ``listener.name.<listener>.*`` settings, read by ``server/properties.py``).

Plain values only: ``network/tls.py`` turns ``TlsSettings`` into an ``ssl.SSLContext``, ``network/session.py``
runs a listener's SASL exchanges."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: how a setting is given for one listener: ``listener.name.<listener in lower case>.<setting>``
LISTENER_PREFIX = "listener.name."
#: Kafka's PASSWORD settings of a listener (passwords, keys, JAAS configurations): never shown or logged
SECRET_SETTINGS = (
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "sasl.jaas.config",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSettings:
    """A listener's TLS, from Kafka's ``ssl.*`` names. PEM text (``*_pem``) or files (``*_location``); a key
    store may also be PKCS12 (``keystore_type``)."""

    keystore_type: str = "PEM"  # PEM or PKCS12
    keystore_location: Path | None = None  # PEM: the key and its certificate chain in one file; PKCS12: the file
    keystore_password: str | None = None  # PKCS12's password
    certificate_chain_pem: str | None = None  # ssl.keystore.certificate.chain
    key_pem: str | None = None  # ssl.keystore.key
    key_password: str | None = None  # ssl.key.password: the private key's passphrase
    truststore_type: str = "PEM"
    truststore_location: Path | None = None
    truststore_certificates_pem: str | None = None  # ssl.truststore.certificates
    client_auth: str = "none"  # ssl.client.auth: none, requested, required
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # ssl.enabled.protocols
    cipher_suites: tuple[str, ...] = ()  # ssl.cipher.suites; empty: OpenSSL's defaults
    principal_mapping_rules: str = "DEFAULT"  # ssl.principal.mapping.rules


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthSettings:
    """OAUTHBEARER's validation: Kafka's unsecured tokens (no ``jwks``) or signed JWTs checked against a JWKS file
    (``sasl.oauthbearer.jwks.endpoint.url`` naming a ``file:`` URL), issuer, audience and expiry."""

    jwks_path: Path | None = None
    expected_issuer: str | None = None  # sasl.oauthbearer.expected.issuer
    expected_audience: tuple[str, ...] = ()  # sasl.oauthbearer.expected.audience
    clock_skew_s: int = 30  # sasl.oauthbearer.clock.skew.seconds
    sub_claim: str = "sub"  # sasl.oauthbearer.sub.claim.name
    scope_claim: str = "scope"  # sasl.oauthbearer.scope.claim.name
    #: the unsecured validator's options (unsecuredValidatorRequiredScope, ...AllowableClockSkewMs, ...)
    unsecured_required_scope: tuple[str, ...] = ()
    unsecured_clock_skew_ms: int = 0
    unsecured_principal_claim: str = "sub"
    unsecured_scope_claim: str = "scope"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerConfig:
    """One listener: where it listens, what it advertises, how clients secure and authenticate on it."""

    name: str  # the listener's name, e.g. PLAINTEXT, SASL_SSL, CLIENT (upper case, as Kafka normalises it)
    host: str
    port: int  # 0: any free port
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    advertised_host: str | None = None  # None: the listen host (or this machine's name for 0.0.0.0)
    advertised_port: int | None = None  # None: the port listened on
    tls: TlsSettings | None = None  # set exactly when protocol.tls
    sasl_mechanisms: tuple[str, ...] = ()  # sasl.enabled.mechanisms of this listener (SASL protocols only)
    #: PLAIN's users: name -> password, from the listener's JAAS config (``user_NAME="password"``)
    plain_users: Mapping[str, str] = field(default_factory=dict)
    oauth: OAuthSettings = field(default_factory=OAuthSettings)
    #: connections.max.reauth.ms for this listener (0: sessions do not expire unless their credential does)
    max_reauth_ms: int = 0


def default_listener(host: str = "127.0.0.1", port: int = 9092) -> ListenerConfig:
    """``regroup serve`` without a configuration file: one PLAINTEXT listener."""
    return ListenerConfig(name="PLAINTEXT", host=host, port=port)
