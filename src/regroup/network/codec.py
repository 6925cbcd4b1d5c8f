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
* A body is first walked against its schema (``precheck``): kio's native reader would reserve room for any
  array length it is given, and it reads a null array where the schema forbids one. Anything the walk refuses,
  and anything that does not decode (bad UTF-8, short buffers), is a ``MalformedRequest`` naming the API and
  version. Trailing bytes after the body are ignored, as Kafka does. An identifier over its limit is not
  malformed: ``DecodedRequest.over_limit`` says which, and the dispatcher answers INVALID_REQUEST.

Speed (the per-request path of every connection): kio readers and writers are looked up once per entity
class; a response header is the correlation id followed by bytes that never change for its class, so it is
packed directly; for the APIs in ``MEMO_API_KEYS`` (the heartbeats of the three group types: a steady member
sends the same bytes every few seconds) small decoded request bodies and encoded response bodies are memoised.
kio entities are immutable and their encoding deterministic, so a memo hit is indistinguishable from decoding
or encoding again. The request header is read by hand when it is a v1 header or a v2 header without tagged
fields (client ids remembered); kio reads any other. An API version's first request in a process imports its
kio modules and composes their readers and writers (``prepare_version``: 4-10 ms): ``unprepared`` tells the
connections which requests to hold until their version is prepared off the loop.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from regroup.network import precheck
from regroup.network.errors import MalformedRequest, UnknownApiKey, UnsupportedApiVersion
from regroup.network.framing import FramedPieces, frame
from regroup.network.limits import CLIENT_ID, Limits

API_VERSIONS_KEY = 18
API_VERSIONS_FLEXIBLE_FROM = 3
_KEY_AND_VERSION = struct.Struct(">hh")
_SIZE_AND_CORRELATION_ID = struct.Struct(">ii")
_CLIENT_ID_AT = 8  # after api key, api version and correlation id, in every request header version
_CLIENT_ID_LENGTH = struct.Struct(">h")
HEARTBEAT_KEY, CONSUMER_GROUP_HEARTBEAT_KEY, SHARE_GROUP_HEARTBEAT_KEY = 12, 68, 76
#: APIs whose small request and response bodies are memoised (see the module doc).
MEMO_API_KEYS = frozenset({HEARTBEAT_KEY, CONSUMER_GROUP_HEARTBEAT_KEY, SHARE_GROUP_HEARTBEAT_KEY})
_MEMO_MAX_BODY_BYTES = 512
_MEMO_MAX_ENTRIES = 8192

#: api key -> (min version, max version) as advertised
VersionRanges = Mapping[int, tuple[int, int]]
_NO_LIMITS: Limits = {}


@dataclass(slots=True, eq=False)
class DecodedRequest:
    """One request frame decoded; never changed after, but for ``plan`` set where it was decoded (not frozen: a
    frozen constructor costs about a microsecond more, on every request)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    #: the kio request entity; None for an ApiVersions request of an unsupported version (body not parsed)
    body: Any
    size: int
    #: the first identifier longer than its limit (answered with INVALID_REQUEST), or None
    over_limit: str | None = None
    #: work on the body done ahead where it was decoded (the dispatcher's ``plan_aside``), or None
    plan: Any = None

    @property
    def unsupported_api_versions(self) -> bool:
        return self.body is None


def decode_request(data: bytes, versions: VersionRanges, limits: Mapping[int, Limits] | None = None) -> DecodedRequest:
    """Decode one request frame. Raises a ``ProtocolError`` subclass when the connection must be closed.
    ``limits``: per API key, the identifier limits its strings are measured against (``precheck``)."""
    if len(data) < _KEY_AND_VERSION.size:
        raise MalformedRequest(f"request of {len(data)} bytes has no header")
    api_key, api_version = _KEY_AND_VERSION.unpack_from(data)
    if api_key not in versions:
        raise UnknownApiKey(f"unknown api key {api_key}")
    low, high = versions[api_key]
    api_limits = _NO_LIMITS if limits is None else limits.get(api_key, _NO_LIMITS)
    if not low <= api_version <= high:
        if api_key != API_VERSIONS_KEY:
            raise UnsupportedApiVersion(f"api key {api_key} version {api_version} outside {low}..{high}")
        header_cls: type[RequestHeaderV1 | RequestHeaderV2] = (
            RequestHeaderV2 if api_version >= API_VERSIONS_FLEXIBLE_FROM else RequestHeaderV1
        )
        over_limit = _client_id_over_limit(data, api_limits)
        try:
            header, _ = _reader(header_cls)(data, 0)
        except Exception as exc:
            raise MalformedRequest(f"ApiVersions v{api_version} header: {exc}") from exc
        return DecodedRequest(
            api_key, api_version, header.correlation_id, header.client_id, None, len(data), over_limit
        )
    request_cls = _request_class(api_key, api_version)
    try:  # as map_exceptions({Exception: MalformedRequest}), without a context manager per request
        over_limit = _client_id_over_limit(data, api_limits)
        correlation_id, client_id, used = _header(data, request_cls.__header_schema__)
        if api_key in MEMO_API_KEYS and len(data) - used <= _MEMO_MAX_BODY_BYTES:
            memo_key = (request_cls, id(api_limits), data[used:])
            body = _REQUEST_MEMO.get(memo_key)
            if body is None:
                _, body_over_limit = precheck.check(request_cls, data, used, api_limits)
                over_limit = over_limit or body_over_limit
                body, _ = _reader(request_cls)(data, used)
                if over_limit is None:  # only bodies within the limits are remembered
                    _remember(_REQUEST_MEMO, memo_key, body)
        else:
            _, body_over_limit = precheck.check(request_cls, data, used, api_limits)
            over_limit = over_limit or body_over_limit
            body, _ = _reader(request_cls)(data, used)
    except Exception as exc:
        name = request_cls.__name__.removesuffix("Request")
        raise MalformedRequest(f"{name} v{api_version}: {exc or type(exc).__name__}") from exc
    return DecodedRequest(api_key, api_version, correlation_id, client_id, body, len(data), over_limit)


_CORRELATION_AND_CLIENT_ID_LENGTH = struct.Struct(">ih")
_CLIENT_IDS: dict[bytes, str] = {}
_CLIENT_ID_MEMO_MAX_BYTES = 256


def _header(data: bytes, header_cls: type[Any]) -> tuple[int, str | None, int]:
    """(correlation id, client id, bytes the header takes) of a request header of ``header_cls`` (v1 or v2).
    The common case, a v1 header or a v2 header without tagged fields, is read here (client ids remembered, a
    connection sends the same one every time); anything else (tagged fields, short or malformed bytes) is
    kio's to read, or to refuse."""
    size = len(data)
    if size >= _CLIENT_ID_AT + 2:
        correlation_id, length = _CORRELATION_AND_CLIENT_ID_LENGTH.unpack_from(data, 4)
        end = _CLIENT_ID_AT + 2 + max(length, 0)
        flexible = header_cls is RequestHeaderV2
        if length >= -1 and end + flexible <= size and (not flexible or data[end] == 0):
            client_id: str | None = None
            if length >= 0:
                raw = data[_CLIENT_ID_AT + 2 : end]
                client_id = _CLIENT_IDS.get(raw)
                if client_id is None:
                    client_id = raw.decode()  # (bad UTF-8 raises: a malformed request, as from kio)
                    if length <= _CLIENT_ID_MEMO_MAX_BYTES:
                        _remember(_CLIENT_IDS, raw, client_id)
            return correlation_id, client_id, end + flexible
    header, used = _reader(header_cls)(data, 0)
    return header.correlation_id, header.client_id, used


def _client_id_over_limit(data: bytes, limits: Limits) -> str | None:
    """The header's client id measured against its limit. (Headers hold no arrays, so kio's reader cannot
    over-allocate on one and needs no walk: a length the bytes cannot hold is an error it raises itself.)"""
    limit = limits.get(CLIENT_ID)
    if limit is None or len(data) < _CLIENT_ID_AT + 2:
        return None
    (length,) = _CLIENT_ID_LENGTH.unpack_from(data, _CLIENT_ID_AT)
    return f"a client id of {length} bytes (at most {limit})" if length > limit else None


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The framed bytes of ``response`` (a kio response entity) answering ``correlation_id``."""
    response_cls = type(response)
    header_tail, write_body, memo = _plan_of(response_cls)
    if header_tail is None:
        return _encode_response_generic(correlation_id, response)
    body = None
    if memo:
        try:
            body = _RESPONSE_MEMO.get(response)
        except TypeError:  # an unhashable field: not memoisable
            memo = False
    if body is None:
        buffer = io.BytesIO()
        write_body(buffer, response)
        body = buffer.getvalue()
        if memo and len(body) <= _MEMO_MAX_BODY_BYTES:
            _remember(_RESPONSE_MEMO, response, body)
    size = _SIZE_AND_CORRELATION_ID.size - 4 + len(header_tail) + len(body)
    return _SIZE_AND_CORRELATION_ID.pack(size, correlation_id) + header_tail + body


def frame_response(correlation_id: int, response_cls: type[Any], body: bytes | Sequence[bytes]) -> bytes:
    """The framed bytes of a response of ``response_cls`` whose body is ``body``, encoded already (whole, or its
    pieces in order: joined with the frame's head in one copy)."""
    pieces: Sequence[bytes] = (body,) if isinstance(body, bytes) else body
    header_tail = _plan_of(response_cls)[0]
    if header_tail is None:
        buffer = io.BytesIO()
        header_cls = response_cls.__header_schema__
        entity_writer(header_cls)(buffer, header_cls(correlation_id=i32(correlation_id)))
        return frame(b"".join((buffer.getvalue(), *pieces)))
    size = _SIZE_AND_CORRELATION_ID.size - 4 + len(header_tail) + sum(map(len, pieces))
    return b"".join((_SIZE_AND_CORRELATION_ID.pack(size, correlation_id), header_tail, *pieces))


def framed_pieces(correlation_id: int, response_cls: type[Any], body: Sequence[bytes], body_size: int) -> FramedPieces:
    """``frame_response``'s framed response as pieces: the frame's head (size, correlation id, the rest of the
    response header), then ``body``'s pieces as they are (none copied); ``body_size``: their bytes together."""
    header_tail = _plan_of(response_cls)[0]
    if header_tail is None:
        whole = frame_response(correlation_id, response_cls, body)
        return FramedPieces((whole,), len(whole))
    head = _SIZE_AND_CORRELATION_ID.pack(
        _SIZE_AND_CORRELATION_ID.size - 4 + len(header_tail) + body_size, correlation_id
    )
    return FramedPieces((head + header_tail, *body), len(head) + len(header_tail) + body_size)


def _plan_of(response_cls: type[Any]) -> tuple[bytes | None, Any, bool]:
    """``response_cls``'s encoding plan (``_response_plan``), made on its first use."""
    plan = _RESPONSE_PLANS.get(response_cls)
    if plan is None:
        plan = _RESPONSE_PLANS[response_cls] = _response_plan(response_cls)
    return plan


def _encode_response_generic(correlation_id: int, response: Any) -> bytes:
    response_cls = type(response)
    header_cls = response_cls.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header_cls(correlation_id=i32(correlation_id)))
    entity_writer(response_cls)(buffer, response)
    return frame(buffer.getvalue())


_RESPONSE_PLANS: dict[type[Any], tuple[bytes | None, Any, bool]] = {}


def _response_plan(response_cls: type[Any]) -> tuple[bytes | None, Any, bool]:
    """(the response header's bytes after the correlation id, or None if the header has other fields; the body
    writer; whether bodies of this class are memoised)."""
    header_cls = response_cls.__header_schema__
    tail: bytes | None = None
    if [f.name for f in dataclasses.fields(header_cls)] == ["correlation_id"]:
        buffer = io.BytesIO()
        entity_writer(header_cls)(buffer, header_cls(correlation_id=i32(0)))
        tail = buffer.getvalue()[4:]
    memo = getattr(response_cls, "__api_key__", None) in MEMO_API_KEYS
    return tail, entity_writer(response_cls), memo


_REQUEST_MEMO: dict[tuple[type[Any], int, bytes], Any] = {}
_RESPONSE_MEMO: dict[Any, bytes] = {}


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _MEMO_MAX_ENTRIES:
        memo.clear()  # bounded: a burst of distinct bodies costs re-decoding, never memory
    memo[key] = value


def response_class(api_key: int, api_version: int) -> type[Any]:
    """kio's response entity class for this API version."""
    return _response_class(api_key, api_version)


@cache
def _request_class(api_key: int, api_version: int) -> type[Any]:
    return load_request_schema(api_key, api_version)


@cache
def _response_class(api_key: int, api_version: int) -> type[Any]:
    return load_response_schema(api_key, api_version)


#: the first four bytes (api key, version) of the requests whose API version is ``prepare_version``'d
_PREPARED_HEADS: set[bytes] = set()


def unprepared(frame: bytes, versions: VersionRanges) -> tuple[int, int] | None:
    """(api key, version) of ``frame`` when it is a request of an advertised API version not yet
    ``prepare_version``'d in this process; else None."""
    head = frame[:4]
    if head in _PREPARED_HEADS or len(head) < _KEY_AND_VERSION.size:
        return None
    api_key, api_version = _KEY_AND_VERSION.unpack(head)
    advertised = versions.get(api_key)
    if advertised is None or not advertised[0] <= api_version <= advertised[1]:
        return None
    return api_key, api_version


def prepare_version(api_key: int, api_version: int) -> None:
    """Load kio's request and response classes of this API version and build their reader, writer and response
    plan: what a version's first request costs besides its own work (its modules imported, kio's readers and
    writers composed: 4-10 ms, more for Metadata's), once per process. Thread-safe: the connections have the
    decoding thread do it for a version's first request (``network/connection.py``)."""
    request_cls = _request_class(api_key, api_version)
    _reader(request_cls)
    _reader(request_cls.__header_schema__)
    response_cls = _response_class(api_key, api_version)
    if response_cls not in _RESPONSE_PLANS:
        _RESPONSE_PLANS[response_cls] = _response_plan(response_cls)
    _PREPARED_HEADS.add(_KEY_AND_VERSION.pack(api_key, api_version))


_READERS: dict[type[Any], Any] = {}


def _reader(entity_cls: type[Any]) -> Any:
    reader = _READERS.get(entity_cls)
    if reader is None:
        reader = _READERS[entity_cls] = entity_reader(entity_cls)
    return reader
