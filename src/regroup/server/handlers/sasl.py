"""SaslHandshake (v0-1) and SaslAuthenticate (v0-2): a connection's SASL exchange (KIP-43, KIP-152, KIP-368),
run by the connection's ``Session`` (``network/session.py``).

No ACL is checked: these requests are how a client authenticates, before it has a principal. A handshake
naming a mechanism the listener does not enable gets UNSUPPORTED_SASL_MECHANISM with the enabled ones; a
failed exchange gets SASL_AUTHENTICATION_FAILED with the mechanism's message after Kafka's
``connection.failed.authentication.delay.ms`` (100 ms), and one INFO line naming the peer, the listener, the
mechanism and the user the client claimed (never a password or a token). After either, the connection is
closed once the response is written. SaslAuthenticate v1+ carries the session lifetime (KIP-368).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from regroup.model.errors import ErrorCode
from regroup.network.session import Session
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.handlers._common import respond

log = logging.getLogger("regroup.server.sasl")

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
#: Kafka's connection.failed.authentication.delay.ms default: a failed authentication's response waits this long
FAILED_AUTHENTICATION_DELAY_S: Final = 0.1
#: the longest error message SaslAuthenticate answers with
MAX_MESSAGE_CHARS: Final = 1024


def _session(ctx: RequestContext) -> Session:
    session = ctx.session
    assert isinstance(session, Session)
    return session


def _handshake_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, mechanisms=[])


async def sasl_handshake(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    session = _session(ctx)
    error = session.handshake(request.mechanism, ctx.api_version)
    if error is not ErrorCode.NONE:
        log.info(
            "authentication failed peer=%s listener=%s mechanism=%.64r: %.1024s",
            ctx.client_host,
            session.listener,
            request.mechanism,
            session.failure or error.name,
        )
    return respond(ctx, error_code=error, mechanisms=list(session.mechanisms))


def _bounded(message: str | None) -> str | None:
    """A mechanism's message as the client gets it: messages may quote what the client sent (a scope, a
    principal), so they are cut to ``MAX_MESSAGE_CHARS`` (every version's string must stay encodable)."""
    if message is None or len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[: MAX_MESSAGE_CHARS - 1] + "…"


def _log_failure(ctx: RequestContext, session: Session) -> None:
    log.info(
        "authentication failed peer=%s listener=%s mechanism=%s user=%.256r: %.1024s",
        ctx.client_host,
        session.listener,
        session.mechanism,
        session.user,
        session.failure,
    )


def _authenticate_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, error_message=None, auth_bytes=b"")


async def sasl_authenticate(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    session = _session(ctx)
    step = session.authenticate(request.auth_bytes)
    if step.rejected:
        _log_failure(ctx, session)
    elif step.error is not ErrorCode.NONE:
        if not session.rejected:  # (a rejection already logged ends here)
            _log_failure(ctx, session)
        session.hold()  # later requests wait: the connection closes after this response
        try:
            await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_S)
        finally:
            session.release()
    elif session.authenticated:
        log.debug("connection %d authenticated as %s", ctx.connection_id, session.principal)
    return respond(
        ctx,
        error_code=step.error,
        error_message=_bounded(step.message),
        auth_bytes=step.auth_bytes,
        session_lifetime=step.session_lifetime_ms,
    )


SPECS = [
    ApiSpec(SASL_HANDSHAKE, 0, 1, sasl_handshake, _handshake_error),
    ApiSpec(SASL_AUTHENTICATE, 0, 2, sasl_authenticate, _authenticate_error),
]
