"""A server configured with a thread switch interval sets it for its process when it starts; one configured
without leaves the interpreter's as it is."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from regroup.server.app import Server, ServerConfig
from regroup.storage.record_log import FsyncPolicy


async def _started(config: ServerConfig) -> float:
    server = Server(config)
    await server.start()
    try:
        return sys.getswitchinterval()
    finally:
        await server.close()


@pytest.mark.parametrize("interval", [None, 0.002])
def test_the_switch_interval_is_the_configured_one(tmp_path: Path, interval: float | None) -> None:
    before = sys.getswitchinterval()
    try:
        config = ServerConfig(port=0, data_dir=tmp_path, fsync=FsyncPolicy.NEVER, switch_interval_s=interval)
        seen = asyncio.run(_started(config))
        assert seen == pytest.approx(before if interval is None else interval)
    finally:
        sys.setswitchinterval(before)
