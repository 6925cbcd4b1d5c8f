"""Bad input closes the offending connection (or gets an error answer) and never disturbs anyone else: each
test keeps a well-behaved client connected across the bad one and checks it is still served."""

from __future__ import annotations

import os
import struct
import time

import pytest

from tests.server.conftest import ServerProcess
from tests.server.test_groups import SUB
from tests.server.wire import API_VERSIONS, DESCRIBE, HEARTBEAT, JOIN, WireClient, encode_request


def still_served(client: WireClient) -> None:
    assert client.call(API_VERSIONS, 2).error_code == 0
    assert client.call(HEARTBEAT, 4, group_id="nobody", generation_id=1, member_id="m").error_code == 25


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


BAD_FRAMES = {
    "oversized": struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 16,
    "negative size": struct.pack(">i", -5),
    "unknown api key": frame(struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff"),
    "api key not served": frame(struct.pack(">hhi", 57, 0, 1) + b"\xff\xff"),  # UpdateFeatures
    "unsupported version": encode_request(HEARTBEAT, 4, 1, "x", group_id="g", generation_id=1, member_id="m").replace(
        struct.pack(">hh", HEARTBEAT, 4), struct.pack(">hh", HEARTBEAT, 9), 1
    ),
    "too short for a header": frame(b"\x00\x0c"),
    "body cut short": frame(
        encode_request(
            JOIN,
            5,
            1,
            "x",
            group_id="g",
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "r", "metadata": SUB}],
        )[4:-9]
    ),
    "garbage": frame(os.urandom(64)),
    "string length past the end": frame(struct.pack(">hhih", HEARTBEAT, 0, 1, 30000) + b"abc"),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frames_close_only_that_connection(server: ServerProcess, name: str) -> None:
    with WireClient(server.port) as good, WireClient(server.port) as bad:
        still_served(good)
        bad.send_raw(BAD_FRAMES[name])
        assert bad.is_closed_by_server()
        still_served(good)


def test_truncated_frame_then_disconnect(server: ServerProcess) -> None:
    with WireClient(server.port) as good:
        bad = WireClient(server.port)
        bad.send_raw(struct.pack(">i", 100) + b"\x00\x12\x00\x00")  # promises 100 bytes, sends 4, leaves
        bad.close()
        still_served(good)
        half = WireClient(server.port)
        half.send_raw(b"\x00\x00")  # half a size prefix
        half.close()
        still_served(good)


def test_raw_garbage_stream(server: ServerProcess) -> None:
    with WireClient(server.port) as good, WireClient(server.port) as bad:
        bad.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # "GET " = 1195725856 bytes: over the limit
        assert bad.is_closed_by_server()
        still_served(good)


def test_client_disconnecting_while_its_join_group_is_parked(server: ServerProcess) -> None:
    join = {
        "group_id": "parked",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
    }
    with WireClient(server.port, client_id="a") as a, WireClient(server.port, client_id="b") as good:
        a_id = a.call(JOIN, 5, member_id="", **join).member_id
        gen = a.call(JOIN, 5, member_id=a_id, **join)
        assert gen.generation_id == 1
        # b joins: the group rebalances and b's JoinGroup parks; a vanishes mid-request with a JoinGroup too
        good.send(JOIN, 3, member_id="", **{k: v for k, v in join.items() if k != "group_instance_id"})
        a.send(JOIN, 5, member_id=a_id, **join)
        a.close()
        # the server keeps serving b (its join completes once a's parked join is counted in)
        resp = good.receive()
        assert resp.error_code == 0 and resp.generation_id == 2
        described = good.call(DESCRIBE, 5, groups=["parked"], include_authorized_operations=False).groups[0]
        assert described.group_state == "CompletingRebalance"
        still_served(good)


def test_pipelined_requests_are_answered_in_order(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        for version in (0, 1, 2, 3):
            client.send(
                API_VERSIONS,
                version,
                **({"client_software_name": "a", "client_software_version": "1"} if version >= 3 else {}),
            )
        client.send(HEARTBEAT, 0, group_id="nobody", generation_id=1, member_id="m")
        answers = [client.receive() for _ in range(5)]  # receive() checks each correlation id in turn
        assert answers[-1].error_code == 25


def test_a_superseded_join_group_closes_its_connection(server: ServerProcess) -> None:
    join = {
        "group_id": "superseded",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
    }
    with WireClient(server.port) as a, WireClient(server.port) as b1, WireClient(server.port) as b2:
        a_id = a.call(JOIN, 3, member_id="", **join).member_id
        b1.send(JOIN, 3, member_id="", **join)  # parks: the group waits for a to rejoin
        described = a.call(DESCRIBE, 0, groups=["superseded"]).groups[0]
        b_id = next(m.member_id for m in described.members if m.member_id != a_id)
        b2.send(JOIN, 3, member_id=b_id, **join)  # b retries on a new connection: the first request is dropped
        assert b1.is_closed_by_server()
        assert a.call(JOIN, 3, member_id=a_id, **join).generation_id == 2
        assert b2.receive().generation_id == 2


def test_requests_behind_a_parked_join_wait_in_order_past_the_in_flight_limit(server: ServerProcess) -> None:
    join = {
        "group_id": "parked-pipeline",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
    }
    with WireClient(server.port, client_id="a") as a, WireClient(server.port, client_id="b") as b:
        a_id = a.call(JOIN, 5, member_id="", **join).member_id
        assert a.call(JOIN, 5, member_id=a_id, **join).generation_id == 1
        b_id = b.call(JOIN, 5, member_id="", **join).member_id
        b.send(JOIN, 5, member_id=b_id, **join)  # parks until a rejoins
        for _ in range(150):  # more than the 64 responses a connection may hold back
            b.send(API_VERSIONS, 2)
        b.send(HEARTBEAT, 4, group_id="nobody", generation_id=1, member_id="m")
        time.sleep(0.5)  # (not an assertion) lets the server read b's backlog up to its limit first
        a.send(JOIN, 5, member_id=a_id, **join)
        assert a.receive().generation_id == 2
        assert b.receive().generation_id == 2  # receive() checks every correlation id in order
        assert all(b.receive().error_code == 0 for _ in range(150))
        assert b.receive().error_code == 25
        still_served(b)
