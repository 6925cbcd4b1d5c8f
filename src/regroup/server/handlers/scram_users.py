"""DescribeUserScramCredentials (v0) and AlterUserScramCredentials (v0), KIP-554: the users' SCRAM credentials
kept by the broker (``server/scram_store.py``, ``Broker.scram``), as a KRaft broker answers them.

ACLs (Kafka's API-to-ACL table): DescribeUserScramCredentials needs DESCRIBE on the CLUSTER, and
AlterUserScramCredentials ALTER on the CLUSTER. Without it the answer is CLUSTER_AUTHORIZATION_FAILED — at the top
level of a description (and for each user named), for each user of an alteration.

**Describe**: no users (null or empty) describes every user with a credential; otherwise each user named is
described by its mechanisms and iteration counts. A user without any credential is RESOURCE_NOT_FOUND ("Attempt to
describe a user credential that does not exist: NAME"), a user named twice DUPLICATE_RESOURCE ("Cannot describe
SCRAM credentials for the same user twice in a single request: NAME"), once per user, in the order named.

**Alter**: applied with Kafka's per-user rules (``scram_store.py``), one result per user named; the accepted
changes are durable before the answer. A failed write answers KAFKA_STORAGE_ERROR for every user.

A broker that keeps no SCRAM credentials (``Broker.scram`` None) answers every entry of both APIs, and a
description's top level, with UNSUPPORTED_VERSION, as a Kafka cluster does whose metadata version predates SCRAM
("The current metadata.version does not support SCRAM").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from regroup.model.errors import ErrorCode
from regroup.security.acl import AclOperation
from regroup.security.scram import mechanism_named
from regroup.server.api import ApiSpec, RequestContext
from regroup.server.authz import require_cluster
from regroup.server.handlers._common import respond
from regroup.server.inspection_answers import encode_array
from regroup.server.scram_store import ScramDeletion, ScramStore, ScramUpsertion
from regroup.storage.format import StorageError

__all__ = ["ALTER_USER_SCRAM_CREDENTIALS", "DESCRIBE_USER_SCRAM_CREDENTIALS", "SPECS"]

log = logging.getLogger(__name__)

DESCRIBE_USER_SCRAM_CREDENTIALS: Final = 50
ALTER_USER_SCRAM_CREDENTIALS: Final = 51

NOT_SUPPORTED: Final = "The current metadata.version does not support SCRAM"
DOES_NOT_EXIST: Final = "Attempt to describe a user credential that does not exist: "
DUPLICATE_USER: Final = "Cannot describe SCRAM credentials for the same user twice in a single request: "
#: the messages of the errors the dispatcher answers with (Kafka's exceptions' default messages)
_ERROR_MESSAGES: Final = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}


def _store(broker: Any) -> ScramStore | None:
    store: ScramStore | None = getattr(broker, "scram", None)
    return store


# ---------------------------------------------------------------------- DescribeUserScramCredentials


async def handle_describe(broker: Any, ctx: RequestContext, request: Any) -> Any:
    require_cluster(broker, ctx, AclOperation.DESCRIBE)
    store = _store(broker)
    named = [u.name for u in request.users] if request.users else None
    if store is None:
        return _describe_failed(ctx, named or [], ErrorCode.UNSUPPORTED_VERSION, NOT_SUPPORTED)
    users = store.users()
    results = []
    if named is None:
        results = [_described(user, mechanisms) for user, mechanisms in users.items()]
    else:
        counts: dict[str, int] = {}
        for name in named:
            counts[name] = counts.get(name, 0) + 1
        for name, count in counts.items():
            if count > 1:
                results.append(_user_error(name, ErrorCode.DUPLICATE_RESOURCE, DUPLICATE_USER + name))
            elif name not in users:
                results.append(_user_error(name, ErrorCode.RESOURCE_NOT_FOUND, DOES_NOT_EXIST + name))
            else:
                results.append(_described(name, users[name]))
    empty = respond(ctx, error_code=ErrorCode.NONE, error_message=None, results=[])
    codes = (int(r["error_code"]) for r in results)
    return await encode_array(empty, "results", results, dict, codes, weight=DESCRIBED_USER_WEIGHT)


#: a described user costs about ten units of a chunk to encode (kio writes it: about 15 µs), an alteration's result
#: about two: a request about 1,000 users was answered in one step of 10-16 ms
DESCRIBED_USER_WEIGHT, ALTERED_USER_WEIGHT = 10, 2


def _described(user: str, mechanisms: list[tuple[str, int]]) -> dict[str, Any]:
    infos = []
    for name, iterations in mechanisms:
        mechanism = mechanism_named(name)
        if mechanism is not None:
            infos.append({"mechanism": mechanism.type_code, "iterations": iterations})
    return {"user": user, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": infos}


def _user_error(user: str, code: ErrorCode | KioErrorCode, message: str | None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def _describe_failed(
    ctx: RequestContext, users: Iterable[str], code: ErrorCode | KioErrorCode, message: str | None
) -> Any:
    results = [_user_error(user, code, message) for user in dict.fromkeys(users)]
    return respond(ctx, error_code=code, error_message=message, results=results)


def _describe_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _describe_failed(ctx, (u.name for u in request.users or ()), code, _ERROR_MESSAGES.get(code))


# ---------------------------------------------------------------------- AlterUserScramCredentials


async def handle_alter(broker: Any, ctx: RequestContext, request: Any) -> Any:
    require_cluster(broker, ctx, AclOperation.ALTER)
    store = _store(broker)
    if store is None:
        return _alter_failed(ctx, request, ErrorCode.UNSUPPORTED_VERSION, NOT_SUPPORTED)
    upsertions = [
        ScramUpsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
        for u in request.upsertions
    ]
    deletions = [ScramDeletion(d.name, int(d.mechanism)) for d in request.deletions]
    try:
        outcome = await store.alter_aside(upsertions, deletions)
    except (OSError, StorageError) as exc:
        log.error("storing SCRAM credentials failed: %s", exc)
        return _alter_failed(ctx, request, KioErrorCode.kafka_storage_error, f"{type(exc).__name__}: {exc}")
    results = [{"user": r.user, "error_code": r.error, "error_message": r.message} for r in outcome]
    codes = (int(r.error) for r in outcome)
    return await encode_array(respond(ctx, results=[]), "results", results, dict, codes, weight=ALTERED_USER_WEIGHT)


def _alter_failed(ctx: RequestContext, request: Any, code: ErrorCode | KioErrorCode, message: str | None) -> Any:
    """Every user of the request with ``code``, once each, in name order (Kafka's ``getErrorResponse``)."""
    users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
    return respond(ctx, results=[{"user": u, "error_code": code, "error_message": message} for u in users])


def _alter_error(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    return _alter_failed(ctx, request, code, _ERROR_MESSAGES.get(code))


SPECS: list[ApiSpec] = [
    ApiSpec(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, handle_describe, _describe_error),
    ApiSpec(ALTER_USER_SCRAM_CREDENTIALS, 0, 0, handle_alter, _alter_error),
]
