"""Eager start of a request's coroutine: its first step runs at once, inside the caller (the connection's
``data_received``), and only a coroutine that actually suspends — a parked JoinGroup, a commit waiting for its
append, a long-polling Fetch — gets a task to finish in.

Most requests (Heartbeat, Metadata, ApiVersions, OffsetFetch, a heartbeat-path core call answered on the runtime's
fast path) never suspend, so they cost no task, no event-loop round trip and no done callback. This is what Python
3.12's eager task factory does; the project supports 3.11, so it is done here for one coroutine at a time. The
continuation mirrors a task's steps: it waits until the awaited future is done (whatever its outcome), then sends
into the coroutine again, so the future's result or exception is raised inside the coroutine exactly where it
awaited; cancelling the continuation cancels the awaited future and throws ``CancelledError`` into the coroutine, as
cancelling a task does (without waiting for the awaited future to wind down: its late outcome is read and dropped,
so asyncio never reports it as unretrieved; the same when the task is cancelled before its first step). During the
eager step there is no current task (``asyncio.current_task()`` is None); after a suspension the continuation task
is current. The continuation can report how long each of its steps held the event loop (``on_step``: the server's
stall watchdog); the eager step is timed by the caller.

The continuation awaits the future itself, so it runs in the loop turn after the future is done, and it hands
its outcome to ``on_done`` inside its last step rather than through the task's done callbacks (which run a turn
later): a request that suspended once (a commit waiting for its append) is answered in the turn after its future
is done, two turns sooner than through a helper future and a done callback. Under load every turn holds a chunk
of some heavy request's work, so turns saved are milliseconds saved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Started(Generic[T]):
    """Outcome of :func:`start`: ``done`` with ``result`` or ``error``, or still running as ``task``."""

    __slots__ = ("done", "error", "on_done", "result", "task")

    def __init__(self) -> None:
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None
        self.task: asyncio.Task[T] | None = None
        #: told the continuation's outcome inside its last step: ``on_done(result, error)``
        self.on_done: OnDone | None = None


#: told how long each step of a continuation held the loop: ``on_step(seconds, context)``
OnStep = Callable[[float, Any], None]
#: told a continuation's outcome in its last step: ``on_done(result, error)``
OnDone = Callable[[Any, "BaseException | None"], None]


def start(coro: Coroutine[Any, Any, T], on_step: OnStep | None = None, context: Any = None) -> Started[T]:
    """Run ``coro`` until it finishes or first suspends; in the second case ``task`` finishes it, and tells
    ``on_step`` (when given) how long each of its later steps took, with ``context``. (Timing the first step
    is the caller's: it runs inside this call.) The caller may then set ``on_done`` on what it got: it hears the
    continuation's outcome inside its last step (a loop turn before the task's done callbacks would), unless the
    task is cancelled before its first step."""
    started: Started[T] = Started()
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        started.done, started.result = True, stop.value
        return started
    except BaseException as exc:  # the coroutine failed before suspending; the caller decides what it means
        started.done, started.error = True, exc
        return started
    task = asyncio.get_running_loop().create_task(_finish(coro, waiting, on_step, context, started))
    if isinstance(waiting, asyncio.Future):
        task.add_done_callback(partial(_release, waiting))
    started.task = task
    return started


async def _finish(
    coro: Coroutine[Any, Any, T], waiting: Any, on_step: OnStep | None, context: Any, started: Started[T]
) -> T:
    try:
        result = await _steps(coro, waiting, on_step, context)
    except BaseException as exc:
        if started.on_done is not None:
            started.on_done(None, exc)
        raise
    if started.on_done is not None:
        started.on_done(result, None)
    return result


async def _steps(coro: Coroutine[Any, Any, T], waiting: Any, on_step: OnStep | None, context: Any) -> T:
    task = asyncio.current_task()
    assert task is not None
    clock = time.perf_counter
    while True:
        try:
            if waiting is None:  # a bare yield (asyncio.sleep(0)): run again on the next loop turn
                await asyncio.sleep(0)
            else:
                if not isinstance(waiting, asyncio.Future):
                    coro.close()
                    raise RuntimeError(f"a request coroutine awaited {waiting!r}, not an asyncio future")
                waiting._asyncio_future_blocking = False
                try:
                    # The task wakes in the loop turn after the future is done (no future in between); whatever
                    # its outcome, the coroutine reads it where it awaited.
                    await waiting
                except asyncio.CancelledError:
                    if task.cancelling():
                        raise  # the continuation itself is cancelled (which cancelled the future too)
                except BaseException:  # (the coroutine reads the future's error when sent into)
                    pass
        except asyncio.CancelledError as cancelled:
            if waiting is not None:
                waiting.cancel()
                # The coroutine is told at once; the future may still finish later (a gather completes once its
                # children have wound down) with an outcome nobody reads: mark it read so asyncio does not log it.
                waiting.add_done_callback(_consume)
            began = clock()
            try:
                waiting = coro.throw(cancelled)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                if on_step is not None:
                    on_step(clock() - began, context)
            continue
        began = clock()
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            if on_step is not None:
                on_step(clock() - began, context)


def _release(waiting: asyncio.Future[Any], task: asyncio.Task[Any]) -> None:
    """The continuation ended. Cancelled before its first step (its connection closed in the same turn), it never
    looked at the future the coroutine first awaited: cancel that future, or read its outcome, so asyncio does
    not report an exception nobody retrieved (a parked request superseded meanwhile). Otherwise the coroutine
    read it already, and this changes nothing."""
    if task.cancelled():
        waiting.cancel()
        waiting.add_done_callback(_consume)


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
