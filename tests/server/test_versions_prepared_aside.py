"""An API version's first request in a process is handled once the decoding thread has prepared the version
(``codec.prepare_version``: its kio modules imported, their readers and writers composed), not on the event loop
(``network/connection.py``): meanwhile other connections are answered, and the requests pipelined behind it on
its own connection wait and keep their order. The first request of a group membership API or an offset commit
(``ORDERED_APIS``) is prepared where it stands instead, on the loop: their order across connections decides a
group's state; so a server has the decoding thread prepare those APIs' versions as soon as it serves."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from regroup.network import codec, connection
from regroup.network.codec import DecodedRequest, prepare_version, unprepared
from regroup.network.connection import Connection, prepare_ordered_versions
from regroup.server.app import Server, ServerConfig
from regroup.storage.record_log import FsyncPolicy
from tests.server.wire import encode_request

API_VERSIONS, HEARTBEAT = 18, 12
VERSIONS = {API_VERSIONS: (0, 3), HEARTBEAT: (0, 4)}
#: how long the decoding thread takes to prepare a version here (slowed down: the test sees what waits for it)
PREPARING_S = 0.3


def head(api_key: int, api_version: int) -> bytes:
    return struct.pack(">hh", api_key, api_version)


@pytest.fixture
def nothing_prepared(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[bytes]]:
    """The process's prepared versions, as if none were (the test process's own are left alone)."""
    prepared: set[bytes] = set()
    monkeypatch.setattr(codec, "_PREPARED_HEADS", prepared)
    yield prepared


def test_an_advertised_version_is_unprepared_until_prepared(nothing_prepared: set[bytes]) -> None:
    frame = encode_request(API_VERSIONS, 2, 7, "c")[4:]
    assert unprepared(frame, VERSIONS)
    prepare_version(API_VERSIONS, 2)
    assert not unprepared(frame, VERSIONS)
    assert unprepared(encode_request(API_VERSIONS, 1, 7, "c")[4:], VERSIONS)  # (one version at a time)
    # what is not advertised is never waited for: decoding refuses it where it stands
    assert not unprepared(head(API_VERSIONS, 4) + b"\x00" * 8, VERSIONS)
    assert not unprepared(head(HEARTBEAT, -1) + b"\x00" * 8, VERSIONS)
    assert not unprepared(head(99, 0) + b"\x00" * 8, VERSIONS)
    assert not unprepared(b"\x00\x12\x00", VERSIONS)  # (too short to name a version)


class Recorder:
    """Answers every request at once with its correlation id; notes (connection, correlation id) in order."""

    def __init__(self) -> None:
        self.versions = VERSIONS
        self.limits: dict[int, Any] = {}
        self.handled: list[tuple[int, int]] = []

    async def respond(
        self, request: DecodedRequest, *, client_host: str, connection_id: int, session: Any = None
    ) -> bytes | None:
        self.handled.append((connection_id, request.correlation_id))
        return b"\x00\x00\x00\x04" + request.correlation_id.to_bytes(4, "big")


def read_answers(sock: socket.socket, count: int) -> list[tuple[int, float]]:
    """``count`` answers' correlation ids, each with when it was read (``time.perf_counter``)."""
    answers = []
    for _ in range(count):
        size = int.from_bytes(read_exactly(sock, 4), "big")
        answers.append((int.from_bytes(read_exactly(sock, size), "big"), time.perf_counter()))
    return answers


def read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "closed"
        data += chunk
    return data


def run_beside_server(
    monkeypatch: pytest.MonkeyPatch, client: Any, prepared_on: list[tuple[str, int, int]]
) -> tuple[Recorder, Any]:
    """A server of ``Connection``s answering with a ``Recorder`` on a loop of its own; ``client(port)`` runs in
    this thread. The decoding thread's ``prepare_version`` is slowed down and notes where it ran."""
    real = connection.prepare_version

    def slow_prepare(api_key: int, api_version: int) -> None:
        prepared_on.append((threading.current_thread().name, api_key, api_version))
        time.sleep(PREPARING_S)
        real(api_key, api_version)

    monkeypatch.setattr(connection, "prepare_version", slow_prepare)
    responder = Recorder()
    ready, stop = threading.Event(), threading.Event()
    port: list[int] = []

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        ids = iter(range(1, 100))
        server = await loop.create_server(lambda: Connection(responder, next(ids)), "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.01)
        server.close()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        outcome = client(port[0])
    finally:
        stop.set()
        thread.join(10)
    return responder, outcome


def test_a_versions_first_request_waits_for_the_decoding_thread_not_the_others(
    monkeypatch: pytest.MonkeyPatch, nothing_prepared: set[bytes]
) -> None:
    prepare_version(API_VERSIONS, 0)  # the other connection's version: ready
    prepared_on: list[tuple[str, int, int]] = []

    def clients(port: int) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as first:
            # a v1 (never prepared) with a v0 pipelined behind it
            first.sendall(encode_request(API_VERSIONS, 1, 1, "c") + encode_request(API_VERSIONS, 0, 2, "c"))
            time.sleep(0.05)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as other:
                other.sendall(encode_request(API_VERSIONS, 0, 3, "c"))
                others = read_answers(other, 1)
            return read_answers(first, 2), others

    responder, (firsts, others) = run_beside_server(monkeypatch, clients, prepared_on)
    assert prepared_on == [("regroup-decode_0", API_VERSIONS, 1)]
    assert [c for c, _ in firsts] == [1, 2] and [c for c, _ in others] == [3]
    assert responder.handled == [(2, 3), (1, 1), (1, 2)]  # the other connection's, while the version is prepared
    assert others[0][1] < firsts[0][1]
    assert head(API_VERSIONS, 1) in nothing_prepared


def test_an_ordered_apis_first_request_is_prepared_where_it_stands(
    monkeypatch: pytest.MonkeyPatch, nothing_prepared: set[bytes]
) -> None:
    prepared_on: list[tuple[str, int, int]] = []
    beat = {"group_id": "g", "generation_id": 1, "member_id": "m"}

    def client(port: int) -> list[tuple[int, float]]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(encode_request(HEARTBEAT, 0, 1, "c", **beat) + encode_request(HEARTBEAT, 0, 2, "c", **beat))
            return read_answers(sock, 2)

    responder, answers = run_beside_server(monkeypatch, client, prepared_on)
    assert prepared_on == []  # never through the decoding thread
    assert [c for c, _ in answers] == [1, 2] and responder.handled == [(1, 1), (1, 2)]


def test_the_ordered_apis_versions_are_prepared_on_the_decoding_thread_newest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prepared: list[tuple[str, int, int]] = []

    def noting(api_key: int, api_version: int) -> None:
        prepared.append((threading.current_thread().name, api_key, api_version))

    monkeypatch.setattr(connection, "prepare_version", noting)
    COMMIT, JOIN, SYNC = 8, 11, 14
    versions = {API_VERSIONS: (0, 3), COMMIT: (8, 9), JOIN: (2, 5), HEARTBEAT: (0, 2), SYNC: (1, 1)}
    prepare_ordered_versions(versions).result(10)
    assert {name for name, _, _ in prepared} == {"regroup-decode_0"}
    assert [(key, version) for _, key, version in prepared] == [
        (COMMIT, 9),
        (JOIN, 5),
        (HEARTBEAT, 2),
        (SYNC, 1),
        (COMMIT, 8),
        (JOIN, 4),
        (HEARTBEAT, 1),
        (JOIN, 3),
        (HEARTBEAT, 0),
        (JOIN, 2),
    ]


def test_a_server_prepares_the_ordered_apis_versions_once_serving(tmp_path: Path, nothing_prepared: set[bytes]) -> None:
    async def scenario() -> None:
        server = Server(ServerConfig(host="127.0.0.1", port=0, data_dir=tmp_path, fsync=FsyncPolicy.NEVER))
        await server.start()
        try:
            assert server.ordered_prepared is not None
            await asyncio.wrap_future(server.ordered_prepared)
            assert server._dispatcher is not None
            versions = server._dispatcher.versions
        finally:
            await server.close()
        expected = {
            head(key, version)
            for key in connection.ORDERED_APIS
            for version in range(versions[key][0], versions[key][1] + 1)
        }
        assert len(expected) > 20 and expected <= nothing_prepared

    asyncio.run(scenario())
