"""The server side of one SASL exchange, whatever its mechanism: each client token is evaluated into the
next step, a challenge to send back (``Continue``), the end of a successful exchange (``Complete``: the
authenticated user name, the last challenge, and when the credential expires if it does) or a failure
(``Failed``: a reason safe to log and to send, never a secret).

Every mechanism (``plain.py``, ``scram.py``, ``oauthbearer.py``) implements ``SaslServer``; one instance serves
one exchange and is dropped after it ends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Continue:
    """The exchange goes on: send ``challenge``, evaluate the client's next token."""

    challenge: bytes


@dataclass(frozen=True, slots=True)
class Complete:
    """Authenticated as ``user`` (the principal's name). ``challenge`` is the last server message (empty for
    PLAIN); ``expires_ms`` is the wall-clock time the credential stops being valid (an OAUTHBEARER token's
    ``exp``), None when it does not expire."""

    user: str
    challenge: bytes = b""
    expires_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The exchange failed. ``reason`` is one line for the client's error message and the server's log;
    ``user`` is the user name the client claimed, when it got that far (logged, never a password).
    ``challenge``: a last message some mechanisms send before failing (OAUTHBEARER's error JSON), else None."""

    reason: str
    user: str | None = None
    challenge: bytes | None = None


SaslStep = Continue | Complete | Failed


class SaslServer(Protocol):
    """One server-side exchange of one mechanism."""

    @property
    def mechanism(self) -> str:
        """The mechanism's IANA name: ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``OAUTHBEARER``."""
        ...

    def evaluate(self, token: bytes, now_ms: int) -> SaslStep:
        """The step after the client's ``token``. After ``Complete`` or ``Failed`` the exchange is over."""
        ...
