"""ApiVersions and FindCoordinator over the wire."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from typing import Any

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from tests.server.conftest import ServerProcess
from tests.server.wire import API_VERSIONS, FIND_COORDINATOR, WireClient

GROUP_APIS = {
    8: (2, 9),
    9: (1, 9),
    10: (0, 4),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 6),
    16: (0, 5),
    18: (0, 4),
    42: (0, 2),
    47: (0, 0),
}


@pytest.mark.parametrize("version", range(5))
def test_api_versions_lists_the_group_apis_with_exact_ranges(server: ServerProcess, version: int) -> None:
    fields = {"client_software_name": "regroup-tests", "client_software_version": "1.0"} if version >= 3 else {}
    with WireClient(server.port) as client:
        resp = client.call(API_VERSIONS, version, **fields)
    assert resp.error_code == 0
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for key, expected in GROUP_APIS.items():
        assert advertised[key] == expected
    assert [k.api_key for k in resp.api_keys] == sorted(advertised)


def test_too_new_api_versions_gets_a_v0_unsupported_version_answer(server: ServerProcess) -> None:
    # KIP-511: the client sends the newest version it knows (here 9, flexible, so request header v2); the
    # broker answers with a v0 response (response header v0) carrying UNSUPPORTED_VERSION and its range.
    buffer = io.BytesIO()
    header = RequestHeader(request_api_key=i16(18), request_api_version=i16(9), correlation_id=i32(42), client_id="x")
    entity_writer(RequestHeader)(buffer, header)
    buffer.write(b"\x00\x00\x00\x00")  # an imaginary v9 body: the server must not try to parse it
    payload = buffer.getvalue()
    with WireClient(server.port) as client:
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        frame = client.read_frame()
        resp_header, used = entity_reader(ResponseHeader)(frame, 0)
        body, _ = entity_reader(ApiVersionsResponseV0)(frame, used)
        assert resp_header.correlation_id == 42
        assert body.error_code == 35  # UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
        # the connection stays usable
        assert client.call(API_VERSIONS, 0).error_code == 0


def test_api_versions_v3_validates_the_client_software_name(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        resp = client.call(API_VERSIONS, 3, client_software_name="bad name!", client_software_version="1")
    assert resp.error_code == 42  # INVALID_REQUEST


@pytest.mark.parametrize("version", range(4))
def test_find_coordinator_single_key(server: ServerProcess, version: int) -> None:
    fields = {"key": "g"} | ({"key_type": 0} if version >= 1 else {})
    with WireClient(server.port) as client:
        resp = client.call(FIND_COORDINATOR, version, **fields)
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 0, "127.0.0.1", server.port)


def test_find_coordinator_v4_batches_keys_and_transactions_are_here_too(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        groups = client.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["a", "b"])
        txn = client.call(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["t"])
        share = client.call(FIND_COORDINATOR, 4, key_type=2, coordinator_keys=["s"])
        old_share = client.call(FIND_COORDINATOR, 2, key="s", key_type=2)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in groups.coordinators] == [
        ("a", 0, 0, server.port),
        ("b", 0, 0, server.port),
    ]
    assert [(c.error_code, c.node_id) for c in txn.coordinators] == [(0, 0)]
    assert [(c.error_code, c.node_id) for c in share.coordinators] == [(42, -1)]
    assert (old_share.error_code, old_share.node_id) == (42, -1)


def test_advertised_host_and_port_are_what_clients_are_told(make_server: Any) -> None:
    """Behind a proxy or a forwarded port, FindCoordinator and Metadata name the advertised address, not the
    one the server listens on."""
    proc = make_server("--advertised-host", "broker.example", "--advertised-port", "19999")
    with WireClient(proc.port) as client:
        found = client.call(FIND_COORDINATOR, 3, key="g", key_type=0)
        metadata = client.call(3, 1, topics=[])
    assert (found.error_code, found.host, found.port) == (0, "broker.example", 19999)
    assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(0, "broker.example", 19999)]
    assert proc.port != 19999


@pytest.mark.parametrize("value", ["0", "65536", "x"])
def test_an_advertised_port_out_of_range_is_one_line_and_exit_2(value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "regroup", "serve", "--advertised-port", value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--advertised-port" in done.stderr and "Traceback" not in done.stderr
