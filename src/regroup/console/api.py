"""The console's JSON (docs/operations.md, "HTTP API and dashboard"): the documents ``/api/groups``,
``/api/groups/<id>``, ``/api/groups/<id>/timeline`` and ``/api/groups/<id>/replays/<replay id>`` answer, built
from the operator view's plain values, and the body ``POST /api/groups/<id>/replays`` reads (``replay_request``).
Every group object carries both ``protocol`` (a classic group's) and ``assignor`` (a consumer or share group's),
the one that does not apply null; a group's detail carries both ``generation`` (classic) and ``epoch`` (consumer,
share) the same way. Partition numbers are JSON object keys in ``lag``, hence strings."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from regroup.console.http import Response
from regroup.console.view import GroupDetail, GroupSummary, ReplayRequest, ReplayState

__all__ = ["error", "group_document", "groups_document", "json_response", "replay_document", "replay_request"]

CONTENT_TYPE: Final = "application/json"
NO_STORE: Final = (("Cache-Control", "no-store"),)
#: a strategy's or protocol's name in a replay's body (the lab checks that it is one it knows)
NAME: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_NAMES: Final = 16
REPLAY_FIELDS: Final = frozenset({"since_ms", "until_ms", "strategies", "protocols", "spark"})


def groups_document(groups: list[GroupSummary]) -> dict[str, Any]:
    return {
        "groups": [
            {
                "group_id": g.group_id,
                "type": g.type,
                "state": g.state,
                "protocol": g.protocol,
                "assignor": g.assignor,
                "members": g.members,
                "lag": g.lag,
            }
            for g in groups
        ]
    }


def group_document(group: GroupDetail) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "type": group.type,
        "state": group.state,
        "generation": group.generation,
        "epoch": group.epoch,
        "protocol": group.protocol,
        "assignor": group.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "instance_id": m.instance_id,
                "rack": m.rack,
                "assignment": {topic: list(partitions) for topic, partitions in m.assignment.items()},
            }
            for m in group.members
        ],
        "lag": None
        if group.lag is None
        else {topic: {str(p): lag for p, lag in sorted(by.items())} for topic, by in sorted(group.lag.items())},
    }


def json_response(document: Any, status: int = 200) -> Response:
    body = json.dumps(document, separators=(",", ":")).encode()
    return Response(status, body, CONTENT_TYPE, NO_STORE)


def error(status: int, message: str) -> Response:
    """``{"error": message}`` with ``status``."""
    return json_response({"error": message}, status)


def replay_request(group_id: str, body: bytes) -> ReplayRequest | str:
    """The replay a POST's JSON body asks for, or why it is not one (one line)."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "the body is not JSON"
    if not isinstance(doc, dict):
        return "the body is not a JSON object"
    unknown = sorted(set(doc) - REPLAY_FIELDS)
    if unknown:
        return f"unknown fields: {', '.join(unknown)[:200]}"
    bounds: list[int] = []
    for name in ("since_ms", "until_ms"):
        value = doc.get(name)
        if type(value) is not int:  # (bool is not an int here)
            return f"{name}: an integer is required"
        if not 0 <= value < 2**62:
            return f"{name}: out of range"
        bounds.append(value)
    if bounds[1] <= bounds[0]:
        return f"until_ms {bounds[1]} is not after since_ms {bounds[0]}"
    lists: list[tuple[str, ...]] = []
    for name in ("strategies", "protocols"):
        value = doc.get(name)
        if value is None:
            lists.append(())
            continue
        if not isinstance(value, list) or len(value) > MAX_NAMES:
            return f"{name}: a list of at most {MAX_NAMES} names is required"
        if not all(isinstance(v, str) and NAME.fullmatch(v) for v in value):
            return f"{name}: each must be a name such as range or cooperative-sticky"
        lists.append(tuple(value))
    spark = doc.get("spark", False)
    if not isinstance(spark, bool):
        return "spark: true or false"
    return ReplayRequest(
        group_id=group_id, since_ms=bounds[0], until_ms=bounds[1], strategies=lists[0], protocols=lists[1],
        spark=spark,
    )  # fmt: skip


def replay_document(state: ReplayState) -> dict[str, Any]:
    return {
        "replay_id": state.replay_id,
        "group_id": state.group_id,
        "since_ms": state.since_ms,
        "until_ms": state.until_ms,
        "status": state.status,
        "error": state.error,
        "result": None if state.result is None else dict(state.result),
    }
