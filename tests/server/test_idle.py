"""``--connections-max-idle-ms``: a connection that neither sends nor waits for anything is closed once the
idle period passes; one that keeps sending, or whose JoinGroup is parked, is kept."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.server.conftest import ServerProcess
from tests.server.test_groups import SUB
from tests.server.wire import API_VERSIONS, JOIN, WireClient

MakeServer = Callable[..., ServerProcess]
IDLE_MS = 1000


def test_idle_connections_are_closed_and_busy_ones_kept(make_server: MakeServer) -> None:
    server = make_server("--connections-max-idle-ms", str(IDLE_MS))
    with WireClient(server.port) as idle, WireClient(server.port) as busy, WireClient(server.port) as silent:
        assert idle.call(API_VERSIONS, 2).error_code == 0
        # busy sends a request every tenth of the idle period for two and a half periods
        deadline = time.monotonic() + 2.5 * IDLE_MS / 1000
        while time.monotonic() < deadline:
            assert busy.call(API_VERSIONS, 2).error_code == 0
            time.sleep(IDLE_MS / 10_000)
        assert idle.is_closed_by_server(timeout=10)
        assert silent.is_closed_by_server(timeout=10)  # never sent a byte
        assert busy.call(API_VERSIONS, 2).error_code == 0
    assert "idle for more than 1000 ms" in server.log()


def test_a_parked_join_group_keeps_its_connection(make_server: MakeServer) -> None:
    server = make_server("--connections-max-idle-ms", str(IDLE_MS))
    join = {
        "group_id": "slow-rebalance",
        "session_timeout": 30_000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
    }
    with WireClient(server.port, client_id="a") as a, WireClient(server.port, client_id="b", timeout=30) as b:
        a_id = a.call(JOIN, 5, member_id="", rebalance_timeout=4 * IDLE_MS, **join).member_id
        assert a.call(JOIN, 5, member_id=a_id, rebalance_timeout=4 * IDLE_MS, **join).generation_id == 1
        b_id = b.call(JOIN, 5, member_id="", rebalance_timeout=4 * IDLE_MS, **join).member_id
        # b's JoinGroup parks until a rejoins or a's rebalance timeout (four idle periods) removes a
        b.send(JOIN, 5, member_id=b_id, rebalance_timeout=4 * IDLE_MS, **join)
        answer = b.receive()
        assert (answer.error_code, answer.generation_id, answer.leader) == (0, 2, b_id)
