"""Requests the server could not serve normally — a handler that raised, an error response that could not be
built, an identifier over its limit, work planned ahead of a handler that failed — counted per API and kind
instead of logged per request.

The first of each (API, kind) is logged in one line (handler failures at ERROR with the exception and where it
was raised, refusals at INFO); the rest only count, so a client repeating a bad request cannot flood the log.
The full traceback of a handler failure is logged at DEBUG. The counts feed the periodic stats line and the
``regroup_request_failures_total`` metric.
"""

from __future__ import annotations

import logging
import traceback
from collections import Counter

log = logging.getLogger("regroup.server.failures")

#: kinds that are not handler failures
OVER_LIMIT = "over_limit"
NO_ERROR_RESPONSE = "no_error_response"
PLAN_FAILED = "plan_failed"


class FailureLog:
    __slots__ = ("_since_taken", "counts")

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()  # (api, kind) -> since start
        self._since_taken: Counter[tuple[str, str]] = Counter()

    def handler_failed(self, api: str, version: int, exc: BaseException) -> None:
        """A handler (or the encoding of its response) raised ``exc``; the client gets UNKNOWN_SERVER_ERROR."""
        kind = type(exc).__name__
        if self._count(api, kind):
            log.error(
                "%s v%d failed with %s: %s (at %s); answered UNKNOWN_SERVER_ERROR; further %s failures of %s "
                "are counted, not logged",
                api,
                version,
                kind,
                exc,
                _where(exc),
                kind,
                api,
            )
        log.debug("%s v%d failed", api, version, exc_info=exc)

    def over_limit(self, api: str, peer: str, what: str) -> None:
        """A request carried an identifier longer than its limit; it is answered with INVALID_REQUEST."""
        if self._count(api, OVER_LIMIT):
            log.info(
                "%s from %s carries %s: answered INVALID_REQUEST; further ones of %s are counted, not logged",
                api,
                peer,
                what,
                api,
            )

    def no_error_response(self, api: str, version: int, exc: BaseException | None) -> None:
        """No error response could be built for a failed request: its connection is closed."""
        if self._count(api, NO_ERROR_RESPONSE):
            detail = "it has none" if exc is None else f"{type(exc).__name__}: {exc} (at {_where(exc)})"
            log.error("%s v%d: no error response could be built (%s); connection closed", api, version, detail)

    def plan_failed(self, api: str, version: int, exc: BaseException) -> None:
        """Work on a large request done ahead of its handler (``ApiSpec.plan_aside``) raised ``exc``; the handler
        answers without it, so the client sees nothing of it."""
        if self._count(api, PLAN_FAILED):
            log.error(
                "%s v%d: the work done ahead of the handler failed with %s: %s (at %s); answered without it; "
                "further ones of %s are counted, not logged",
                api,
                version,
                type(exc).__name__,
                exc,
                _where(exc),
                api,
            )
        log.debug("%s v%d: the work ahead failed", api, version, exc_info=exc)

    def take(self) -> dict[str, int]:
        """``api/kind`` -> count since the last call (for the periodic stats line)."""
        taken = {f"{api}/{kind}": n for (api, kind), n in sorted(self._since_taken.items())}
        self._since_taken.clear()
        return taken

    def _count(self, api: str, kind: str) -> bool:
        """Count one; True for the first of its (api, kind)."""
        key = (api, kind)
        self._since_taken[key] += 1
        self.counts[key] += 1
        return self.counts[key] == 1


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name}"
