"""``server/member_run.py``: a call's ``member_state`` rows, taken in pieces of any size, are the rows each member
joining or leaving makes, in order, with consecutive ``seq`` numbers; each line is exactly the event-log line of
its row (``event_line``, ``json.dumps`` with compact separators), over any ids and reasons (quotes, control
characters, DEL, text outside ASCII); and ``GroupEvents`` hands them to a plain sink, a sink taking pieces and
the events file alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.events import MemberJoined, MemberLeft
from regroup.coordinator.result import Result
from regroup.model.eventlog import FIELDS, event_line
from regroup.server.events import GroupEvents
from regroup.server.member_run import MemberPiece, MemberRun
from tests.server.test_group_events_turns import coordinator

_TEXT = st.text(st.characters(codec="utf-8"), max_size=8) | st.sampled_from(('"', "\\", "\x7f", "\x00\n", "é", "g=h"))
_MOVES = st.lists(
    st.builds(
        lambda left, group, member, client, generation, reason: (
            MemberLeft(group, "classic", member, client, generation, reason)
            if left
            else MemberJoined(group, "classic", member, client, generation, ("range",))
        ),
        st.booleans(),
        _TEXT,
        _TEXT,
        _TEXT,
        st.integers(-1, 2**31 - 1),
        st.sampled_from(("leave", "session timeout", "join timeout", "replaced")),
    ),
    max_size=12,
)


def _expected(t: int, moved: list[MemberJoined | MemberLeft], first_seq: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, event in enumerate(moved):
        row: dict[str, Any] = dict.fromkeys(FIELDS)
        row.update(member=event.client_id, member_id=event.member_id, generation=event.generation)
        if isinstance(event, MemberLeft):
            row.update(state="Left", detail=f"group={event.group_id} reason={event.reason.replace(' ', '-')}")
        else:
            row.update(state="Joined", detail=f"group={event.group_id}")
        row.update(seq=first_seq + i, t=t, type="member_state")
        out.append(row)
    return out


@settings(max_examples=200, deadline=None)
@given(moved=_MOVES, most=st.integers(1, 5), first_seq=st.integers(0, 10**6), t=st.integers(0, 2**41))
def test_a_runs_pieces_are_its_members_rows_and_their_lines(
    moved: list[MemberJoined | MemberLeft], most: int, first_seq: int, t: int
) -> None:
    run = MemberRun(t, moved)
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    seq = first_seq
    while (piece := run.take(most, seq)) is not None:
        assert isinstance(piece, MemberPiece) and 1 <= len(piece.lines) <= most and piece.t == t
        taken = list(piece.rows())
        assert [list(row) for row in taken] == [list(FIELDS)] * len(taken)  # (the schema's keys, in its order)
        rows += taken
        lines += piece.lines
        seq += len(piece.lines)
    expected = _expected(t, moved, first_seq)
    assert rows == expected
    assert lines == [event_line(row) for row in expected]
    assert lines == [json.dumps(row, separators=(",", ":")) for row in expected]


def test_group_events_hand_the_rows_to_every_kind_of_sink_alike(tmp_path: Path) -> None:
    moved: list[MemberJoined | MemberLeft] = [
        MemberJoined("g", "classic", f"m{i}", f"client-é{i}", 4, ("range",)) for i in range(3)
    ]
    moved.append(MemberLeft("g", "classic", "m0", "client-é0", 4, "session timeout"))
    path = tmp_path / "events.jsonl"
    observer = GroupEvents(path)
    plain: list[dict[str, Any]] = []
    pieces: list[dict[str, Any]] = []
    piece_lines: list[str] = []

    def runs(piece: Any) -> None:
        pieces.extend(piece.rows())
        piece_lines.extend(piece.lines)

    observer.add_sink(plain.append)
    observer.add_sink(lambda row: None, runs)
    result = Result()
    result.events.extend(moved)
    observer(coordinator(), result, 25)
    observer.close()
    expected = _expected(25, moved, 0)
    assert plain == expected and pieces == expected
    assert [json.loads(line) for line in path.read_text().splitlines()] == expected
    assert piece_lines == path.read_text().splitlines()
