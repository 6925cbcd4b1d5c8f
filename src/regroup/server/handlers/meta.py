"""ApiVersions (v0-4) and FindCoordinator (v0-4).

ApiVersions lists every registered API (``Broker.api_specs``: this package's modules plus the data-plane
handlers when they are installed) with exactly the version ranges their handlers implement. A too-new
ApiVersions version never reaches this handler: the codec answers it (KIP-511). v3+ requests must name the
client software with Kafka's pattern, else INVALID_REQUEST, as Kafka validates.

FindCoordinator: this is a single-node cluster, so the coordinator of every group (key type 0) and every
transactional id (key type 1) is this node. Other key types (2 = share groups, needs v6) are
INVALID_REQUEST, per key in v4+ (batched ``CoordinatorKeys``), for the request in v0-3. The node advertised is
this broker's address on the listener the request came in through. A batched answer is encoded by hand, a chunk
of keys at a time (``server/coordinator_answers.py``).

ACLs: ApiVersions none (answered before authentication). FindCoordinator: DESCRIBE on the Group for a group
key (GROUP_AUTHORIZATION_FAILED), DESCRIBE on the TransactionalId for a transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key.
"""

from __future__ import annotations

import re
from typing import Any

from regroup.model.errors import ErrorCode
from regroup.security.acl import AclOperation, ResourceType
from regroup.server.api import NODE_ID, ApiSpec, Broker, RequestContext
from regroup.server.authz import allowed
from regroup.server.coordinator_answers import FoundCoordinator, coordinators_answer
from regroup.server.handlers._common import respond
from regroup.server.offset_answers import Pacer, pause

API_VERSIONS, FIND_COORDINATOR = 18, 10
FIND_COORDINATOR_BATCHED_FROM = 4
SOFTWARE_VALIDATED_FROM = 3
GROUP_KEY, TRANSACTION_KEY = 0, 1
#: Kafka's ``ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN``
SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
NO_NODE = {"node_id": -1, "host": "", "port": -1}


# ---------------------------------------------------------------------------------------- ApiVersions
def _versions_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return respond(ctx, error_code=code, api_keys=[])


#: the answer per (API table, version): every connection asks first, and building it costs far more than the key
_VERSIONS_ANSWERS: dict[tuple[tuple[tuple[int, int, int], ...], int], Any] = {}


async def api_versions(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= SOFTWARE_VALIDATED_FROM and not (
        SOFTWARE_PATTERN.fullmatch(request.client_software_name)
        and SOFTWARE_PATTERN.fullmatch(request.client_software_version)
    ):
        return _versions_error(ctx, request, ErrorCode.INVALID_REQUEST)
    table = tuple(sorted((spec.api_key, spec.min_version, spec.max_version) for spec in broker.api_specs.values()))
    key = (table, ctx.api_version)
    answer = _VERSIONS_ANSWERS.get(key)
    if answer is None:
        keys = [{"api_key": k, "min_version": low, "max_version": high} for k, low, high in table]
        answer = respond(ctx, error_code=ErrorCode.NONE, api_keys=keys)  # an immutable kio entity
        if len(_VERSIONS_ANSWERS) > 64:  # tests start many brokers in one process
            _VERSIONS_ANSWERS.clear()
        _VERSIONS_ANSWERS[key] = answer
    return answer


# ------------------------------------------------------------------------------------ FindCoordinator
def _coordinator(broker: Broker, ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, dict[str, Any]]:
    if key_type == GROUP_KEY:
        if not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, NO_NODE
    elif key_type == TRANSACTION_KEY:
        if not allowed(broker, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_NODE
    else:
        return ErrorCode.INVALID_REQUEST, NO_NODE
    host, port = broker.endpoint(ctx.listener)
    return ErrorCode.NONE, {"node_id": NODE_ID, "host": host, "port": port}


def _find_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    if ctx.api_version >= FIND_COORDINATOR_BATCHED_FROM:
        rows = [{"key": k, "error_code": code, "error_message": None, **NO_NODE} for k in request.coordinator_keys]
        return respond(ctx, coordinators=rows)
    return respond(ctx, error_code=code, error_message=None, **NO_NODE)


async def find_coordinator(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", GROUP_KEY)
    if ctx.api_version >= FIND_COORDINATOR_BATCHED_FROM:
        found: list[FoundCoordinator] = []
        pacer = Pacer()
        for key in request.coordinator_keys:
            if pacer.due():
                await pause()
            error, node = _coordinator(broker, ctx, key_type, key)
            found.append((key, int(error), node["node_id"], node["host"], node["port"]))
        return await coordinators_answer(respond(ctx, coordinators=[]), found)
    error, node = _coordinator(broker, ctx, key_type, request.key)
    return respond(ctx, error_code=error, error_message=None, **node)


SPECS = [
    ApiSpec(API_VERSIONS, 0, 4, api_versions, _versions_error),
    ApiSpec(FIND_COORDINATOR, 0, 4, find_coordinator, _find_error),
]
