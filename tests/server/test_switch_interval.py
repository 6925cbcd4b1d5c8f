"""A server configured with a thread switch interval, or with the cyclic collector's thresholds, sets them for its
process when it starts; one configured without leaves the interpreter's as they are."""

from __future__ import annotations

import asyncio
import gc
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


async def _thresholds_started(config: ServerConfig) -> tuple[int, int, int]:
    server = Server(config)
    await server.start()
    try:
        return gc.get_threshold()
    finally:
        await server.close()


@pytest.mark.parametrize("thresholds", [None, (12_345, 7, 9)])
def test_the_collector_thresholds_are_the_configured_ones(
    tmp_path: Path, thresholds: tuple[int, int, int] | None
) -> None:
    before = gc.get_threshold()
    try:
        config = ServerConfig(port=0, data_dir=tmp_path, fsync=FsyncPolicy.NEVER, gc_thresholds=thresholds)
        seen = asyncio.run(_thresholds_started(config))
        assert seen == (before if thresholds is None else thresholds)
    finally:
        gc.set_threshold(*before)
