"""The blocking Kafka-wire client of ``regroup groups``: kio-encoded requests over plain sockets, to any
Kafka-compatible broker (a real Kafka cluster as well as ``regroup serve``).

It owns the transport and the routing, nothing about groups:

* ``Connection``: one socket to one broker; ApiVersions first, then every ``call`` picks the highest version
  both the broker and this client speak (``call(api_key, lo, hi, **fields)``; fields are plain values given to
  ``regroup.server.entities.build``, which keeps those the chosen version has).
* ``Cluster``: the bootstrap connection, the brokers Metadata names (a connection to each opened when first
  needed), the coordinator of a group (FindCoordinator, retried while the coordinator is loading or moving)
  and the leaders of partitions (Metadata).

Every failure — a broker that cannot be reached or closes the connection, a version range with nothing in
common, an answer that does not decode — is a ``WireError`` whose message is one line.

``http_json`` reads a JSON document from ``regroup serve``'s HTTP console (``--http-port``; ``regroup groups
timeline``), HTTP Basic credentials taken from the URL's ``user:password@``; its failures are ``WireError`` too.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import socket
import struct
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from regroup.server.entities import build

__all__ = ["Cluster", "Connection", "WireError", "error_name", "http_json", "parse_base_url", "parse_bootstrap"]

API_VERSIONS: Final = 18
METADATA: Final = 3
FIND_COORDINATOR: Final = 10
CLIENT_ID: Final = "regroup-groups"
#: errors after which FindCoordinator and the group requests are tried again, briefly
RETRIABLE: Final = frozenset({14, 15, 16})  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
RETRY_S: Final = 0.2
RETRIES: Final = 25
_SIZE = struct.Struct(">i")
MAX_FRAME: Final = 100 * 1024 * 1024


class WireError(Exception):
    """The broker could not be reached or its answer could not be used; the message is one line."""


def error_name(code: int) -> str:
    """Kafka's name of an error code (``GROUP_ID_NOT_FOUND``), or the number when kio does not know it."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


def parse_base_url(text: str) -> urllib.parse.SplitResult:
    """An ``http://[user:password@]host[:port]`` URL of the HTTP console; ``ValueError`` (one line) otherwise."""
    try:
        url = urllib.parse.urlsplit(text.strip())
        port = url.port
    except ValueError:
        raise ValueError(f"expected http://host:port, got {text!r}") from None
    if url.scheme != "http" or not url.hostname or url.query or url.fragment or (port is not None and port <= 0):
        raise ValueError(f"expected http://host:port, got {text!r}")
    return url


def http_json(base: urllib.parse.SplitResult, path: str, timeout: float) -> tuple[int, Any]:
    """``GET base + path``: (status, the JSON document answered). A server that cannot be reached or does not
    answer JSON is a ``WireError``."""
    host, port = base.hostname or "", base.port or 80
    where = f"{base.scheme}://{host}:{port}"
    headers = {"Accept": "application/json"}
    if base.username is not None:
        user = urllib.parse.unquote(base.username)
        password = urllib.parse.unquote(base.password or "")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", base.path.rstrip("/") + path, headers=headers)
        response = connection.getresponse()
        status, body = response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise WireError(f"cannot reach {where}: {_reason(exc)}") from None
    finally:
        connection.close()
    if status == 401:
        raise WireError(f"{where}: authentication required (give http://user:password@host:port)")
    try:
        return status, json.loads(body)
    except ValueError:
        raise WireError(f"{where}{path}: HTTP {status}, not a JSON answer") from None


def _reason(exc: BaseException) -> str:
    return (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__).strip().splitlines()[0]


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` as (host, port) pairs; ``ValueError`` (one line) when malformed."""
    servers: list[tuple[str, int]] = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"--bootstrap-server: expected host:port, got {item.strip()!r}")
        servers.append((host, int(port)))
    return servers


class Connection:
    """One broker: a socket, the API versions it advertised, and requests answered in order."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.address = f"{host}:{port}"
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise WireError(f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        self._next = 0
        self.versions: dict[int, tuple[int, int]] = {}
        answer = self._call(API_VERSIONS, 3, client_software_name="regroup", client_software_version="1")
        if int(answer.error_code) != 0:
            self.close()
            raise WireError(f"{self.address}: ApiVersions failed with {error_name(int(answer.error_code))}")
        self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}

    def close(self) -> None:
        self._sock.close()

    def version(self, api_key: int, lo: int, hi: int) -> int | None:
        """The highest version in ``lo..hi`` the broker serves, or None."""
        served = self.versions.get(api_key)
        if served is None or served[1] < lo or served[0] > hi:
            return None
        return min(hi, served[1])

    def call(self, api_key: int, lo: int, hi: int, **fields: Any) -> tuple[int, Any]:
        """(version used, decoded response body) of the request at the highest common version."""
        version = self.version(api_key, lo, hi)
        if version is None:
            name = load_request_schema(api_key, hi).__name__.removesuffix("Request")
            raise WireError(f"{self.address} does not serve {name} v{lo}-{hi}")
        return version, self._call(api_key, version, **fields)

    def _call(self, api_key: int, version: int, **fields: Any) -> Any:
        self._next += 1
        correlation_id = self._next
        request_cls = load_request_schema(api_key, version)
        header_cls = request_cls.__header_schema__
        buffer = io.BytesIO()
        header = header_cls(
            request_api_key=i16(api_key),
            request_api_version=i16(version),
            correlation_id=i32(correlation_id),
            client_id=CLIENT_ID,
        )
        entity_writer(header_cls)(buffer, header)
        entity_writer(request_cls)(buffer, build(request_cls, **fields))
        payload = buffer.getvalue()
        name = request_cls.__name__.removesuffix("Request")
        try:
            self._sock.sendall(_SIZE.pack(len(payload)) + payload)
            (size,) = _SIZE.unpack(self._read(4))
            if not 0 <= size <= MAX_FRAME:
                raise WireError(f"{self.address}: {name} answer of {size} bytes")
            frame = self._read(size)
        except OSError as exc:
            raise WireError(f"{self.address}: {name} failed: {exc.strerror or exc}") from None
        response_cls = load_response_schema(api_key, version)
        try:
            answer_header, used = entity_reader(response_cls.__header_schema__)(frame, 0)
            body, _ = entity_reader(response_cls)(frame, used)
        except Exception as exc:
            raise WireError(f"{self.address}: {name} v{version} answer does not decode: {exc}") from None
        if answer_header.correlation_id != correlation_id:
            raise WireError(f"{self.address}: {name} answered out of order")
        return body

    def _read(self, n: int) -> bytes:
        chunks: list[bytes] = []
        left = n
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise WireError(f"{self.address} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


class Cluster:
    """The brokers of one cluster, reached from a bootstrap list (see the module doc)."""

    def __init__(self, bootstrap: Sequence[tuple[str, int]], timeout: float) -> None:
        self.timeout = timeout
        self._connections: dict[int, Connection] = {}
        errors: list[str] = []
        first: Connection | None = None
        for host, port in bootstrap:
            try:
                first = Connection(host, port, timeout)
                break
            except WireError as exc:
                errors.append(str(exc))
        if first is None:
            raise WireError("; ".join(errors))
        self.bootstrap = first
        answer = self._metadata([])
        self.brokers: dict[int, tuple[str, int]] = {int(b.node_id): (b.host, int(b.port)) for b in answer.brokers}

    def _metadata(self, topics: list[str]) -> Any:
        _, answer = self.bootstrap.call(
            METADATA,
            4,
            12,
            topics=[{"name": n, "topic_id": None} for n in topics],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        return answer

    def close(self) -> None:
        self.bootstrap.close()
        for connection in self._connections.values():
            if connection is not self.bootstrap:
                connection.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def node(self, node_id: int) -> Connection:
        """The connection to broker ``node_id`` (opened when first asked for)."""
        connection = self._connections.get(node_id)
        if connection is None:
            address = self.brokers.get(node_id)
            if address is None:
                raise WireError(f"broker {node_id} is not in the cluster's metadata")
            if f"{address[0]}:{address[1]}" == self.bootstrap.address:
                connection = self.bootstrap
            else:
                connection = Connection(address[0], address[1], self.timeout)
            self._connections[node_id] = connection
        return connection

    def all_brokers(self) -> list[Connection]:
        """A connection to every broker (the bootstrap one alone when the metadata names none)."""
        if not self.brokers:
            return [self.bootstrap]
        return [self.node(node_id) for node_id in sorted(self.brokers)]

    def coordinator(self, group_id: str) -> Connection:
        """The connection to ``group_id``'s coordinator."""
        for _ in range(RETRIES):
            version, answer = self.bootstrap.call(
                FIND_COORDINATOR, 1, 6, key=group_id, key_type=0, coordinator_keys=[group_id]
            )
            found = answer.coordinators[0] if version >= 4 else answer
            code = int(found.error_code)
            if code == 0:
                node_id = int(found.node_id)
                self.brokers.setdefault(node_id, (found.host, int(found.port)))
                return self.node(node_id)
            if code not in RETRIABLE:
                raise WireError(f"FindCoordinator for group {group_id!r} failed with {error_name(code)}")
            time.sleep(RETRY_S)
        raise WireError(f"no coordinator for group {group_id!r} after {RETRIES} tries")

    def leaders(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> leader node id of every partition of ``topics`` (missing topics left out)."""
        names = sorted(set(topics))
        if not names:
            return {}
        answer = self._metadata(names)
        for b in answer.brokers:
            self.brokers.setdefault(int(b.node_id), (b.host, int(b.port)))
        return {
            (t.name, int(p.partition_index)): int(p.leader_id)
            for t in answer.topics
            if int(t.error_code) == 0
            for p in t.partitions
        }
