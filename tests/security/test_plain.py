"""SASL/PLAIN's server side as Kafka's ``PlainSaslServer`` runs it (``security/plain.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regroup.security.plain import PlainServer
from regroup.security.sasl import Complete, Continue, Failed, SaslServer

USERS = {"alice": "alice-secret", "bob": "b\u00f6b-p\u00e4ss"}


def evaluate(token: bytes) -> Complete | Continue | Failed:
    server: SaslServer = PlainServer(USERS)
    assert server.mechanism == "PLAIN"
    return server.evaluate(token, 0)


def test_good_password() -> None:
    assert evaluate(b"\x00alice\x00alice-secret") == Complete("alice")
    assert evaluate("bob\x00bob\x00b\u00f6b-p\u00e4ss".encode()) == Complete("bob")


@pytest.mark.parametrize(
    ("token", "reason", "user"),
    [
        (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password", "alice"),
        (b"\x00carol\x00alice-secret", "Authentication failed: Invalid username or password", "carol"),
        (b"\x00\x00alice-secret", "Authentication failed: username not specified", None),
        (b"\x00alice\x00", "Authentication failed: password not specified", "alice"),
        (
            b"bob\x00alice\x00alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
            "alice",
        ),
        (b"alice\x00alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2", None),
        (b"a\x00b\x00c\x00d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4", None),
        (b"\x00alice\x00\xff\xfe", "Invalid SASL/PLAIN response: not UTF-8", None),
    ],
)
def test_failures(token: bytes, reason: str, user: str | None) -> None:
    assert evaluate(token) == Failed(reason, user)


def test_one_message_only() -> None:
    server = PlainServer(USERS)
    assert isinstance(server.evaluate(b"\x00alice\x00alice-secret", 0), Complete)
    assert isinstance(server.evaluate(b"\x00alice\x00alice-secret", 0), Failed)


def test_reasons_never_hold_the_password() -> None:
    for token in (b"\x00alice\x00hunter2", b"bob\x00alice\x00hunter2", b"\x00nobody\x00hunter2"):
        step = evaluate(token)
        assert isinstance(step, Failed) and "hunter2" not in step.reason


@given(st.binary(max_size=300))
def test_any_bytes_give_a_step(token: bytes) -> None:
    step = evaluate(token)
    assert isinstance(step, Complete | Failed)
    if isinstance(step, Complete):
        assert token.split(b"\x00")[1:] == [step.user.encode(), USERS[step.user].encode()]
