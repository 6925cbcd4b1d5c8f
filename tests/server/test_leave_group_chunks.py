"""A LeaveGroup of more members than ``LEAVE_GROUP_CHUNK``: the core is asked a chunk at a time, and the answer
is the one a single call gives (a property over random member lists against one core call on a twin
coordinator); on ``regroup serve``, every member answered in the request's order, a member named twice answered
UNKNOWN_MEMBER_ID the second time even across a chunk boundary, unknown members likewise, the group Empty
afterwards, and the log's last word on it a group without members."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.classic.group import ClassicGroup
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import RequestKey, Result
from regroup.protocol.classic import LeaveGroupRequest, LeavingMember
from regroup.records.model import GroupMetadataValue, Record
from regroup.server.handlers.groups import LEAVE_GROUP_CHUNK, _leave
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy
from tests.server.conftest import ServerProcess
from tests.server.test_inspection_stall import _classic
from tests.server.wire import DESCRIBE, LEAVE, WireClient

NONE, UNKNOWN_MEMBER_ID = 0, 25
GROUP, MEMBERS = "leaving", 2 * LEAVE_GROUP_CHUNK + 200
NOW_MS = 1_000_000


def _group_values(data: Path) -> list[GroupMetadataValue]:
    log = CoordinatorLog.open(data / "coordinator", fsync=FsyncPolicy.NEVER)
    try:
        records: list[Record] = list(log.records())
    finally:
        log.close()
    return [
        r.value
        for r in records
        if getattr(r.key, "group_id", None) == GROUP and isinstance(r.value, GroupMetadataValue)
    ]


def test_a_large_leave_is_answered_as_one_call_would_be(
    make_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data = tmp_path / "preloaded"
    data.mkdir()
    log = CoordinatorLog.open(data / "coordinator", fsync=FsyncPolicy.NEVER)
    try:
        log.append([_classic(GROUP, MEMBERS)])
        log.log.sync()
    finally:
        log.close()
    written_before = len(_group_values(data))
    server = make_server("--fsync", "always", data_dir=data)
    ids = [f"{GROUP}-m{i}" for i in range(MEMBERS)]
    leaving = [*ids[:3], "nobody", *ids[3 : LEAVE_GROUP_CHUNK + 100], ids[10], *ids[LEAVE_GROUP_CHUNK + 100 :]]
    with WireClient(server.port) as client:
        resp = client.call(
            LEAVE,
            5,
            group_id=GROUP,
            members=[{"member_id": m, "group_instance_id": None, "reason": None} for m in leaving],
        )
        assert resp.error_code == NONE
        expected = [(m, NONE) for m in leaving]
        expected[3] = ("nobody", UNKNOWN_MEMBER_ID)
        expected[LEAVE_GROUP_CHUNK + 101] = (ids[10], UNKNOWN_MEMBER_ID)  # named again, in a later chunk
        assert [(m.member_id, m.error_code) for m in resp.members] == expected
        described = client.call(DESCRIBE, 5, groups=[GROUP], include_authorized_operations=False).groups[0]
        assert (described.group_state, described.members) == ("Empty", ())
    server.kill(signal.SIGTERM)
    written = _group_values(data)[written_before:]
    assert written and written[-1].members == ()


class CoreRuntime:
    """Stands in for the coordinator runtime: runs each core call on ``core`` at once, noting its members."""

    def __init__(self, core: GroupCoordinator) -> None:
        self.core = core
        self.calls: list[int] = []

    async def call(
        self,
        op: Callable[[GroupCoordinator, RequestKey, int], Result],
        *,
        may_park: bool = False,
        group_id: str | None = None,
    ) -> Any:
        result = op(self.core, len(self.calls), NOW_MS)
        request = getattr(op, "args", (None,))[0]
        self.calls.append(len(request.members) if isinstance(request, LeaveGroupRequest) else -1)
        return result.response_for(len(self.calls) - 1)


def _twin_cores(members: int) -> tuple[GroupCoordinator, GroupCoordinator]:
    record = _classic(GROUP, members)
    return GroupCoordinator.from_records([record], NOW_MS), GroupCoordinator.from_records([record], NOW_MS)


@st.composite
def picks(draw: st.DrawFn) -> list[int]:
    """Member indexes to leave (negative: an empty id; past the group's size: unknown), as many as chunks need."""
    count = draw(st.sampled_from([0, 1, 7, LEAVE_GROUP_CHUNK, LEAVE_GROUP_CHUNK + 1, 2 * LEAVE_GROUP_CHUNK + 37]))
    return draw(st.lists(st.integers(-3, 2 * LEAVE_GROUP_CHUNK + 60), min_size=count, max_size=count))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 2 * LEAVE_GROUP_CHUNK + 30), picks())
def test_the_chunked_leave_answers_as_one_core_call(members: int, picks: list[int]) -> None:
    chunked_core, one_call_core = _twin_cores(members)
    leaving = tuple(LeavingMember(member_id=f"{GROUP}-m{i}" if i >= 0 else "", group_instance_id=None) for i in picks)
    runtime = CoreRuntime(chunked_core)
    chunked = asyncio.run(_leave(SimpleNamespace(coordinator=runtime), GROUP, leaving))  # type: ignore[arg-type]
    one_call = one_call_core.leave_group(LeaveGroupRequest(group_id=GROUP, members=leaving), 0, NOW_MS).response_for(0)
    assert chunked == one_call
    assert all(0 <= n <= LEAVE_GROUP_CHUNK for n in runtime.calls)
    assert len(runtime.calls) == max(1, -(-len(leaving) // LEAVE_GROUP_CHUNK))
    assert _state(chunked_core) == _state(one_call_core)


def _state(core: GroupCoordinator) -> tuple[str, list[str]]:
    group = core.groups.typed(GROUP, ClassicGroup)
    assert group is not None
    return str(group.state), sorted(group.members)


def test_a_leave_refused_at_the_top_is_that_answer_alone() -> None:
    chunked_core, one_call_core = _twin_cores(3)
    leaving = tuple(LeavingMember(member_id=f"m{i}") for i in range(LEAVE_GROUP_CHUNK + 5))
    runtime = CoreRuntime(chunked_core)
    chunked = asyncio.run(_leave(SimpleNamespace(coordinator=runtime), "", leaving))  # type: ignore[arg-type]
    request = LeaveGroupRequest(group_id="", members=leaving)
    one_call = one_call_core.leave_group(request, 0, NOW_MS).response_for(0)
    assert chunked == one_call and chunked.error != 0 and chunked.members == ()
    assert runtime.calls == [LEAVE_GROUP_CHUNK]  # no second call once the first was refused
