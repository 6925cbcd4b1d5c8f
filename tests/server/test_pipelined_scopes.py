"""Scopes in the pipelined group commit (``GroupCommitWriter`` given a ``flush``, ``--fsync always``): a job whose
batches concern other groups than the jobs before it writes, fsyncs and is done without waiting for them (a
healthy group's commit is not held while a 10,000-member group's record is encoded); jobs of a shared group or of
unknown scope keep their submission order in the log and in their callbacks, and a batch without records still
waits for everything before it."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.protocol.offsets import OffsetCommitRequest, PartitionCommit
from regroup.records.builders import new_group_metadata_record, new_offset_commit_record
from regroup.records.model import GroupMetadataValue, MemberMetadata, OffsetCommitValue, Record
from regroup.server import runtime
from regroup.server.core_runtime import GroupCommitWriter
from regroup.server.runtime import CoordinatorRuntime
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy, RecordLog
from tests.server.test_pipelined_writer import StagedLog, assert_durable_before_done, pipelined, until
from tests.server.test_runtime import commit_op, fetch_op

Done = list[tuple[str, BaseException | None]]


class HeldLog(StagedLog):
    """A ``StagedLog`` whose write of a batch holding a record of ``held`` waits (``holding`` set) until
    ``release`` is set, the way a large record's encoding keeps a job's write from returning."""

    def __init__(self, held: set[str]) -> None:
        super().__init__()
        self.held = held
        self.holding = threading.Event()
        self.release = threading.Event()

    def write(self, records: Sequence[str]) -> None:
        if self.held.intersection(records):
            self.holding.set()
            assert self.release.wait(5)
        super().write(records)


def _written(events: list[tuple[str, object]]) -> list[str]:
    return [r for kind, value in events if kind == "written" for r in value]  # type: ignore[attr-defined]


async def _until_done(done: Done, tag: str) -> None:
    for _ in range(500):
        if any(t == tag for t, _ in done):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{tag} was not done: {done}")


async def _held_big(**kwargs: Any) -> tuple[HeldLog, GroupCommitWriter[str], Done]:
    """A pipelined writer (given ``kwargs``) whose job of "big" (group g1) is being written, held there until
    ``release``."""
    staged = HeldLog({"big"})
    w = pipelined(staged, **kwargs)
    done: Done = []
    w.submit(["big"], staged.done("big", done), frozenset({"g1"}))
    await until(staged.holding)
    return staged, w, done


def test_a_job_of_another_group_is_written_and_done_while_an_earlier_job_s_write_is_held() -> None:
    async def scenario() -> None:
        staged, w, done = await _held_big()  # its job writes (held: a large record being encoded)

        def submit(tag: str, records: list[str], scope: frozenset[Hashable] | None) -> None:
            w.submit(records, staged.done(tag, done), scope)

        submit("other", ["other"], frozenset({"g2"}))
        await _until_done(done, "other")  # written, fsynced and done while "big" is still being written
        assert _written(staged.events) == ["other"] and [t for t, _ in done] == ["other"]
        submit("answer", [], frozenset({"g2"}))  # (a call of g2 without records: waits for g2's batches only)
        await _until_done(done, "answer")
        for tag, scope in (("same", {"g1"}), ("both", {"g1", "g3"}), ("unknown", None), ("after", {"g2"})):
            submit(tag, [tag], None if scope is None else frozenset(scope))
            await asyncio.sleep(0)  # (each its own job)
        submit("empty", [], frozenset({"g2"}))
        await asyncio.sleep(0.1)
        assert _written(staged.events) == ["other"] and [t for t, _ in done] == ["other", "answer"]
        staged.release.set()
        await asyncio.wait_for(w.wait_idle(), 5)
        assert _written(staged.events) == ["other", "big", "same", "both", "unknown", "after"]
        assert [t for t, _ in done] == ["other", "answer", "big", "same", "both", "unknown", "after", "empty"]
        assert all(error is None for _, error in done)
        assert_durable_before_done(staged.events, {t: t for t, _ in done if t not in ("answer", "empty")})
        await w.close()

    asyncio.run(scenario())


def test_a_batch_without_records_of_unknown_scope_waits_for_everything_before_and_holds_nothing_back() -> None:
    async def scenario() -> None:
        staged, w, done = await _held_big()
        w.submit(["other"], staged.done("other", done), frozenset({"g2"}))
        w.submit([], staged.done("waits", done))  # (same turn as the batches beside it)
        w.submit(["later"], staged.done("later", done), frozenset({"g3"}))
        await _until_done(done, "later")
        await asyncio.sleep(0.1)
        assert sorted(_written(staged.events)) == ["later", "other"]
        assert sorted(t for t, _ in done) == ["later", "other"]  # "waits" only after "big"
        staged.release.set()
        await asyncio.wait_for(w.wait_idle(), 5)
        assert [t for t, _ in done][2:] == ["big", "waits"]
        await w.close()

    asyncio.run(scenario())


def test_batches_queued_together_are_split_into_those_that_pass_and_those_that_wait() -> None:
    """One turn's batches while a job of g1 is being written: those of other groups are one job that passes it;
    those of g1, and one of g2 and g1 after them, wait; a batch of g2 queued before that one still passes."""

    async def scenario() -> None:
        staged, w, done = await _held_big()
        for tag, scope in (("a", {"g1"}), ("b", {"g2"}), ("c", {"g1", "g2"}), ("d", {"g3"}), ("e", {"g2"})):
            w.submit([tag], staged.done(tag, done), frozenset(scope))
        await _until_done(done, "d")
        await asyncio.sleep(0.1)
        assert [t for t, _ in done] == ["b", "d"] and _written(staged.events) == ["b", "d"]
        staged.release.set()
        await asyncio.wait_for(w.wait_idle(), 5)
        assert [t for t, _ in done] == ["b", "d", "big", "a", "c", "e"]
        assert _written(staged.events) == ["b", "d", "big", "a", "c", "e"]
        await w.close()

    asyncio.run(scenario())


_SCOPES = st.one_of(st.none(), st.frozensets(st.sampled_from("abc"), min_size=1, max_size=2))


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(_SCOPES, st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=14),
    st.integers(0, 2**16),
)
def test_scoped_jobs_keep_each_group_s_order_in_the_log_and_in_their_callbacks(
    steps: list[tuple[frozenset[str] | None, bool, bool, bool]], seed: int
) -> None:
    """Random batches (a scope or none; with a record or without; some writes slow; a loop turn or not before the
    next): every record written once; two batches whose records' scopes meet (or either unknown) written in
    submission order; a batch done only after every earlier batch whose scope meets its own and every earlier
    one with records of unknown scope, and after all earlier ones when its own scope is unknown; each done
    after an fsync that began after its write."""
    rng = random.Random(seed)
    slow = {f"r{i}" for i, step in enumerate(steps) if step[2]}

    class SlowLog(StagedLog):
        def write(self, records: Sequence[str]) -> None:
            if slow.intersection(records):
                time.sleep(rng.random() * 0.004)
            super().write(records)

    staged = SlowLog()

    async def scenario() -> None:
        w: GroupCommitWriter[str] = pipelined(staged)
        done: Done = []
        for i, (scope, with_record, _, turn) in enumerate(steps):
            w.submit([f"r{i}"] if with_record else [], staged.done(f"r{i}", done), scope)
            if turn:
                await asyncio.sleep(0)
        await asyncio.wait_for(w.wait_idle(), 10)
        await w.close()
        assert all(error is None for _, error in done)
        assert sorted(t for t, _ in done) == sorted(f"r{i}" for i in range(len(steps)))
        written = _written(staged.events)
        records = [f"r{i}" for i, step in enumerate(steps) if step[1]]
        assert sorted(written) == sorted(records)
        order = {tag: n for n, (tag, _) in enumerate(done)}
        for j, (scope_j, record_j, _, _) in enumerate(steps):
            for i in range(j):
                scope_i, record_i = steps[i][0], steps[i][1]
                meet = scope_i is None or scope_j is None or bool(scope_i & scope_j)
                if record_i and record_j and meet:
                    assert written.index(f"r{i}") < written.index(f"r{j}"), (i, j, steps)
                known_meet = scope_i is not None and scope_j is not None and bool(scope_i & scope_j)
                if known_meet or scope_j is None or (scope_i is None and record_i):
                    assert order[f"r{i}"] < order[f"r{j}"], (i, j, steps, done)
        assert_durable_before_done(staged.events, {t: t for t in records})

    asyncio.run(scenario())


def test_a_heavy_batch_is_a_job_of_its_own_and_the_batches_queued_beside_it_pass_it() -> None:
    """Submitted in one turn: a commit, a heavy batch (a large group's record: its write held), another commit.
    Three jobs: the commits of other groups are written and done while the heavy one is still being written;
    without ``heavy`` the three are one job, done only after it."""

    async def scenario(heavy: bool) -> list[str]:
        staged = HeldLog({"big"})
        w = pipelined(staged)
        done: Done = []
        w.submit(["before"], staged.done("before", done), frozenset({"g2"}))
        w.submit(["big"], staged.done("big", done), frozenset({"g1"}), heavy=heavy)
        w.submit(["after"], staged.done("after", done), frozenset({"g3"}))
        await until(staged.holding)
        await asyncio.sleep(0.2)
        early = [t for t, _ in done]
        staged.release.set()
        await asyncio.wait_for(w.wait_idle(), 5)
        assert sorted(t for t, _ in done) == ["after", "before", "big"]
        await w.close()
        return early

    assert asyncio.run(scenario(True)) == ["before", "after"]
    assert asyncio.run(scenario(False)) == []


def test_the_runtime_marks_large_batches_heavy_and_scopes_answers_without_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch is heavy from ``HEAVY_BATCH`` records, or a classic group's record of that many members, and only
    for the pipelined writer (the others never split a batch); a call without records behind its group's
    unwritten commit waits for that group's batches only when it names its group, else for every batch."""
    monkeypatch.setattr(runtime, "HEAVY_BATCH", 3)
    member = MemberMetadata("m", None, "c", "h", 1000, 1000, b"", b"")

    def group_record(members: int) -> Record:
        value = GroupMetadataValue(
            protocol_type="consumer",
            generation=1,
            protocol_name="range",
            leader="m",
            current_state_timestamp_ms=0,
            members=(member,) * members,
        )
        return new_group_metadata_record("g", value)

    value = OffsetCommitValue(offset=1, leader_epoch=-1, metadata="", commit_timestamp_ms=0, expire_timestamp_ms=None)
    commit = new_offset_commit_record("g", "t", 0, value)
    assert runtime._heavy([group_record(3)]) and runtime._heavy([commit] * 3)
    assert not runtime._heavy([group_record(2), commit]) and not runtime._heavy([commit] * 2)

    submitted: list[tuple[int, bool, frozenset[Hashable] | None]] = []
    real_submit = GroupCommitWriter.submit

    def spy(
        self: GroupCommitWriter[Any],
        records: Any,
        done: Any = None,
        scope: frozenset[Hashable] | None = None,
        *,
        heavy: bool = False,
    ) -> None:
        records = list(records)
        submitted.append((len(records), heavy, scope))
        real_submit(self, records, done, scope, heavy=heavy)

    monkeypatch.setattr(GroupCommitWriter, "submit", spy)

    async def scenario(fsync: FsyncPolicy) -> None:
        log_ = CoordinatorLog(RecordLog.open(tmp_path / fsync.value, fsync=fsync))
        rt = CoordinatorRuntime.load(log_)
        rt.start()
        await rt.call(commit_op("g", 1))
        await rt.call(commit_partitions_op("g", 3))
        # calls without records behind an unwritten commit of g: one naming its group, one not
        pending = asyncio.ensure_future(rt.call(commit_op("g", 2), group_id="g"))
        await asyncio.sleep(0)
        fetched = [rt.call(fetch_op("g"), group_id="g"), rt.call(fetch_op("g"))]
        assert [answer.topics[0][1][0].offset for answer in await asyncio.gather(*fetched)] == [2, 2]
        await pending
        await rt.close()
        log_.close()

    g = frozenset({"g"})
    asyncio.run(scenario(FsyncPolicy.ALWAYS))
    assert submitted == [(1, False, g), (3, True, g), (1, False, g), (0, False, g), (0, False, None)]
    submitted.clear()
    asyncio.run(scenario(FsyncPolicy.INTERVAL))
    assert [(n, heavy) for n, heavy, _ in submitted if n] == [(1, False), (3, False), (1, False)]


def commit_partitions_op(group: str, partitions: int) -> Any:
    commits = tuple(PartitionCommit(partition=p, offset=1) for p in range(partitions))
    req = OffsetCommitRequest(group_id=group, topics=(("t", commits),))
    return lambda c, key, now: c.offset_commit(req, key, now)


def test_a_failing_callback_of_a_passing_job_fails_every_other_batch_once() -> None:
    async def scenario() -> None:
        failures: list[BaseException] = []
        staged, w, done = await _held_big(on_failure=failures.append)
        calls: list[tuple[str, BaseException | None]] = []

        def boom(error: BaseException | None) -> None:
            calls.append(("other", error))
            raise ValueError("bug")

        w.submit(["other"], boom, frozenset({"g2"}))
        w.submit(["more"], lambda error: calls.append(("more", error)), frozenset({"g2"}))
        for _ in range(500):
            if w.failure is not None:
                break
            await asyncio.sleep(0.01)
        assert isinstance(w.failure, ValueError) and failures == [w.failure]
        staged.release.set()
        await asyncio.wait_for(w.close(), 5)
        assert calls == [("other", None), ("more", w.failure)]  # (each once; "more" failed with the error)
        assert done == [("big", w.failure)]

    asyncio.run(scenario())
