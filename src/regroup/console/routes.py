"""Which path answers what (docs/operations.md, "HTTP API and dashboard"):

* ``/metrics`` — the Prometheus text exposition;
* ``/`` and ``/groups/<id>`` — the dashboard's page (``assets/index.html``; a single-page application that reads
  the location's path), ``/assets/<name>`` its other files;
* ``/api/groups`` — every group; ``/api/groups/<id>`` — one group (the id percent-decoded);
  ``/api/groups/<id>/timeline[?since_ms=&until_ms=]`` — its rebalances; ``/api/events`` — the live stream of
  group events (Server-Sent Events);
* ``POST /api/groups/<id>/replays`` — start a "what if" replay of a window of the group's history (the only
  path that takes a POST: ``accepts_post``); ``/api/groups/<id>/replays/<replay id>`` — where it is, its
  comparison once done; ``.../report`` — its HTML report once done;
* anything else a 404 (JSON under ``/api/``).

With authentication (``auth.py``) every path asks for it first, a POST's included."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Final

from regroup.console import api
from regroup.console.assets import INDEX, asset
from regroup.console.auth import BasicAuth
from regroup.console.http import Request, Response, Stream, text
from regroup.console.sse import EventHub
from regroup.console.view import OperatorView, ReplayRefused, ReplayService

__all__ = ["Console"]

METRICS_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
SSE_HEADERS: Final = (("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"))
#: the one path a POST is taken on: ``/api/groups/<id>/replays``
REPLAYS_PATH: Final = re.compile(r"/api/groups/[^/]+/replays")
#: what a replay's id looks like (anything else is not one)
REPLAY_ID: Final = re.compile(r"[0-9a-z-]{1,64}")

Scrape = Callable[[], Awaitable[str]]


class Console:
    """The handler of the console's ``HttpServer``: ``await console(request)``."""

    def __init__(
        self,
        view: OperatorView,
        *,
        scrape: Scrape | None = None,
        events: EventHub | None = None,
        auth: BasicAuth | None = None,
        replays: ReplayService | None = None,
    ) -> None:
        self._view = view
        self._scrape = scrape
        self._events = events
        self._auth = auth
        self._replays = replays

    @staticmethod
    def accepts_post(path: str) -> bool:
        """Whether ``path`` takes a POST (the ``HttpServer``'s ``accepts_post``)."""
        return REPLAYS_PATH.fullmatch(path) is not None

    async def __call__(self, request: Request) -> Response | Stream:
        if self._auth is not None:
            refused = await self._auth.check(request)
            if refused is not None:
                return refused
        path = request.path
        if path == "/metrics":
            if self._scrape is None:
                return text(404, "no metrics here")
            return Response(200, (await self._scrape()).encode(), METRICS_CONTENT_TYPE)
        if path == "/api" or path.startswith("/api/"):
            return await self._api(request, path.removeprefix("/api"))
        if path == "/" or path == "/index.html" or (path.startswith("/groups/") and len(path) > len("/groups/")):
            return asset(INDEX)
        if path.startswith("/assets/"):
            return asset(urllib.parse.unquote(path.removeprefix("/assets/")))
        return text(404, "not found")

    async def _api(self, request: Request, path: str) -> Response | Stream:
        parts = path.split("/")[1:]  # "/groups/x/timeline" -> ["groups", "x", "timeline"]
        if parts == ["events"]:
            return self._stream(request)
        if not parts or parts[0] != "groups":
            return api.error(404, "not found")
        if len(parts) == 1 or parts[1:] == [""]:
            return api.json_response(api.groups_document(await self._view.groups()))
        is_replay = len(parts) >= 3 and parts[2] == "replays"
        if not is_replay and (len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "timeline")):
            return api.error(404, "not found")
        try:
            group_id = urllib.parse.unquote(parts[1], errors="strict")
        except UnicodeDecodeError:
            return api.error(400, "the group id is not UTF-8")
        if is_replay:
            return await self._replay(request, group_id, parts[3:])
        if len(parts) == 3:
            return await self._timeline(request, group_id)
        group = await self._view.group(group_id)
        if group is None:
            return api.error(404, f"group {group_id!r} not found")
        return api.json_response(api.group_document(group))

    async def _timeline(self, request: Request, group_id: str) -> Response:
        if not self._view.has_timelines:
            return api.error(404, "this server keeps no rebalance history")
        bounds: list[int | None] = []
        for name in ("since_ms", "until_ms"):
            raw = request.query.get(name)
            if raw is None or raw == "":
                bounds.append(None)
                continue
            try:
                bounds.append(int(raw))
            except ValueError:
                return api.error(400, f"{name}: not an integer: {raw[:50]!r}")
        timeline = await self._view.timeline(group_id, bounds[0], bounds[1])
        if timeline is None:
            # a group that exists but has not rebalanced within the window has an empty timeline
            if await self._view.group(group_id) is None:
                return api.error(404, f"group {group_id!r} not found in the rebalance history")
            timeline = {"rebalances": [], "ownership": []}
        return api.json_response({"group_id": group_id, **timeline})

    async def _replay(self, request: Request, group_id: str, rest: list[str]) -> Response:
        if self._replays is None or not self._view.has_timelines:
            return api.error(404, "this server keeps no rebalance history to replay")
        if request.method == "POST":
            asked = api.replay_request(group_id, request.body)
            if isinstance(asked, str):
                return api.error(400, asked)
            known = await self._view.timeline(group_id, asked.until_ms, asked.until_ms) is not None  # (a narrow window)
            if not known and await self._view.group(group_id) is None:
                return api.error(404, f"group {group_id!r} not found")
            try:
                started = await self._replays.start(asked)
            except ReplayRefused as refused:
                return api.error(refused.status, refused.message)
            return api.json_response({"replay_id": started.replay_id, "status": started.status}, 202)
        if not rest or len(rest) > 2 or (len(rest) == 2 and rest[1] != "report"):
            return api.error(404, "not found")
        if REPLAY_ID.fullmatch(rest[0]) is None:
            return api.error(404, "no such replay")
        if len(rest) == 2:
            report = await self._replays.report(group_id, rest[0])
            if report is None:
                return api.error(404, "no report for this replay (unknown, running or failed)")
            return Response(200, report, "text/html; charset=utf-8", api.NO_STORE)
        state = await self._replays.state(group_id, rest[0])
        if state is None:
            return api.error(404, "no such replay")
        return api.json_response(api.replay_document(state))

    def _stream(self, request: Request) -> Response | Stream:
        if self._events is None:
            return api.error(404, "this server streams no events")
        if request.head_only:
            return Response(200, b"", "text/event-stream", SSE_HEADERS)
        chunks = self._events.subscribe()
        if chunks is None:
            return api.error(503, "too many event streams open")
        return Stream(chunks, "text/event-stream", SSE_HEADERS)
