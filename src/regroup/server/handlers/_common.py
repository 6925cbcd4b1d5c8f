"""What the group handler modules share: building the response of the request's version and KIP-40's client
identity. (Failures inside a handler become the API's error response in the dispatcher, through each
``ApiSpec``'s ``error_response``.)"""

from __future__ import annotations

import sys
import typing
from functools import cache
from typing import Any

from regroup.model.errors import ErrorCode
from regroup.network.codec import response_class
from regroup.protocol.classic import ClientInfo
from regroup.server.api import RequestContext
from regroup.server.entities import build


def respond(ctx: RequestContext, /, **values: Any) -> Any:
    """The kio response entity of ``ctx``'s API and version, from version-agnostic values (``throttle_time``
    defaults to 0: this server never throttles)."""
    values.setdefault("throttle_time", 0)
    return build(response_class(ctx.api_key, ctx.api_version), **values)


def client_info(ctx: RequestContext) -> ClientInfo:
    """KIP-40's client id and host as Kafka reports them: a null client id is "", the host is
    ``InetAddress.toString()`` of the peer, i.e. ``/127.0.0.1``."""
    return ClientInfo(client_id=ctx.client_id or "", client_host=f"/{ctx.client_host}" if ctx.client_host else "")


#: Kafka's default texts (``Errors.message()``) for the errors the KIP-848 and KIP-932 heartbeats and describes
#: answer outside the group logic (the group logic's own errors carry the core's message)
DEFAULT_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library or the message was "
        "sent to an incompatible broker. See the broker logs for more details."
    ),
}


@cache
def assignment_class(api_key: int, version: int) -> type[Any]:
    """The kio ``Assignment`` entity of that API's response (a struct, not an array, so ``build`` cannot infer
    it): ConsumerGroupHeartbeat/Describe's and ShareGroupHeartbeat/Describe's."""
    cls = response_class(api_key, version)
    return typing.cast(type[Any], sys.modules[cls.__module__].Assignment)
