"""Where the records of the usual Produce request lie in its bytes: one topic, one partition, one run of records
(v3–13), read by hand so that an answer given at once (``server/at_once.py``) can tell the part that repeats from
one request of a producer to the next (its client id, transactional id, acks, timeout, topic and partition) from
the records, without decoding the request.

Layout (Kafka's ProduceRequest schema; the request header is v1, or v2 with tagged fields from v9, where the body
turns to compact lengths): client id (int16 length, -1 for null), [header tags], transactional id (nullable
string), acks (int16), timeout (int32), topics (array of 1: name, or from v13 a topic id of 16 bytes; partitions
(array of 1: index int32, records nullable bytes, [tags])), [tags]), [tags]. Anything else (several topics or
partitions, null records, a tagged field, a version outside 3–13, bytes left over or missing) is not this layout:
None, and the request takes the general path, whose decoder judges it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["split_produce"]

FIRST_VERSION: Final = 3
LAST_VERSION: Final = 13
FLEXIBLE_FROM: Final = 9
TOPIC_ID_FROM: Final = 13
_HEADER_FIXED: Final = 8  # api key, version, correlation id
_TOPIC_ID_BYTES: Final = 16
_NO_TAGS: Final = b"\x00"
#: what ends a flexible request of this layout: the partition's, the topic's and the request's empty tags
_FLEXIBLE_END: Final = b"\x00\x00\x00"


class _NotThisLayout(Exception):
    pass


def _uvarint(frame: bytes, pos: int) -> tuple[int, int]:
    """(the unsigned varint at ``pos``, the position after it); at most five bytes, as Kafka reads lengths."""
    value = shift = 0
    for i in range(pos, min(pos + 5, len(frame))):
        byte = frame[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    raise _NotThisLayout


def _int16(frame: bytes, pos: int) -> int:
    if pos + 2 > len(frame):
        raise _NotThisLayout
    return int.from_bytes(frame[pos : pos + 2], "big", signed=True)


def _int32(frame: bytes, pos: int) -> int:
    if pos + 4 > len(frame):
        raise _NotThisLayout
    return int.from_bytes(frame[pos : pos + 4], "big", signed=True)


def _string(frame: bytes, pos: int, flexible: bool, *, nullable: bool) -> int:
    """The position after the (nullable) string at ``pos``."""
    if flexible:
        length, pos = _uvarint(frame, pos)
        length -= 1  # (compact: the length plus one, 0 for null)
    else:
        length = _int16(frame, pos)
        pos += 2
    if length < 0:
        if not nullable or length != -1:
            raise _NotThisLayout
        return pos
    return pos + length


def _one(frame: bytes, pos: int, flexible: bool) -> int:
    """The position after an array's length at ``pos``, which must be 1."""
    if flexible:
        if pos >= len(frame) or frame[pos] != 2:  # (compact: the count plus one)
            raise _NotThisLayout
        return pos + 1
    if _int32(frame, pos) != 1:
        raise _NotThisLayout
    return pos + 4


def split_produce(frame: bytes, version: int) -> tuple[int, bytes] | None:
    """``(end, records)``: where the part of ``frame`` (a request's payload, from its api key) that precedes the
    records' length ends, and the records; None when ``frame`` is not a Produce of this layout."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        return None
    flexible = version >= FLEXIBLE_FROM
    try:
        pos = _string(frame, _HEADER_FIXED, False, nullable=True)  # client id (int16 length in every header)
        if flexible:
            if frame[pos : pos + 1] != _NO_TAGS:
                return None
            pos += 1
        pos = _string(frame, pos, flexible, nullable=True) + 6  # transactional id; acks and timeout
        pos = _one(frame, pos, flexible)
        if version >= TOPIC_ID_FROM:
            pos += _TOPIC_ID_BYTES
        else:
            pos = _string(frame, pos, flexible, nullable=False)
        pos = _one(frame, pos, flexible) + 4  # the partition's index
        end = pos
        if flexible:
            length, pos = _uvarint(frame, pos)
            length -= 1
            tail = _FLEXIBLE_END
        else:
            length = _int32(frame, pos)
            pos += 4
            tail = b""
    except _NotThisLayout:
        return None
    if length < 0 or pos + length + len(tail) != len(frame) or frame[pos + length :] != tail:
        return None
    return end, frame[pos : pos + length]
