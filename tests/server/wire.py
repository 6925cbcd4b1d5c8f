"""A tiny blocking Kafka-wire client for the server tests: kio-encoded requests over a plain socket, responses
decoded with the header and body schema of the version sent. Requests are built from keyword values with
``regroup.server.entities.build`` (nested arrays as lists of dicts, durations as milliseconds)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from regroup.server.entities import build

API_VERSIONS, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 18, 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE, LIST, DELETE = 8, 9, 15, 16, 42
CREATE_TOPICS = 19
TOPIC_ALREADY_EXISTS = 36


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, **fields: Any) -> bytes:
    """The framed bytes of a request (header of the version's schema + body)."""
    request_cls = load_request_schema(api_key, version)
    header_cls = request_cls.__header_schema__
    buffer = io.BytesIO()
    header = header_cls(
        request_api_key=i16(api_key),
        request_api_version=i16(version),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    entity_writer(header_cls)(buffer, header)  # type: ignore[arg-type]
    entity_writer(request_cls)(buffer, build(request_cls, **fields))
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


class WireClient:
    def __init__(
        self, port: int, client_id: str | None = "wire-test", timeout: float = 5.0, source: str | None = None
    ) -> None:
        """``source``: the local address to connect from (any 127.x.y.z on Linux), e.g. to play another host."""
        source_address = None if source is None else (source, 0)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=source_address)
        self.client_id = client_id
        self._next = 0
        self._sent: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    @classmethod
    def over(cls, sock: socket.socket, client_id: str | None = "wire-test") -> WireClient:
        """A client on a socket already connected (a TLS socket, say)."""
        client = cls.__new__(cls)
        client.sock, client.client_id, client._next, client._sent = sock, client_id, 0, []
        return client

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, **fields: Any) -> int:
        self._next += 1
        self.sock.sendall(encode_request(api_key, version, self._next, self.client_id, **fields))
        self._sent.append((self._next, api_key, version))
        return self._next

    def receive(self) -> Any:
        """The response to the oldest request sent and not yet received (checks the correlation id)."""
        correlation_id, api_key, version = self._sent.pop(0)
        frame = self.read_frame()
        response_cls = load_response_schema(api_key, version)
        header, used = entity_reader(response_cls.__header_schema__)(frame, 0)
        assert header.correlation_id == correlation_id, (header.correlation_id, correlation_id)
        body, _ = entity_reader(response_cls)(frame, used)
        return body

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        self.send(api_key, version, **fields)
        return self.receive()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(data)} of {n} bytes")
            data += chunk
        return data

    def is_closed_by_server(self, timeout: float = 3.0) -> bool:
        """True when the server closed the connection (EOF or reset) within ``timeout`` with nothing sent."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def create_topics(client: WireClient, partitions: dict[str, int]) -> None:
    """Create each topic with its partition count (CreateTopics v7); an existing topic is fine."""
    topics = [
        {"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": []}
        for name, n in partitions.items()
    ]
    created = client.call(CREATE_TOPICS, 7, topics=topics, timeout=5000, validate_only=False)
    codes = {t.name: t.error_code for t in created.topics}
    assert set(codes.values()) <= {0, TOPIC_ALREADY_EXISTS}, codes
