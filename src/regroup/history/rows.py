"""One event-log row as the timeline reads it: the few fields it uses, checked (a row of another type, or one
whose values do not have the schema's types, is not read at all), and the ``key=value`` tokens of its
``detail``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from regroup.model.eventlog import detail_fields

#: the row types the timeline reads
GROUP_STATE: Final = "group_state"
MEMBER_STATE: Final = "member_state"
GROUP_ASSIGNMENT: Final = "group_assignment"
ASSIGNED: Final = "assigned"
REVOKED: Final = "revoked"
_TYPES: Final = frozenset((GROUP_STATE, MEMBER_STATE, GROUP_ASSIGNMENT, ASSIGNED, REVOKED))
#: row types naming one partition of one member
_PARTITION_ROWS: Final = frozenset((GROUP_ASSIGNMENT, ASSIGNED, REVOKED))


@dataclass(slots=True)
class Row:
    t: int
    type: str
    #: the group named by ``group=`` in ``detail`` (None: not named; a classic ``group_assignment`` row of an
    #: older log follows its group's ``group_state`` row)
    group_id: str | None
    member_id: str | None
    generation: int | None
    state: str | None
    topic: str | None
    partition: int | None
    fields: dict[str, str]


def _int(value: Any) -> int | None:
    return value if type(value) is int else None  # (bool is not an int here)


def _str(value: Any) -> str | None:
    return value if type(value) is str else None


#: the last ``detail`` read and its fields: a large group's rebalance writes a row per assigned partition,
#: every one with the same ``detail``
_LAST_DETAIL: tuple[str | None, dict[str, str]] = (None, {})


def tokens(detail: str | None) -> dict[str, str]:
    """The ``key=value`` fields of a ``detail`` string (``model.eventlog.detail_fields``: values may hold
    spaces; the first of a repeated key wins), a dict of the caller's own. The last string read is remembered,
    its fields copied rather than parsed again."""
    global _LAST_DETAIL
    last = _LAST_DETAIL
    if detail is not None and last[0] == detail:
        return dict(last[1])
    fields = detail_fields(detail)
    _LAST_DETAIL = (detail, dict(fields))
    return fields


def parse(row: Mapping[str, Any]) -> Row | None:
    """The row as the timeline reads it, or None: not a mapping, another type, or a field it needs missing
    or of the wrong type."""
    try:
        kind = row.get("type")
        if kind not in _TYPES:
            return None
        t = _int(row.get("t"))
        detail = row.get("detail")
        if t is None or (detail is not None and type(detail) is not str):
            return None
        fields = tokens(detail)
        parsed = Row(
            t=t,
            type=kind,
            group_id=fields.get("group") or None,
            member_id=_str(row.get("member_id")),
            generation=_int(row.get("generation")),
            state=_str(row.get("state")),
            topic=_str(row.get("topic")),
            partition=_int(row.get("partition")),
            fields=fields,
        )
    except (AttributeError, TypeError):  # not a mapping, or one whose ``get`` fails
        return None
    if kind in _PARTITION_ROWS:
        if parsed.member_id is None or parsed.topic is None or parsed.partition is None:
            return None
    elif parsed.state is None or (kind == MEMBER_STATE and parsed.member_id is None):
        return None
    if kind == GROUP_STATE and parsed.generation is None:
        return None
    return parsed
