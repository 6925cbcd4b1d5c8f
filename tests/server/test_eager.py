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
