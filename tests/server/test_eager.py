"""``network/eager.py``: a coroutine's first step runs inline; one that suspends finishes in a task with a
task's semantics (results and exceptions of awaited futures raised where it awaited, cancellation thrown in)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from regroup.network.eager import start


def test_a_coroutine_that_never_suspends_finishes_inline_without_a_task() -> None:
    async def scenario() -> None:
        ran: list[str] = []

        async def answer() -> int:
            ran.append("ran")
            return 42

        started = start(answer())
        assert ran == ["ran"]  # before start() returned, on this very turn of the loop
        assert (started.done, started.result, started.error, started.task) == (True, 42, None, None)

        async def fail() -> int:
            raise ValueError("bad request")

        failed = start(fail())
        assert failed.done and isinstance(failed.error, ValueError) and failed.task is None

    asyncio.run(scenario())


def test_a_suspended_coroutine_finishes_in_a_task_with_results_and_errors_where_it_awaited() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        seen: list[object] = []

        async def parked() -> str:
            seen.append(await first)
            try:
                await second
            except KeyError as exc:
                seen.append(f"caught {exc}")
            await asyncio.sleep(0)
            return "done"

        started = start(parked())
        assert not started.done and started.task is not None
        first.set_result("first")
        await asyncio.sleep(0)
        second.set_exception(KeyError("second"))
        assert await started.task == "done"
        assert seen == ["first", "caught 'second'"]

    asyncio.run(scenario())


def test_cancelling_the_task_cancels_the_awaited_future_and_throws_into_the_coroutine() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        waited: asyncio.Future[None] = loop.create_future()
        cleaned: list[str] = []

        async def parked() -> None:
            try:
                await waited
            finally:
                cleaned.append("finally")

        started = start(parked())
        assert started.task is not None
        await asyncio.sleep(0)
        started.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await started.task
        assert waited.cancelled() and cleaned == ["finally"]

    asyncio.run(scenario())


@pytest.mark.parametrize("outcome", ["exception", "result", "none yet"])
def test_a_task_cancelled_before_its_first_step_releases_the_awaited_future(outcome: str) -> None:
    """A connection closed in the same turn its request suspended cancels the continuation before it ever ran.
    The future the coroutine awaited is then cancelled, or its outcome read (a parked JoinGroup superseded
    meanwhile fails with RequestDropped): asyncio never reports an exception nobody retrieved."""
    reported: list[dict[str, object]] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(context))
        held: dict[str, asyncio.Future[None]] = {"future": loop.create_future()}

        async def parked(waited: asyncio.Future[None]) -> None:
            await waited

        started = start(parked(held["future"]))
        assert started.task is not None
        started.task.cancel()  # (before the task's first step)
        waited = held.pop("future")
        if outcome == "exception":
            waited.set_exception(RuntimeError("superseded"))
        elif outcome == "result":
            waited.set_result(None)
        with pytest.raises(asyncio.CancelledError):
            await started.task
        await asyncio.sleep(0)
        assert waited.done()
        if outcome == "none yet":
            assert waited.cancelled()
        del waited, started
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(scenario())
    gc.collect()
    assert not [c for c in reported if "never retrieved" in str(c.get("message", ""))], reported


@pytest.mark.parametrize("outcome", ["result", "exception", "cancelled by another"])
def test_the_outcome_is_told_in_the_loop_turn_after_the_awaited_future_is_done(outcome: str) -> None:
    """A commit waiting for its append is answered one loop turn after its future is done (``on_done``, inside
    the continuation's last step), a turn before the task's done callbacks: under load every turn holds a chunk
    of some heavy request, so each turn saved is time saved."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        appended: asyncio.Future[int] = loop.create_future()
        told: list[tuple[int, object, str]] = []
        turn = [0]
        done_at: list[int] = []

        async def commit() -> int:
            try:
                return await appended + 1
            except asyncio.CancelledError:
                return -1

        started = start(commit())
        assert started.task is not None
        started.on_done = lambda result, error: told.append((turn[0], result, type(error).__name__))
        started.task.add_done_callback(lambda _: done_at.append(turn[0]))
        settled_at: list[int] = []

        def tick() -> None:
            turn[0] += 1
            if turn[0] < 10:
                loop.call_soon(tick)  # (before the future's callbacks: they run after it next turn)
            if turn[0] == 3:
                settled_at.append(turn[0])
                if outcome == "result":
                    appended.set_result(41)
                elif outcome == "exception":
                    appended.set_exception(KeyError("lost"))
                else:
                    appended.cancel()

        loop.call_soon(tick)
        while turn[0] < 10:
            await asyncio.sleep(0)
        expected = {
            "result": (42, "NoneType"),
            "exception": (None, "KeyError"),
            "cancelled by another": (-1, "NoneType"),
        }
        assert told == [(settled_at[0] + 1, *expected[outcome])]
        assert done_at == [settled_at[0] + 2]  # the task's done callbacks: a turn later
        if outcome == "exception":
            assert isinstance(started.task.exception(), KeyError)

    asyncio.run(scenario())


def test_on_done_hears_a_cancelled_continuation() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        waited: asyncio.Future[None] = loop.create_future()
        told: list[str] = []

        async def parked() -> None:
            await waited

        started = start(parked())
        assert started.task is not None
        started.on_done = lambda result, error: told.append(type(error).__name__)
        await asyncio.sleep(0)
        started.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await started.task
        assert told == ["CancelledError"] and waited.cancelled()

    asyncio.run(scenario())
