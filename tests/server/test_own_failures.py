"""A failure of the server's own while a connection's frame is handled — not the client's fault: the process out of
descriptors when a message's module is imported on its first request, say — closes that connection, is logged
at WARNING (once per kind and interval, then with how many more) and leaves every other connection served."""

from __future__ import annotations

import asyncio
import errno
import logging
from pathlib import Path
from typing import Any

import pytest

from regroup.network import connection
from regroup.network.admission import RateLimit
from tests.server.test_heartbeat_at_once import Client, running
from tests.server.wire import API_VERSIONS


def test_a_failure_of_the_servers_own_closes_that_connection_and_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [0.0]
    monkeypatch.setattr(connection, "_own_failures", RateLimit(60.0, lambda: clock[0]))
    decode = connection.decode_request
    failing = [True]

    def out_of_descriptors(*args: Any) -> Any:
        if failing[0]:
            raise OSError(errno.EMFILE, "Too many open files")
        return decode(*args)

    monkeypatch.setattr(connection, "decode_request", out_of_descriptors)

    async def closed_without_answer(port: int) -> bool:
        client = await Client.open(port)
        client.send(API_VERSIONS, 2)
        try:
            return await asyncio.wait_for(client.reader.read(1), 10) == b""
        finally:
            client.close()

    async def scenario() -> None:
        async with running(tmp_path) as (_, port, _):
            healthy = await Client.open(port)
            failing[0] = False
            assert (await healthy.call(API_VERSIONS, 2)).error_code == 0
            failing[0] = True
            with caplog.at_level(logging.WARNING, logger="regroup.network.connection"):
                assert await closed_without_answer(port)
                assert await closed_without_answer(port)  # within the interval: counted, not logged
                clock[0] += 61
                assert await closed_without_answer(port)
            failing[0] = False
            assert (await healthy.call(API_VERSIONS, 2)).error_code == 0  # the others are untouched
            healthy.close()

    asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == "regroup.network.connection"]
    assert len(lines) == 2, lines
    assert all("cannot handle its request: OSError: [Errno 24] Too many open files" in line for line in lines)
    assert "more connections" not in lines[0] and "(1 more connections closed so since the last line)" in lines[1]
