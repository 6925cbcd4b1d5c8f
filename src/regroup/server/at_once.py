"""Requests answered from their bytes at once: the way a steady member's heartbeat goes around the general path
(the decoder, the request's context, the handler's coroutine and the coordinator runtime's call).

An API opts in with an ``AtOnce`` in its ``ApiSpec`` (Heartbeat, ConsumerGroupHeartbeat, Produce and
OffsetCommit do). The first time a request's bytes are seen (all but its correlation id: a steady member sends
the same bytes every few seconds; for an API with a ``split``, all but its correlation id and its varying part:
a producer's requests to a partition differ in their records alone), the frame is decoded by the general
decoder against the same version ranges and identifier limits, and the API's ``prepare`` works out what its
answer needs; the outcome is remembered (a bounded memo). A frame with the same bytes later goes straight to the
API's ``answer``, which checks the ACL, asks the core, and returns the response, or None to leave the request to
the general path, which then handles the frame from its first byte as if this path did not exist. A frame that
does not decode, is of a version not served, carries an identifier over its limit, or whose API says it never
answers such a request at once, is always the general path's. A ``fresh`` API's requests (an OffsetCommit's
offsets differ every time) are decoded every time and nothing is remembered: what it saves is the handler's
coroutine, task and context. An answer may come later (a ``network.deferred.Deferred``: a commit or a produce
waiting for its fsync), framed and measured when it does. An ``alone`` API's request is answered at once only
while the connection has no earlier request still being handled.

What the dispatcher does around a handler is done here too for an answer given at once: the request is
counted per API (the periodic stats line), logged at debug level, and measured with ``--metrics-port``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import Any, Final

from regroup.network.codec import VersionRanges, decode_request, frame_response
from regroup.network.deferred import Deferred
from regroup.network.errors import ProtocolError
from regroup.network.limits import Limits
from regroup.server.api import ApiSpec, AtOnce
from regroup.server.metrics import RequestMetrics

log = logging.getLogger("regroup.server.at_once")

#: request bytes remembered per API, and the longest remembered (a burst of distinct ones costs decoding only)
MEMO_MAX_ENTRIES: Final = 16_384
MEMO_MAX_BYTES: Final = 512
_HEADER_BYTES: Final = 10  # api key, version, correlation id, client id length: in every request header
_NEVER: Final = object()  # a request its API never answers at once


class _Api:
    __slots__ = ("at_once", "memo", "name")

    def __init__(self, at_once: AtOnce, name: str) -> None:
        self.at_once = at_once
        self.name = name
        #: request bytes after the correlation id -> (version, client id, what ``prepare`` made of it or _NEVER)
        self.memo: dict[bytes, tuple[int, str | None, Any]] = {}


class AtOnceAnswers:
    """The dispatcher's answers at once for the APIs of ``specs`` that have an ``AtOnce``; ``counts``,
    ``metrics`` and ``request_log`` are the dispatcher's own, so both paths count and log alike."""

    def __init__(
        self,
        broker: Any,
        specs: Mapping[int, ApiSpec],
        names: Mapping[int, str],
        versions: VersionRanges,
        limits: Mapping[int, Limits],
        counts: Counter[str],
        metrics: RequestMetrics | None,
        request_log: logging.Logger,
    ) -> None:
        self._broker = broker
        self._apis = {key: _Api(spec.at_once, names[key]) for key, spec in specs.items() if spec.at_once is not None}
        self._versions = versions
        self._limits = limits
        self.counts = counts
        self._metrics = metrics
        self._request_log = request_log
        self._failed_once = False

    def answer(
        self, frame: bytes, principal: str, client_host: str, connection_id: int, busy: bool = False
    ) -> bytes | Deferred[bytes] | None:
        """The framed response to the request ``frame`` (a frame's payload), or None: the general path's; a
        ``Deferred`` when the API's answer comes later (it settles with the framed response).
        ``busy``: an earlier request of the connection is still being handled (an ``alone`` API waits for it)."""
        if len(frame) < _HEADER_BYTES:
            return None
        api = self._apis.get((frame[0] << 8) | frame[1])
        if api is None or (busy and api.at_once.alone):
            return None
        started = time.perf_counter() if self._metrics is not None else 0.0
        version = (frame[2] << 8) | frame[3]
        split = api.at_once.split
        if api.at_once.fresh:
            known, varying = self._decoded(api, frame, version), None
        elif split is None:
            tail, varying = frame[8:], None
            known = api.memo.get(tail)
        else:
            cut = split(frame, version)
            if cut is None:
                return None
            tail, varying = frame[8 : cut[0]], cut[1]
            known = api.memo.get(tail)
        if known is None or known[0] != version:
            if api.at_once.fresh:
                return None
            known = self._learn(api, frame, version, tail)
            if known is None:
                return None
        client_id, prepared = known[1], known[2]
        if prepared is _NEVER:
            return None
        try:
            response = api.at_once.answer(self._broker, principal, client_host, client_id, version, prepared, varying)
        except Exception:  # a bug here must not cost the request: the general path answers (and reports) it
            if not self._failed_once:
                self._failed_once = True
                log.exception(
                    "%s v%d: the answer at once failed; such requests take the general path", api.name, version
                )
            return None
        if response is None:
            return None
        correlation_id = int.from_bytes(frame[4:8], "big", signed=True)
        self.counts[api.name] += 1
        self._request_log.debug(
            "request conn=%d api=%s v=%d correlation_id=%d client_id=%s",
            connection_id,
            api.name,
            version,
            correlation_id,
            client_id,
        )
        if isinstance(response, Deferred):  # (the response comes later: framed, measured and handed on then)
            framed: Deferred[bytes] = Deferred()
            response.then(partial(self._framed_later, framed, api.name, correlation_id, len(frame), started))
            return framed
        data = frame_response(correlation_id, response.response_class, response.body)
        metrics = self._metrics
        if metrics is not None:
            stats = metrics.received(api.name, len(frame) + 4)
            metrics.answered(api.name, stats, time.perf_counter() - started, response, len(data))
        return data

    def _framed_later(
        self,
        framed: Deferred[bytes],
        name: str,
        correlation_id: int,
        size: int,
        started: float,
        response: Any,
        error: BaseException | None,
    ) -> None:
        """A response given later: framed and measured as one given at once, then handed to ``framed``."""
        if error is not None:
            framed.fail(error)
            return
        try:
            data = frame_response(correlation_id, response.response_class, response.body)
        except Exception as exc:
            framed.fail(exc)
            return
        metrics = self._metrics
        if metrics is not None:
            stats = metrics.received(name, size + 4)
            metrics.answered(name, stats, time.perf_counter() - started, response, len(data))
        framed.settle(data)

    def _learn(self, api: _Api, frame: bytes, version: int, tail: bytes) -> tuple[int, str | None, Any] | None:
        """Decode ``frame`` as the general path would and remember what ``prepare`` makes of it; None (and
        nothing remembered): the frame does not decode, its own path closes the connection or answers it."""
        known = self._decoded(api, frame, version)
        if known is not None and len(tail) <= MEMO_MAX_BYTES:
            if len(api.memo) >= MEMO_MAX_ENTRIES:
                api.memo.clear()
            api.memo[tail] = known
        return known

    def _decoded(self, api: _Api, frame: bytes, version: int) -> tuple[int, str | None, Any] | None:
        """``(version, client id, what prepare made of it or _NEVER)`` of ``frame`` decoded as the general path
        would; None: the frame does not decode (its own path closes the connection or answers it)."""
        try:
            request = decode_request(frame, self._versions, self._limits)
        except ProtocolError:
            return None
        prepared: Any = _NEVER
        if request.over_limit is None and request.body is not None:
            try:
                made = api.at_once.prepare(version, request.body)
            except Exception:  # (a bug here must not cost the request either: the general path answers it)
                if not self._failed_once:
                    self._failed_once = True
                    log.exception("%s v%d: preparing an answer at once failed", api.name, version)
                made = None
            if made is not None:
                prepared = made
        return version, request.client_id, prepared
