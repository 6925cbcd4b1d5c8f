"""What the group handler modules share: building the response of the request's version and KIP-40's client
identity. (Failures inside a handler become the API's error response in the dispatcher, through each
``ApiSpec``'s ``error_response``.)"""

from __future__ import annotations

from typing import Any

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
