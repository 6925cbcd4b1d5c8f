"""The event loop's long turns, named: put this directory first on ``PYTHONPATH`` with ``REGROUP_TURNS_LOG`` set
to a directory, and every ``regroup serve`` started so (``bench/stall.py`` passes its environment on) runs on
asyncio's own loop and writes, to ``<dir>/turns-<pid>.log``, each turn of its loop whose callbacks took longer
than ``REGROUP_TURNS_MS`` (10 by default; the wait for the sockets before them not counted): how long, how many
callbacks, the collector's collections in it (generation, ms), and its six costliest kinds of callback with their
count and time (a task's by its coroutine, and for a callback over the threshold the API key of the request it
serves when it can tell).

    REGROUP_TURNS_LOG=/tmp/turns PYTHONPATH=bench/turns .venv/bin/python bench/stall.py --cases classic-joins-10k

The instrumentation costs every callback two clock readings: compare trees with it on both, not against a run
without it. (uvloop's callbacks cannot be timed from Python, hence asyncio's loop.)"""

from __future__ import annotations

import os
import sys

_DIR = os.environ.get("REGROUP_TURNS_LOG")

if _DIR and "serve" in sys.argv:
    import asyncio.base_events
    import asyncio.events
    import collections
    import gc
    import time
    from typing import Any

    sys.argv += ["--event-loop", "asyncio"]
    _THRESHOLD_S = float(os.environ.get("REGROUP_TURNS_MS", "10")) / 1000
    _out = open(os.path.join(_DIR, f"turns-{os.getpid()}.log"), "w")  # noqa: SIM115 (open for the process)
    _spent: collections.Counter[str] = collections.Counter()
    _count: collections.Counter[str] = collections.Counter()
    _collections: list[tuple[int, float]] = []
    _began = [0.0]

    def _on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            _began[0] = time.perf_counter()
        else:
            _collections.append((int(info["generation"]), round((time.perf_counter() - _began[0]) * 1000, 1)))

    gc.callbacks.append(_on_collection)

    def _api(task: Any) -> str:
        """The API key of the request a task's coroutine chain serves, if a frame of it names one."""
        try:
            coro = task.get_coro()
            for _ in range(4):
                frame = coro.cr_frame
                if frame is None:
                    return ""
                names = frame.f_locals
                request = names.get("request")
                if request is not None and hasattr(request, "api_key"):
                    return f":api{request.api_key}"
                coro = names.get("coro")
                if coro is None:
                    return ""
        except Exception:  # (a diagnostic: never in the way)
            return ""
        return ""

    _run = asyncio.events.Handle._run

    def _timed_run(self: Any) -> None:
        callback = getattr(self, "_callback", None)
        owner = getattr(callback, "__self__", None)
        task = owner if owner is not None and hasattr(owner, "get_coro") else None
        api = _api(task) if task is not None else ""
        began = time.perf_counter()
        try:
            _run(self)
        finally:
            took = time.perf_counter() - began
            name = getattr(callback, "__qualname__", None) or type(callback).__name__
            if task is not None:
                name += ":" + getattr(task.get_coro(), "__qualname__", "?")
                if took > _THRESHOLD_S:
                    name += api
            _spent[name] += took
            _count[name] += 1

    asyncio.events.Handle._run = _timed_run  # type: ignore[method-assign]

    _run_once = asyncio.base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]

    def _timed_run_once(self: Any) -> None:
        _spent.clear()
        _count.clear()
        _collections.clear()
        _run_once(self)
        took = sum(_spent.values())  # (the callbacks' time: not the wait for the sockets before them)
        if took > _THRESHOLD_S:
            top = ", ".join(f"{name} x{_count[name]} {spent * 1000:.1f}ms" for name, spent in _spent.most_common(6))
            _out.write(f"turn {took * 1000:.1f} ms callbacks={sum(_count.values())} gc={_collections[:4]} | {top}\n")
            _out.flush()

    asyncio.base_events.BaseEventLoop._run_once = _timed_run_once  # type: ignore[attr-defined]
