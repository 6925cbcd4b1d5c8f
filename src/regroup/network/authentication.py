"""What one listener needs to authenticate its connections: its TLS context, the mechanisms it enables and
how each exchange is built (PLAIN's users from the listener's JAAS config, SCRAM's credentials from the
broker's store, OAUTHBEARER's validator), and the principal of a TLS client certificate
(``ssl.principal.mapping.rules``). ``new_session`` gives each accepted connection its ``Session``.

Built once per listener at start-up; anything unusable (a key store that does not load, a JWKS file that cannot
be read) is a ``SecurityConfigError`` with one line, and the server does not start."""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import time
from collections.abc import Callable
from typing import Any

from regroup.network.listeners import ListenerConfig, OAuthSettings
from regroup.network.session import Session
from regroup.network.tls import TlsConfigError, server_context
from regroup.security.acl import ANONYMOUS
from regroup.security.oauthbearer import JwksValidator, OAuthBearerServer, UnsecuredValidator
from regroup.security.plain import PlainServer
from regroup.security.principal import NoMatchingRuleError, SslPrincipalMapper, tls_principal
from regroup.security.sasl import SaslServer
from regroup.security.scram import ScramCredential, ScramServer, mechanism_named

__all__ = ["ListenerSecurity", "ScramLookup", "SecurityConfigError"]

#: (mechanism name, user) -> that user's credential for the mechanism, or None
ScramLookup = Callable[[str, str], ScramCredential | None]


class SecurityConfigError(ValueError):
    """A listener's security settings cannot be used (one line, no secret)."""


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _nonce() -> str:
    return secrets.token_urlsafe(24)


class ListenerSecurity:
    def __init__(self, config: ListenerConfig, scram: ScramLookup | None = None) -> None:
        self.config = config
        self.name = config.name
        self._scram = scram
        self.ssl_context: ssl.SSLContext | None = None
        self._mapper: SslPrincipalMapper | None = None
        if config.protocol.tls:
            if config.tls is None:
                raise SecurityConfigError(f"listener {config.name}: {config.protocol.value} needs ssl.* settings")
            try:
                self.ssl_context = server_context(config.tls, config.name)
                self._mapper = SslPrincipalMapper(config.tls.principal_mapping_rules)
            except (TlsConfigError, ValueError) as exc:
                raise SecurityConfigError(str(exc)) from None
        self._oauth: UnsecuredValidator | JwksValidator | None = None
        if config.protocol.sasl and "OAUTHBEARER" in config.sasl_mechanisms:
            self._oauth = _oauth_validator(config.name, config.oauth)

    def new_session(self, transport: asyncio.Transport) -> Session:
        """The authentication of a connection just accepted on this listener."""
        config = self.config
        if config.protocol.sasl:
            return Session(
                listener=config.name,
                mechanisms=config.sasl_mechanisms,
                new_exchange=self._exchange,
                max_reauth_ms=config.max_reauth_ms,
                monotonic_ms=_monotonic_ms,
                wall_ms=_wall_ms,
            )
        try:
            principal = self._tls_principal(transport)
        except NoMatchingRuleError:
            session = Session(listener=config.name, monotonic_ms=_monotonic_ms, wall_ms=_wall_ms)
            session.fail("no ssl.principal.mapping.rules rule maps its certificate's subject")
            return session
        return Session(listener=config.name, principal=principal, monotonic_ms=_monotonic_ms, wall_ms=_wall_ms)

    def _tls_principal(self, transport: asyncio.Transport) -> str:
        """An SSL listener's principal: the client certificate's subject, mapped; ANONYMOUS without one."""
        if self._mapper is None:
            return ANONYMOUS
        cert = transport.get_extra_info("peercert")
        return tls_principal(cert.get("subject") if isinstance(cert, dict) else None, self._mapper)

    def _exchange(self, mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainServer(self.config.plain_users)
        scram = mechanism_named(mechanism)
        if scram is not None:
            store = self._scram

            def lookup(user: str) -> ScramCredential | None:
                return None if store is None else store(mechanism, user)

            return ScramServer(scram, lookup, _nonce)
        if mechanism == "OAUTHBEARER" and self._oauth is not None:
            return OAuthBearerServer(self._oauth)
        raise SecurityConfigError(f"listener {self.name}: mechanism {mechanism} is not served")  # (never enabled)


def _oauth_validator(listener: str, settings: OAuthSettings) -> UnsecuredValidator | JwksValidator:
    if settings.jwks_path is None:
        return UnsecuredValidator(
            principal_claim=settings.unsecured_principal_claim,
            scope_claim=settings.unsecured_scope_claim,
            required_scope=settings.unsecured_required_scope,
            clock_skew_ms=settings.unsecured_clock_skew_ms,
        )
    try:
        jwks: Any = json.loads(settings.jwks_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SecurityConfigError(
            f"listener {listener}: cannot read the JWKS file {settings.jwks_path}: {exc.strerror or exc}"
        ) from None
    except ValueError:
        raise SecurityConfigError(f"listener {listener}: the JWKS file {settings.jwks_path} is not JSON") from None
    try:
        return JwksValidator(
            jwks,
            expected_issuer=settings.expected_issuer,
            expected_audience=settings.expected_audience,
            clock_skew_s=settings.clock_skew_s,
            sub_claim=settings.sub_claim,
            scope_claim=settings.scope_claim,
        )
    except ValueError as exc:
        raise SecurityConfigError(f"listener {listener}: the JWKS file {settings.jwks_path}: {exc}") from None
