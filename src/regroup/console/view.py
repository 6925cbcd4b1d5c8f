"""What the console reads of the broker: plain values describing groups, and the interface the server
implements to provide them (``server/operator_view.py``); the "what if" replays of a group's recorded window the
server runs for it (``ReplayService``, ``server/replays.py``). The console turns them into JSON (``api.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "GroupDetail",
    "GroupSummary",
    "MemberDetail",
    "OperatorView",
    "ReplayRefused",
    "ReplayRequest",
    "ReplayService",
    "ReplayState",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSummary:
    """One group as ``GET /api/groups`` lists it."""

    group_id: str
    type: str  # classic | consumer | share
    state: str
    #: a classic group's selected protocol (None before a generation selects one)
    protocol: str | None
    #: a consumer or share group's server-side assignor
    assignor: str | None
    members: int
    #: the total lag over the group's committed partitions; None when it cannot be computed (share groups)
    lag: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberDetail:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    rack: str | None
    #: topic -> sorted partitions
    assignment: Mapping[str, list[int]]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDetail:
    """One group as ``GET /api/groups/<id>`` shows it."""

    group_id: str
    type: str
    state: str
    #: a classic group's generation (None for the other types)
    generation: int | None
    #: a consumer or share group's group epoch (None for classic groups)
    epoch: int | None
    protocol: str | None
    assignor: str | None
    members: tuple[MemberDetail, ...]
    #: topic -> partition -> log end offset - committed offset, over the committed partitions; None: no offsets
    #: for this type (share groups)
    lag: Mapping[str, Mapping[int, int]] | None


class OperatorView(Protocol):
    """The broker as the console sees it. The coroutines run on the server's event loop and must not hold it
    long (they yield between groups)."""

    async def groups(self) -> list[GroupSummary]: ...

    async def group(self, group_id: str) -> GroupDetail | None: ...

    async def timeline(self, group_id: str, since_ms: int | None, until_ms: int | None) -> dict[str, Any] | None:
        """The group's rebalance timeline, or None for a group the history does not know."""
        ...

    @property
    def has_timelines(self) -> bool:
        """Whether the server keeps a history of rebalances (``timeline`` answers)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayRequest:
    """A replay of one group's recorded window (``POST /api/groups/<id>/replays``)."""

    group_id: str
    since_ms: int
    until_ms: int
    #: the strategies and protocols to replay under (empty: the lab's defaults)
    strategies: tuple[str, ...] = ()
    protocols: tuple[str, ...] = ()
    #: run the alternatives on a local Spark (one worker thread) instead of in the replay's own process
    spark: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayState:
    """Where a replay is (``GET /api/groups/<id>/replays/<replay id>``)."""

    replay_id: str
    group_id: str
    since_ms: int
    until_ms: int
    status: str  # running | done | failed
    #: why it failed, in one line (None unless failed)
    error: str | None
    #: the replay's ``replay.json`` document once done
    result: Mapping[str, Any] | None


class ReplayRefused(Exception):
    """A replay that is not started: ``status`` is the HTTP status to answer (400, 404, 429, 503)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ReplayService(Protocol):
    """The replays the server runs for the console, each in a child process of its own."""

    async def start(self, request: ReplayRequest) -> ReplayState:
        """Start a replay (``ReplayRefused`` when it cannot be)."""
        ...

    async def state(self, group_id: str, replay_id: str) -> ReplayState | None:
        """A replay of that group (None: no such replay)."""
        ...

    async def report(self, group_id: str, replay_id: str) -> bytes | None:
        """A finished replay's ``report.html`` (None: no such replay, or not done)."""
        ...
