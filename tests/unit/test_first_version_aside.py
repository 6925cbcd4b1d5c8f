"""The first request of an API version the process has not decoded yet is decoded on the decoding thread, which
loads kio's classes for it there (``codec.schemas_loaded``, ``codec.load_schemas``, ``network/connection.py``):
4-10 ms of imports no longer held the event loop in one piece. Later requests of that version are decoded on the
loop; a connection's requests are answered in order either way."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from regroup.network import codec, connection
from regroup.network.codec import DecodedRequest, load_schemas, schemas_loaded
from regroup.network.connection import Connection
from tests.server.wire import encode_request

API_VERSIONS, HEARTBEAT = 18, 12
VERSIONS = {API_VERSIONS: (0, 3), HEARTBEAT: (0, 4)}


@pytest.fixture(autouse=True)
def nothing_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_LOADED", set())


def test_a_version_is_loaded_once_asked_and_frames_decoding_refuses_need_nothing() -> None:
    frame = encode_request(API_VERSIONS, 2, 7, "c")[4:]
    assert not schemas_loaded(frame, VERSIONS)
    load_schemas(API_VERSIONS, 2)
    assert schemas_loaded(frame, VERSIONS)
    assert not schemas_loaded(encode_request(API_VERSIONS, 1, 7, "c")[4:], VERSIONS)  # (each version its own)
    assert schemas_loaded(encode_request(API_VERSIONS, 2, 7, "c")[4:], {})  # an api key not served
    assert schemas_loaded(
        encode_request(HEARTBEAT, 4, 7, "c", group_id="g", generation_id=1, member_id="m")[4:], {HEARTBEAT: (0, 3)}
    )  # a version not served
    assert schemas_loaded(b"\x00", VERSIONS)  # too short to say


class Responder:
    def __init__(self) -> None:
        self.versions = VERSIONS
        self.limits: dict[int, Any] = {}
        self.handled: list[int] = []

    async def respond(
        self, request: DecodedRequest, *, client_host: str, connection_id: int, session: Any = None
    ) -> bytes | None:
        self.handled.append(request.correlation_id)
        return b"\x00\x00\x00\x04" + request.correlation_id.to_bytes(4, "big")


def _transport(written: list[bytes]) -> Any:
    def nothing(*_: Any, **__: Any) -> None:
        return None

    return SimpleNamespace(
        get_extra_info=lambda name, default=None: ("127.0.0.1", 9999) if name == "peername" else default,
        get_write_buffer_size=lambda: 0,
        is_closing=lambda: False,
        write=written.append,
        **dict.fromkeys(("set_write_buffer_limits", "writelines", "pause_reading", "resume_reading"), nothing),
        close=nothing,
    )


def test_the_first_request_of_a_version_is_decoded_on_the_decoding_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded_aside: list[tuple[int, str]] = []
    real = connection._decode_and_plan

    def watched(frame: bytes, *args: Any) -> DecodedRequest:
        decoded_aside.append((int.from_bytes(frame[4:8], "big"), threading.current_thread().name))
        return real(frame, *args)

    monkeypatch.setattr(connection, "_decode_and_plan", watched)

    async def scenario() -> tuple[list[int], list[bytes]]:
        responder, written = Responder(), []  # type: ignore[var-annotated]
        conn = Connection(responder, 1)
        conn.connection_made(_transport(written))
        conn.data_received(b"".join(encode_request(API_VERSIONS, 2, i, "c") for i in range(4)))
        for _ in range(200):
            if len(responder.handled) == 4:
                break
            await asyncio.sleep(0.005)
        conn.data_received(b"".join(encode_request(API_VERSIONS, 2, i, "c") for i in range(4, 6)))
        await asyncio.sleep(0)
        conn.close()
        return responder.handled, written

    handled, written = asyncio.run(scenario())
    assert handled == list(range(6))  # in order; the last two on the loop at once
    assert len(decoded_aside) == 1 and decoded_aside[0][0] == 0
    assert decoded_aside[0][1] != threading.main_thread().name
    assert schemas_loaded(encode_request(API_VERSIONS, 2, 9, "c")[4:], VERSIONS)
    answered = b"".join(written)
    assert [int.from_bytes(answered[i + 4 : i + 8], "big") for i in range(0, len(answered), 8)] == list(range(6))
