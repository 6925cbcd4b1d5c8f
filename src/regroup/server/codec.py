"""Request decoding and response encoding with kio, following Kafka's header rules.

* Request header v2 (flexible: compact strings, tagged fields — but ``client_id`` stays a classic nullable
  string) for the API's flexible versions, v1 otherwise; kio's request classes carry the right one
  (``__header_schema__``). Response header v1 for flexible versions, v0 otherwise — except ApiVersions,
  whose response header is always v0 so a client can read it before it knows what the broker speaks.
* An unknown API key, or a version outside the advertised range, closes the connection (Kafka's
  ``SocketServer`` does the same: ``InvalidRequestException`` → close). The one exception is ApiVersions
  (KIP-511): a client sends the newest version it knows, so an unsupported ApiVersions version is answered
  with a v0 response carrying UNSUPPORTED_VERSION and the ApiVersions range; the header of such a request
  is parsed as v2 from version 3 on (ApiVersions is flexible from v3), v1 below.
* Anything that does not decode (kio ``DecodeError``, bad UTF-8, short buffers) is a ``MalformedRequest``.
  Trailing bytes after the body are ignored, as Kafka does.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from regroup.server.errors import MalformedRequest, UnknownApiKey, UnsupportedApiVersion, map_exceptions
from regroup.server.framing import frame

API_VERSIONS_KEY = 18
API_VERSIONS_FLEXIBLE_FROM = 3
_KEY_AND_VERSION = struct.Struct(">hh")

#: api key -> (min version, max version) as advertised
VersionRanges = Mapping[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    #: the kio request entity; None for an ApiVersions request of an unsupported version (body not parsed)
    body: Any
    size: int

    @property
    def unsupported_api_versions(self) -> bool:
        return self.body is None


def decode_request(data: bytes, versions: VersionRanges) -> DecodedRequest:
    """Decode one request frame. Raises a ``ProtocolError`` subclass when the connection must be closed."""
    if len(data) < _KEY_AND_VERSION.size:
        raise MalformedRequest(f"request of {len(data)} bytes has no header")
    api_key, api_version = _KEY_AND_VERSION.unpack_from(data)
    if api_key not in versions:
        raise UnknownApiKey(f"unknown api key {api_key}")
    low, high = versions[api_key]
    if not low <= api_version <= high:
        if api_key != API_VERSIONS_KEY:
            raise UnsupportedApiVersion(f"api key {api_key} version {api_version} outside {low}..{high}")
        header_cls: type[RequestHeaderV1 | RequestHeaderV2] = (
            RequestHeaderV2 if api_version >= API_VERSIONS_FLEXIBLE_FROM else RequestHeaderV1
        )
        with map_exceptions({Exception: MalformedRequest}):
            header, _ = _reader(header_cls)(data, 0)
        return DecodedRequest(api_key, api_version, header.correlation_id, header.client_id, None, len(data))
    with map_exceptions({Exception: MalformedRequest}):
        request_cls = _request_class(api_key, api_version)
        header, used = _reader(request_cls.__header_schema__)(data, 0)
        body, _ = _reader(request_cls)(data, used)
    return DecodedRequest(api_key, api_version, header.correlation_id, header.client_id, body, len(data))


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The framed bytes of ``response`` (a kio response entity) answering ``correlation_id``."""
    response_cls = type(response)
    header_cls = response_cls.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header_cls(correlation_id=i32(correlation_id)))
    entity_writer(response_cls)(buffer, response)
    return frame(buffer.getvalue())


def response_class(api_key: int, api_version: int) -> type[Any]:
    """kio's response entity class for this API version."""
    return _response_class(api_key, api_version)


@cache
def _request_class(api_key: int, api_version: int) -> type[Any]:
    return load_request_schema(api_key, api_version)


@cache
def _response_class(api_key: int, api_version: int) -> type[Any]:
    return load_response_schema(api_key, api_version)


_READERS: dict[type[Any], Any] = {}


def _reader(entity_cls: type[Any]) -> Any:
    reader = _READERS.get(entity_cls)
    if reader is None:
        reader = _READERS[entity_cls] = entity_reader(entity_cls)
    return reader
