"""From a decoded request to the bytes of its response: finds the handler, builds the ``RequestContext``,
checks that the handler answered with the response entity of the requested version, encodes it, counts
requests per API for the periodic log line and, with ``--metrics-port``, feeds ``RequestMetrics``."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kio.schema.index import api_key_map

from regroup.model.errors import ErrorCode
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.codec import API_VERSIONS_KEY, DecodedRequest, encode_response, response_class
from regroup.server.entities import build
from regroup.server.errors import ProtocolError
from regroup.server.metrics import RequestMetrics
from regroup.server.runtime import wall_ms

log = logging.getLogger("regroup.server.dispatch")

PRODUCE_KEY = 0


class HandlerContractError(ProtocolError):
    """A handler returned something other than the response entity of the request's version."""


def api_name(api_key: int) -> str:
    """Kafka's name of an API (``JoinGroup``), or ``api-<key>`` for keys kio does not know."""
    name = _API_NAMES.get(api_key)
    if name is None:
        snake = api_key_map.get(api_key)
        name = "".join(part.capitalize() for part in snake.split("_")) if snake else f"api-{api_key}"
        if len(_API_NAMES) < _API_NAMES_MAX:  # keys come from the wire: keep the cache bounded
            _API_NAMES[api_key] = name
    return name


_API_NAMES: dict[int, str] = {}
_API_NAMES_MAX = 1024


class Dispatcher:
    """Routes requests to the handlers of ``specs`` (one ``ApiSpec`` per API key)."""

    def __init__(self, broker: Broker, specs: Mapping[int, ApiSpec], metrics: RequestMetrics | None = None) -> None:
        self.broker = broker
        self.metrics = metrics
        self.specs = dict(specs)
        self.versions = {key: (spec.min_version, spec.max_version) for key, spec in self.specs.items()}
        self.counts: Counter[str] = Counter()

    async def respond(self, request: DecodedRequest, *, client_host: str, connection_id: int) -> bytes | None:
        """The framed response to ``request``, or None when Kafka sends none (Produce with acks=0).
        Raises when the connection must be closed instead."""
        name = api_name(request.api_key)
        self.counts[name] += 1
        metrics = self.metrics
        if metrics is None:
            return (await self._respond(request, name, client_host, connection_id))[0]
        started = time.perf_counter()
        metrics.received(name, request.size + 4)
        data, response = await self._respond(request, name, client_host, connection_id)
        metrics.answered(name, time.perf_counter() - started, response, 0 if data is None else len(data))
        return data

    async def _respond(
        self, request: DecodedRequest, name: str, client_host: str, connection_id: int
    ) -> tuple[bytes | None, Any]:
        """(the framed response or None, the response entity)."""
        log.debug(
            "request conn=%d api=%s v=%d correlation_id=%d client_id=%s",
            connection_id,
            name,
            request.api_version,
            request.correlation_id,
            request.client_id,
        )
        if request.unsupported_api_versions:
            response = self._unsupported_api_versions()
            return encode_response(request.correlation_id, response), response
        spec = self.specs[request.api_key]
        ctx = RequestContext(
            api_key=request.api_key,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            client_host=client_host,
            connection_id=connection_id,
            now_ms=wall_ms(),
        )
        response = await spec.handler(self.broker, ctx, request.body)
        expected = response_class(request.api_key, request.api_version)
        if type(response) is not expected:
            raise HandlerContractError(f"{name} v{request.api_version} handler returned {type(response).__name__}")
        if request.api_key == PRODUCE_KEY and getattr(request.body, "acks", 1) == 0:
            return None, response  # the producer expects no answer; a response would break its correlation ids
        return encode_response(request.correlation_id, response), response

    def _unsupported_api_versions(self) -> object:
        """KIP-511, as Kafka answers a too-new ApiVersions: a v0 response with UNSUPPORTED_VERSION whose only
        entry is the ApiVersions range, so the client can retry with a version we speak."""
        spec = self.specs[API_VERSIONS_KEY]
        return build(
            response_class(API_VERSIONS_KEY, 0),
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[{"api_key": API_VERSIONS_KEY, "min_version": spec.min_version, "max_version": spec.max_version}],
        )

    def take_counts(self) -> dict[str, int]:
        """Requests per API since the last call (for the periodic stats line)."""
        counts, self.counts = dict(self.counts), Counter()
        return counts
