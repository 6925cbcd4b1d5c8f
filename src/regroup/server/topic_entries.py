"""How one topic of a Metadata or DescribeTopicPartitions response is encoded, piece by piece, for one response
version: ``EntryFormat``.

A topic entry is its head (error code, name, topic id, internal flag — whichever the version has), its
partitions array and its tail (the authorized operations, the tagged fields). On this single broker every
partition of every topic encodes the same but for its index (leader 0, replicas = ISR = [0], epoch -1), so the
entries of partitions 0..n-1 are one run of bytes shared by all topics, encoded once and sliced: a topic's
partitions cost a copy, whatever their number. A head is written directly for the layouts Metadata and
DescribeTopicPartitions use (checked against kio's encoding when the format is made; any other layout is
encoded by kio); tails are encoded by kio once per operations value. Entries that are not a plain existing
topic (errors) are encoded by kio (``encode``).

``format_for`` hands out one ``EntryFormat`` per distinct encoding: versions whose topic and partition
entities have the same fields and flexibility share it (and so share the entries cached for it).
"""

from __future__ import annotations

import dataclasses
import io
import struct
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from kio.serial import entity_writer

from regroup.server.api import ZERO_UUID, TopicInfo
from regroup.server.encoded import array_header, field_offset
from regroup.server.entities import build

__all__ = ["EntryFormat", "format_for"]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
#: the fields before ``partitions`` in the topic entities whose heads are written directly
_DIRECT_HEADS = {
    ("error_code", "name"),
    ("error_code", "name", "is_internal"),
    ("error_code", "name", "topic_id", "is_internal"),
}
_NO_ERROR = b"\x00\x00"
_FALSE = b"\x00"
#: names the direct head encoding is checked with (a long one needs a two-byte length varint)
_CHECK_NAMES = ("t", "orders.eu-west_1", "x" * 249)
_CHECK_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


class EntryFormat:
    """The encoding of a topic entry of ``topic_cls`` (partitions of ``partition_cls``, each with the values
    ``partition_values`` but its index)."""

    def __init__(self, topic_cls: type[Any], partition_cls: type[Any], partition_values: Mapping[str, Any]) -> None:
        self.topic_cls = topic_cls
        self.flexible: bool = topic_cls.__flexible__
        first = build(partition_cls, **partition_values, partition_index=0)
        self._partition, at = field_offset(first, "partition_index")
        if self._partition[at : at + 4] != _INT32.pack(0):
            raise ValueError(f"{partition_cls.__name__}.partition_index is not an int32")
        self._before_index, self._after_index = self._partition[:at], self._partition[at + 4 :]
        #: bytes of one partition entry (all have the same size)
        self.partition_size = len(self._partition)
        self._run = b""
        head_fields = []
        for f in dataclasses.fields(topic_cls):
            if f.name == "partitions":
                break
            head_fields.append(f.name)
        self._has_id = "topic_id" in head_fields
        self._has_internal = "is_internal" in head_fields
        self._direct = tuple(head_fields) in _DIRECT_HEADS
        self._tails: dict[int, bytes] = {}
        if self._direct:
            for name in _CHECK_NAMES:
                sample = TopicInfo(name, _CHECK_ID, 1)
                if self._direct_head(sample) != self._kio_head(sample):
                    self._direct = False
                    break

    # ------------------------------------------------------------------ pieces

    def head(self, info: TopicInfo) -> bytes:
        """The bytes of an existing topic's entry before its partitions array."""
        return self._direct_head(info) if self._direct else self._kio_head(info)

    def partitions(self, first: int, end: int) -> bytes:
        """The partitions array of partitions ``first``..``end``-1 (empty when ``end <= first``)."""
        count = max(0, end - first)
        if end > len(self._run) // self.partition_size:
            self._grow(end)
        size = self.partition_size
        return array_header(count, self.flexible) + self._run[first * size : first * size + count * size]

    def tail(self, operations: int) -> bytes:
        """The bytes of an entry after its partitions array, with ``operations`` as its authorized operations
        (where the version has them)."""
        tail = self._tails.get(operations)
        if tail is None:
            entity = build(
                self.topic_cls,
                error_code=0,
                name="",
                topic_id=ZERO_UUID,
                partitions=(),
                topic_authorized_operations=operations,
            )
            data, at = field_offset(entity, "partitions")
            tail = data[at + len(array_header(0, self.flexible)) :]
            if len(self._tails) < 1024:  # (operations are bit fields of a few bits: a handful of values)
                self._tails[operations] = tail
        return tail

    def body(self, info: TopicInfo) -> bytes:
        """An existing topic's entry without its tail: head and every partition."""
        return self.head(info) + self.partitions(0, info.partitions)

    def encode(self, **values: Any) -> bytes:
        """The entry of ``values`` (an error entry, say), encoded by kio."""
        buffer = io.BytesIO()
        entity_writer(self.topic_cls)(buffer, build(self.topic_cls, **values))
        return buffer.getvalue()

    # ------------------------------------------------------------------ internals

    def _grow(self, count: int) -> None:
        """Extend the run of partition entries to at least ``count`` (doubling, so growth is amortised)."""
        have = len(self._run) // self.partition_size
        want = max(count, 2 * have, 64)
        before, after, pack = self._before_index, self._after_index, _INT32.pack
        self._run += b"".join(before + pack(p) + after for p in range(have, want))

    def _direct_head(self, info: TopicInfo) -> bytes:
        name = info.name.encode()
        # (a compact string's length is the varint of length + 1, as a compact array's)
        length = array_header(len(name), True) if self.flexible else _INT16.pack(len(name))
        head = _NO_ERROR + length + name
        if self._has_id:
            head += info.topic_id.bytes
        if self._has_internal:
            head += _FALSE
        return head

    def _kio_head(self, info: TopicInfo) -> bytes:
        entity = build(
            self.topic_cls, error_code=0, name=info.name, topic_id=info.topic_id, is_internal=False, partitions=()
        )
        data, at = field_offset(entity, "partitions")
        return data[:at]


_FORMATS: dict[tuple[Any, ...], EntryFormat] = {}
_BY_CLASS: dict[tuple[type[Any], type[Any], tuple[tuple[str, Any], ...]], EntryFormat] = {}


def format_for(topic_cls: type[Any], partition_cls: type[Any], partition_values: Mapping[str, Any]) -> EntryFormat:
    """The ``EntryFormat`` of these entities (one per distinct encoding, shared by the versions that have it)."""
    values = tuple(sorted(partition_values.items()))
    key = (topic_cls, partition_cls, values)
    found = _BY_CLASS.get(key)
    if found is None:
        signature = (_signature(topic_cls), _signature(partition_cls), values)
        found = _FORMATS.get(signature)
        if found is None:
            found = _FORMATS[signature] = EntryFormat(topic_cls, partition_cls, partition_values)
        _BY_CLASS[key] = found
    return found


def _signature(cls: type[Any]) -> tuple[Any, ...]:
    """What decides the encoding of ``cls``: its flexibility and its fields (name, Kafka type, shape)."""
    hints = typing.get_type_hints(cls)
    fields = tuple((f.name, f.metadata.get("kafka_type"), _shape(hints[f.name])) for f in dataclasses.fields(cls))
    return (cls.__flexible__, fields)


def _shape(hint: Any) -> Any:
    """A field's type as far as its encoding goes (nested entities by their signature, not their class)."""
    if typing.get_origin(hint) is tuple:
        return ("array", tuple(_shape(arg) for arg in typing.get_args(hint)))
    if isinstance(hint, types.UnionType):
        return ("union", tuple(_shape(arg) for arg in typing.get_args(hint)))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return ("entity", _signature(hint))
    return repr(hint)
