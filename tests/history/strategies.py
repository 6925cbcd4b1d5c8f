"""Hypothesis strategies for event-log rows: arbitrary dicts, and rows of the server's types with arbitrary
plausible values (a handful of groups, members and partitions, so that rows meet)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from regroup.model.eventlog import FIELDS

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12), st.binary(max_size=4)
)
_VALUES = st.one_of(
    _SCALARS, st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(max_size=3), _SCALARS, max_size=2)
)

#: any dict at all, its keys those of the schema or others
any_rows = st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=6)), _VALUES, max_size=16)

_TYPES = ("group_state", "member_state", "group_assignment", "assigned", "revoked", "request", "sim_start")
_STATES = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Assigning",
    "Reconciling",
    "Joined",
    "Left",
)
_TOKENS = st.sampled_from(
    (
        "group=g",
        "group=h",
        "type=classic",
        "type=consumer",
        "type=share",
        "rebalance=eager",
        "rebalance=cooperative",
        "cause=join",
        "cause=leave",
        "cause=metadata",
        "reason=session-timeout",
        "assignment_epoch=1",
        "assignment_epoch=2",
        "assignment_epoch=x",
        "protocol=range",
        "novalue",
    )
)


@st.composite
def server_rows(draw: st.DrawFn) -> dict[str, Any]:
    """A row of the schema with values the timeline reads, drawn from small sets (times not sorted)."""
    row: dict[str, Any] = dict.fromkeys(FIELDS)
    row.update(
        seq=draw(st.integers(0, 1_000)),
        t=draw(st.integers(0, 200)),
        type=draw(st.sampled_from(_TYPES)),
        member_id=draw(st.sampled_from(("a", "b", "c", None))),
        generation=draw(st.one_of(st.integers(0, 4), st.none())),
        state=draw(st.sampled_from(_STATES)),
        topic=draw(st.sampled_from(("t", "u"))),
        partition=draw(st.integers(0, 2)),
        detail=" ".join(draw(st.lists(_TOKENS, max_size=5))),
    )
    return row


@st.composite
def ordered_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Server-like rows in time order."""
    rows = draw(st.lists(server_rows(), max_size=60))
    rows.sort(key=lambda r: r["t"])
    return rows
