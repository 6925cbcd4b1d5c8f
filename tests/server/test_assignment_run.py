"""``server/assignment_run.py``: a run's lines are exactly the event-log lines of its rows (``event_line``,
``json.dumps`` with compact separators), over any ids and topic names (quotes, control characters, DEL,
text outside ASCII); its rows, taken in pieces of any size, are the members' rows in member id order with
consecutive ``seq`` numbers; and ``GroupEvents`` hands a run's rows to a plain sink, a sink taking pieces and
the events file alike, in order with the rows around them."""

from __future__ import annotations

import itertools
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
from regroup.server.member_run import MemberPiece
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
    total = sum(len(held) for _, held in members.values()) + len(members)
    for size in itertools.islice(itertools.cycle(sizes), total + 1):  # (each piece: a row or a member walked)
        piece = run.take(size, seq)
        if piece is None:
            break
        assert 1 <= len(piece.lines) + piece.walked <= size
        assert [piece.row(i) for i in range(len(piece.lines))] == list(piece.rows())
        for line, row in zip(piece.lines, piece.rows(), strict=True):
            assert tuple(row) == FIELDS
            assert line == event_line(row) == json.dumps(row, separators=(",", ":"))
            assert json.loads(line) == row
        rows.extend(piece.rows())
        seq += len(piece.lines)
    assert run.take(5, seq) is None
    assert rows == _expected(t, group_id, generation, members, first_seq)


def test_members_without_rows_are_walked_a_piece_s_worth_at_a_time() -> None:
    """A classic group of many members, most of them assigned nothing: a piece walks ``most`` members at most,
    those without rows counting as rows, so no piece walks the whole group; the rows are still all there, in
    member order, with consecutive ``seq`` numbers."""
    members = [(f"m{i:03d}", f"c{i}", [("t", i)] if i % 40 == 7 else []) for i in range(200)]
    run = AssignmentRun(5, "g", 1, members, lambda held: held)
    walked: list[int] = []
    rows: list[dict[str, Any]] = []
    seq = 0
    while (piece := run.take(10, seq)) is not None:
        assert len(piece.lines) + piece.walked <= 10
        walked.append(piece.walked)
        rows.extend(piece.rows())
        seq += len(piece.lines)
    assert sum(walked) == 195 and max(walked) == 10
    assert [(row["member_id"], row["partition"], row["seq"]) for row in rows] == [
        (f"m{i:03d}", i, k) for k, i in enumerate(range(7, 200, 40))
    ]


def test_a_member_of_many_rows_has_only_the_rows_handed_out_encoded() -> None:
    """A member holding 10,000 partitions: a piece of 10 rows encodes those 10 of its rows, not all of them
    (the run's memo of the member holds as many); the next run of the group, the member holding the very same
    object, takes the memo over and goes on from there, its lines those of its rows."""
    held = [("t", p) for p in range(10_000)]
    first = AssignmentRun(5, "g", 1, [("m", "c", held)], lambda h: h)
    piece = first.take(10, 0)
    assert piece is not None and len(piece.lines) == 10
    assert len(first.memo["m"][4]) == 10
    again = AssignmentRun(6, "g", 2, [("m", "c", held)], lambda h: h, memo=first.memo)
    lines: list[str] = []
    while (piece := again.take(3_000, len(lines))) is not None:
        lines.extend(piece.lines)
    assert len(again.memo["m"][4]) == 10_000
    assert lines == [event_line(row) for row in _expected(6, "g", 2, {"m": ("c", held)}, 0)]


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
    pieces: list[Piece | MemberPiece] = []
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
    runs = [piece for piece in pieces if isinstance(piece, Piece)]
    assert [r for piece in runs for r in piece.rows()] == assignments
    assert [line for piece in runs for line in piece.lines] == [event_line(r) for r in assignments]
    members = [r for piece in pieces if isinstance(piece, MemberPiece) for r in piece.rows()]
    assert members == [r for r in plain if r["type"] == "member_state"] and members
    assert others == [r for r in plain if r["type"] not in ("group_assignment", "member_state")]
    assert plain[-1]["type"] == "group_state" and plain[-1]["state"] == "Stable"  # (after the run)


def _lines(run: AssignmentRun[Any], size: int) -> list[str]:
    out: list[str] = []
    while (piece := run.take(size, len(out))) is not None:
        out.extend(piece.lines)
    return out


@settings(max_examples=150, deadline=None)
@given(
    first=_MEMBERS,
    changes=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from(("keep", "same-content", "other", "client"))), max_size=8
    ),
    size=st.integers(1, 5),
)
def test_a_run_given_the_last_run_s_memo_writes_what_a_run_without_one_writes(
    first: dict[str, Any], changes: list[tuple[int, str]], size: int
) -> None:
    """Members holding the very same object as in the last run take their rows from the memo; any other member
    (a new object, even an equal one; another client id) has them made again: the lines are the same either
    way."""
    members = [(m, c, list(held)) for m, (c, held) in sorted(first.items())]
    partitions = list  # (each held list is a row list already)
    last = AssignmentRun(1, "g", 1, members, partitions)
    _lines(last, size)
    after = list(members)
    for index, change in changes:
        if not after:
            break
        member_id, client_id, held = after[index % len(after)]
        if change == "same-content":
            held = list(held)
        elif change == "other":
            held = [*held, ("z", index)]
        elif change == "client":
            client_id += "'"
        after[index % len(after)] = (member_id, client_id, held)
    remembered = AssignmentRun(2, "g", 2, after, partitions, last.memo)
    fresh = AssignmentRun(2, "g", 2, after, partitions)
    assert _lines(remembered, size) == _lines(fresh, size)
    assert set(remembered.memo) == {m for m, _, _ in after}


def test_a_renamed_topic_is_not_taken_from_the_memo() -> None:
    """The same targets after the cluster image changed (a topic gone: named by its id): the rows say so."""
    observer = GroupEvents()
    rows: list[dict[str, Any]] = []
    observer.add_sink(rows.append, lambda piece: rows.extend(piece.rows()))
    c = coordinator()
    topic = topic_id_for("t0")
    targets = (("m1", "c1", {topic: frozenset([0, 1])}),)
    observer(c, _result(TargetComputed("g", 2, "uniform", targets)), 1)
    c.update_metadata(ClusterImage.of([TopicImage(topic_id=topic_id_for("t1"), name="t1", partitions=3)]), 2)
    observer(c, _result(TargetComputed("g", 3, "uniform", targets)), 2)
    named = [(r["generation"], r["topic"]) for r in rows if r["type"] == "group_assignment"]
    assert named == [(2, "t0"), (2, "t0"), (3, str(topic)), (3, str(topic))]


def _result(*events: Any) -> Result:
    result = Result()
    result.events.extend(events)
    return result


def test_a_dead_group_s_memo_is_forgotten() -> None:
    """A memo per group lives as long as the group: groups made and deleted over and over leave none behind."""
    observer = GroupEvents()
    observer.add_sink(lambda row: None, lambda piece: None)
    c = coordinator()
    for i in range(50):
        group = f"g{i}"
        targets = ((f"m{i}", "c", {topic_id_for("t0"): frozenset([0])}),)
        observer(c, _result(TargetComputed(group, 2, "uniform", targets)), i)
        observer(c, _result(GroupStateChanged(group, "consumer", "Dead", 2, "uniform", None, None, 2, 0)), i)
    assert observer._memos == {}
