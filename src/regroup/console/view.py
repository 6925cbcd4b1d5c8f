"""What the console reads of the broker: plain values describing groups, and the interface the server
implements to provide them (``server/operator_view.py``). The console turns them into JSON (``api.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["GroupDetail", "GroupSummary", "MemberDetail", "OperatorView"]


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

    def timeline(self, group_id: str, since_ms: int | None, until_ms: int | None) -> dict[str, Any] | None:
        """The group's rebalance timeline, or None for a group the history does not know."""
        ...

    @property
    def has_timelines(self) -> bool:
        """Whether the server keeps a history of rebalances (``timeline`` answers)."""
        ...
