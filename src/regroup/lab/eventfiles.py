"""Reading event logs written by ``regroup simulate --events`` or ``regroup serve --events``: one JSON
object per line with exactly the keys of ``regroup.model.eventlog.FIELDS``. A simulator log holds one group;
a server log may hold many, told apart by ``group=<id>`` in ``detail`` (``group_assignment`` rows follow
their group's ``group_state``), so a file yields one event list per group. Any malformed line is an error
naming the file and the line."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from regroup.lab.errors import LabInputError
from regroup.model.eventlog import FIELDS, detail_fields
from regroup.sim.eventlog import Event

_KEYS = set(FIELDS)
R = TypeVar("R", bound=Mapping[str, Any])  # an event as a lab module holds it
_INTS = ("seq", "t", "generation", "request_id", "partition", "value")
_STRS = ("type", "member", "member_id", "api", "error", "state", "topic", "detail")


def check(event: Any, where: str) -> Event:
    if not isinstance(event, dict):
        raise LabInputError(f"{where}: not a JSON object")
    if event.keys() != _KEYS:
        missing, extra = sorted(_KEYS - set(event)), sorted(set(event) - _KEYS)
        problem = f"missing keys {missing}" if missing else f"unknown keys {extra}"
        raise LabInputError(f"{where}: not an event of the log schema ({problem})")
    for key in _INTS:
        value = event[key]
        if value is not None and type(value) is not int:  # bool is not an int here
            raise LabInputError(f"{where}: {key} must be an integer or null")
    for key in _STRS:
        if event[key] is not None and type(event[key]) is not str:
            raise LabInputError(f"{where}: {key} must be a string or null")
    if event["t"] is None or event["type"] is None:
        raise LabInputError(f"{where}: t and type must not be null")
    return event


def _group_of(event: Mapping[str, Any]) -> str | None:
    return detail_fields(event["detail"]).get("group")


def read_events(path: str) -> list[Event]:
    """Every event of the file, in file order, each checked against the log schema (``LabInputError`` naming
    the file and the line; a file without events is an error too)."""
    events: list[Event] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path}: line {number}"
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise LabInputError(f"{where}: invalid JSON: {exc.msg}") from None
                events.append(check(doc, where))
    except OSError as exc:
        raise LabInputError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LabInputError(f"{path}: cannot read: not UTF-8 text") from None
    if not events:
        raise LabInputError(f"{path}: no events")
    return events


def read_groups(path: str) -> list[tuple[str | None, list[Event]]]:
    """[(group id or None for a simulator log, its events in file order)]."""
    events = read_events(path)
    if events[0]["type"] == "sim_start":
        return [(None, events)]
    groups = by_group(events)
    if not groups:
        raise LabInputError(f"{path}: no group events (neither a simulator log nor a server log)")
    return sorted(groups.items())


def by_group(events: Sequence[R]) -> dict[str, list[R]]:
    """A server log's events per group, in file order: an event belongs to the group its ``detail`` names, a
    ``group_assignment`` row without one to the group of the ``group_state`` row before it."""
    groups: dict[str, list[R]] = {}
    current: str | None = None
    for event in events:
        group = _group_of(event)
        if event["type"] == "group_state":
            current = group
        if group is None and event["type"] == "group_assignment":
            group = current
        if group is not None:
            groups.setdefault(group, []).append(event)
    return groups
