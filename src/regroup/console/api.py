"""The console's JSON (docs/operations.md, "HTTP API and dashboard"): the documents ``/api/groups``,
``/api/groups/<id>`` and ``/api/groups/<id>/timeline`` answer, built from the operator view's plain values.
Every group object carries both ``protocol`` (a classic group's) and ``assignor`` (a consumer or share group's),
the one that does not apply null; a group's detail carries both ``generation`` (classic) and ``epoch`` (consumer,
share) the same way. Partition numbers are JSON object keys in ``lag``, hence strings."""

from __future__ import annotations

import json
from typing import Any, Final

from regroup.console.http import Response
from regroup.console.view import GroupDetail, GroupSummary

__all__ = ["error", "group_document", "groups_document", "json_response"]

CONTENT_TYPE: Final = "application/json"
NO_STORE: Final = (("Cache-Control", "no-store"),)


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
