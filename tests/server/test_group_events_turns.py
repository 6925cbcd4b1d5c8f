"""A large group's ``group_assignment`` rows are handed out a turn's worth at a time (``server/events.py``):
a consumer group whose target covers 1,800 partitions of three members gives ``ROWS_PER_TURN`` rows within the
call that computed it and the rest in later turns of the event loop, every later row behind them; a target of
many members gives none within the call; in the end the rows, their order and their ``seq`` are those handed
out at once. A long backlog drains faster, too many waiting are handed out at once; ``close`` hands out what
waits. A call with many members leaving logs a line for each of the first few only, and hands out their rows over
turns too, as it does a member's ``assigned`` rows of many partitions."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import GroupStateChanged, MemberJoined, MemberLeft, TargetComputed
from regroup.coordinator.result import Result
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.server import events as events_module
from regroup.server.events import (
    MEMBER_LINES_PER_CALL,
    MEMBER_LINES_PER_WINDOW,
    MEMBER_LINES_WINDOW_MS,
    ROWS_PER_TURN,
    GroupEvents,
)

PARTITIONS = 600


def target_event(epoch: int) -> TargetComputed:
    """Three members, each with one topic of 600 partitions."""
    targets = tuple(
        (f"member-{i}", f"client-{i}", {topic_id_for(f"t{i}"): frozenset(range(PARTITIONS))}) for i in range(3)
    )
    return TargetComputed("big", epoch, "uniform", targets)


def state_event(epoch: int) -> GroupStateChanged:
    return GroupStateChanged("big", "consumer", "Reconciling", epoch, "uniform", None, None, epoch, 3)


def coordinator() -> GroupCoordinator:
    c = GroupCoordinator()
    image = ClusterImage.of(
        TopicImage(topic_id=topic_id_for(f"t{i}"), name=f"t{i}", partitions=PARTITIONS) for i in range(3)
    )
    c.update_metadata(image, 0)
    return c


def result_of(*events: Any) -> Result:
    result = Result()
    result.events.extend(events)
    return result


def handed_over(calls: list[tuple[Result, int]], expected: list[dict[str, Any]]) -> list[int]:
    """How many rows were handed out after each of ``calls`` (results and their times, given in turn to one
    observer over one coordinator), then after each later turn of the event loop until none wait; the rows in the
    end must be ``expected``."""

    async def scenario() -> list[int]:
        seen: list[dict[str, Any]] = []
        observer = GroupEvents()
        observer.add_sink(seen.append)
        c = coordinator()
        handed: list[int] = []
        for result, now in calls:
            observer(c, result, now)
            handed.append(len(seen))
        while observer.backlog_rows:
            await asyncio.sleep(0)
            handed.append(len(seen))
        assert seen == expected
        observer.close()
        return handed

    return asyncio.run(scenario())


def rows_at_once(tmp_path: Path) -> list[dict[str, Any]]:
    """The rows with no event loop running: all handed out within the calls."""
    path = tmp_path / "at-once.jsonl"
    observer = GroupEvents(path)
    c = coordinator()
    observer(c, result_of(target_event(2)), 10)
    observer(c, result_of(state_event(3)), 11)
    observer.close()
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_large_target_is_handed_out_a_turn_at_a_time(tmp_path: Path) -> None:
    expected = rows_at_once(tmp_path)
    assert [row["type"] for row in expected].count("group_assignment") == 3 * PARTITIONS

    # (the state row behind the rows still waiting)
    handed = handed_over([(result_of(target_event(2)), 10), (result_of(state_event(3)), 11)], expected)
    assert handed[:2] == [0, 0]  # (none within the calls: a target's rows are made from the next turn on)
    assert all(b - a <= ROWS_PER_TURN for a, b in itertools.pairwise(handed))
    assert handed[-1] == 3 * PARTITIONS + 1 and len(handed) >= 4


def test_close_hands_out_what_waits(tmp_path: Path) -> None:
    expected = rows_at_once(tmp_path)

    async def scenario() -> None:
        path = tmp_path / "closed.jsonl"
        observer = GroupEvents(path)
        c = coordinator()
        observer(c, result_of(target_event(2)), 10)
        observer(c, result_of(state_event(3)), 11)
        assert observer.backlog_rows > 0
        observer.close()
        assert [json.loads(line) for line in path.read_text().splitlines()] == expected

    asyncio.run(scenario())


def many_members_event(epoch: int) -> TargetComputed:
    """1,800 members of one partition each."""
    targets = tuple(
        (f"member-{i:04d}", f"client-{i}", {topic_id_for(f"t{i % 3}"): frozenset({i // 3})}) for i in range(1_800)
    )
    return TargetComputed("big", epoch, "uniform", targets)


def _watched_target() -> tuple[GroupEvents, list[dict[str, Any]]]:
    """An observer whose sink keeps every row it is handed, given the 1,800 members' target just now."""
    seen: list[dict[str, Any]] = []
    observer = GroupEvents()
    observer.add_sink(seen.append)
    observer(coordinator(), result_of(many_members_event(2)), 10)
    return observer, seen


def test_a_long_backlog_is_handed_out_faster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A target of many members hands out none of its rows within the call that computed it; with more rows
    waiting than turns of ``ROWS_PER_TURN`` hand out quickly, a turn hands out a ``BACKLOG_SHARE`` of them."""
    monkeypatch.setattr(events_module, "ROWS_PER_TURN", 10)
    path = tmp_path / "at-once.jsonl"
    observer = GroupEvents(path)
    observer(coordinator(), result_of(many_members_event(2)), 10)
    observer.close()
    expected = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(expected) == 1_800

    async def scenario() -> list[int]:
        observer, seen = _watched_target()
        handed = [len(seen)]
        while observer.backlog_rows:
            await asyncio.sleep(0)
            handed.append(len(seen))
        assert seen == expected
        return handed

    handed = asyncio.run(scenario())
    assert handed[0] == 0 and handed[1] == 1_800 // events_module.BACKLOG_SHARE


class _SteppingClock:
    """``time`` for the events module: each reading ``step`` seconds after the one before."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now


def _first_turns(observer_rows: int) -> list[int]:
    """Rows handed out by the call and by each of the next two turns, for 1,800 rows waiting."""

    async def scenario() -> list[int]:
        observer, seen = _watched_target()
        handed = [len(seen)]
        for _ in range(2):
            await asyncio.sleep(0)
            handed.append(len(seen))
        observer.close()
        assert len(seen) == observer_rows
        return handed

    return asyncio.run(scenario())


def test_a_turn_hands_out_rows_for_a_slice_of_time_while_few_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """While fewer than ``SLICED_BACKLOG_ROWS`` wait, a turn stops handing out rows once ``DRAIN_SLICE_S`` has
    passed (read every ``ROWS_PER_PIECE`` rows), whatever its budget of rows; with more waiting, the budget
    alone says."""
    monkeypatch.setattr(events_module, "time", _SteppingClock(events_module.DRAIN_SLICE_S * 0.4))
    monkeypatch.setattr(events_module, "ROWS_PER_TURN", 500)
    handed = _first_turns(1_800)
    piece = events_module.ROWS_PER_PIECE
    assert handed[0] == 0 and handed[1] == 3 * piece and handed[2] == 6 * piece  # (read at 0.4, 0.8, 1.2)
    monkeypatch.setattr(events_module, "SLICED_BACKLOG_ROWS", 1_000)
    handed = _first_turns(1_800)
    assert handed[0] == 0 and handed[1] == 500 and handed[2] == 1_000


def test_a_turn_of_many_small_waiting_runs_stops_at_its_slice_of_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows waiting one to a call (each run exhausted before its piece is): the turn reads the clock after each of
    them too, and stops at ``DRAIN_SLICE_S``."""
    monkeypatch.setattr(events_module, "time", _SteppingClock(events_module.DRAIN_SLICE_S * 0.4))

    async def scenario() -> list[int]:
        seen: list[dict[str, Any]] = []
        observer = GroupEvents()
        observer.add_sink(seen.append)
        for i in range(1_000):
            observer._queue(iter(((i, "group_state", {"group_id": f"g{i}"}),)), 1, later=True)
        handed = [len(seen)]
        for _ in range(2):
            await asyncio.sleep(0)
            handed.append(len(seen))
        observer.close()
        assert [row["group_id"] for row in seen] == [f"g{i}" for i in range(1_000)]
        return handed

    assert asyncio.run(scenario()) == [0, 3, 6]  # (read after each: at 0.4, 0.8, 1.2 ms)


def test_windows_over_at_once_are_said_a_bounded_number_a_call(caplog: pytest.LogCaptureFixture) -> None:
    """Many groups' windows over at once (10,000 groups loaded, a member each): a call closes
    ``WINDOWS_CLOSED_PER_CALL`` of them at most, says a line each for the first ``GROUPS_SUMMARISED_PER_CALL``
    that counted lines and one line for the others together; the calls after it close the rest, every count said
    once."""
    lines = events_module._MemberLines()
    groups = 2 * events_module.WINDOWS_CLOSED_PER_CALL + 200
    with caplog.at_level(logging.INFO, logger="regroup.server.events"):
        lines.new_call(0)
        for g in range(groups):
            lines.line(0, f"g{g}", "joined", f"m{g}", "c")
        caplog.clear()
        per_call = []
        for call in range(4):
            lines.new_call(MEMBER_LINES_WINDOW_MS + call)
            per_call.append([r.getMessage() for r in caplog.records])
            caplog.clear()
    said = events_module.GROUPS_SUMMARISED_PER_CALL
    counted = groups - MEMBER_LINES_PER_CALL  # (the call's first lines were said, not counted)
    first = events_module.WINDOWS_CLOSED_PER_CALL - MEMBER_LINES_PER_CALL
    assert len(per_call[0]) == said + 1
    assert per_call[0][said] == f"{first - said} more groups: {first - said} more members joined (each logged at debug)"
    assert per_call[0][0] == f"group=g{MEMBER_LINES_PER_CALL} 1 more members joined (each logged at debug)"
    assert [len(c) for c in per_call[1:]] == [said + 1, said + 1, 0]
    total = 0
    for messages in per_call:
        for message in messages:
            total += 1 if message.startswith("group=") else int(message.split(": ")[1].split(" ")[0])
    assert total == counted


def test_too_many_waiting_are_handed_out_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "MAX_BACKLOG_ROWS", 1_000)

    async def scenario() -> None:
        observer, seen = _watched_target()
        assert len(seen) == 1_800 and observer.backlog_rows == 0  # (1,800 waiting: over the bound)
        observer.close()

    asyncio.run(scenario())


def members_leaving(count: int) -> list[MemberLeft]:
    return [MemberLeft("classic-big", "classic", f"m-{i:05d}", f"client-{i}", 7, "leave") for i in range(count)]


def test_a_large_leave_logs_a_line_per_member_up_to_a_bound_and_hands_its_rows_out_over_turns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A LeaveGroup of many members in one call: ``MEMBER_LINES_PER_CALL`` lines at info, then one line saying
    how many more left (each of them at debug) once the group's window of lines is over (here: at close); its
    ``member_state`` rows, the same as handed out at once, a turn's worth at a time, the group's next row behind
    them."""
    count = 2 * ROWS_PER_TURN + 30
    gone = GroupStateChanged("classic-big", "classic", "Empty", 7, "range", None, None, 7, 0)
    path = tmp_path / "at-once.jsonl"
    observer = GroupEvents(path)
    with caplog.at_level(logging.DEBUG, logger="regroup.server.events"):
        observer(coordinator(), result_of(*members_leaving(count), gone), 10)
        observer.close()
    expected = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row["member_id"] for row in expected[:count]] == [f"m-{i:05d}" for i in range(count)]
    assert expected[0]["detail"] == "group=classic-big reason=leave" and expected[0]["state"] == "Left"
    assert expected[-1]["type"] == "group_state" and expected[-1]["state"] == "Empty"
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "left" in r.getMessage()]
    assert info[:MEMBER_LINES_PER_CALL] == [
        f"group=classic-big member left member_id=m-{i:05d} client_id=client-{i}" for i in range(MEMBER_LINES_PER_CALL)
    ]
    assert info[MEMBER_LINES_PER_CALL:] == [
        f"group=classic-big {count - MEMBER_LINES_PER_CALL} more members left (each logged at debug)"
    ]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and " member left" in r.getMessage()]
    assert len(debug) == count - MEMBER_LINES_PER_CALL

    async def scenario() -> list[int]:
        seen: list[dict[str, Any]] = []
        observer = GroupEvents()
        observer.add_sink(seen.append)
        observer(coordinator(), result_of(*members_leaving(count), gone), 10)
        handed = [len(seen)]
        while observer.backlog_rows:
            await asyncio.sleep(0)
            handed.append(len(seen))
        assert [{k: v for k, v in row.items() if k != "t"} for row in seen] == [
            {k: v for k, v in row.items() if k != "t"} for row in expected
        ]
        return handed

    handed = asyncio.run(scenario())
    assert handed[0] <= ROWS_PER_TURN and len(handed) >= 3
    assert all(b - a <= ROWS_PER_TURN for a, b in itertools.pairwise(handed))


@pytest.mark.parametrize("count", [events_module.MEMBER_ROWS_AT_ONCE, events_module.MEMBER_ROWS_AT_ONCE + 1])
def test_a_call_hands_out_the_rows_of_a_few_members_itself_and_of_more_from_the_next_turn(count: int) -> None:
    """``MEMBER_ROWS_AT_ONCE`` members leaving: their rows within the call; one more: none of them within the
    call (a LeaveGroup's chunk of 250 members), all of them in the next turn, in order."""

    async def scenario() -> tuple[int, list[str]]:
        seen: list[dict[str, Any]] = []
        observer = GroupEvents()
        observer.add_sink(seen.append)
        observer(coordinator(), result_of(*members_leaving(count)), 10)
        within = len(seen)
        await asyncio.sleep(0)
        next_turn = [row["member_id"] for row in seen]
        observer.close()
        return within, next_turn

    within, ids = asyncio.run(scenario())
    assert within == (count if count <= events_module.MEMBER_ROWS_AT_ONCE else 0)
    assert ids == [f"m-{i:05d}" for i in range(count)]


def test_members_joining_one_call_at_a_time_log_a_bounded_number_of_lines_a_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A group's members joining one call each (a large classic group forming): a line each at info for the first
    ``MEMBER_LINES_PER_WINDOW`` of the window, the others counted; the next call after the window says how many
    more joined, and a new window logs lines again; another group's lines have a window of their own."""
    window = MEMBER_LINES_WINDOW_MS
    count = MEMBER_LINES_PER_WINDOW + 35

    def joined(group: str, i: int) -> MemberJoined:
        return MemberJoined(group, "classic", f"{group}-m{i}", f"client-{i}", 1, ("range",))

    observer = GroupEvents()
    with caplog.at_level(logging.INFO, logger="regroup.server.events"):
        for i in range(count):
            observer(coordinator(), result_of(joined("big", i)), 1_000 + i)
        observer(coordinator(), result_of(joined("small", 0)), 1_000 + count)
        first = [r.getMessage() for r in caplog.records]
        assert first == [
            *(
                f"group=big member joined member_id=big-m{i} client_id=client-{i}"
                for i in range(MEMBER_LINES_PER_WINDOW)
            ),
            "group=small member joined member_id=small-m0 client_id=client-0",
        ]
        caplog.clear()
        observer(coordinator(), result_of(joined("big", count)), 1_000 + window)  # (the window is over)
        assert [r.getMessage() for r in caplog.records] == [
            f"group=big {count - MEMBER_LINES_PER_WINDOW} more members joined (each logged at debug)",
            f"group=big member joined member_id=big-m{count} client_id=client-{count}",
        ]
        caplog.clear()
        observer.close()
        assert not caplog.records  # (nothing counted since)


def assigned_event(member: str, count: int) -> Any:
    """A member assigned ``count`` partitions of each of the three topics."""
    from regroup.coordinator.events import PartitionsAssigned

    partitions = tuple((topic_id_for(f"t{i}"), tuple(range(count))) for i in range(3))
    return PartitionsAssigned("big", member, f"client-{member}", 4, partitions)


@pytest.mark.parametrize("count", [5, PARTITIONS])
def test_a_members_assigned_rows_are_handed_out_a_turn_at_a_time(tmp_path: Path, count: int) -> None:
    """A member's ``assigned`` rows (one per partition, by topic then partition): a few within the call, many
    (3 x 600) from the next turn on, a turn's worth at a time, the rows after them behind; in the end what is
    handed out at once."""
    path = tmp_path / "at-once.jsonl"
    at_once = GroupEvents(path)
    at_once(coordinator(), result_of(assigned_event("m", count), state_event(5)), 10)
    at_once.close()
    expected = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [r for r in expected if r["type"] == "assigned"]
    assert [(r["topic"], r["partition"]) for r in rows] == [(f"t{i}", p) for i in range(3) for p in range(count)]
    assert {(r["member_id"], r["generation"], r["detail"]) for r in rows} == {("m", 4, "group=big")}

    handed = handed_over([(result_of(assigned_event("m", count), state_event(5)), 10)], expected)
    if 3 * count <= ROWS_PER_TURN:
        assert handed == [3 * count + 1]
    else:
        assert handed[0] == 0
        assert all(b - a <= ROWS_PER_TURN for a, b in itertools.pairwise(handed)) and len(handed) >= 4


def test_a_members_partitions_are_named_and_sorted_as_its_first_row_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A member of many partitions: the call that assigned them neither names nor sorts them (3-4 ms for 10,000),
    the turn that takes its first row does, once."""
    named: list[int] = []
    real = events_module.named_partitions

    def counted(*args: Any) -> list[tuple[str, int]]:
        named.append(1)
        return real(*args)

    monkeypatch.setattr(events_module, "named_partitions", counted)

    async def scenario() -> None:
        seen: list[dict[str, Any]] = []
        observer = GroupEvents()
        observer.add_sink(seen.append)
        observer(coordinator(), result_of(assigned_event("m", PARTITIONS)), 10)
        assert not named and not seen
        while observer.backlog_rows:
            await asyncio.sleep(0)
        assigned = [(r["topic"], r["partition"]) for r in seen if r["type"] == "assigned"]
        assert len(named) == 1 and assigned == [(f"t{i}", p) for i in range(3) for p in range(PARTITIONS)]

    asyncio.run(scenario())
