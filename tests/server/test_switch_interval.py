"""A server configured with a thread switch interval sets it for its process when it starts; one configured without
leaves the interpreter's as it is. (The collector's settings: ``test_young_gc.py``.)"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from regroup.server.app import Server, ServerConfig
from regroup.storage.record_log import FsyncPolicy

T = TypeVar("T")


async def _seen_while_serving(config: ServerConfig, read: Callable[[], T]) -> T:
    """What ``read`` says of the process while a server made with ``config`` is running."""
    server = Server(config)
    await server.start()
    try:
        return read()
    finally:
        await server.close()


@pytest.mark.parametrize("interval", [None, 0.002])
def test_the_switch_interval_is_the_configured_one(tmp_path: Path, interval: float | None) -> None:
    before = sys.getswitchinterval()
    try:
        config = ServerConfig(port=0, data_dir=tmp_path, fsync=FsyncPolicy.NEVER, switch_interval_s=interval)
        seen = asyncio.run(_seen_while_serving(config, sys.getswitchinterval))
        assert seen == pytest.approx(before if interval is None else interval)
    finally:
        sys.setswitchinterval(before)
