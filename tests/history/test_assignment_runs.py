"""A run of ``group_assignment`` rows handed to the history at once (``Timelines.observe_assignments``,
``HistoryFeed.sink_run``) leaves exactly what handing each row leaves: the same timelines, over random row
sequences whose runs are cut as the server cuts them (one group, one time, one ``detail``), and the same rows
on disk; the console's stream sends a run's lines as it sends the rows."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.console.sse import EventHub
from regroup.history import Timelines
from regroup.server.assignment_run import AssignmentRun
from regroup.server.history_feed import HistoryFeed
from regroup.storage.history_log import read_rows
from tests.history import rows as make
from tests.history.strategies import ordered_rows, server_rows

Row = dict[str, Any]


def _runs(rows: list[Row]) -> list[list[Row]]:
    """``rows`` cut into runs: consecutive group_assignment rows of one time and detail together, every other
    row alone."""
    out: list[list[Row]] = []
    for key, group in itertools.groupby(
        rows, key=lambda r: (r["t"], r["detail"]) if r["type"] == "group_assignment" else object()
    ):
        del key
        out.append(list(group))
    return out


def _state(timelines: Timelines) -> Any:
    groups = timelines.group_ids()
    return (
        groups,
        [timelines.latest_ms(g) for g in groups],
        [json.dumps(timelines.timeline(g), sort_keys=True, default=str) for g in groups],
    )


_GROUPS = ("g", "h")
_MEMBERS = ("a", "b", "c")
_PARTITIONS = st.lists(st.tuples(st.sampled_from(("t", "u")), st.integers(0, 3)), max_size=4)


@st.composite
def _group_story(draw: st.DrawFn) -> list[Row]:
    """Rows of two groups, classic or consumer (one may change type), in the shapes the server writes them:
    state changes, members joining and leaving, assignments and targets as runs, partitions assigned and
    revoked; the time moving either way by a little."""
    out: list[Row] = []
    t = 0
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.integers(-2, 2))
        group = draw(st.sampled_from(_GROUPS))
        member = draw(st.sampled_from(_MEMBERS))
        number = draw(st.integers(0, 4))
        kind = draw(st.sampled_from(("classic_state", "epoch_state", "join", "leave", "run", "held")))
        if kind == "classic_state":
            state = draw(st.sampled_from(("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")))
            style = draw(st.sampled_from((None, "eager", "cooperative")))
            out.append(
                make.classic_state(
                    t, group, state, number, rebalance=style, cause=draw(st.sampled_from((None, "join")))
                )
            )
        elif kind == "epoch_state":
            state = draw(st.sampled_from(("Empty", "Assigning", "Reconciling", "Stable", "Dead")))
            out.append(
                make.epoch_state(
                    t, group, state, number, draw(st.integers(0, 4)), cause=draw(st.sampled_from((None, "join")))
                )
            )
        elif kind == "join":
            out.append(make.joined(t, group, member, number))
        elif kind == "leave":
            out.append(make.left(t, group, member, "leave", number))
        elif kind == "run":
            for holder in draw(st.lists(st.sampled_from(_MEMBERS), max_size=3, unique=True)):
                out.extend(make.assignment(t, group, number, holder, *draw(_PARTITIONS)))
        else:
            out.extend(
                make.held(t, draw(st.sampled_from(("assigned", "revoked"))), group, member, number, *draw(_PARTITIONS))
            )
    return out


@settings(max_examples=400, deadline=None)
@given(st.one_of(_group_story(), ordered_rows(), st.lists(server_rows(), max_size=40)))
def test_a_run_observed_at_once_leaves_what_each_row_leaves(rows: list[Row]) -> None:
    each, at_once = Timelines(10_000), Timelines(10_000)
    for row in rows:
        each.observe(row)
    for run in _runs(rows):
        if run[0]["type"] == "group_assignment":
            at_once.observe_assignments(run[0], lambda run=run: run)  # type: ignore[misc]
        else:
            at_once.observe(run[0])
    assert _state(at_once) == _state(each)
    assert at_once._waiting == each._waiting  # (rows held for a group not known yet)


def _consumer_group(timelines: Timelines) -> None:
    state = {
        "seq": 0,
        "t": 1,
        "type": "group_state",
        "member": None,
        "member_id": None,
        "generation": 2,
        "api": None,
        "request_id": None,
        "error": None,
        "state": "Reconciling",
        "topic": None,
        "partition": None,
        "value": None,
        "detail": "group=g type=consumer protocol=uniform assignment_epoch=2 cause=join",
    }
    timelines.observe(state)


def test_the_feed_keeps_a_run_s_rows_as_it_keeps_rows(tmp_path: Path) -> None:
    members = [(f"m{i}", f"c{i}", [("t", i), ("é", i)]) for i in range(30)]
    pieces = []
    run = AssignmentRun(7, "g", 2, members, lambda held: held)
    while (piece := run.take(11, len(pieces) * 11)) is not None:
        pieces.append(piece)
    by_pieces = HistoryFeed(tmp_path / "a", 86_400_000, lambda: 5)
    by_rows = HistoryFeed(tmp_path / "b", 86_400_000, lambda: 5)
    _consumer_group(by_pieces.timelines)
    _consumer_group(by_rows.timelines)
    for piece in pieces:
        by_pieces.sink_run(piece)
        for row in piece.rows():
            by_rows.sink(row)
    kept = list(read_rows(by_pieces.segments()))
    assert kept == list(read_rows(by_rows.segments()))
    assert len(kept) == 60 and kept == [row for piece in pieces for row in piece.rows()]
    assert by_pieces.timelines.latest_ms("g") == by_rows.timelines.latest_ms("g") == 7


def test_the_stream_sends_a_run_s_lines_as_it_sends_its_rows() -> None:
    async def chunks(send_lines: bool) -> list[bytes]:
        hub = EventHub()
        stream = hub.subscribe()
        assert stream is not None
        run = AssignmentRun(3, "g\u00e9", 1, [("m", "c\x7f", [("t", 0), ("t", 1)])], lambda held: held)
        piece = run.take(10, 0)
        assert piece is not None
        if send_lines:
            hub.publish_lines(piece.lines)
        else:
            for row in piece.rows():
                hub.publish(row)
        return [await anext(stream) for _ in range(3)][1:]  # (after its retry line)

    assert asyncio.run(chunks(True)) == asyncio.run(chunks(False))
