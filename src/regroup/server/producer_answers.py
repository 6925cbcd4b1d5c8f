"""The body of a DescribeProducers answer, encoded by hand, a chunk of partitions at a time with the event loop
given back between chunks.

An admin tool asking about every partition of a large topic (``kafka-transactions.sh describe-producers``
per partition, or a UI's producer view) names thousands of partitions; a kio entity per partition held the loop
about 10 µs each. Here a partition without producers is a few bytes joined, one with producers a ``struct``
pack per producer.

Layout (Kafka's ``DescribeProducersResponse.json``, v0, flexible: compact strings and arrays, an empty
tagged-field section ending each struct): topic = name, [partition_index int32, error_code int16, error_message
nullable string, [producer_id int64, producer_epoch int32, last_sequence int32, last_timestamp int64,
coordinator_epoch int32, current_txn_start_offset int64]]. The fields around the topics array are kio's
(``encoded.splice_pieces``); the tests hold the bytes to kio's encoding of the straightforward entity.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces
from regroup.server.offset_answers import Pacer, nullable_string, pause, string

__all__ = ["ActiveProducer", "ProducersPartition", "ProducersTopic", "describe_producers_answer"]

#: (producer id, epoch, last sequence, last timestamp, coordinator epoch, current transaction's first offset)
ActiveProducer = tuple[int, int, int, int, int, int]
#: (partition, error code, error message, its active producers)
ProducersPartition = tuple[int, int, str | None, Sequence[ActiveProducer]]
#: (topic name, its partitions)
ProducersTopic = tuple[str, Sequence[ProducersPartition]]

_PARTITION = struct.Struct(">ih")
_PRODUCER = struct.Struct(">qiiqiqB")
_TAGS = b"\x00"
_NO_PRODUCERS = array_header(0, True) + _TAGS  # an empty array of producers, then the partition's tagged fields


async def describe_producers_answer(empty: Any, topics: Sequence[ProducersTopic]) -> PreEncoded:
    """The DescribeProducers answer ``empty`` (the response entity, ``topics`` empty) with ``topics``."""
    parts: list[bytes] = []
    errors: list[int] = []
    messages: dict[str | None, bytes] = {}  # (most partitions: null; the refused ones all say the same)
    pacer = Pacer()
    for name, partitions in topics:
        parts.append(string(name, True) + array_header(len(partitions), True))
        for partition, code, message, producers in partitions:
            if pacer.due():
                await pause()
            encoded = messages.get(message)
            if encoded is None:
                encoded = messages[message] = nullable_string(message, True)
            parts.append(_PARTITION.pack(partition, code))
            parts.append(encoded)
            if producers:
                parts.append(array_header(len(producers), True))
                parts.extend(_PRODUCER.pack(*producer, 0) for producer in producers)
                parts.append(_TAGS)
            else:
                parts.append(_NO_PRODUCERS)
            if code:
                errors.append(code)
        parts.append(_TAGS)
    return PreEncoded(response_type(empty), splice_pieces(empty, "topics", len(topics), parts), tuple(errors))
