"""Plain values a member machine hands to its driver: requests to send, its state, and the log of the
rebalance callbacks it ran."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final

from regroup.protocol.classic import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest
from regroup.protocol.offsets import OffsetCommitRequest
from regroup.protocol.share import ShareGroupHeartbeatRequest
from regroup.protocol.share_fetch import ShareAcknowledgeRequest, ShareFetchRequest

# The value types below are immutable by type: their fields are ``Final`` (mypy rejects any assignment
# outside ``__init__``), and each has an explicit ``__init__`` rather than a frozen dataclass's generated
# one, which the compiled build cannot compile and which sets each field through ``object.__setattr__``.

#: (topic, partition)
TopicPartition = tuple[str, int]

Request = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | ConsumerGroupHeartbeatRequest
    | ShareGroupHeartbeatRequest
    | ShareFetchRequest
    | ShareAcknowledgeRequest
)


def api_name(request: object) -> str:
    """Kafka's API name of a request or response object (``JoinGroup``, ``OffsetCommit``, ...)."""
    kind = type(request)
    name = _API_NAMES.get(kind)
    if name is None:
        name = kind.__name__
        for suffix in ("Request", "Response"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        _API_NAMES[kind] = name
    return name


_API_NAMES: Final[dict[type, str]] = {}  # per request or response class


class ClassicClientState(enum.Enum):
    """Where the member is in the classic protocol (Kafka's client-side ``MemberState`` plus the ends)."""

    UNJOINED = "Unjoined"  # no JoinGroup in flight (before the first, or waiting to retry)
    PREPARING_REBALANCE = "PreparingRebalance"  # JoinGroup in flight
    COMPLETING_REBALANCE = "CompletingRebalance"  # SyncGroup in flight
    STABLE = "Stable"  # assignment received
    LEFT = "Left"  # left the group (LeaveGroup sent unless static)
    CRASHED = "Crashed"  # the process stopped without leaving
    FAILED = "Failed"  # a fatal error (fenced instance, inconsistent protocol, ...)

    @property
    def running(self) -> bool:
        return self not in STOPPED


#: the states of a process that has stopped (a tuple: ``in`` compares identity first); ``state not in STOPPED``
#: is ``state.running`` without the property call
STOPPED: Final = (ClassicClientState.LEFT, ClassicClientState.CRASHED, ClassicClientState.FAILED)


class ClientStateError(Exception):
    """A simulated member moved between states its transition table does not allow (a bug)."""


def _running_to(*states: enum.Enum) -> frozenset[enum.Enum]:
    """``states`` plus the ends every running process can reach: closed, crashed, failed."""
    return frozenset((*states, ClassicClientState.LEFT, ClassicClientState.CRASHED, ClassicClientState.FAILED))


#: the classic member's transitions: where each state may go (the stopped states go nowhere)
CLASSIC_CLIENT_TRANSITIONS: Final[dict[ClassicClientState, frozenset[enum.Enum]]] = {
    ClassicClientState.UNJOINED: _running_to(ClassicClientState.PREPARING_REBALANCE),  # JoinGroup sent
    ClassicClientState.PREPARING_REBALANCE: _running_to(
        ClassicClientState.COMPLETING_REBALANCE,  # JoinGroup answered: SyncGroup sent
        ClassicClientState.UNJOINED,  # JoinGroup failed (retry, new member id, ...)
    ),
    ClassicClientState.COMPLETING_REBALANCE: _running_to(
        ClassicClientState.STABLE,  # SyncGroup answered with the assignment
        ClassicClientState.UNJOINED,  # SyncGroup failed: rejoin
    ),
    ClassicClientState.STABLE: _running_to(
        ClassicClientState.PREPARING_REBALANCE,  # rejoining (rebalance in progress, metadata changed, ...)
        ClassicClientState.UNJOINED,  # reset (unknown member, illegal generation, poll interval exceeded)
    ),
    ClassicClientState.LEFT: frozenset(),
    ClassicClientState.CRASHED: frozenset(),
    ClassicClientState.FAILED: frozenset(),
}


class CallbackKind(enum.Enum):
    """The ``ConsumerRebalanceListener`` callbacks."""

    REVOKED = "revoked"  # onPartitionsRevoked
    ASSIGNED = "assigned"  # onPartitionsAssigned
    LOST = "lost"  # onPartitionsLost


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class CallbackEvent:
    """One callback invocation: which partitions, when, at which generation, and why."""

    kind: Final[CallbackKind]
    partitions: Final[tuple[TopicPartition, ...]]  # sorted
    at_ms: Final[int]
    generation: Final[int]
    reason: Final[str] = ""


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class OutgoingRequest:
    """A request the driver must send to the coordinator now. ``request_id`` is unique per member
    machine; the driver hands the response back with it (``on_response``)."""

    request_id: Final[int]
    request: Final[Request]

    @property
    def api(self) -> str:
        return api_name(self.request)


#: ``sorted_partitions`` of sets already sorted: a member's callbacks keep meeting the same sets (what it was
#: assigned is what it later revokes, a kept assignment comes back each generation); a lookup hashes the set
#: once and compares it, cheaper than sorting pairs again (bounded: cleared when full)
_SORTED: Final[dict[frozenset[Any], tuple[Any, ...]]] = {}


def sorted_partitions(partitions: frozenset[TopicPartition]) -> tuple[TopicPartition, ...]:
    """A deterministic order for a set of (topic, partition) pairs (sets iterate by hash)."""
    known = _SORTED.get(partitions)
    if known is None:
        known = tuple(sorted(partitions))
        if len(_SORTED) >= 4096:
            _SORTED.clear()
        _SORTED[partitions] = known
    return known


@dataclass(slots=True, kw_only=True)
class Inflight:
    """A request sent and not yet answered, with what the member was when it sent it (the member's own
    bookkeeping)."""

    api: str
    request: Request
    sent_ms: int
    deadline_ms: int
    generation: int
    member_id: str


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class MemberNote:
    """Something the driver may want to log: a timeout, a reset, a rejoin request, a fatal error."""

    at_ms: Final[int]
    kind: Final[str]
    detail: Final[str]
