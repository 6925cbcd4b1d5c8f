"""One connection's authentication: who it is (its principal), what it may send now, and its SASL exchange, as
Kafka's broker runs them (``SaslServerAuthenticator``, KIP-152 and KIP-368).

* On a PLAINTEXT or SSL listener a connection is authenticated from the start: ``User:ANONYMOUS``, or on SSL
  with a client certificate the certificate's subject mapped by ``ssl.principal.mapping.rules``.
* On a SASL listener it starts unauthenticated. ApiVersions and SaslHandshake are answered; anything else closes
  the connection. A handshake naming an enabled mechanism starts the exchange: after SaslHandshake v1 the
  client's tokens come in SaslAuthenticate requests, after v0 as raw length-prefixed tokens (``raw_token``).
  Only SaslAuthenticate (or raw tokens) is accepted until the exchange ends. An unsupported mechanism, a
  failed exchange or a request out of turn fails the session: its response is sent, then the connection is
  closed.
* Re-authentication (KIP-368): a successful exchange's session lifetime is the shorter of the listener's
  ``connections.max.reauth.ms`` and the credential's remaining life (an OAUTHBEARER token's expiry); none if
  neither is set. SaslAuthenticate v1+ tells the client. Once it lapses, any request but SaslHandshake closes
  the connection. A SaslHandshake v1 on an authenticated connection starts a re-authentication with the same
  mechanism, which must end with the same principal.

A shell module without I/O: the connection asks ``check`` before each request; the SaslHandshake and
SaslAuthenticate handlers (``handlers/sasl.py``) call ``handshake`` and ``authenticate``. Clocks are injected.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from regroup.model.errors import ErrorCode
from regroup.security.acl import ANONYMOUS
from regroup.security.sasl import Complete, Continue, Failed, SaslServer

__all__ = ["AuthStep", "Session", "SessionState"]

API_VERSIONS: Final = 18
SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36


class SessionState(enum.Enum):
    HANDSHAKE = "handshake"  # SASL, before a mechanism is chosen
    AUTHENTICATE = "authenticate"  # tokens in SaslAuthenticate requests
    RAW_TOKENS = "raw tokens"  # tokens as raw frames (after SaslHandshake v0)
    AUTHENTICATED = "authenticated"
    FAILED = "failed"  # the last response is being sent; the connection closes after it


@dataclass(frozen=True, slots=True)
class AuthStep:
    """SaslAuthenticate's answer: error code and message, the server's bytes, the session lifetime (KIP-368)."""

    error: ErrorCode
    message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0
    #: the credential was rejected and this is the mechanism's last challenge (OAUTHBEARER's error): the
    #: exchange fails at the client's next token, but some clients never send it, so this is the moment to log
    rejected: bool = False


#: builds the server side of one exchange of a mechanism enabled on the listener
MechanismFactory = Callable[[str], SaslServer]


class Session:
    """The authentication of one connection."""

    def __init__(
        self,
        *,
        listener: str,
        principal: str = ANONYMOUS,
        mechanisms: tuple[str, ...] = (),
        new_exchange: MechanismFactory | None = None,
        max_reauth_ms: int = 0,
        monotonic_ms: Callable[[], float],
        wall_ms: Callable[[], int],
    ) -> None:
        self.listener = listener
        self.principal = principal
        self.mechanisms = mechanisms
        self._new_exchange = new_exchange
        self._max_reauth_ms = max_reauth_ms
        self._monotonic_ms = monotonic_ms
        self._wall_ms = wall_ms
        self.sasl = new_exchange is not None
        self.state = SessionState.HANDSHAKE if self.sasl else SessionState.AUTHENTICATED
        self.mechanism: str | None = None
        self.user: str | None = None  # the user name the client claimed in its last exchange (for the log)
        self.failure: str | None = None  # why the session failed (for the log)
        self._exchange: SaslServer | None = None
        self._expires_at: float | None = None  # monotonic ms; None: the session does not expire
        self._reauthenticating = False
        self._bad_mechanism: str | None = None  # a re-authentication that asked for another mechanism
        self._fail_next: str | None = None  # the exchange failed but sent a last challenge (OAUTHBEARER)
        #: requests being answered that hold the connection's later requests until they let go (``hold``)
        self._holds = 0
        #: called when the last hold is let go (the connection goes on with the requests it held)
        self.on_released: Callable[[], None] | None = None

    @property
    def busy(self) -> bool:
        """A request being answered holds the connection's later requests: none is started meanwhile."""
        return self._holds > 0

    def hold(self) -> None:
        """Hold the connection's later requests until ``release``: a failed exchange step whose response waits
        Kafka's delay; a Produce appending over several turns of the event loop, so that the requests behind it
        see all of its records, as they would in Kafka, which handles a connection's requests one at a time."""
        self._holds += 1

    def release(self) -> None:
        self._holds -= 1
        if self._holds == 0 and self.on_released is not None:
            self.on_released()

    @property
    def authenticated(self) -> bool:
        return self.state is SessionState.AUTHENTICATED

    @property
    def rejected(self) -> bool:
        """The credential was rejected with a last challenge; the exchange fails at the next token."""
        return self._fail_next is not None

    def expired(self) -> bool:
        return self._expires_at is not None and self._monotonic_ms() > self._expires_at

    def check(self, api_key: int) -> str | None:
        """None when a request of ``api_key`` may be handled now; else why the connection must close."""
        state = self.state
        if state is SessionState.AUTHENTICATED:
            if api_key != SASL_HANDSHAKE and self.expired():
                return "its session expired and it did not re-authenticate (connections.max.reauth.ms)"
            return None
        if state is SessionState.HANDSHAKE:
            if api_key in (API_VERSIONS, SASL_HANDSHAKE):
                return None
            return f"request of API {api_key} before SASL authentication (only ApiVersions and SaslHandshake)"
        if state is SessionState.AUTHENTICATE:
            if api_key == SASL_AUTHENTICATE:
                return None
            return f"request of API {api_key} during SASL authentication"
        if state is SessionState.RAW_TOKENS:
            return "a Kafka request where a SASL token was expected"
        return "its authentication failed"

    # ------------------------------------------------------------------------------ the exchange
    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """SaslHandshake: start an exchange of ``mechanism`` (or a re-authentication)."""
        if not self.sasl:
            return ErrorCode.ILLEGAL_SASL_STATE  # (Kafka's answer on a listener without SASL)
        if self.state is SessionState.AUTHENTICATED:
            if version < 1:
                self.fail(f"a SaslHandshake v{version} cannot start a re-authentication")
                return ErrorCode.ILLEGAL_SASL_STATE
            self._reauthenticating = True
            if mechanism != self.mechanism:
                self._bad_mechanism = mechanism
                self.state = SessionState.AUTHENTICATE
                return ErrorCode.NONE if mechanism in self.mechanisms else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        elif self.state is not SessionState.HANDSHAKE:
            self.fail("an unexpected SaslHandshake")
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            self.fail(f"unsupported SASL mechanism {mechanism[:64]!r}")
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert self._new_exchange is not None
        self.mechanism = mechanism
        self._exchange = self._new_exchange(mechanism)
        self.state = SessionState.AUTHENTICATE if version >= 1 else SessionState.RAW_TOKENS
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> AuthStep:
        """SaslAuthenticate: the client's next token."""
        if self.state is not SessionState.AUTHENTICATE:
            self.fail("a SaslAuthenticate out of turn")
            return AuthStep(ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request")
        if self._bad_mechanism is not None:
            reason = (
                f"SASL mechanism {self._bad_mechanism[:64]!r} requested by client during re-authentication is not "
                f"the mechanism {self.mechanism} of the original authentication"
            )
            self.fail(reason)
            return AuthStep(ErrorCode.SASL_AUTHENTICATION_FAILED, reason)
        return self._step(token)

    def raw_token(self, token: bytes) -> bytes | None:
        """A raw token after SaslHandshake v0: the server's reply, or None when the connection must close."""
        if self.state is not SessionState.RAW_TOKENS:
            return None
        step = self._step(token)
        if step.error is not ErrorCode.NONE:
            return None
        return step.auth_bytes

    def _step(self, token: bytes) -> AuthStep:
        if self._fail_next is not None:
            reason = self._fail_next
            self.fail(reason)
            return AuthStep(ErrorCode.SASL_AUTHENTICATION_FAILED, reason)
        exchange = self._exchange
        assert exchange is not None
        step = exchange.evaluate(token, self._wall_ms())
        if isinstance(step, Continue):
            return AuthStep(ErrorCode.NONE, auth_bytes=step.challenge)
        if isinstance(step, Failed):
            self.user = step.user or self.user
            if step.challenge is not None:  # sent now; the client's acknowledgement then fails the exchange
                self._fail_next = self.failure = step.reason
                return AuthStep(ErrorCode.NONE, auth_bytes=step.challenge, rejected=True)
            self.fail(step.reason)
            return AuthStep(ErrorCode.SASL_AUTHENTICATION_FAILED, step.reason)
        assert isinstance(step, Complete)
        principal = f"User:{step.user}"
        self.user = step.user
        if self._reauthenticating and principal != self.principal:
            reason = f"Cannot change principals during re-authentication from {self.principal}: {principal}"
            self.fail(reason)
            return AuthStep(ErrorCode.SASL_AUTHENTICATION_FAILED, reason)
        self.principal = principal
        self.state = SessionState.AUTHENTICATED
        self._exchange = None
        self._reauthenticating = False
        lifetime = self._lifetime_ms(step.expires_ms)
        self._expires_at = None if lifetime is None else self._monotonic_ms() + lifetime
        return AuthStep(ErrorCode.NONE, auth_bytes=step.challenge, session_lifetime_ms=lifetime or 0)

    def _lifetime_ms(self, credential_expires_ms: int | None) -> int | None:
        """KIP-368: the shorter of connections.max.reauth.ms and the credential's remaining life, or None."""
        limits = []
        if self._max_reauth_ms > 0:
            limits.append(self._max_reauth_ms)
        if credential_expires_ms is not None:
            limits.append(max(0, credential_expires_ms - self._wall_ms()))
        return min(limits) if limits else None

    def fail(self, reason: str) -> None:
        """End the session: the connection closes (after the response being built, if any)."""
        self.state = SessionState.FAILED
        self.failure = reason
        self._exchange = None
