"""Running ``regroup assign``: the strategy on the parsed spec, and the output document as bytes.

The input gives each member's previous assignment as owned partitions and a generation (the neutral
fields); a strategy maps them to its native form with ``with_previous``. Kafka's ``sticky`` carries them in
its subscription user data, which ``with_previous`` would encode and ``assign`` decode again: it reads them
straight from the spec instead (``assign_sticky``), with the same claims and so the same assignment.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import orjson

from regroup.assignors.base import PartitionAssignor
from regroup.assignors.spec import Assignment, GroupSpec


def assignment_of(assignor: PartitionAssignor, spec: GroupSpec) -> Assignment:
    """``assignor.assign(assignor.with_previous(spec))`` for a spec with the neutral fields."""
    sticky = sys.modules.get("regroup.assignors.sticky")  # loaded when the strategy is one of its assignors
    if sticky is not None and type(assignor) is sticky.StickyAssignor:
        from regroup.cli.assign_sticky import owned_sticky

        return owned_sticky(assignor).assign(spec)
    return assignor.assign(assignor.with_previous(spec))


def render(doc: dict[str, Any], indent: int | None) -> bytes:
    """``doc`` as JSON and a newline: compact by orjson, or, with ``indent`` or for what orjson does not
    write (integers beyond 64 bits, keys that are not strings, NumPy scalars), Python's writer."""
    if indent is None:
        try:
            return orjson.dumps(doc) + b"\n"
        except orjson.JSONEncodeError:
            pass
    return (json.dumps(doc, indent=indent) + "\n").encode("utf-8")
