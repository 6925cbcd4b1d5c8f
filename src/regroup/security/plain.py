"""SASL/PLAIN's server side (RFC 4616), as Kafka's ``PlainSaslServer`` runs it: one client message
``authzid NUL authcid NUL passwd`` (UTF-8), checked against the listener's users (``user_NAME="password"`` of
its JAAS config, ``jaas.plain_users``).

Kafka's checks, in Kafka's order and with its messages: exactly three NUL-separated parts; a user name and a
password that are not empty; the password equal to the user's (compared in constant time; a user that does not
exist fails the same way, after the same comparison); an authorization id that is empty or the user name.
No reason ever holds the password."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final

from regroup.security.sasl import Complete, Failed, SaslStep

__all__ = ["MECHANISM", "PlainServer"]

MECHANISM: Final = "PLAIN"
#: compared against when the user does not exist, so both failures take the same path
_NO_PASSWORD: Final = b"\x00" * 32


class PlainServer:
    """The server side of one PLAIN exchange over ``users`` (name -> password)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._done = False

    @property
    def mechanism(self) -> str:
        return MECHANISM

    def evaluate(self, token: bytes, now_ms: int) -> SaslStep:
        if self._done:
            return Failed("Authentication failed: the PLAIN exchange is already over")
        self._done = True
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            return Failed("Invalid SASL/PLAIN response: not UTF-8")
        parts = text.split("\x00", 3)
        if len(parts) != 3:
            return Failed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        if not user:
            return Failed("Authentication failed: username not specified")
        if not password:
            return Failed("Authentication failed: password not specified", user)
        expected = self._users.get(user)
        given = password.encode("utf-8")
        matches = hmac.compare_digest(given, _NO_PASSWORD if expected is None else expected.encode("utf-8"))
        if expected is None or not matches:
            return Failed("Authentication failed: Invalid username or password", user)
        if authzid and authzid != user:
            return Failed(
                "Authentication failed: Client requested an authorization id that is different from username", user
            )
        return Complete(user)
