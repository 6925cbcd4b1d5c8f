"""The coordinator runtime in-process, over a fake log: responses wait for the append of their records (and of
every earlier call), a failed append is fatal, timers fire through ``advance``, superseded requests are
dropped."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Completion, Result
from regroup.protocol.classic import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest
from regroup.protocol.offsets import OffsetCommitRequest, OffsetFetchRequest, PartitionCommit
from regroup.records.model import Record
from regroup.server.errors import CoordinatorUnavailable, RequestDropped
from regroup.server.runtime import ANSWERS_PER_TURN, CoordinatorRuntime
from regroup.storage.record_log import FsyncPolicy
from tests.group_views import classic_groups


class FakeRecordLog:
    fsync_policy = FsyncPolicy.ALWAYS

    def sync(self) -> None:
        pass


class FakeLog:
    """Stands in for ``CoordinatorLog``; ``gate`` (when set) holds every append until released."""

    pipelined = False  # (the runtime appends whole: write and fsync in one call)

    def __init__(self) -> None:
        self.log = FakeRecordLog()
        self.appended: list[Record] = []
        self.gate: threading.Event | None = None
        #: (when set) one event per append to come: each append waits for its own
        self.turns: list[threading.Event] | None = None
        self.fail = False
        self.closed = False

    def append(self, records: Sequence[Record]) -> int:
        if self.gate is not None:
            assert self.gate.wait(5)
        if self.turns is not None:
            assert self.turns[0].wait(5)
            self.turns.pop(0)
        if self.fail:
            raise OSError(28, "No space left on device")
        self.appended.extend(records)
        return len(self.appended) - 1

    def write_now(self, records: Sequence[Record]) -> bool:
        """Declines: every append goes to the writer's thread, where ``gate`` and ``turns`` hold it."""
        return False

    def prepare_snapshot(self, coordinator: GroupCoordinator) -> None:

        return None

    def close(self) -> None:
        self.closed = True


def runtime(config: CoordinatorConfig | None = None, **kwargs: Any) -> tuple[CoordinatorRuntime, FakeLog]:
    fake = FakeLog()
    rt = CoordinatorRuntime(
        GroupCoordinator(config or CoordinatorConfig(group_initial_rebalance_delay_ms=0)), fake, **kwargs
    )  # type: ignore[arg-type]
    rt.start()
    return rt, fake


def commit_op(group: str, offset: int) -> Any:
    req = OffsetCommitRequest(group_id=group, topics=(("t", (PartitionCommit(partition=0, offset=offset),)),))
    return lambda c, key, now: c.offset_commit(req, key, now)


def fetch_op(group: str) -> Any:
    req = OffsetFetchRequest(group_id=group, topics=(("t", (0,)),))
    return lambda c, key, now: c.offset_fetch(req, key, now)


def join_op(member_id: str = "", session_ms: int = 6000, version: int = 3, group: str = "g") -> Any:
    req = JoinGroupRequest(
        group_id=group,
        member_id=member_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms,
        protocol_type="consumer",
        protocols=(("range", b""),),
        version=version,
    )
    return lambda c, key, now: c.join_group(req, key, now)


def test_responses_wait_until_their_records_and_earlier_ones_are_appended() -> None:
    async def scenario() -> None:
        rt, fake = runtime()
        fake.gate = threading.Event()
        commit = asyncio.create_task(rt.call(commit_op("g", 5)))
        fetch = asyncio.create_task(rt.call(fetch_op("g")))  # no records of its own
        await asyncio.sleep(0.1)
        assert not commit.done() and not fetch.done() and fake.appended == []
        fake.gate.set()
        answer = await fetch
        assert answer.topics[0][1][0].offset == 5
        assert commit.done() and len(fake.appended) == 1
        await rt.close()
        assert fake.closed

    asyncio.run(scenario())


def test_an_answer_about_one_group_waits_only_for_that_groups_records() -> None:
    async def scenario() -> None:
        rt, fake = runtime()
        fake.gate = threading.Event()
        commit = asyncio.create_task(rt.call(commit_op("g", 5), group_id="g"))
        await asyncio.sleep(0)
        other = asyncio.create_task(rt.call(fetch_op("h"), group_id="h"))  # nothing of h is being written
        same = asyncio.create_task(rt.call(fetch_op("g"), group_id="g"))
        unnamed = asyncio.create_task(rt.call(fetch_op("h")))  # (no group named: waits for every earlier call)
        await asyncio.sleep(0.1)
        assert other.done() and other.result().topics[0][1][0].offset == -1
        assert not commit.done() and not same.done() and not unnamed.done() and fake.appended == []
        fake.gate.set()
        assert (await same).topics[0][1][0].offset == 5
        await unnamed
        assert commit.done() and rt._unwritten == {}
        await rt.close()

    asyncio.run(scenario())


def test_a_group_waits_for_every_batch_of_its_records_not_yet_durable() -> None:
    """Two batches holding the group's records: an answer about it waits until the second is durable too, and
    one about a group whose records are only in the first goes on once the first is."""

    async def scenario() -> None:
        rt, fake = runtime()
        turns = fake.turns = [threading.Event(), threading.Event()]
        first = asyncio.create_task(rt.call(lambda c, key, now: _commits(c, key, now, ("g", "h"), 1)))
        await asyncio.sleep(0)  # (the first batch is being written: the next one waits for it)
        second = asyncio.create_task(rt.call(commit_op("g", 2), group_id="g"))
        await asyncio.sleep(0.05)
        assert rt._unwritten == {"g": 2, "h": 1}
        g_read = asyncio.create_task(rt.call(fetch_op("g"), group_id="g"))
        h_read = asyncio.create_task(rt.call(fetch_op("h"), group_id="h"))
        await asyncio.sleep(0.05)
        assert not g_read.done() and not h_read.done()
        turns[0].set()
        await first
        assert rt._unwritten == {"g": 1}
        h_after = await rt.call(fetch_op("h"), group_id="h")  # (h's batch is durable: answered at once)
        assert h_after.topics[0][1][0].offset == 1
        await asyncio.sleep(0.05)
        assert not g_read.done() and not second.done()
        turns[0].set()
        assert (await g_read).topics[0][1][0].offset == 2
        await h_read
        await second
        assert rt._unwritten == {}
        await rt.close()

    asyncio.run(scenario())


def test_a_call_made_when_a_timer_is_due_fires_it_as_a_write_of_its_own() -> None:
    """The timers due fire before a request: what they do may be another group's (a member expiring, its group's
    parked requests answered), so a call naming its group fires them first as a write of their own, whose
    answers wait for every earlier call's records to be durable; the call's own answer, about its group alone,
    does not."""

    async def scenario() -> None:
        now = [1_000_000]
        config = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=10)
        rt, fake = runtime(config, clock=lambda: now[0])
        joined: JoinGroupResponse = await rt.call(join_op(session_ms=60_000, group="h"), may_park=True)
        assert joined.generation_id == 1
        sync = SyncGroupRequest(
            group_id="h", generation_id=1, member_id=joined.member_id, assignments=((joined.member_id, b""),)
        )
        await rt.call(lambda c, key, now: c.sync_group(sync, key, now), may_park=True)  # Stable
        # a newcomer's first JoinGroup: a pending member (KIP-394) whose session is short
        pending: JoinGroupResponse = await rt.call(join_op(session_ms=100, version=4, group="h"), may_park=True)
        assert pending.member_id and pending.generation_id == -1
        rejoin = asyncio.create_task(rt.call(join_op(joined.member_id, 60_000, 3, "h"), may_park=True))
        await asyncio.sleep(0.05)
        assert not rejoin.done()  # parked: the join phase waits for the pending member
        fake.gate = threading.Event()
        commit = asyncio.create_task(rt.call(commit_op("g", 5), group_id="g"))
        await asyncio.sleep(0)
        quiet = await rt.call(fetch_op("x"), group_id="x")  # (no timer due: at once)
        assert quiet.topics[0][1][0].offset == -1
        now[0] += 1_000  # the pending member's session is over: its timer is due, not fired yet
        due = await asyncio.wait_for(rt.call(fetch_op("x"), group_id="x"), 1)  # at once: x waits for nothing
        assert due.topics[0][1][0].offset == -1
        await asyncio.sleep(0.1)
        # the timer fired before that call and completed h's join phase (no record): h's member is not told yet
        assert classic_groups(rt.coordinator)["h"].generation == 2
        assert not rejoin.done() and not commit.done()
        fake.gate.set()
        assert (await rejoin).generation_id == 2
        await commit
        await rt.close()

    asyncio.run(scenario())


def _commits(c: GroupCoordinator, key: Any, now: int, groups: Sequence[str], offset: int) -> Result:
    """One core call committing ``offset`` for each of ``groups`` (one batch holding records of all of them)."""
    result = Result()
    for group in groups:
        req = OffsetCommitRequest(group_id=group, topics=(("t", (PartitionCommit(partition=0, offset=offset),)),))
        part = c.offset_commit(req, key, now)
        result.records.extend(part.records)
        result.events.extend(part.events)
        if group == groups[0]:
            result.completions.extend(part.completions)
    return result


def test_a_failed_append_is_fatal() -> None:
    async def scenario() -> None:
        fatal: list[BaseException] = []
        rt, fake = runtime(on_fatal=fatal.append)
        fake.fail = True
        with pytest.raises(CoordinatorUnavailable):
            await rt.call(commit_op("g", 1))
        assert isinstance(fatal[0], OSError) and rt.failure is fatal[0]
        with pytest.raises(CoordinatorUnavailable):
            await rt.call(fetch_op("g"))
        await rt.close()

    asyncio.run(scenario())


def test_session_expiry_fires_from_the_timer() -> None:
    async def scenario() -> None:
        config = CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=10)
        rt, _ = runtime(config)
        joined: JoinGroupResponse = await rt.call(join_op(session_ms=100), may_park=True)
        assert joined.generation_id == 1
        assert classic_groups(rt.coordinator)["g"].members
        await asyncio.sleep(0.4)  # no heartbeat: the session timer expires the member, the group empties
        assert not classic_groups(rt.coordinator)["g"].members
        await rt.close()

    asyncio.run(scenario())


def test_a_superseded_parked_join_is_dropped() -> None:
    async def scenario() -> None:
        rt, _ = runtime()
        first: JoinGroupResponse = await rt.call(join_op(), may_park=True)
        member_id = first.member_id
        other = asyncio.create_task(rt.call(join_op(), may_park=True))  # a second member: rebalance, parked
        await asyncio.sleep(0.05)
        member_two = next(m for m in classic_groups(rt.coordinator)["g"].members if m != member_id)
        parked = asyncio.create_task(rt.call(join_op(member_two), may_park=True))  # supersedes `other`
        with pytest.raises(RequestDropped):
            await other
        await rt.call(join_op(member_id), may_park=True)  # the leader rejoins: the join phase completes
        assert (await parked).generation_id == 2
        await rt.close()

    asyncio.run(scenario())


def test_a_join_phase_completing_for_many_members_wakes_them_a_slice_per_turn() -> None:
    """A result answering many parked requests (a large classic group's join phase completing) hands out its
    answers ``ANSWERS_PER_TURN`` per turn of the loop; every member still gets its answer, of the same
    generation."""
    members = 3 * ANSWERS_PER_TURN + 7

    async def scenario() -> None:
        rt, _ = runtime()
        leader: JoinGroupResponse = await rt.call(join_op(), may_park=True)
        parked = [asyncio.create_task(rt.call(join_op(), may_park=True)) for _ in range(members - 1)]
        for _ in range(100):
            await asyncio.sleep(0)
            if len(classic_groups(rt.coordinator)["g"].members) == members:
                break
        assert not any(task.done() for task in parked)
        rejoined = asyncio.create_task(rt.call(join_op(leader.member_id), may_park=True))
        woken: list[int] = []
        for _ in range(200):
            if all(task.done() for task in parked):
                break
            before = sum(task.done() for task in parked)
            await asyncio.sleep(0)
            woken.append(sum(task.done() for task in parked) - before)
        assert all(task.done() for task in parked)
        assert max(woken) <= ANSWERS_PER_TURN
        assert sum(1 for n in woken if n) >= (members - 1) // ANSWERS_PER_TURN
        answers = [task.result() for task in parked] + [await rejoined]
        assert {answer.generation_id for answer in answers} == {2}
        assert len({answer.member_id for answer in answers}) == members
        await rt.close()

    asyncio.run(scenario())


def test_large_results_due_in_one_turn_share_its_answers_and_a_small_one_is_answered_at_once() -> None:
    """Two large results made durable in the same turn (two chunks of a rebalance's answers in one batch) wake
    ``ANSWERS_PER_TURN`` requests per turn together, not that many each, in order (the first result's
    requests, then its dropped keys, then the second's), but for each one's first answer (the request whose
    call made it), which goes out at once; a small result due meanwhile (a commit) is answered at once too,
    not behind them."""
    size = 2 * ANSWERS_PER_TURN + 3

    async def scenario() -> None:
        rt, _ = runtime()
        loop = asyncio.get_running_loop()
        first, second = list(range(10_000, 10_000 + size)), list(range(20_000, 20_000 + size))
        dropped, small = 30_000, 40_000
        futures = {key: loop.create_future() for key in [*first, *second, dropped, small]}
        rt._waiting.update(futures)
        rt._answer([Completion(key, key) for key in first], [dropped])
        rt._answer([Completion(key, key) for key in second], [])
        rt._answer([Completion(small, "committed")], [])
        at_once = {key for key, future in futures.items() if future.done()}
        assert at_once == {*first[: 1 + ANSWERS_PER_TURN], second[0], small}
        order: list[int] = []
        woken: list[int] = []
        later = [*first[1 + ANSWERS_PER_TURN :], dropped, *second[1:]]
        for _ in range(50):
            await asyncio.sleep(0)
            now = [key for key in later if futures[key].done() and key not in order]
            order += now
            woken.append(sum(1 for key in now if key != dropped))  # (a dropped key is failed, not answered)
            if len(order) == len(later):
                break
        assert order == later
        assert max(woken) <= ANSWERS_PER_TURN
        assert sum(1 for n in woken if n) >= len(later) // ANSWERS_PER_TURN
        assert all(futures[key].result() == key for key in [*first, *second])
        with pytest.raises(RequestDropped):
            futures[dropped].result()
        await rt.close()

    asyncio.run(scenario())


def test_the_answer_to_the_call_that_made_a_large_result_goes_out_first() -> None:
    """A call whose result also answers many parked requests (a heartbeat whose call fired the timer answering
    a chunk of a rebalance's members) has its own answer go out first once the result is durable, not behind
    theirs, a slice of which go out per turn."""

    async def scenario() -> None:
        rt, fake = runtime()
        loop_time = asyncio.get_running_loop().time
        fake.gate = threading.Event()
        commit = asyncio.create_task(rt.call(commit_op("g", 5), group_id="g"))  # holds the writer
        await asyncio.sleep(0)
        keys = list(range(50_000, 50_000 + 3 * ANSWERS_PER_TURN))
        futures = {key: rt._wait_for(key) for key in keys}
        own = keys[-1]
        rt._after(Result(completions=[Completion(key, key) for key in keys]), own)
        await asyncio.sleep(0.05)
        assert not any(future.done() for future in futures.values())  # (not durable yet)
        fake.gate.set()
        give_up = loop_time() + 5
        while not futures[own].done() and loop_time() < give_up:
            await asyncio.sleep(0)  # (a turn at a time: each hands out a slice at most)
        assert futures[own].result() == own
        assert sum(future.done() for future in futures.values()) <= 1 + ANSWERS_PER_TURN
        for _ in range(100):
            if all(future.done() for future in futures.values()):
                break
            await asyncio.sleep(0)
        assert all(futures[key].result() == key for key in keys)
        await commit
        await rt.close()

    asyncio.run(scenario())


def test_a_parked_request_keeps_no_reference_to_the_result_that_parked_it() -> None:
    """While a JoinGroup waits for the rebalance, nothing keeps the core result of the call that parked it (its
    records, events and completions): for 10,000 parked members that would be tens of thousands of objects the
    collector walks for as long as the rebalance lasts."""

    def results_naming(member_id: str) -> list[Result]:
        gc.collect()
        return [
            o
            for o in gc.get_objects()
            if isinstance(o, Result) and any(getattr(e, "member_id", None) == member_id for e in o.events)
        ]

    async def scenario() -> None:
        rt, _ = runtime()
        leader: JoinGroupResponse = await rt.call(join_op(), may_park=True)
        parked = asyncio.create_task(rt.call(join_op(), may_park=True))  # a second member: a rebalance
        for _ in range(100):
            await asyncio.sleep(0)
            if len(classic_groups(rt.coordinator)["g"].members) == 2:
                break
        (newcomer,) = (m for m in classic_groups(rt.coordinator)["g"].members if m != leader.member_id)
        assert not parked.done()
        assert results_naming(newcomer) == []
        await rt.call(join_op(leader.member_id), may_park=True)
        assert (await parked).member_id == newcomer
        await rt.close()

    asyncio.run(scenario())


def test_a_parked_request_answered_or_cancelled_waits_no_more() -> None:
    """The runtime forgets a waiting request once its answer is read, and when its caller gave up (a connection
    closed under a parked JoinGroup cancels the handler): nothing is left behind either way."""

    async def scenario() -> None:
        rt, _ = runtime()
        leader: JoinGroupResponse = await rt.call(join_op(), may_park=True)
        given_up = asyncio.create_task(rt.call(join_op(), may_park=True))
        answered = asyncio.create_task(rt.call(join_op(), may_park=True))
        for _ in range(100):
            await asyncio.sleep(0)
            if len(classic_groups(rt.coordinator)["g"].members) == 3:
                break
        assert len(rt._waiting) == 2
        given_up.cancel()
        with pytest.raises(asyncio.CancelledError):
            await given_up
        assert len(rt._waiting) == 1
        await rt.call(join_op(leader.member_id), may_park=True)
        assert (await answered).generation_id == 2
        assert rt._waiting == {}
        await rt.close()

    asyncio.run(scenario())
