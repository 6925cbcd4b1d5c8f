"""From a decoded request to the bytes of its response: finds the handler, builds the ``RequestContext``,
checks that the handler answered with the response entity of the requested version (or with the body of one,
encoded already: ``encoded.PreEncoded``), encodes it, counts requests per API for the periodic log line and,
with ``--metrics-port``, feeds ``RequestMetrics``.

It is also the one place where a request that cannot be served normally becomes an answer: an ``ApiError``
from the handler is the API's error response with that code, a stopped coordinator COORDINATOR_NOT_AVAILABLE,
anything unexpected (in the handler or in encoding its response) UNKNOWN_SERVER_ERROR in every error slot,
and an identifier over its limit INVALID_REQUEST without running the handler. Those are counted in a
``FailureLog`` (one log line per API and kind, not per request). Only when no error response can be built
is the connection closed (``HandlerFailed``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kio.schema.index import api_key_map

from regroup.model.errors import ApiError, ErrorCode
from regroup.network.codec import (
    API_VERSIONS_KEY,
    DecodedRequest,
    encode_response,
    frame_response,
    framed_pieces,
    response_class,
)
from regroup.network.deferred import Deferred
from regroup.network.errors import ProtocolError
from regroup.network.framing import FramedPieces
from regroup.network.limits import Limits
from regroup.network.session import Session
from regroup.security.acl import ANONYMOUS
from regroup.server.api import ApiSpec, Broker, RequestContext
from regroup.server.at_once import AtOnceAnswers
from regroup.server.encoded import PreEncoded, response_type
from regroup.server.entities import build
from regroup.server.errors import CoordinatorUnavailable, RequestDropped
from regroup.server.failures import FailureLog
from regroup.server.metrics import RequestMetrics
from regroup.server.young_gc import freeze_young

log = logging.getLogger("regroup.server.dispatch")


class _PlanFailed:
    """A request's ``plan_aside`` raised ``error``: no plan (the handler answers without one)."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


PRODUCE_KEY = 0


class HandlerContractError(Exception):
    """A handler returned something other than the response entity of the request's version."""


class HandlerFailed(ProtocolError):
    """A request failed and no error response could be built for it: its connection is closed."""


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

    def __init__(
        self,
        broker: Broker,
        specs: Mapping[int, ApiSpec],
        metrics: RequestMetrics | None = None,
        id_limits: Limits | None = None,
    ) -> None:
        self.broker = broker
        self.metrics = metrics
        self.specs = dict(specs)
        self.versions = {key: (spec.min_version, spec.max_version) for key, spec in self.specs.items()}
        #: per API key: the identifier limits its requests are measured against (less the kinds it checks itself)
        self.limits: dict[int, Limits] = {
            key: {kind: n for kind, n in (id_limits or {}).items() if kind not in spec.own_limits}
            for key, spec in self.specs.items()
        }
        self.failures = FailureLog()
        self.counts: Counter[str] = Counter()
        self._at_once = AtOnceAnswers(
            broker,
            self.specs,
            {key: api_name(key) for key in self.specs},
            self.versions,
            self.limits,
            self.counts,
            metrics,
            log,
        )

    def answer_at_once(
        self, frame: bytes, principal: str, client_host: str, connection_id: int, busy: bool = False
    ) -> bytes | Deferred[bytes] | None:
        """The framed response to the request ``frame`` when it can be given at once from its bytes
        (``server/at_once.py``; a ``Deferred`` of it when it comes later), or None: ``respond`` answers it.
        ``busy``: an earlier request of the connection is still being handled."""
        return self._at_once.answer(frame, principal, client_host, connection_id, busy)

    def plan_aside(self, request: DecodedRequest) -> None:
        """Set ``request.plan`` to its API's ``plan_aside`` of the body, if the API has one: called on the thread
        that decoded a large request, before ``respond``. A failure there is the server's own and leaves no plan
        (logged once per API): the handler answers without it. Then the young objects are frozen
        (``young_gc.freeze_young``): the request's and its plan's live until it is answered, and the collector
        need not walk them."""
        spec = self.specs.get(request.api_key)
        if spec is not None and spec.plan_aside is not None and request.body is not None and request.over_limit is None:
            try:
                request.plan = spec.plan_aside(self.broker, request.api_version, request.body)
            except Exception as exc:
                request.plan = _PlanFailed(exc)  # (reported by ``_respond``, on the loop: ``failures`` is not shared)
        freeze_young()

    async def respond(
        self, request: DecodedRequest, *, client_host: str, connection_id: int, session: Session | None = None
    ) -> bytes | FramedPieces | None:
        """The framed response to ``request``, or None when Kafka sends none (Produce with acks=0).
        Raises when the connection must be closed instead. ``session``: the connection's authentication (its
        principal and listener go into the request's context)."""
        name = api_name(request.api_key)
        self.counts[name] += 1
        metrics = self.metrics
        if metrics is None:
            return (await self._respond(request, name, client_host, connection_id, session))[0]
        started = time.perf_counter()
        stats = metrics.received(name, request.size + 4)
        data, response = await self._respond(request, name, client_host, connection_id, session)
        metrics.answered(name, stats, time.perf_counter() - started, response, 0 if data is None else len(data))
        return data

    async def _respond(
        self, request: DecodedRequest, name: str, client_host: str, connection_id: int, session: Session | None
    ) -> tuple[bytes | FramedPieces | None, Any]:
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
        plan = request.plan
        if type(plan) is _PlanFailed:
            self.failures.plan_failed(name, request.api_version, plan.error)
            plan = None
        ctx = RequestContext(
            api_key=request.api_key,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            client_host=client_host,
            connection_id=connection_id,
            principal=ANONYMOUS if session is None else session.principal,
            listener="PLAINTEXT" if session is None else session.listener,
            session=session,
            plan=plan,
        )
        if request.over_limit is not None:
            self.failures.over_limit(name, client_host, request.over_limit)
            response = self._error_response(spec, ctx, request.body, ErrorCode.INVALID_REQUEST, name)
        else:
            response = await self._handle(spec, ctx, request.body, name)
        if request.api_key == PRODUCE_KEY and getattr(request.body, "acks", 1) == 0:
            return None, response  # the producer expects no answer; a response would break its correlation ids
        try:
            return _encode(request.correlation_id, response), response
        except Exception as exc:  # a value the response schema cannot carry: a bug in the handler
            self.failures.handler_failed(name, ctx.api_version, exc)
            response = self._error_response(spec, ctx, request.body, ErrorCode.UNKNOWN_SERVER_ERROR, name)
            try:
                return encode_response(request.correlation_id, response), response
            except Exception as again:
                self.failures.no_error_response(name, ctx.api_version, again)
                raise HandlerFailed(f"{name} v{ctx.api_version}: the error response does not encode") from again

    async def _handle(self, spec: ApiSpec, ctx: RequestContext, body: Any, name: str) -> Any:
        """The handler's response, or the API's error response when the handler raises."""
        try:
            response = await spec.handler(self.broker, ctx, body)
        except RequestDropped:
            raise  # the connection is closed instead (see RequestDropped)
        except ApiError as exc:
            return self._error_response(spec, ctx, body, exc.code, name)
        except CoordinatorUnavailable:
            return self._error_response(spec, ctx, body, ErrorCode.COORDINATOR_NOT_AVAILABLE, name)
        except Exception as exc:
            self.failures.handler_failed(name, ctx.api_version, exc)
            return self._error_response(spec, ctx, body, ErrorCode.UNKNOWN_SERVER_ERROR, name)
        if response_type(response) is not response_class(ctx.api_key, ctx.api_version):
            failure = HandlerContractError(f"the handler returned {response_type(response).__name__}")
            self.failures.handler_failed(name, ctx.api_version, failure)
            return self._error_response(spec, ctx, body, ErrorCode.UNKNOWN_SERVER_ERROR, name)
        return response

    def _error_response(self, spec: ApiSpec, ctx: RequestContext, body: Any, code: ErrorCode, name: str) -> Any:
        """``spec``'s error response carrying ``code``; raises ``HandlerFailed`` when there is none."""
        if spec.error_response is None:
            self.failures.no_error_response(name, ctx.api_version, None)
            raise HandlerFailed(f"{name} v{ctx.api_version} failed and has no error response")
        try:
            response = spec.error_response(ctx, body, code)
        except Exception as exc:
            self.failures.no_error_response(name, ctx.api_version, exc)
            raise HandlerFailed(f"{name} v{ctx.api_version}: its error response failed: {exc}") from exc
        if response_type(response) is not response_class(ctx.api_key, ctx.api_version):
            self.failures.no_error_response(name, ctx.api_version, None)
            raise HandlerFailed(f"{name} v{ctx.api_version}: its error response is a {type(response).__name__}")
        return response

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
        counts = dict(self.counts)
        self.counts.clear()  # (the same Counter: the answers at once count into it too)
        return counts


#: a ``PreEncoded`` body at least this large, in at most ``PIECES_AT_MOST`` pieces, is framed in pieces
#: (``FramedPieces``), not joined into one bytes object: its pieces, kept between requests (an all-topics
#: Metadata), are then never copied on the loop (a copy of 3 MB took 5-18 ms of the loop on a machine that had been
#: idle a moment: ``docs/benchmarks.md``). A body of many small pieces (an entry per partition) is joined, as the
#: socket's writes of thousands of small buffers would cost more than the copy.
PIECES_FROM_BYTES = 256 * 1024
PIECES_AT_MOST = 64


def _encode(correlation_id: int, response: Any) -> bytes | FramedPieces:
    """The framed response: a kio entity encoded, a ``PreEncoded`` body framed as it is (in pieces when large)."""
    if isinstance(response, PreEncoded):
        pieces = response.pieces
        if len(pieces) <= PIECES_AT_MOST and (size := sum(map(len, pieces))) >= PIECES_FROM_BYTES:
            return framed_pieces(correlation_id, response.response_class, pieces, size)
        return frame_response(correlation_id, response.response_class, pieces)
    return encode_response(correlation_id, response)
