"""The body of a Produce answer, encoded by hand, ``CHUNK`` partitions at a time with the event loop given back
between chunks (as ``offset_answers.py`` does for the offset APIs): a kio entity per partition and kio's
generic writer cost about 10 µs a partition, 100 ms held on the loop for a Produce of 10,000 partitions. The
fields around the topic array (throttle time, tagged fields) are written by kio (``encoded.splice_pieces``);
the tests hold every version's bytes to kio's encoding of the straightforward entity.

Layout (Kafka's ProduceResponse schema, v3-13, flexible from 9): topic = name (v3-12) or topic id (v13+),
[index int32, error_code int16, base_offset int64, log_append_time_ms int64, log_start_offset int64 (v5+),
record_errors [] (v8+: always empty here), error_message nullable string (v8+)]. No ``current_leader`` (a
tagged field Kafka writes only on NOT_LEADER_OR_FOLLOWER, which a single node never answers).
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Sequence
from typing import Any

from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces
from regroup.server.offset_answers import CHUNK, Pacer, pause, string, topic_head

__all__ = ["PRODUCE_FLEXIBLE_FROM", "ProducePartition", "ProduceTopic", "one_partition_answer", "produce_answer"]

PRODUCE_FLEXIBLE_FROM, PRODUCE_LOG_START_FROM, PRODUCE_ERRORS_FROM, PRODUCE_TOPIC_ID_FROM = 9, 5, 8, 13

#: (index, error code, base offset, log append time in ms or -1, log start offset, error message)
ProducePartition = tuple[int, int, int, int, int, str | None]
#: (the topic's name or, from v13, its id; its partitions)
ProduceTopic = tuple[str | uuid.UUID | None, Sequence[ProducePartition]]

_TAGS = b"\x00"


_WITH_LOG_START = struct.Struct(">ihqqq").pack
_WITHOUT_LOG_START = struct.Struct(">ihqq").pack


@functools.cache
def _no_message(flexible: bool, with_errors: bool) -> bytes:
    """What follows a partition's offsets when it has no error message: the record errors (an empty array) and
    the null message (v8+), then the tags (flexible versions)."""
    tail = (array_header(0, flexible) + (b"\x00" if flexible else b"\xff\xff")) if with_errors else b""
    return tail + (_TAGS if flexible else b"")


def _layout(version: int) -> tuple[bool, bool, bool]:
    """(flexible, with record errors and message, with log start offset) of ``version``'s partitions."""
    return version >= PRODUCE_FLEXIBLE_FROM, version >= PRODUCE_ERRORS_FROM, version >= PRODUCE_LOG_START_FROM


def _partition(parts: list[bytes], row: ProducePartition, flexible: bool, with_errors: bool, log_start: bool) -> None:
    """Append one partition's pieces to ``parts``."""
    index, error, base, append_ms, start, message = row
    if log_start:
        parts.append(_WITH_LOG_START(index, error, base, append_ms, start))
    else:
        parts.append(_WITHOUT_LOG_START(index, error, base, append_ms))
    if message is None or not with_errors:
        parts.append(_no_message(flexible, with_errors))
    else:
        tail = array_header(0, flexible) + string(message, flexible)
        parts.append(tail + _TAGS if flexible else tail)


async def produce_answer(empty: Any, topics: Sequence[ProduceTopic], version: int) -> PreEncoded:
    """The Produce answer ``empty`` (the response entity of ``version``, ``responses`` empty) with ``topics``."""
    flexible, with_errors, log_start = _layout(version)
    pacer, parts, errors = Pacer(), list[bytes](), list[int]()
    for topic, partitions in topics:
        parts.append(topic_head(topic, len(partitions), flexible, version >= PRODUCE_TOPIC_ID_FROM))
        for i, row in enumerate(partitions):
            if i % CHUNK == 0 and pacer.due(min(CHUNK, len(partitions) - i)):
                await pause()
            _partition(parts, row, flexible, with_errors, log_start)
            if row[1]:
                errors.append(int(row[1]))
        if flexible:
            parts.append(_TAGS)
    return PreEncoded(response_type(empty), splice_pieces(empty, "responses", len(topics), parts), tuple(errors))


def one_partition_answer(empty: Any, topic: str | uuid.UUID, row: ProducePartition, version: int) -> PreEncoded:
    """``produce_answer`` of one topic of one partition, at once (nothing to pace)."""
    flexible, with_errors, log_start = _layout(version)
    parts = [topic_head(topic, 1, flexible, version >= PRODUCE_TOPIC_ID_FROM)]
    _partition(parts, row, flexible, with_errors, log_start)
    if flexible:
        parts.append(_TAGS)
    errors = (int(row[1]),) if row[1] else ()
    return PreEncoded(response_type(empty), splice_pieces(empty, "responses", 1, parts), errors)
