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

__all__ = ["PRODUCE_FLEXIBLE_FROM", "ProducePartition", "ProduceTopic", "produce_answer"]

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


async def produce_answer(empty: Any, topics: Sequence[ProduceTopic], version: int) -> PreEncoded:
    """The Produce answer ``empty`` (the response entity of ``version``, ``responses`` empty) with ``topics``."""
    flexible = version >= PRODUCE_FLEXIBLE_FROM
    with_errors = version >= PRODUCE_ERRORS_FROM
    log_start = version >= PRODUCE_LOG_START_FROM
    pack = _WITH_LOG_START if log_start else _WITHOUT_LOG_START
    no_message = _no_message(flexible, with_errors)
    pacer, parts, errors = Pacer(), list[bytes](), list[int]()
    for topic, partitions in topics:
        parts.append(topic_head(topic, len(partitions), flexible, version >= PRODUCE_TOPIC_ID_FROM))
        for i, (index, error, base, append_ms, start, message) in enumerate(partitions):
            if i % CHUNK == 0 and pacer.due(min(CHUNK, len(partitions) - i)):
                await pause()
            if log_start:
                parts.append(pack(index, error, base, append_ms, start))
            else:
                parts.append(pack(index, error, base, append_ms))
            if message is None or not with_errors:
                parts.append(no_message)
            else:
                tail = array_header(0, flexible) + string(message, flexible)
                parts.append(tail + _TAGS if flexible else tail)
            if error:
                errors.append(int(error))
        if flexible:
            parts.append(_TAGS)
    return PreEncoded(response_type(empty), splice_pieces(empty, "responses", len(topics), parts), tuple(errors))
