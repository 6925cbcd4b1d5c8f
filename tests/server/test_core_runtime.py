"""The runtimes' shared machinery on its own: the clock never goes backwards, the deadline timer re-arms and
fires, the group-commit writer appends in order and in groups, waits record-less batches behind earlier
ones, snapshots when drained, syncs after appends when asked, and fails every waiting batch when an append
fails; given ``write_now``, a turn's batches are written on the loop unless it declines them."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.server.core_runtime import DeadlineTimer, GroupCommitWriter, MonotonicClock, WriterClosed

log = logging.getLogger("tests.core_runtime")


def test_the_clock_never_goes_backwards() -> None:
    readings = iter([100, 90, 120, 110])
    clock = MonotonicClock(lambda: next(readings))
    assert clock.last == 0
    assert [clock.now() for _ in range(4)] == [100, 100, 120, 120]
    assert clock.last == 120


class FakeTime:
    def __init__(self) -> None:
        self.ms = 1_000

    def __call__(self) -> int:
        return self.ms


def test_the_timer_fires_once_after_its_deadline() -> None:
    async def scenario() -> None:
        now, fired = FakeTime(), asyncio.Event()
        timer = DeadlineTimer(now, fired.set)
        timer.arm(now.ms + 20)
        assert timer.deadline == 1_020
        await asyncio.wait_for(fired.wait(), 1)
        assert timer.deadline is None

    asyncio.run(scenario())


def test_rearming_keeps_replaces_or_cancels_the_handle() -> None:
    async def scenario() -> None:
        now, fired = FakeTime(), []
        timer = DeadlineTimer(now, lambda: fired.append(now.ms))
        timer.arm(now.ms + 10_000)
        handle = timer._handle
        timer.arm(now.ms + 10_000)  # the same deadline: the same handle
        assert timer._handle is handle
        timer.arm(now.ms + 5)  # earlier: replaced
        assert timer._handle is not handle and handle is not None and handle.cancelled()
        await asyncio.sleep(0.05)
        assert fired == [1_000] and timer.deadline is None
        timer.arm(now.ms + 5)
        timer.arm(None)  # nothing due
        assert timer.deadline is None
        timer.arm(now.ms + 5)
        timer.cancel()
        await asyncio.sleep(0.05)
        assert fired == [1_000]

    asyncio.run(scenario())


def test_a_capped_timer_fires_early() -> None:
    async def scenario() -> None:
        now, fired = FakeTime(), asyncio.Event()
        timer = DeadlineTimer(now, fired.set, max_delay_s=0.01)
        timer.arm(now.ms + 86_400_000)
        await asyncio.wait_for(fired.wait(), 1)

    asyncio.run(scenario())


class FakeLog:
    """Records each ``append`` call's batch and thread; ``gate`` (when set) holds every append until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[str] = set()
        self.gate: threading.Event | None = None
        self.fail = False
        self.syncs = 0
        self.snapshots = 0

    def append(self, records: Sequence[str]) -> None:
        self.threads.add(threading.current_thread().name)
        if self.gate is not None:
            assert self.gate.wait(5)
        if self.fail:
            raise OSError(28, "No space left on device")
        self.batches.append(list(records))

    def sync(self) -> None:
        self.syncs += 1

    def snapshot(self) -> None:
        self.snapshots += 1


def writer(fake: FakeLog, **kwargs: Any) -> GroupCommitWriter[str]:
    w: GroupCommitWriter[str] = GroupCommitWriter(
        fake.append, name="test-log", logger=log, what="test log", snapshot=fake.snapshot, **kwargs
    )
    w.start()
    return w


def test_batches_are_appended_in_groups_and_completed_in_order() -> None:
    async def scenario() -> None:
        fake = FakeLog()
        fake.gate = threading.Event()
        w = writer(fake)
        done: list[tuple[str, BaseException | None]] = []
        w.submit(["a"], lambda e: done.append(("a", e)))
        await asyncio.sleep(0.02)  # "a" is being written
        w.submit(["b1", "b2"], lambda e: done.append(("b", e)))
        w.submit([], lambda e: done.append(("empty", e)))  # waits for "b", queued before it
        w.submit(["c"], lambda e: done.append(("c", e)))
        assert not w.idle and done == []
        fake.gate.set()
        await asyncio.wait_for(w.wait_idle(), 2)
        assert fake.batches == [["a"], ["b1", "b2", "c"]]
        assert done == [("a", None), ("b", None), ("empty", None), ("c", None)]
        assert fake.snapshots >= 1 and w.idle and w.failure is None
        assert len(fake.threads) == 1 and next(iter(fake.threads)).startswith("test-log")
        await w.close()

    asyncio.run(scenario())


def test_a_batch_submitted_to_a_free_writer_is_handed_to_its_thread_within_submit() -> None:
    """No turn of the event loop between ``submit`` and the append on the worker thread (the whole shape has no
    task to wake): the append runs while the loop is still inside the call that submitted it. Its callback
    comes on the loop, in the turn after the thread's end."""

    async def scenario() -> None:
        fake = FakeLog()
        appended = threading.Event()
        inner = fake.append

        def append(records: Sequence[str]) -> None:
            inner(records)
            appended.set()

        fake.append = append  # type: ignore[method-assign]
        w = writer(fake)
        done: list[BaseException | None] = []
        w.submit(["a"], done.append)
        assert appended.wait(5), "the append did not start before the loop turned"
        assert done == [] and not w.idle
        await asyncio.wait_for(w.wait_idle(), 2)
        assert fake.batches == [["a"]] and done == [None]
        await w.close()

    asyncio.run(scenario())


def test_a_batch_without_records_needs_no_append() -> None:
    async def scenario() -> None:
        fake = FakeLog()
        w = writer(fake)
        done: list[BaseException | None] = []
        w.submit([], done.append)
        await asyncio.wait_for(w.wait_idle(), 2)
        assert done == [None] and fake.batches == [] and fake.snapshots == 1
        await w.close()

    asyncio.run(scenario())


def test_a_failed_append_fails_every_waiting_batch_and_stops_the_writer(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        fake = FakeLog()
        fake.gate, fake.fail = threading.Event(), True
        failures: list[BaseException] = []
        w = writer(fake, on_failure=failures.append)
        done: list[tuple[str, BaseException | None]] = []
        w.submit(["a"], lambda e: done.append(("a", e)))
        await asyncio.sleep(0.02)
        w.submit(["b"], lambda e: done.append(("b", e)))
        fake.gate.set()
        await asyncio.wait_for(w.wait_idle(), 2)
        assert len(failures) == 1 and isinstance(failures[0], OSError) and w.failure is failures[0]
        assert done == [("a", failures[0]), ("b", failures[0])]
        with pytest.raises(RuntimeError):
            w.submit(["c"])
        await asyncio.wait_for(w.close(), 2)  # does not wait for a writer that stopped

    with caplog.at_level(logging.CRITICAL, logger=log.name):
        asyncio.run(scenario())
    assert "test log write failed; stopping" in caplog.text


def test_a_failing_callback_is_fatal_too() -> None:
    async def scenario() -> None:
        fake = FakeLog()
        failures: list[BaseException] = []
        w = writer(fake, on_failure=failures.append)

        def boom(error: BaseException | None) -> None:
            raise ValueError("bug")

        done: list[BaseException | None] = []
        w.submit(["a"], boom)
        w.submit(["b"], done.append)
        await asyncio.wait_for(w.wait_idle(), 2)
        assert isinstance(w.failure, ValueError) and failures == [w.failure] and done == [w.failure]
        await w.close()

    asyncio.run(scenario())


def test_sync_runs_shortly_after_appends_stop() -> None:
    async def scenario() -> None:
        fake = FakeLog()
        w = writer(fake, sync=fake.sync, sync_after_s=0.01)
        w.submit(["a"])
        w.submit(["b"])
        await asyncio.wait_for(w.wait_idle(), 2)
        assert fake.syncs == 0
        await asyncio.sleep(0.05)
        await asyncio.wait_for(w.wait_idle(), 2)
        assert fake.syncs == 1
        await w.close()

    asyncio.run(scenario())


def test_close_makes_everything_queued_durable_first() -> None:
    async def scenario() -> None:
        fake = FakeLog()
        fake.gate = threading.Event()
        w = writer(fake)
        done: list[BaseException | None] = []
        w.submit(["a"], done.append)
        closing = asyncio.create_task(w.close())
        await asyncio.sleep(0.02)
        assert not closing.done()
        fake.gate.set()
        await asyncio.wait_for(closing, 2)
        assert done == [None] and fake.batches == [["a"]]
        with pytest.raises(RuntimeError):
            w.submit(["b"])

    asyncio.run(scenario())


def test_closing_a_writer_that_never_started_gives_up_its_batches() -> None:
    async def scenario() -> None:
        fake = FakeLog()
        w: GroupCommitWriter[str] = GroupCommitWriter(fake.append, name="test-log", logger=log, what="test log")
        done: list[BaseException | None] = []
        w.submit(["a"], done.append)
        await asyncio.wait_for(w.close(), 2)
        assert len(done) == 1 and isinstance(done[0], WriterClosed) and fake.batches == []

    asyncio.run(scenario())


# ------------------------------------------------------------------------- writing on the loop (write_now)


class NowLog(FakeLog):
    """A ``FakeLog`` whose ``write_now`` takes a batch on the calling thread unless ``declines`` says no (it is
    called with the records of one turn); ``order`` is every record written, either way, in order."""

    def __init__(self, declines: Any = None) -> None:
        super().__init__()
        self.declines = declines or (lambda records: False)
        self.now_batches: list[list[str]] = []
        self.now_threads: set[str] = set()
        self.order: list[str] = []
        self.syncs_on: list[str] = []

    def write_now(self, records: Sequence[str]) -> bool:
        self.now_threads.add(threading.current_thread().name)
        if self.fail:
            raise OSError(5, "Input/output error")
        if self.declines(records):
            return False
        self.now_batches.append(list(records))
        self.order.extend(records)
        return True

    def append(self, records: Sequence[str]) -> None:
        super().append(records)
        self.order.extend(records)

    def sync(self) -> None:
        self.syncs_on.append(threading.current_thread().name)
        super().sync()


def now_writer(fake: NowLog, **kwargs: Any) -> GroupCommitWriter[str]:
    return writer(fake, write_now=fake.write_now, **kwargs)


def test_a_turn_s_batches_are_written_on_the_loop_together_and_done_in_that_turn() -> None:
    async def scenario() -> None:
        fake = NowLog()
        w = now_writer(fake)
        done: list[str] = []
        w.submit(["a"], lambda e: done.append("a"))
        w.submit([], lambda e: done.append("empty"))
        w.submit(["b1", "b2"], lambda e: done.append("b"))
        assert done == [] and not w.idle  # (kept to the end of the turn)
        await asyncio.sleep(0)
        assert done == ["a", "empty", "b"] and w.idle
        assert fake.now_batches == [["a", "b1", "b2"]] and fake.batches == []
        assert fake.now_threads == {threading.current_thread().name}
        await w.close()

    asyncio.run(scenario())


def test_what_write_now_declines_goes_to_the_thread_and_the_next_turn_is_offered_again() -> None:
    """A declined turn is appended on the worker thread, with what was submitted while it was being written;
    once the thread is free again the following batches are offered to ``write_now`` first."""

    async def scenario() -> None:
        fake = NowLog(declines=lambda records: "big" in records)
        fake.gate = threading.Event()
        w = now_writer(fake)
        done: list[str] = []
        w.submit(["big"], lambda e: done.append("big"))
        await asyncio.sleep(0.02)  # declined: "big" is on the thread, held by the gate
        w.submit(["c"], lambda e: done.append("c"))
        w.submit(["d"], lambda e: done.append("d"))
        await asyncio.sleep(0.02)
        assert done == [] and fake.now_batches == []
        fake.gate.set()
        await asyncio.wait_for(w.wait_idle(), 2)
        assert done == ["big", "c", "d"]
        assert fake.batches == [["big"]] and fake.now_batches == [["c", "d"]]
        fake.gate = None
        w.submit(["e"], lambda e: done.append("e"))
        await asyncio.wait_for(w.wait_idle(), 2)
        assert fake.now_batches[-1] == ["e"] and fake.batches == [["big"]]
        await w.close()

    asyncio.run(scenario())


def test_the_interval_sync_after_writes_on_the_loop_runs_on_the_thread() -> None:
    async def scenario() -> None:
        fake = NowLog()
        w = now_writer(fake, sync=fake.sync, sync_after_s=0.01)
        w.submit(["a"])
        await asyncio.wait_for(w.wait_idle(), 2)
        await asyncio.sleep(0.05)
        await asyncio.wait_for(w.wait_idle(), 2)
        assert fake.now_batches == [["a"]] and fake.syncs == 1
        assert fake.syncs_on and all(name.startswith("test-log") for name in fake.syncs_on)
        await w.close()

    asyncio.run(scenario())


def test_a_failed_write_on_the_loop_fails_every_waiting_batch(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        fake = NowLog()
        fake.fail = True
        failures: list[BaseException] = []
        w = now_writer(fake, on_failure=failures.append)
        errors: list[BaseException | None] = []
        w.submit(["a"], errors.append)
        w.submit(["b"], errors.append)
        await asyncio.sleep(0.01)
        assert len(errors) == 2 and all(isinstance(e, OSError) for e in errors)
        assert isinstance(w.failure, OSError) and len(failures) == 1
        with pytest.raises(RuntimeError):
            w.submit(["c"])
        await w.close()

    with caplog.at_level(logging.CRITICAL):
        asyncio.run(scenario())


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.booleans()),  # records, declined, a turn passes after
        min_size=1,
        max_size=40,
    )
)
@settings(max_examples=60, deadline=None)
def test_every_record_is_written_once_in_order_and_done_in_order(steps: list[tuple[int, bool, bool]]) -> None:
    """Over any mix of turns, batches with and without records and batches ``write_now`` declines (those go to
    the thread): every record is written exactly once, in submission order, and the callbacks run in
    submission order, each after its records were written."""
    declined = {f"r{i}-0" for i, (count, no, _) in enumerate(steps) if no and count}

    async def scenario() -> tuple[list[str], list[int], list[int]]:
        fake = NowLog(declines=lambda records: any(r in declined for r in records))
        w = now_writer(fake)
        done: list[int] = []
        written_when_done: list[int] = []

        def callback(i: int) -> Callable[[BaseException | None], None]:
            def call(error: BaseException | None) -> None:
                assert error is None
                done.append(i)
                written_when_done.append(len(fake.order))

            return call

        for i, (count, _, turn) in enumerate(steps):
            w.submit([f"r{i}-{k}" for k in range(count)], callback(i))
            if turn:
                await asyncio.sleep(0)
        await asyncio.wait_for(w.wait_idle(), 5)
        await w.close()
        return fake.order, done, written_when_done

    order, done, written_when_done = asyncio.run(scenario())
    assert order == [f"r{i}-{k}" for i, (count, _, _) in enumerate(steps) for k in range(count)]
    assert done == list(range(len(steps)))
    ends = [sum(count for count, _, _ in steps[: i + 1]) for i in range(len(steps))]
    assert all(seen >= end for seen, end in zip(written_when_done, ends, strict=True))


# ------------------------------------------------------------------ written beside the thread's append (scope)


def test_a_batch_of_another_scope_passes_the_thread_s_append_and_the_rest_wait() -> None:
    """While the thread appends a batch ``write_now`` declined (a large record of group G), a batch of another
    scope queued behind it is written on the loop and done first; a batch of G, one behind a declined batch of
    its own scope, one of unknown scope and any batch after that one, and a batch without records, all wait
    for the thread, and are done in their order."""

    async def scenario() -> None:
        fake = NowLog(declines=lambda records: any("big" in r for r in records))
        fake.gate = threading.Event()
        w = now_writer(fake)
        done: list[str] = []

        def submit(records: list[str], name: str, scope: set[str] | None) -> None:
            w.submit(records, lambda e: done.append(name), None if scope is None else frozenset(scope))

        submit(["g-big"], "g-big", {"G"})
        await asyncio.sleep(0.02)  # on the thread, held by the gate
        submit(["h1"], "h1", {"H"})
        submit(["g2"], "g2", {"G"})
        submit(["k-big"], "k-big", {"K"})
        submit(["k2"], "k2", {"K"})
        submit(["h2"], "h2", {"H"})
        submit([], "empty", None)
        submit(["x"], "x", None)
        submit(["m"], "m", {"M"})
        await asyncio.sleep(0.02)
        assert done == ["h1", "h2"] and fake.now_batches == [["h1"], ["h2"]]
        fake.gate.set()
        await asyncio.wait_for(w.wait_idle(), 2)
        assert done == ["h1", "h2", "g-big", "g2", "k-big", "k2", "empty", "x", "m"]
        assert fake.order == ["h1", "h2", "g-big", "g2", "k-big", "k2", "x", "m"]
        await w.close()

    asyncio.run(scenario())


def test_a_turn_whose_write_is_declined_writes_the_batches_of_other_scopes_and_hands_the_rest_to_the_thread() -> None:
    """A turn's batches ``write_now`` declines together (a large record of group G among them): those of other
    scopes are written on the loop one by one and done in that turn, the large one and those behind it in its
    scope go to the thread, and are done after."""

    async def scenario() -> None:
        fake = NowLog(declines=lambda records: any("big" in r for r in records))
        fake.gate = threading.Event()
        w = now_writer(fake)
        done: list[str] = []
        for name, scope in (("g-big", "G"), ("h1", "H"), ("g2", "G"), ("k1", "K")):
            w.submit([name], lambda e, name=name: done.append(name), frozenset({scope}))
        await asyncio.sleep(0.02)
        assert done == ["h1", "k1"] and fake.now_batches == [["h1"], ["k1"]]
        fake.gate.set()
        await asyncio.wait_for(w.wait_idle(), 2)
        assert done == ["h1", "k1", "g-big", "g2"] and fake.batches == [["g-big", "g2"]]
        fake.gate = None
        w.submit(["m"], lambda e: done.append("m"), frozenset({"M"}))  # (offered to write_now first again)
        await asyncio.wait_for(w.wait_idle(), 2)
        assert fake.now_batches[-1] == ["m"] and done[-1] == "m"
        await w.close()

    asyncio.run(scenario())


@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # records
            st.sampled_from(["A", "B", "C", None]),  # scope
            st.booleans(),  # declined by write_now
            st.booleans(),  # a turn passes after it
            st.booleans(),  # the thread's gate opens after it
        ),
        min_size=1,
        max_size=40,
    )
)
@settings(max_examples=80, deadline=None)
def test_batches_passing_the_thread_keep_the_order_of_their_scope(
    steps: list[tuple[int, str | None, bool, bool, bool]],
) -> None:
    """Over any mix of scopes, declines, turns and thread appends: every record is written once; the records of
    a scope are written in submission order, and so is a record of unknown scope after every record submitted
    before it; every batch is done after its records are written, the batches of a scope in submission order,
    and a batch without records (or of unknown scope) after every batch submitted before it."""
    declined = {f"r{i}-0" for i, (count, _, no, _, _) in enumerate(steps) if no and count}

    async def scenario() -> tuple[list[str], list[int], dict[int, int]]:
        fake = NowLog(declines=lambda records: any(r in declined for r in records))
        fake.gate = threading.Event()
        w = now_writer(fake)
        done: list[int] = []
        written_when_done: dict[int, int] = {}

        def callback(i: int) -> Callable[[BaseException | None], None]:
            def call(error: BaseException | None) -> None:
                assert error is None
                done.append(i)
                written_when_done[i] = len(fake.order)

            return call

        for i, (count, scope, _, turn, opens) in enumerate(steps):
            w.submit([f"r{i}-{k}" for k in range(count)], callback(i), None if scope is None else frozenset(scope))
            if turn:
                await asyncio.sleep(0)
            if opens:
                gate = fake.gate
                fake.gate = threading.Event()
                gate.set()
                await asyncio.sleep(0.005)
        fake.gate.set()
        fake.gate = None
        await asyncio.wait_for(w.wait_idle(), 5)
        await w.close()
        return fake.order, done, written_when_done

    order, done, written_when_done = asyncio.run(scenario())
    records = {i: [f"r{i}-{k}" for k in range(count)] for i, (count, _, _, _, _) in enumerate(steps)}
    assert sorted(order) == sorted(r for rs in records.values() for r in rs) and len(set(order)) == len(order)
    at = {r: n for n, r in enumerate(order)}
    for scope in ("A", "B", "C"):
        mine = [r for i, (_, s, _, _, _) in enumerate(steps) if s == scope for r in records[i]]
        assert [r for r in order if r in set(mine)] == mine
        mine_done = [i for i in done if steps[i][1] == scope]
        assert mine_done == sorted(mine_done)
    for i, (_, scope, _, _, _) in enumerate(steps):
        if scope is None:
            for r in records[i]:
                assert all(at[earlier] < at[r] for j in range(i) for earlier in records[j])
        if scope is None or not records[i]:
            assert all(done.index(j) < done.index(i) for j in range(i))
        assert all(at[r] < written_when_done[i] for r in records[i])
    assert sorted(done) == list(range(len(steps)))
