"""``server/assignment_run.py``: a run's lines are exactly the event-log lines of its rows (``event_line``,
``json.dumps`` with compact separators), over any ids and topic names (quotes, control characters, DEL,
text outside ASCII); its rows, taken in pieces of any size, are the members' rows in member id order with
consecutive ``seq`` numbers; and ``GroupEvents`` hands a run's rows to a plain sink, a sink taking pieces and
the events file alike, in order with the rows around them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.events import GroupStateChanged, MemberJoined, TargetComputed
from regroup.coordinator.result import Result
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.model.eventlog import FIELDS, event_line
from regroup.server.assignment_run import AssignmentRun, Piece
from regroup.server.events import GroupEvents
from tests.server.test_group_events_turns import coordinator

_TEXT = st.text(st.characters(codec="utf-8"), max_size=8) | st.sampled_from(('"', "\\", "\x7f", "\x00\n", "é", "g=h"))
_MEMBERS = st.dictionaries(
    _TEXT, st.tuples(_TEXT, st.lists(st.tuples(_TEXT, st.integers(0, 2**31 - 1)), max_size=4)), max_size=6
)


def _expected(t: int, group_id: str, generation: int, members: dict[str, Any], first_seq: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for member_id in sorted(members):
        client_id, held = members[member_id]
        for topic, partition in held:
            row: dict[str, Any] = dict.fromkeys(FIELDS)
            row.update(
                seq=first_seq + len(out),
                t=t,
                type="group_assignment",
                member=client_id,
                member_id=member_id,
                generation=generation,
                topic=topic,
                partition=partition,
                detail=f"group={group_id}",
            )
            out.append(row)
    return out


@settings(max_examples=200, deadline=None)
@given(
    t=st.integers(0, 2**53),
    group_id=_TEXT,
    generation=st.integers(-1, 2**31 - 1),
    members=_MEMBERS,
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=40),
    first_seq=st.integers(0, 2**40),
)
def test_pieces_are_the_rows_and_their_lines_are_their_event_lines(
    t: int, group_id: str, generation: int, members: dict[str, Any], sizes: list[int], first_seq: int
) -> None:
    run = AssignmentRun(
        t, group_id, generation, [(m, c, held) for m, (c, held) in members.items()], lambda held: list(held)
    )
    rows: list[dict[str, Any]] = []
    seq = first_seq
    for size in sizes * 20:
        piece = run.take(size, seq)
        if piece is None:
            break
        assert 1 <= len(piece.lines) <= size and len(piece.cells) == len(piece.lines)
        for line, row in zip(piece.lines, piece.rows(), strict=True):
            assert tuple(row) == FIELDS
            assert line == event_line(row) == json.dumps(row, separators=(",", ":"))
            assert json.loads(line) == row
        rows.extend(piece.rows())
        seq += len(piece.lines)
    assert run.take(5, seq) is None
    assert rows == _expected(t, group_id, generation, members, first_seq)


def test_a_piece_s_rows_are_fresh_dicts() -> None:
    run = AssignmentRun(5, "g", 1, [("m", "c", [("t", 0)])], lambda held: held)
    piece = run.take(10, 0)
    assert isinstance(piece, Piece)
    first = piece.row(0)
    first["topic"] = "changed"
    assert piece.row(0)["topic"] == "t"


def _observe_large_target(observer: GroupEvents, members: int) -> int:
    """A consumer group of ``members`` members, three of them joining, then one target of one or two partitions
    each, then the group Stable; how many partitions the target holds."""
    c = coordinator()
    image = ClusterImage.of(
        TopicImage(topic_id=topic_id_for(name), name=name, partitions=members) for name in ("t", "u")
    )
    c.update_metadata(image, 0)
    joins = [MemberJoined("g", "consumer", f"m{i:04d}", f"c{i}", 1, ()) for i in range(3)]
    state = GroupStateChanged("g", "consumer", "Reconciling", 2, "uniform", None, None, 1, members)
    targets = tuple(
        (f"m{i:04d}", f"c{i}", {topic_id_for("t" if i % 3 else "u"): frozenset([i, (i * 7) % members])})
        for i in range(members)
    )
    result = Result()
    result.events.extend([*joins, state, TargetComputed("g", 2, "uniform", targets)])
    observer(c, result, 10)
    after = Result()
    after.events.append(GroupStateChanged("g", "consumer", "Stable", 2, "uniform", None, None, 2, members))
    observer(c, after, 11)
    return sum(len(ps) for _, _, target in targets for ps in target.values())


def test_every_sink_and_the_file_get_the_same_rows_in_order(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    observer = GroupEvents(path)
    plain: list[dict[str, Any]] = []
    pieces: list[Piece] = []
    others: list[dict[str, Any]] = []
    observer.add_sink(plain.append)
    observer.add_sink(others.append, pieces.append)
    count = _observe_large_target(observer, 1_500)  # (more than a turn's worth: handed out by close here)
    observer.close()
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert plain == written
    assert [r["seq"] for r in plain] == list(range(len(plain)))
    assignments = [r for r in plain if r["type"] == "group_assignment"]
    assert len(assignments) == count > 1_500
    assert [r for piece in pieces for r in piece.rows()] == assignments
    assert [line for piece in pieces for line in piece.lines] == [event_line(r) for r in assignments]
    assert others == [r for r in plain if r["type"] != "group_assignment"]
    assert plain[-1]["type"] == "group_state" and plain[-1]["state"] == "Stable"  # (after the run)
