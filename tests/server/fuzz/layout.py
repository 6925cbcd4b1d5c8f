"""Where the length fields of an encoded request are: a reader of Kafka's wire format driven by the kio
schema that, instead of building values, records every length prefix it crosses (string, bytes and array
lengths, nullable-struct markers, tagged-field counts and sizes) with its offset and encoding. The fuzzer's
mutations rewrite exactly these bytes (huge, negative, null, off by one).

It reads what kio's writer wrote: ``walk`` of a seed must end exactly at the end of the bytes (checked by
the tests for every API and version served), which keeps it honest about the format."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from tests.server.fuzz.schema import FieldInfo, fields_of

FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "float64": 8,
    "uuid": 16,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}


@dataclass(frozen=True, slots=True)
class LengthSite:
    """One length prefix: ``width`` bytes at ``offset`` (0 for an unsigned varint, whose width is its own)."""

    offset: int
    #: ``i8`` (nullable struct marker), ``i16``, ``i32`` or ``uvarint``
    encoding: str
    #: what it counts: ``array``, ``string``, ``bytes``, ``struct``, ``tags`` or ``tag_size``
    counts: str
    #: the value as written (for a compact length: the length + 1, 0 meaning null)
    value: int
    width: int
    #: the field it belongs to ("" for tagged-field bookkeeping) and whether the schema lets it be null
    field: str = ""
    nullable: bool = False


class LayoutError(ValueError):
    pass


def walk(cls: type[Any], data: bytes, offset: int = 0, *, header: bool = False) -> tuple[list[LengthSite], int]:
    """The length sites of the ``cls`` entity encoded at ``offset`` of ``data`` and the offset after it.
    ``header``: ``cls`` is a request header (its client id is a classic string even in flexible versions)."""
    reader = _Reader(data, offset)
    reader.entity(cls, header=header)
    return reader.sites, reader.pos


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos
        self.sites: list[LengthSite] = []

    def entity(self, cls: type[Any], *, header: bool = False) -> None:
        flexible = bool(cls.__flexible__)
        for info in fields_of(cls):
            if info.tag is not None:
                continue
            if info.array:
                self.array(info, flexible)
            else:
                self.single(info, flexible and not (header and info.name == "client_id"))
        if flexible:
            self.tagged_fields()

    def array(self, info: FieldInfo, flexible: bool) -> None:
        count = self.compact_length("array", info) if flexible else self.fixed_length(">i", "array", info)
        for _ in range(max(count, 0)):
            self.single(FieldInfo(info.name, info.kafka_type, False, False, info.entity, None, None), flexible)

    def single(self, info: FieldInfo, flexible: bool) -> None:
        if info.entity is not None:
            if info.nullable:
                start = self.pos
                (marker,) = self.unpack(">b")
                self.sites.append(LengthSite(start, "i8", "struct", marker, 1, info.name, True))
                if marker < 0:
                    return
            self.entity(info.entity)
            return
        kind = info.kafka_type
        if kind in FIXED_SIZES:
            self.skip(FIXED_SIZES[kind])
        elif kind == "string":
            self.skip(self.compact_length("string", info) if flexible else self.fixed_length(">h", "string", info))
        elif kind in ("bytes", "records"):
            self.skip(self.compact_length("bytes", info) if flexible else self.fixed_length(">i", "bytes", info))
        else:
            raise LayoutError(f"unknown kafka type {kind!r}")

    def tagged_fields(self) -> None:
        count = self.uvarint("tags")
        for _ in range(count):
            self.uvarint(None)  # the tag
            self.skip(self.uvarint("tag_size"))

    def compact_length(self, counts: str, info: FieldInfo) -> int:
        """A compact length (stored + 1; 0 is null → -1)."""
        return self.uvarint(counts, info) - 1

    def fixed_length(self, fmt: str, counts: str, info: FieldInfo) -> int:
        start = self.pos
        (value,) = self.unpack(fmt)
        encoding = "i16" if fmt == ">h" else "i32"
        self.sites.append(LengthSite(start, encoding, counts, value, self.pos - start, info.name, info.nullable))
        return int(value)

    def uvarint(self, counts: str | None, info: FieldInfo | None = None) -> int:
        start, value, shift = self.pos, 0, 0
        while True:
            if self.pos >= len(self.data):
                raise LayoutError("varint past the end")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
            if shift > 35:
                raise LayoutError("varint too long")
        if counts is not None:
            name, nullable = (info.name, info.nullable) if info is not None else ("", False)
            self.sites.append(LengthSite(start, "uvarint", counts, value, self.pos - start, name, nullable))
        return value

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise LayoutError("value past the end")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def skip(self, size: int) -> None:
        if size < 0:
            return  # a null string or bytes
        if self.pos + size > len(self.data):
            raise LayoutError("value past the end")
        self.pos += size
