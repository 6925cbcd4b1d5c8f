"""A scenario member's application model (``regroup.client.app.AppModel``) read from its JSON fields, for
``sim.scenario``: ``max_poll_records``, ``processing_ms`` (a number, or ``{"distribution": ...}``),
``commit_on_revoke``, ``revoke_ms``, ``assign_ms``, ``client``, ``heartbeat_phase``, ``startup_ms``
(docs/simulator.md, "The application model")."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from regroup.client.app import CLIENTS, DEFAULT_APP, HEARTBEAT_PHASES, AppModel

#: the member fields of the application model, in the order the docs list them
APP_FIELDS: Final = (
    "max_poll_records",
    "processing_ms",
    "commit_on_revoke",
    "revoke_ms",
    "assign_ms",
    "client",
    "heartbeat_phase",
    "startup_ms",
)
_DISTRIBUTION_FIELDS: Final = {
    "fixed": ("value",),
    "uniform": ("min", "max"),
    "exponential": ("mean",),
    "lognormal": ("median", "sigma"),
}

Fail = Callable[[str, str], Exception]


def read_app(doc: dict[str, Any], where: str, fail: Fail) -> AppModel:
    """The application model of a member document (fields absent: the defaults)."""
    if not any(key in doc for key in APP_FIELDS):
        return DEFAULT_APP
    out: dict[str, Any] = {}
    if "max_poll_records" in doc:
        out["max_poll_records"] = _int(doc["max_poll_records"], f"{where}.max_poll_records", 1, fail)
    if "processing_ms" in doc:
        out["processing"] = processing(doc["processing_ms"], f"{where}.processing_ms", fail)
    if "commit_on_revoke" in doc:
        if not isinstance(doc["commit_on_revoke"], bool):
            raise fail(f"{where}.commit_on_revoke", "must be true or false")
        out["commit_on_revoke"] = doc["commit_on_revoke"]
    for key in ("revoke_ms", "assign_ms", "startup_ms"):
        if key in doc:
            out[key] = _int(doc[key], f"{where}.{key}", 0, fail)
    for key, allowed in (("client", CLIENTS), ("heartbeat_phase", HEARTBEAT_PHASES)):
        if key in doc:
            if doc[key] not in allowed:
                raise fail(f"{where}.{key}", f"must be one of {', '.join(allowed)}")
            out[key] = doc[key]
    return AppModel(**out)


def processing(value: Any, where: str, fail: Fail) -> tuple[object, ...]:
    """A per-record processing time: a number of milliseconds (fixed), or an object naming a distribution."""
    if _number(value):
        if value < 0:
            raise fail(where, "must not be negative")
        return ("fixed", float(value))
    if not isinstance(value, dict):
        raise fail(where, "must be a number of milliseconds or {distribution: ..., ...}")
    kind = value.get("distribution")
    if kind not in _DISTRIBUTION_FIELDS:
        raise fail(f"{where}.distribution", f"must be one of {', '.join(_DISTRIBUTION_FIELDS)}")
    names = _DISTRIBUTION_FIELDS[kind]
    for key in value:
        if key != "distribution" and key not in names:
            raise fail(f"{where}.{key}", f"unknown field (a {kind} distribution takes {', '.join(names)})")
    numbers: list[float] = []
    for name in names:
        if name not in value:
            raise fail(f"{where}.{name}", "missing")
        if not _number(value[name]) or value[name] < 0:
            raise fail(f"{where}.{name}", "must be a number >= 0")
        numbers.append(float(value[name]))
    result: tuple[object, ...] = (kind, *numbers)
    try:
        AppModel(processing=result)
    except ValueError as exc:
        raise fail(where, str(exc)) from None
    return result


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _int(value: Any, where: str, minimum: int, fail: Fail) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(where, "must be an integer")
    if value < minimum:
        raise fail(where, f"must be >= {minimum}")
    return value
