"""The body of a Fetch answer, encoded by hand, ``CHUNK`` partitions at a time with the event loop given back
between chunks (as ``produce_answers.py`` does for Produce): a kio entity per partition and kio's generic
writer cost about 10 µs a partition, a Fetch of 10,000 partitions held the loop for about 60 ms to encode
alone. The fields around the topic array (throttle time, error code, session id, tagged fields) are written by
kio (``encoded.splice_pieces``); the tests hold every version's bytes to kio's encoding of the straightforward
entity.

Layout (Kafka's FetchResponse schema, v4-18, flexible from 12): topic = name (v4-12) or topic id (v13+),
[partition_index int32, error_code int16, high_watermark int64, last_stable_offset int64, log_start_offset
int64 (v5+), aborted_transactions nullable [producer_id int64, first_offset int64], preferred_read_replica
int32 (v11+), records nullable bytes]. The tagged fields of a partition (diverging epoch, current leader,
snapshot id) are never written: a single node has none to tell.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any

from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces
from regroup.server.offset_answers import CHUNK, Pacer, pause, topic_head

__all__ = ["FETCH_FLEXIBLE_FROM", "FetchPartition", "FetchTopic", "fetch_answer"]

FETCH_FLEXIBLE_FROM, FETCH_LOG_START_FROM, FETCH_REPLICA_FROM, FETCH_TOPIC_ID_FROM = 12, 5, 11, 13

#: (index, error code, high watermark, last stable offset, log start offset, aborted transactions as
#: (producer id, first offset) or None, records)
FetchPartition = tuple[int, int, int, int, int, Sequence[tuple[int, int]] | None, bytes]
#: (the topic's name or, from v13, its id; its partitions)
FetchTopic = tuple[str | uuid.UUID | None, Sequence[FetchPartition]]

_TAGS = b"\x00"
_INT32 = struct.Struct(">i")
_ABORTED = struct.Struct(">qq")
_NO_REPLICA = _INT32.pack(-1)


def _aborted(found: Sequence[tuple[int, int]] | None, flexible: bool) -> bytes:
    if found is None:
        return b"\x00" if flexible else _INT32.pack(-1)
    tail = _TAGS if flexible else b""
    return array_header(len(found), flexible) + b"".join(_ABORTED.pack(pid, first) + tail for pid, first in found)


async def fetch_answer(empty: Any, topics: Sequence[FetchTopic], version: int) -> PreEncoded:
    """The Fetch answer ``empty`` (the response entity of ``version``, ``responses`` empty) with ``topics``."""
    flexible = version >= FETCH_FLEXIBLE_FROM
    log_start = version >= FETCH_LOG_START_FROM
    replica = _NO_REPLICA if version >= FETCH_REPLICA_FROM else b""
    pack = struct.Struct(">ihqq" + ("q" if log_start else "")).pack
    no_aborted, empty_aborted = _aborted(None, flexible), _aborted((), flexible)
    pacer, parts, errors = Pacer(), list[bytes](), list[int]()
    for topic, partitions in topics:
        parts.append(topic_head(topic, len(partitions), flexible, version >= FETCH_TOPIC_ID_FROM))
        for i, (index, error, high, stable, start, aborted, records) in enumerate(partitions):
            if i % CHUNK == 0 and pacer.due(min(CHUNK, len(partitions) - i)):
                await pause()
            parts.append(pack(index, error, high, stable, start) if log_start else pack(index, error, high, stable))
            if aborted is None:
                parts.append(no_aborted)
            else:
                parts.append(_aborted(aborted, flexible) if aborted else empty_aborted)
            parts.append(replica)
            parts.append(array_header(len(records), flexible))  # (records: never null here)
            if records:
                parts.append(records)
            if flexible:
                parts.append(_TAGS)
            if error:
                errors.append(int(error))
        if flexible:
            parts.append(_TAGS)
    return PreEncoded(response_type(empty), splice_pieces(empty, "responses", len(topics), parts), tuple(errors))
