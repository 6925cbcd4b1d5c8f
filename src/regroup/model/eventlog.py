"""The event log's line schema, shared by every writer (the simulator, ``regroup serve --event-log``) and the
lab that reads them: one flat JSON object per line with exactly these keys, in this order (absent values are
``null``). The schema is documented in docs/simulator.md; keep it stable."""

from __future__ import annotations

import json
import re
from typing import Any, Final

import orjson

#: Every line has exactly these keys, in this order.
FIELDS: Final = (
    "seq",
    "t",
    "type",
    "member",
    "member_id",
    "generation",
    "api",
    "request_id",
    "error",
    "state",
    "topic",
    "partition",
    "value",
    "detail",
)

_KEY: Final = re.compile(r"[a-z_]+")


def detail_fields(detail: str | None) -> dict[str, str]:
    """The ``key=value`` fields of a row's ``detail`` (``group=orders type=classic protocol=range``). A value may
    hold spaces — a group id, a client id inside a member id —: a space-separated piece that is not
    ``key=value`` (a lowercase key) continues the value before it. The first of a repeated key wins."""
    out: dict[str, str] = {}
    current: str | None = None
    for piece in (detail or "").split(" "):
        name, sep, value = piece.partition("=")
        if sep and _KEY.fullmatch(name):
            if name in out:
                current = None
            else:
                out[name] = value
                current = name
        elif current is not None:
            out[current] += " " + piece
    return out


def event_line(row: dict[str, Any]) -> str:
    """``row`` as one line of the log, without its newline: what ``json.dumps(row, separators=(",", ":"))``
    writes (keys in the row's order, everything outside ASCII escaped). ``orjson`` writes it when its bytes are
    the same (no float, whose digits the two may write differently; all ASCII, no DEL, which json escapes),
    about ten times faster: a large group's rebalance writes a row per assigned partition."""
    out = b""
    if not any(type(value) is float for value in row.values()):
        try:
            out = orjson.dumps(row)
        except (orjson.JSONEncodeError, TypeError):
            out = b""
    if out and out.isascii() and b"\x7f" not in out:
        return out.decode("ascii")
    return json.dumps(row, separators=(",", ":"))
