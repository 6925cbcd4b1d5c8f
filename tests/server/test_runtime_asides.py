"""The coordinator runtime's worker thread (``server/runtime.py``): work a core call hands out
(``Result.asides``) runs off the loop, its outcome lands on the loop through ``GroupCoordinator.land`` and the
landing's records are appended like any call's; a landing that raises is landed again as a failure, so that
nothing waits for it forever. (The KIP-848 target computed aside, end to end with real clients:
``tests/clients/test_kip848_offload.py``.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from regroup.coordinator.context import Ctx
from regroup.coordinator.groups import Groups
from regroup.coordinator.result import Completion, Result
from regroup.records.builders import new_group_tombstone
from tests.server.test_runtime import runtime


class Work:
    """A piece of work that records where it ran and what landed; ``fail_landing``: its first landing raises."""

    def __init__(self, fail_landing: bool = False) -> None:
        self.ran_on: str | None = None
        self.landed: list[object] = []
        self.fail_landing = fail_landing

    def run(self) -> object:
        self.ran_on = threading.current_thread().name
        return 42

    def land(self, ctx: Ctx, groups: Groups, outcome: object) -> None:
        self.landed.append(outcome)
        if self.fail_landing and len(self.landed) == 1:
            raise RuntimeError("a bug in the landing")
        ctx.emit(new_group_tombstone("landed"))


def handing_out(work: Work) -> Any:
    def op(coordinator: Any, key: Any, now: int) -> Result:
        result = Result()
        result.completions.append(Completion(key, "answered"))
        result.asides.append(work)
        return result

    return op


def test_work_runs_on_the_worker_thread_and_its_records_are_appended() -> None:
    async def scenario() -> None:
        rt, fake = runtime()
        work = Work()
        assert await rt.call(handing_out(work)) == "answered"
        for _ in range(200):
            if fake.appended:
                break
            await asyncio.sleep(0.01)
        assert work.ran_on is not None and work.ran_on.startswith("regroup-aside")
        assert work.landed == [42]
        assert [r.key.group_id for r in fake.appended] == ["landed"]
        assert rt.asides_landed == 1 and rt.aside_seconds >= 0
        await rt.close()

    asyncio.run(scenario())


def test_a_landing_that_raises_lands_again_as_a_failure() -> None:
    async def scenario() -> None:
        rt, fake = runtime()
        work = Work(fail_landing=True)
        await rt.call(handing_out(work))
        for _ in range(200):
            if len(work.landed) == 2:
                break
            await asyncio.sleep(0.01)
        assert work.landed[0] == 42 and isinstance(work.landed[1], RuntimeError)
        for _ in range(200):
            if fake.appended:
                break
            await asyncio.sleep(0.01)
        assert len(fake.appended) == 1  # (the landing that raised wrote nothing; the second did)
        await rt.close()

    asyncio.run(scenario())
