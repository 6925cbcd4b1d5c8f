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

import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

__all__ = ["PreEncoded", "array_header", "entity_bytes", "field_offset", "response_type", "splice"]

_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class PreEncoded:
    """A response body encoded already: ``body`` is the encoding of an entity of ``response_class``."""

    response_class: type[Any]
    body: bytes
    #: the non-zero error codes in the body (top level and nested), as the metrics count them
    error_codes: tuple[int, ...] = ()

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
    ``count + 1`` in flexible versions, an int32 before them."""
    if not flexible:
        return _INT32.pack(count)
    value, out = count + 1, bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def splice(entity: Any, field: str, count: int, items: Sequence[bytes] | bytes) -> bytes:
    """The encoding of ``entity`` with its array field ``field`` holding ``count`` items whose encodings are
    ``items`` (in order, or already joined); ``entity`` itself has that field empty."""
    before, after = _around(entity, field)
    joined = items if isinstance(items, bytes) else b"".join(items)
    return b"".join((before, array_header(count, type(entity).__flexible__), joined, after))


def field_offset(entity: Any, field: str) -> tuple[bytes, int]:
    """(the encoding of ``entity``, the byte offset at which its field ``field`` starts in it)."""
    buffer = io.BytesIO()
    probe = _Probe(entity, field, buffer, None)
    entity_writer(type(entity))(buffer, probe)
    if probe.offset < 0:
        raise ValueError(f"{type(entity).__name__} has no field {field!r} that kio writes")
    return buffer.getvalue(), probe.offset


def _around(entity: Any, field: str) -> tuple[bytes, bytes]:
    """The bytes of ``entity`` before its (empty) array field ``field`` and after it."""
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
