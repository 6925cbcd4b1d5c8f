"""What every handler module shares: building the response of the request's version, and ``guarded``,
which turns any failure inside a handler into that API's error response (the ``to_error_response`` of the
anchor design) so that a bad request or a bug never takes the server down."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.classic import ClientInfo
from regroup.server.api import Handler, RequestContext
from regroup.server.codec import response_class
from regroup.server.entities import build
from regroup.server.errors import CoordinatorUnavailable, RequestDropped

log = logging.getLogger("regroup.server.handlers")

#: ``error_response(ctx, request, code)``: the API's response carrying ``code`` where the API puts errors
ErrorResponse = Callable[[RequestContext, Any, ErrorCode], Any]


def respond(ctx: RequestContext, /, **values: Any) -> Any:
    """The kio response entity of ``ctx``'s API and version, from version-agnostic values (``throttle_time``
    defaults to 0: this server never throttles)."""
    values.setdefault("throttle_time", 0)
    return build(response_class(ctx.api_key, ctx.api_version), **values)


def client_info(ctx: RequestContext) -> ClientInfo:
    """KIP-40's client id and host as Kafka reports them: a null client id is "", the host is
    ``InetAddress.toString()`` of the peer, i.e. ``/127.0.0.1``."""
    return ClientInfo(client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}" if ctx.client_host else "")


def guarded(error_response: ErrorResponse) -> Callable[[Handler], Handler]:
    """Map handler failures to ``error_response``: ``ApiError`` → its code, a stopped coordinator →
    COORDINATOR_NOT_AVAILABLE, anything unexpected → UNKNOWN_SERVER_ERROR (logged with its traceback).
    ``RequestDropped`` passes through: that connection is closed instead."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def run(broker: Any, ctx: RequestContext, request: Any) -> Any:
            try:
                return await handler(broker, ctx, request)
            except RequestDropped:
                raise
            except ApiError as exc:
                return error_response(ctx, request, exc.code)
            except CoordinatorUnavailable:
                return error_response(ctx, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            except Exception:
                log.exception(
                    "api key %d v%d from %s failed", ctx.api_key, ctx.api_version, ctx.client_id or ctx.client_host
                )
                return error_response(ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)

        return run

    return decorate
