"""Requests that no schema reading can accept close their connection, as Kafka's ``SocketServer`` closes one
whose request does not parse: logged at INFO without a traceback, the server alive, other clients served.

* A length (array count, string or bytes length, tagged-field count or size) claiming more than the frame
  holds: Kafka refuses to read past the end ("tried to allocate a collection of size N, but there are only
  M bytes remaining") rather than allocating what the count says.
* A null where the schema does not allow one ("non-nullable field X was serialized as null").

The first cases are frames found by fuzzing (``tests/server/fuzz``); the rest walk every API and version the
server advertises, every length field of a plausible request and every non-nullable array."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import pytest

from regroup.server.dispatch import api_name
from tests.server.conftest import ServerProcess
from tests.server.fuzz.layout import LengthSite
from tests.server.fuzz.schema import served_requests
from tests.server.fuzz.seeds import Seed, array_paths, encode_frame, make_seed, with_null
from tests.server.fuzz.values import RandomChooser, entity_value
from tests.server.fuzz.watch import LogWatcher
from tests.server.wire import API_VERSIONS, HEARTBEAT, WireClient
from tests.server_data.batches import uvarint

#: whole frames (size prefix included) that aborted the server: a compact array count of ~2^32 elements
FOUND_HUGE_COUNTS = {
    "Metadata v9": "0000001a0003000900000001000672656c69616200ffffffff0f00000000",
    "DescribeGroups v5": "00000018000f000500000001000672656c69616200ffffffff0f0000",
    "OffsetFetch v8": "000000180009000800000001000672656c69616200ffffffff0f0000",
    "CreateTopics v5": "0000001c0013000500000001000672656c69616200ffffffff0f000003e80000",
}
#: DescribeGroups v0 whose (non-nullable) groups array is null: a handler used to fail on it with a traceback
FOUND_NULL_ARRAY = "00000014000f000000000005000672656c696162ffffffff"

VERSIONS = served_requests()
IDS = [f"{api_name(key)}-v{version}" for key, version, _ in VERSIONS]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("regroup-malformed")
    proc = ServerProcess(base / "data", base / "server.log", [])
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture
def server(shared: ServerProcess) -> ServerProcess:
    """The module's server, started again if an earlier case killed it (so each case fails on its own)."""
    if shared.proc is None or shared.proc.poll() is not None:
        shared.restart()
    return shared


def refused(server: ServerProcess, frames: dict[str, bytes]) -> None:
    """Each frame, alone on its own connection, gets the connection closed with nothing written, is logged
    at INFO with no traceback; the server stays up and serves a client that was connected all along."""
    log = LogWatcher(server.log_path)
    failures = []
    with WireClient(server.port) as good:
        for label, frame in frames.items():
            with WireClient(server.port) as bad:
                bad.send_raw(frame)
                try:
                    closed = bad.is_closed_by_server()
                except OSError:
                    closed = False
            try:
                assert good.call(API_VERSIONS, 2).error_code == 0
            except OSError:
                if server.proc is not None:
                    server.proc.wait(timeout=10)
                pytest.fail(f"{label}: the server died ({frame.hex()}):\n{server.log()[-1500:]}")
            records = log.new_records()
            logged = [f"{r.level} {r.message} {' '.join(r.rest)[-300:]}" for r in records if r.is_finding]
            if not closed or logged:
                answer = "answered or left open" if not closed else "closed"
                failures.append(f"{label}: {answer}; {'; '.join(logged)[:600]} ({frame.hex()})")
            elif not any(r.level == "INFO" and "closing connection" in r.message for r in records):
                failures.append(f"{label}: closed without an INFO line saying why ({frame.hex()})")
        assert good.call(API_VERSIONS, 2).error_code == 0
        assert good.call(HEARTBEAT, 4, group_id="nobody", generation_id=1, member_id="m").error_code == 25
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", sorted(FOUND_HUGE_COUNTS))
def test_found_huge_array_counts(server: ServerProcess, name: str) -> None:
    refused(server, {name: bytes.fromhex(FOUND_HUGE_COUNTS[name])})


def test_found_null_array(server: ServerProcess) -> None:
    refused(server, {"DescribeGroups v0, groups null": bytes.fromhex(FOUND_NULL_ARRAY)})


def past_the_end(seed: Seed, site: LengthSite) -> bytes | None:
    """``seed`` with the length at ``site`` claiming more than the whole frame holds (None when the field
    cannot: an int16 string length and a frame of 32 KiB or more)."""
    frame = bytearray(seed.frame)
    if site.encoding == "uvarint":
        frame[site.offset : site.offset + site.width] = uvarint(2**32 - 1)
    elif site.encoding == "i32":
        struct.pack_into(">i", frame, site.offset, 2**31 - 1)
    elif site.encoding == "i16" and len(frame) < 2**15 - 1:
        struct.pack_into(">h", frame, site.offset, 2**15 - 1)
    else:
        return None
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


@pytest.mark.parametrize(("api_key", "version", "cls"), VERSIONS, ids=IDS)
def test_every_length_past_the_end(server: ServerProcess, api_key: int, version: int, cls: type) -> None:
    chooser = RandomChooser(random.Random(f"{api_key}/{version}"))
    frames = {}
    for n in range(2):  # two plausible requests: arrays of 0 to 3 entries, so most lengths show up
        seed = make_seed(cls, entity_value(cls, chooser))
        for site in seed.sites:
            frame = past_the_end(seed, site) if site.counts != "struct" else None
            if frame is not None:
                frames[f"#{n} {site.counts} {site.field or '(tags)'} {site.encoding} @{site.offset}"] = frame
    refused(server, frames)


NULL_CASES = [(key, version, cls) for key, version, cls in VERSIONS if array_paths(cls)]


@pytest.mark.parametrize(
    ("api_key", "version", "cls"), NULL_CASES, ids=[f"{api_name(k)}-v{v}" for k, v, _ in NULL_CASES]
)
def test_every_non_nullable_array_sent_null(server: ServerProcess, api_key: int, version: int, cls: type) -> None:
    chooser = RandomChooser(random.Random(f"{api_key}/{version}"))
    frames = {}
    for path in array_paths(cls):
        body = with_null(entity_value(cls, chooser), path, chooser)
        frames[".".join(path) + " null"] = encode_frame(cls, body, 7, "null-array")
    refused(server, frames)
