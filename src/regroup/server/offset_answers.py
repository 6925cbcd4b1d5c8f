"""The bodies of OffsetCommit (and OffsetDelete), OffsetFetch, ListOffsets and DeleteRecords answers, encoded by
hand, a chunk of partitions at a time with the event loop given back between chunks.

A kio entity per partition and kio's generic writer cost about 10 µs a partition: 100 ms for an answer of
10,000 partitions, held on the event loop. Here each partition is one ``struct`` pack (and, for OffsetFetch,
its metadata string), so an answer of 10,000 partitions costs a few milliseconds, and a handler that walks
more than ``CHUNK`` partitions yields to the loop after each ``CHUNK`` (``Pacer``), so other connections'
requests are served in between. The fields around the array (throttle time, the top-level error code, tagged
fields) are written by kio (``encoded.splice``), so only the array items are restated here; the tests hold
every version's bytes to kio's encoding of the straightforward entity.

Layouts (Kafka's JSON schemas; flexible versions use compact strings and arrays and end every struct with an
empty tagged-field section):

- ListOffsets v1-11 (flexible from 6): topic = name, [partition_index int32, error_code int16, timestamp int64,
  offset int64, leader_epoch int32 (v4+)];
- OffsetCommit v2-9 (flexible from 8), OffsetDelete v0, TxnOffsetCommit v0-4 (flexible from 3) and
  AddPartitionsToTxn v0-3 (flexible from 3): topic = name, [partition_index int32, error_code int16];
- DeleteRecords v0-2 (flexible from 2): topic = name, [partition_index int32, low_watermark int64, error_code
  int16];
- OffsetFetch v1-7 (flexible from 6): topic = name, [partition_index int32, committed_offset int64,
  committed_leader_epoch int32 (v5+), metadata nullable string, error_code int16]; v8-9 (flexible): group =
  group_id, [topic as in v7], error_code int16.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces

__all__ = [
    "CHUNK",
    "LIST_OFFSETS_FLEXIBLE_FROM",
    "CommitTopic",
    "FetchGroup",
    "FetchTopic",
    "ListTopic",
    "Pacer",
    "commit_topics",
    "delete_records_topics",
    "fetch_groups",
    "fetch_topics",
    "list_offsets_partitions",
    "list_offsets_topic",
    "nullable_string",
    "pause",
    "string",
]

#: partitions handled between two yields to the event loop (about 1-3 ms of work)
CHUNK = 1000

LIST_OFFSETS_FLEXIBLE_FROM, LIST_OFFSETS_EPOCH_FROM = 6, 4
COMMIT_FLEXIBLE_FROM = 8
FETCH_FLEXIBLE_FROM, FETCH_EPOCH_FROM = 6, 5

#: (name, [(partition, error code)])
CommitTopic = tuple[str, Sequence[tuple[int, int]]]
#: (name, [(partition, committed offset, leader epoch, metadata, error code)])
FetchTopic = tuple[str, Sequence[tuple[int, int, int, str | None, int]]]
#: (group id, topics, error code)
FetchGroup = tuple[str, Sequence[FetchTopic], int]
#: (name, [(partition, error code, timestamp, offset)])
ListTopic = tuple[str, Sequence[tuple[int, int, int, int]]]

_TAGS = b"\x00"  # an empty tagged-field section
_INT16 = struct.Struct(">h")


class Pacer:
    """Counts partitions as a handler walks them: ``due()`` is true before every ``CHUNK``-th one after the
    first ``CHUNK``, when the handler should ``await pause()``. A request of at most ``CHUNK`` partitions never
    yields, so it still costs no task (``network/eager.py``)."""

    __slots__ = ("_left",)

    def __init__(self) -> None:
        self._left = CHUNK

    def due(self, items: int = 1) -> bool:
        """Count ``items`` about to be handled; true when a whole chunk was handled before them (then pause)."""
        if self._left <= 0:
            self._left = CHUNK - items
            return True
        self._left -= items
        return False


async def pause() -> None:
    """Give the event loop one turn (other connections' requests, timers) before the next chunk."""
    await asyncio.sleep(0)


def topic_head(topic: str | uuid.UUID | None, count: int, flexible: bool, by_id: bool) -> bytes:
    """The start of a topic entry in a Produce or Fetch answer: its name (or, ``by_id``, its id; the zero id
    when it has none), then the length prefix of its ``count`` partitions."""
    if by_id:
        key = (topic if isinstance(topic, uuid.UUID) else uuid.UUID(int=0)).bytes
    else:
        key = string(topic if isinstance(topic, str) else "", flexible)
    return key + array_header(count, flexible)


def string(value: str, flexible: bool) -> bytes:
    """A non-null string: a compact string's varint length + 1 in flexible versions, an int16 length before."""
    data = value.encode()
    return (array_header(len(data), True) if flexible else _INT16.pack(len(data))) + data


def nullable_string(value: str | None, flexible: bool) -> bytes:
    """A nullable string: null is a compact length of 0 in flexible versions, an int16 of -1 before."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    return string(value, flexible)


def _topic(name: str, count: int, flexible: bool) -> bytes:
    """A topic entry up to its partitions: the name and the partition array's length."""
    return string(name, flexible) + array_header(count, flexible)


# ---------------------------------------------------------------------------------------- OffsetCommit
async def commit_topics(empty: Any, topics: Sequence[CommitTopic], field: str = "topics") -> PreEncoded:
    """The OffsetCommit answer ``empty`` (the response entity of the request's version, ``topics`` empty) with
    ``topics``; also any answer whose array ``field`` holds topics of (partition, error code) in that layout
    (OffsetDelete, TxnOffsetCommit, AddPartitionsToTxn up to v3)."""
    return await _packed_topics(empty, topics, field, "ih", 1)


# ---------------------------------------------------------------------------------------- DeleteRecords
#: (name, [(partition, low watermark, error code)])
DeletedTopic = tuple[str, Sequence[tuple[int, int, int]]]


async def delete_records_topics(empty: Any, topics: Sequence[DeletedTopic]) -> PreEncoded:
    """The DeleteRecords answer ``empty`` (the response entity of the request's version, ``topics`` empty) with
    ``topics``."""
    return await _packed_topics(empty, topics, "topics", "iqh", 2)


async def _packed_topics(
    empty: Any, topics: Sequence[tuple[str, Sequence[tuple[int, ...]]]], field: str, layout: str, error_at: int
) -> PreEncoded:
    """``empty`` with its array ``field`` holding ``topics``: each a name and its partitions' rows, every row the
    fields ``layout`` packs (``struct`` codes, big-endian), its error code at ``error_at``."""
    flexible = bool(type(empty).__flexible__)
    tail = _TAGS if flexible else b""
    pack = struct.Struct(">" + layout + ("B" if flexible else "")).pack
    pacer, parts, errors = Pacer(), list[bytes](), list[int]()
    for name, partitions in topics:
        parts.append(_topic(name, len(partitions), flexible))
        for start in range(0, len(partitions), CHUNK):
            if pacer.due(min(CHUNK, len(partitions) - start)):
                await pause()
            chunk = partitions[start : start + CHUNK]
            if flexible:
                parts.append(b"".join([pack(*row, 0) for row in chunk]))
            else:
                parts.append(b"".join([pack(*row) for row in chunk]))
            errors.extend(int(row[error_at]) for row in chunk if row[error_at])
        parts.append(tail)
    return PreEncoded(response_type(empty), splice_pieces(empty, field, len(topics), parts), tuple(errors))


# ---------------------------------------------------------------------------------------- OffsetFetch
async def _fetch_topics(
    topics: Sequence[FetchTopic], flexible: bool, epochs: bool, pacer: Pacer, parts: list[bytes], errors: list[int]
) -> None:
    head = struct.Struct(">iqi" if epochs else ">iq").pack
    error_tail = struct.Struct(">hB" if flexible else ">h").pack
    metadata_bytes: dict[str | None, bytes] = {}  # most partitions carry the same metadata ("" or null)
    for name, partitions in topics:
        parts.append(_topic(name, len(partitions), flexible))
        for i, (p, offset, epoch, metadata, error) in enumerate(partitions):
            if i % CHUNK == 0 and pacer.due(min(CHUNK, len(partitions) - i)):
                await pause()
            encoded = metadata_bytes.get(metadata)
            if encoded is None:
                encoded = metadata_bytes[metadata] = nullable_string(metadata, flexible)
            parts.append(head(p, offset, epoch) if epochs else head(p, offset))
            parts.append(encoded)
            parts.append(error_tail(error, 0) if flexible else error_tail(error))
            if error:
                errors.append(int(error))
        if flexible:
            parts.append(_TAGS)


async def fetch_topics(empty: Any, topics: Sequence[FetchTopic], version: int) -> PreEncoded:
    """The OffsetFetch v1-7 answer ``empty`` (its top-level error code set, ``topics`` empty) with ``topics``."""
    flexible = version >= FETCH_FLEXIBLE_FROM
    pacer, parts, errors = Pacer(), list[bytes](), list[int]()
    await _fetch_topics(topics, flexible, version >= FETCH_EPOCH_FROM, pacer, parts, errors)
    top = int(getattr(empty, "error_code", 0))
    codes = ((top,) if top else ()) + tuple(errors)
    return PreEncoded(response_type(empty), splice_pieces(empty, "topics", len(topics), parts), codes)


#: a group of a batched OffsetFetch answer costs about ten partitions to encode besides its partitions (1,000
#: groups of one partition each were 5-8 ms in one step)
FETCHED_GROUP_WEIGHT = 10


async def fetch_groups(empty: Any, groups: Sequence[FetchGroup]) -> PreEncoded:
    """The OffsetFetch v8+ answer ``empty`` (``groups`` empty) with ``groups``."""
    pacer, parts, errors = Pacer(), list[bytes](), list[int]()
    for group_id, topics, error in groups:
        if pacer.due(FETCHED_GROUP_WEIGHT):
            await pause()
        parts.append(_topic(group_id, len(topics), True))
        await _fetch_topics(topics, True, True, pacer, parts, errors)
        parts.append(_INT16.pack(error) + _TAGS)
        if error:
            errors.append(int(error))
    return PreEncoded(response_type(empty), splice_pieces(empty, "groups", len(groups), parts), tuple(errors))


# ---------------------------------------------------------------------------------------- ListOffsets
def list_offsets_topic(name: str, count: int, version: int) -> tuple[bytes, bytes]:
    """A ListOffsets topic entry of ``count`` partitions: (its bytes before the partitions, after them)."""
    flexible = version >= LIST_OFFSETS_FLEXIBLE_FROM
    return _topic(name, count, flexible), _TAGS if flexible else b""


def list_offsets_partitions(partitions: Iterable[tuple[int, int, int, int]], version: int, errors: list[int]) -> bytes:
    """ListOffsets partition entries (``partition, error, timestamp, offset``); their non-zero error codes are
    added to ``errors``."""
    flexible = version >= LIST_OFFSETS_FLEXIBLE_FROM
    epochs = version >= LIST_OFFSETS_EPOCH_FROM
    pack = struct.Struct(">ihqq" + ("i" if epochs else "") + ("B" if flexible else "")).pack
    out = []
    for p, error, timestamp, offset in partitions:
        if flexible:
            out.append(pack(p, error, timestamp, offset, -1, 0))
        elif epochs:
            out.append(pack(p, error, timestamp, offset, -1))
        else:
            out.append(pack(p, error, timestamp, offset))
        if error:
            errors.append(int(error))
    return b"".join(out)
