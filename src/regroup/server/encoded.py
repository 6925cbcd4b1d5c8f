"""Responses put together from bytes encoded beforehand.

``PreEncoded`` is a response a handler returns as its body's bytes (the dispatcher frames them as they are,
behind the response header of the request's version) instead of as a kio entity; it names the kio response
class those bytes encode, so the dispatcher still checks that the version is the one asked for, and the
non-zero error codes they carry, for the metrics. ``splice`` encodes a kio entity whose one array field is
given as items encoded already: kio writes everything else (the header fields, the tagged fields), the items
are copied in. A handler whose answer is mostly the same large array every time (Metadata's topics) keeps
the items' bytes and pays per request only for what changed.

Where an array field sits in an entity's encoding is found by encoding the entity with that field empty
while watching kio's writer read the fields in order (``_Probe``), so nothing here restates a schema.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Sequence
from typing import Any

from kio.serial import entity_reader, entity_writer

__all__ = ["PreEncoded", "array_header", "entity_bytes", "field_offset", "response_type", "splice", "splice_pieces"]

_INT32 = struct.Struct(">i")


class PreEncoded:
    """A response body encoded already: ``body`` is the encoding of an entity of ``response_class``, given whole
    or as the pieces it is made of (``splice_pieces``), which the dispatcher frames with one join: an all-topics
    Metadata answer at 100,000 partitions is megabytes, and each copy of it a millisecond of the loop. ``body``
    joins the pieces when asked (tests and tools)."""

    __slots__ = ("_body", "error_codes", "pieces", "response_class")

    def __init__(
        self, response_class: type[Any], body: bytes | tuple[bytes, ...], error_codes: tuple[int, ...] = ()
    ) -> None:
        self.response_class = response_class
        #: the body's pieces, in order
        self.pieces: tuple[bytes, ...] = (body,) if isinstance(body, bytes) else body
        #: the non-zero error codes in the body (top level and nested), as the metrics count them
        self.error_codes = error_codes
        self._body = body if isinstance(body, bytes) else None

    @property
    def body(self) -> bytes:
        if self._body is None:
            self._body = b"".join(self.pieces)
        return self._body

    def __repr__(self) -> str:
        return f"PreEncoded({self.response_class.__name__}, {sum(map(len, self.pieces))} bytes)"

    def decode(self) -> Any:
        """The kio entity the body encodes (for tests and tools; the server never needs it)."""
        entity, _ = entity_reader(self.response_class)(self.body, 0)
        return entity


def entity_bytes(entity: Any) -> bytes:
    """kio's encoding of one entity (no frame, no header)."""
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def response_type(response: Any) -> type[Any]:
    """The kio response class ``response`` is (an entity) or encodes (a ``PreEncoded``)."""
    return response.response_class if isinstance(response, PreEncoded) else type(response)


def array_header(count: int, flexible: bool) -> bytes:
    """The length prefix of a non-null array of ``count`` items: a compact array's unsigned varint of
    ``count + 1`` in flexible versions, an int32 before them. (Also a compact string's or bytes' length prefix:
    the hand-written answers call this for every string they write, so the varints of small counts are kept.)"""
    if not flexible:
        return _INT32.pack(count)
    found = _COMPACT_HEADERS.get(count)
    if found is not None:
        return found
    value, out = count + 1, bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    header = bytes(out)
    if 0 <= count < _COMPACT_HEADERS_KEPT:
        _COMPACT_HEADERS[count] = header
    return header


#: compact headers of the counts below ``_COMPACT_HEADERS_KEPT``, made on first use (two bytes at most each)
_COMPACT_HEADERS: dict[int, bytes] = {}
_COMPACT_HEADERS_KEPT = 1 << 14


def splice(entity: Any, field: str, count: int, items: Sequence[bytes] | bytes) -> bytes:
    """The encoding of ``entity`` with its array field ``field`` holding ``count`` items whose encodings are
    ``items`` (in order, or already joined); ``entity`` itself has that field empty."""
    return b"".join(splice_pieces(entity, field, count, items))


def splice_pieces(entity: Any, field: str, count: int, items: Sequence[bytes] | bytes) -> tuple[bytes, ...]:
    """``splice``'s encoding as pieces, not joined (``items`` already joined stays one piece, uncopied): for a
    ``PreEncoded`` the dispatcher frames with one join."""
    before, after = _around(entity, field)
    header = array_header(count, type(entity).__flexible__)
    if isinstance(items, bytes):
        return (before, header, items, after)
    return (before, header, *items, after)


def field_offset(entity: Any, field: str) -> tuple[bytes, int]:
    """(the encoding of ``entity``, the byte offset at which its field ``field`` starts in it)."""
    buffer = io.BytesIO()
    probe = _Probe(entity, field, buffer, None)
    entity_writer(type(entity))(buffer, probe)
    if probe.offset < 0:
        raise ValueError(f"{type(entity).__name__} has no field {field!r} that kio writes")
    return buffer.getvalue(), probe.offset


def _around(entity: Any, field: str) -> tuple[bytes, bytes]:
    """The bytes of ``entity`` before its (empty) array field ``field`` and after it (kept for the last
    ``AROUND_KEPT`` entities asked about: most answers are the same empty entity, the throttle time 0, every
    time; an entity that cannot be hashed is written each time)."""
    try:
        return _around_kept(entity, field)
    except TypeError:  # (unhashable: a list or a dict in it)
        return _write_around(entity, field)


#: how many (entity, field) pairs ``_around`` keeps the bytes of
AROUND_KEPT = 512


@functools.lru_cache(maxsize=AROUND_KEPT)
def _around_kept(entity: Any, field: str) -> tuple[bytes, bytes]:
    return _write_around(entity, field)


def _write_around(entity: Any, field: str) -> tuple[bytes, bytes]:
    buffer = io.BytesIO()
    probe = _Probe(entity, field, buffer, ())
    entity_writer(type(entity))(buffer, probe)
    data, at = buffer.getvalue(), probe.offset
    empty = array_header(0, type(entity).__flexible__)
    if at < 0 or data[at : at + len(empty)] != empty:
        raise ValueError(f"{type(entity).__name__}.{field} is not an array field kio writes in place")
    return data[:at], data[at + len(empty) :]


class _Probe:
    """Stands in for an entity while kio writes it: kio reads each field right before writing it, so the
    buffer's position when ``field`` is read is where that field starts. ``replacement`` (unless None) is
    written instead of the field's value."""

    __slots__ = ("_buffer", "_entity", "_field", "_replacement", "offset")

    def __init__(self, entity: Any, field: str, buffer: io.BytesIO, replacement: Any) -> None:
        self._entity = entity
        self._field = field
        self._buffer = buffer
        self._replacement = replacement
        self.offset = -1

    def __getattr__(self, name: str) -> Any:
        if name == self._field:
            self.offset = self._buffer.tell()
            if self._replacement is not None:
                return self._replacement
        return getattr(self._entity, name)
