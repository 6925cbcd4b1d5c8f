"""A change of a durable file (the ACLs, the SCRAM credentials) written off the event loop, its effect in memory
following the file whatever becomes of the request that made it.

A handler plans the change on the loop with the store's lock held, then ``written_then`` writes the file on a
worker thread and, in the write's own callback on the loop, applies the change in memory and releases the lock.
So a request cancelled while its file is written (its client gone: the connection cancels its handlers) still
leaves the store as the file says (a deleted ACL stops granting, a deleted credential stops authenticating), and
the next change, planned against this one, waits until it is applied."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable

__all__ = ["written_then"]


async def written_then(
    lock: asyncio.Lock,
    write: Callable[[], object],
    then: Callable[[], object],
    executor: concurrent.futures.Executor | None = None,
) -> None:
    """With ``lock`` held by the caller: ``write`` on a worker thread (``executor``; None: the loop's default);
    once it has returned, ``then`` on the event loop, and ``lock`` released either way, both in the write's
    callback, even if the caller is cancelled meanwhile. Raises what ``write`` raised (``then`` not run)."""
    try:
        written = asyncio.get_running_loop().run_in_executor(executor, write)
    except BaseException:
        lock.release()
        raise

    def finish(done: asyncio.Future[object]) -> None:
        try:
            if not done.cancelled() and done.exception() is None:
                then()
        finally:
            lock.release()

    written.add_done_callback(finish)
    await asyncio.shield(written)
