"""The contract between the connection layer and the API handlers.

A handler is ``async def handle(broker, ctx, request) -> response``: ``request`` is the kio request entity
decoded at the version the client sent (``ctx.api_version``), the return value is the kio response entity
*of the same version*. Handlers never touch sockets; the connection layer frames, orders and writes
responses. Each handler module exposes ``SPECS``, the APIs it serves and the version range it advertises
in ApiVersions (exactly what it implements).

The group handlers reach the coordinator through ``Broker.coordinator`` (a ``GroupService``: run one core
operation, get its response once it is durable); ApiVersions lists ``Broker.api_specs``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.offsets import PlannedTopic
from regroup.coordinator.result import RequestKey, Result
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import PartitionCommits

NODE_ID = 0
#: the null topic id of Kafka's schemas (a topic named, not identified)
ZERO_UUID = uuid.UUID(int=0)
CLUSTER_ID = "regroup-cluster"


@dataclass(slots=True, eq=False)
class RequestContext:
    """What a handler knows of the request besides its body. Built once per request and never changed after
    (not frozen only because a frozen dataclass's constructor costs three times as much, on every request)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    #: who sent it: ``User:NAME`` once authenticated, ``User:ANONYMOUS`` otherwise (``security/acl.py``)
    principal: str = "User:ANONYMOUS"
    #: the name of the listener it came in through
    listener: str = "PLAINTEXT"
    #: the connection's authentication (``network/session.Session``; None outside a connection)
    session: Any = None
    #: what the API's ``plan_aside`` made of the body before the handler ran (None: nothing was made)
    plan: Any = None


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int


class TopicStore(Protocol):
    """The embedded partition log, as the handlers see it (implemented in ``server/topics.py``)."""

    def topics(self) -> dict[str, TopicInfo]: ...
    def create_topic(self, name: str, partitions: int) -> TopicInfo: ...
    def delete_topic(self, name: str) -> bool: ...


class GroupService(Protocol):
    """The coordinator runtime as the handlers see it (implemented in ``server/runtime.py``)."""

    async def call(
        self,
        op: Callable[[GroupCoordinator, RequestKey, int], Result],
        *,
        may_park: bool = False,
        group_id: str | None = None,
    ) -> Any:
        """Run ``op(coordinator, request_key, now_ms)`` and return the response completed for the key once
        its records are durable. ``may_park``: the response may come later (a parked JoinGroup/SyncGroup).
        ``group_id``: the one group the call concerns, when it concerns one (its answer then waits only for
        the records of that group, not for every earlier call's)."""
        ...

    def call_then(
        self,
        op: Callable[[GroupCoordinator, RequestKey, int], Result],
        done: Callable[[Any, BaseException | None], None],
        *,
        group_id: str | None = None,
    ) -> tuple[bool, Any]:
        """``call`` (never parked) without a coroutine: ``(True, response)`` when it is known now, else
        ``(False, None)`` and ``done(response, error)`` once it is durable (or with what ``call`` would raise)."""
        ...

    def answer_at_once(self, op: Callable[..., Any], *request: Any, group_id: str | None = None) -> Any | None:
        """``op(coordinator, *request, now_ms)``'s answer when the core can give it at once with nothing to make
        durable and every earlier call it could depend on answered (``group_id``: the request's group); None:
        ``call`` must run the request."""
        ...

    def plan_offset_commit(
        self,
        group_id: str,
        topic: str,
        columns: PartitionCommits,
        retention_ms: int,
        producer_id: int | None = None,
    ) -> PlannedTopic:
        """A topic's part of an OffsetCommit (``producer_id``: a TxnOffsetCommit) worked out ahead from the
        request alone (``offsets.plan_topic``), for ``call`` to hand the coordinator's ``offset_commit`` (or
        ``txn_offset_commit``); safe from any thread."""
        ...

    async def write(self, op: Callable[[GroupCoordinator, RequestKey, int], Result]) -> None:
        """Run ``op``, an operation that answers no request, and return once its records are durable."""
        ...

    def update_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        """Hand the coordinator a group's new settings (``coordinator/group_config.py``)."""
        ...


class Broker(Protocol):
    """Shared server state handed to every handler."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def topic_store(self) -> TopicStore: ...
    @property
    def auto_create_topics(self) -> bool: ...
    @property
    def default_partitions(self) -> int: ...
    @property
    def coordinator(self) -> GroupService: ...
    @property
    def api_specs(self) -> Mapping[int, ApiSpec]: ...
    def endpoint(self, listener: str) -> tuple[str, int]:
        """The host and port advertised to clients of ``listener``."""
        ...


def broker_rack(broker: Broker) -> str | None:
    """The broker's ``broker.rack`` (None: none; handlers' test doubles may not carry one)."""
    rack: str | None = getattr(broker, "rack", None)
    return rack


Handler = Callable[[Any, RequestContext, Any], Awaitable[Any]]
#: ``error_response(ctx, request, code)``: the API's response carrying ``code`` in every error slot (Kafka's
#: ``AbstractRequest.getErrorResponse``); ``code`` is one of regroup's ``ErrorCode``s
ErrorResponse = Callable[[RequestContext, Any, ErrorCode], Any]


@dataclass(frozen=True, slots=True)
class AtOnce:
    """How an API answers the requests it can answer from their bytes at once, without its handler's general
    path (``server/at_once.py``: a steady member's heartbeat, the usual Produce). The answer must be exactly the
    one the handler would give, authorization and effects included.

    ``prepare(api_version, body)``: what ``answer`` needs of a decoded request body (a request entity of the
    core, say), worked out once per distinct request bytes and remembered; None: such requests are never
    answered at once. ``answer(broker, principal, client_host, client_id, api_version, prepared, varying)``: the
    response, a ``PreEncoded`` body of the requested version; None: the handler answers this one (an error, a
    rebalance, a denied ACL).

    ``split(frame, api_version)``: for requests whose bytes differ from one to the next in one part only (a
    Produce's records), ``(end, varying)``: the bytes before ``end`` are what is remembered (and must hold
    everything ``prepare`` reads), ``varying`` is handed to ``answer``; None: not such a request (the general
    path's). Without it the whole request is remembered and ``varying`` is None. ``fresh``: requests whose bytes
    seldom repeat (an OffsetCommit's offsets): each is decoded, ``prepare`` sees each body and nothing is
    remembered. ``alone``: answered at once only while none of the connection's earlier requests is still being
    handled (a Produce appends after the ones before it, as Kafka handles a connection's requests one at a time).
    The response may be a ``network.deferred.Deferred`` that settles with it later (once durable)."""

    prepare: Callable[[int, Any], Any]
    answer: Callable[[Any, str, str, str | None, int, Any, Any], Any]
    split: Callable[[bytes, int], tuple[int, Any] | None] | None = None
    fresh: bool = False
    alone: bool = False


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API as served: its key, the versions advertised, the handler and the error response the
    dispatcher answers with when the handler raises (``ApiError`` → its code, anything unexpected →
    UNKNOWN_SERVER_ERROR) or an identifier is over its limit (INVALID_REQUEST). ``own_limits``: identifier
    kinds (``precheck.ID_KINDS``) the handler checks itself with the API's own error code."""

    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponse | None = None
    own_limits: frozenset[str] = frozenset()
    #: how requests are answered at once (None: always through ``handler``)
    at_once: AtOnce | None = None
    #: ``plan_aside(broker, api_version, body)``: work on a large request's decoded body that reads nothing that
    #: changes, done on the thread that decoded it, off the event loop, before the handler runs
    #: (``network/connection.py``: frames of ``DECODE_ASIDE_BYTES`` or more); the handler finds it in
    #: ``ctx.plan``, None when it was not made (a smaller frame) or failed. The handler must answer the same
    #: without it.
    plan_aside: Callable[[Any, int, Any], Any] | None = None
