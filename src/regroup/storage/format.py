"""Byte formats of the record log: batch frames (in segment files) and snapshot files.

Pure functions over ``bytes``; all file handling lives in :mod:`regroup.storage.record_log`. Integers are
big-endian and unsigned. See ``docs/storage.md`` for the full description and the reasoning.

Batch frame (one per ``append`` call; the unit of atomicity and of checksumming)::

    offset  size  field
    0       4     magic        b"RGB1" (format version 1)
    4       4     body_len     u32, bytes of body after this 24-byte header
    8       8     base_offset  u64, offset of the first record in the batch
    16      4     count        u32 >= 1, records in the batch
    20      4     crc          u32, zlib.crc32 of bytes 4..20 (body_len, base_offset, count) then the body
    24      ...   body         count x (payload_len u32 | payload)

Record ``i`` of the batch has offset ``base_offset + i``. The CRC covers the lengths and the offsets as well
as the payloads, so a frame is accepted only as a whole: a half-written batch is rejected entirely.

Snapshot file (``snapshot-<offset:020d>.bin``)::

    0       4     magic        b"RGS1"
    4       8     offset       u64, the last record offset the state includes
    12      8     length       u64, bytes of state after this 24-byte header
    20      4     crc          u32, zlib.crc32 of bytes 4..20 (offset, length) then the state
    24      ...   state        opaque bytes; the file ends exactly after them
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from regroup.storage.crc_shift import crc32_joined

FRAME_MAGIC = b"RGB1"
SNAPSHOT_MAGIC = b"RGS1"

_FRAME_HEADER = struct.Struct(">4sIQII")  # magic, body_len, base_offset, count, crc
_SNAPSHOT_HEADER = struct.Struct(">4sQQI")  # magic, offset, length, crc
_LENGTH = struct.Struct(">I")

FRAME_HEADER_SIZE = _FRAME_HEADER.size
SNAPSHOT_HEADER_SIZE = _SNAPSHOT_HEADER.size
RECORD_OVERHEAD = _LENGTH.size
MAX_U32 = 0xFFFF_FFFF
MAX_U64 = 0xFFFF_FFFF_FFFF_FFFF

assert FRAME_HEADER_SIZE == 24 and SNAPSHOT_HEADER_SIZE == 24


class StorageError(Exception):
    """Base class of the record log's own errors (I/O failures surface as ``OSError``)."""


class CorruptLogError(StorageError):
    """The log or its snapshots are damaged in a way recovery must not paper over (data that was once
    durable is missing or altered). Nothing is deleted or truncated when this is raised."""


class FormatError(ValueError):
    """Bytes that do not decode as a valid frame or snapshot; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded batch frame: its records' payloads and where it ends in the buffer."""

    base_offset: int
    payloads: tuple[bytes, ...]
    end: int

    @property
    def next_offset(self) -> int:
        """The offset just after this batch's last record."""
        return self.base_offset + len(self.payloads)


def frame_size(payload_lengths: Iterable[int]) -> int:
    """Bytes a batch frame with payloads of these lengths occupies on disk."""
    return FRAME_HEADER_SIZE + sum(RECORD_OVERHEAD + n for n in payload_lengths)


def encode_batch(base_offset: int, payloads: Sequence[bytes]) -> bytes:
    """Frame ``payloads`` (at least one) as the records ``base_offset, base_offset + 1, ...``."""
    if not 0 <= base_offset <= MAX_U64 - len(payloads):
        raise ValueError(f"offset {base_offset} is out of range")
    body = _body(payloads)
    head = struct.pack(">IQI", len(body), base_offset, len(payloads))
    crc = zlib.crc32(body, zlib.crc32(head))
    return _FRAME_HEADER.pack(FRAME_MAGIC, len(body), base_offset, len(payloads), crc) + body


@dataclass(frozen=True, slots=True)
class FramedBody:
    """A batch frame's body and its checksum, made before its first offset is known (``frame_body``): the
    frame is then ``frame_header(base_offset, body)`` followed by ``body.data``, the same bytes ``encode_batch``
    makes. For a large batch, the copy and the checksum of megabytes need not wait for the log's turn."""

    data: bytes
    crc: int
    count: int


def frame_body(payloads: Sequence[bytes]) -> FramedBody:
    """The body of a batch frame of ``payloads`` (at least one), with its CRC-32."""
    data = _body(payloads)
    return FramedBody(data, zlib.crc32(data), len(payloads))


def _body(payloads: Sequence[bytes]) -> bytes:
    """A batch frame's body: each payload after its length."""
    if not payloads:
        raise ValueError("a batch frame holds at least one record")
    if sum(RECORD_OVERHEAD + len(payload) for payload in payloads) > MAX_U32:
        raise ValueError(f"a batch body is limited to {MAX_U32} bytes")
    parts: list[bytes] = []
    for payload in payloads:
        parts.append(_LENGTH.pack(len(payload)))
        parts.append(payload)
    return b"".join(parts)


def frame_header(base_offset: int, body: FramedBody) -> bytes:
    """The header of the frame of ``body`` whose first record is ``base_offset`` (its checksum joined to the
    body's: ``crc_shift``)."""
    if not 0 <= base_offset <= MAX_U64 - body.count:
        raise ValueError(f"offset {base_offset} is out of range")
    head = struct.pack(">IQI", len(body.data), base_offset, body.count)
    crc = crc32_joined(zlib.crc32(head), body.crc, len(body.data))
    return _FRAME_HEADER.pack(FRAME_MAGIC, len(body.data), base_offset, body.count, crc)


def decode_frame(buf: bytes, pos: int) -> Frame:
    """Decode the frame starting at ``buf[pos]``; raise :class:`FormatError` if there is no complete, valid
    frame there. The caller checks ``base_offset`` against the offset it expects."""
    end_of_buf = len(buf)
    if pos + FRAME_HEADER_SIZE > end_of_buf:
        raise FormatError(f"truncated frame header ({end_of_buf - pos} of {FRAME_HEADER_SIZE} bytes)")
    magic, body_len, base_offset, count, crc = _FRAME_HEADER.unpack_from(buf, pos)
    if magic != FRAME_MAGIC:
        raise FormatError(f"bad frame magic {magic!r}")
    if count < 1 or body_len < RECORD_OVERHEAD * count:
        raise FormatError(f"impossible frame header (count {count}, body length {body_len})")
    body_start = pos + FRAME_HEADER_SIZE
    end = body_start + body_len
    if end > end_of_buf:
        raise FormatError(f"frame body runs past the end of the data ({end - end_of_buf} bytes missing)")
    view = memoryview(buf)
    actual = zlib.crc32(view[body_start:end], zlib.crc32(view[pos + 4 : pos + 20]))
    if actual != crc:
        raise FormatError(f"frame checksum mismatch (stored {crc:#010x}, computed {actual:#010x})")
    payloads: list[bytes] = []
    p = body_start
    for _ in range(count):
        if p + RECORD_OVERHEAD > end:
            raise FormatError("record lengths do not add up to the frame body")
        (n,) = _LENGTH.unpack_from(buf, p)
        p += RECORD_OVERHEAD
        if p + n > end:
            raise FormatError("record lengths do not add up to the frame body")
        payloads.append(buf[p : p + n])
        p += n
    if p != end:
        raise FormatError("record lengths do not add up to the frame body")
    return Frame(base_offset, tuple(payloads), end)


def encode_snapshot(offset: int, state: bytes) -> bytes:
    """The bytes of a snapshot file holding ``state`` as of record ``offset``."""
    if not 0 <= offset <= MAX_U64:
        raise ValueError(f"offset {offset} is out of range")
    head = struct.pack(">QQ", offset, len(state))
    crc = zlib.crc32(state, zlib.crc32(head))
    return _SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, offset, len(state), crc) + bytes(state)


def decode_snapshot(data: bytes, expected_offset: int) -> bytes:
    """The state held by snapshot file contents ``data``; raise :class:`FormatError` unless the header, the
    length, the checksum and the offset (which must equal the one in the file name) all check out."""
    if len(data) < SNAPSHOT_HEADER_SIZE:
        raise FormatError(f"truncated snapshot header ({len(data)} of {SNAPSHOT_HEADER_SIZE} bytes)")
    magic, offset, length, crc = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if magic != SNAPSHOT_MAGIC:
        raise FormatError(f"bad snapshot magic {magic!r}")
    if offset != expected_offset:
        raise FormatError(f"snapshot header says offset {offset}, file name says {expected_offset}")
    if len(data) != SNAPSHOT_HEADER_SIZE + length:
        raise FormatError(f"snapshot is {len(data)} bytes, header promises {SNAPSHOT_HEADER_SIZE + length}")
    view = memoryview(data)
    actual = zlib.crc32(view[SNAPSHOT_HEADER_SIZE:], zlib.crc32(view[4:20]))
    if actual != crc:
        raise FormatError(f"snapshot checksum mismatch (stored {crc:#010x}, computed {actual:#010x})")
    return data[SNAPSHOT_HEADER_SIZE:]
