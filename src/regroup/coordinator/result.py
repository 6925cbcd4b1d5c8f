"""What every coordinator operation returns: the records it produced, the responses it completed and the
events saying what happened (``events.py``).

A request that has to wait (a JoinGroup parked until the join phase completes, a follower's SyncGroup
waiting for the leader) completes later, in the result of whichever operation releases it. Responses are
therefore *completions* keyed by the request key the caller chose when it submitted the request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from regroup.coordinator.events import Event
from regroup.model.errors import ErrorCode
from regroup.records.model import Record

if TYPE_CHECKING:
    from regroup.coordinator.asides import Aside

RequestKey = int | str


@dataclass(slots=True)
class Completion:
    key: RequestKey
    response: Any


@dataclass(slots=True)
class Result:
    records: list[Record] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    #: parked requests superseded by a newer one from the same member: they will never be answered (as in
    #: Kafka, which replaces the parked future); a shell may forget them.
    dropped: list[RequestKey] = field(default_factory=list)
    #: the error the request was refused with (its handler raised: it wrote nothing and changed nothing),
    #: or None when it was handled (its response may still carry an error code Kafka answers with)
    refused: ErrorCode | None = field(init=False, default=None)
    #: what happened, in order (``events.py``): a refused request's events are dropped with its records
    events: list[Event] = field(init=False, default_factory=list)
    #: work to run beside the coordinator and hand back to ``GroupCoordinator.land`` (``asides.py``); a shell
    #: that runs none must configure the coordinator never to hand any out
    asides: list[Aside] = field(init=False, default_factory=list)

    def extend(self, other: Result) -> None:
        self.records.extend(other.records)
        self.completions.extend(other.completions)
        self.dropped.extend(other.dropped)
        self.events.extend(other.events)
        self.asides.extend(other.asides)

    def response_for(self, key: RequestKey) -> Any:
        """The response completed for ``key`` in this result, or None if it is still waiting."""
        for c in self.completions:
            if c.key == key:
                return c.response
        return None
