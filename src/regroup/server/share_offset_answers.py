"""The body of a DescribeShareGroupOffsets answer, encoded by hand, a chunk of partitions at a time with the event
loop given back between chunks.

A share group of a large topic has a start offset per partition: described whole, or for every partition named,
that is thousands of rows, and a kio entity per row held the loop about 10 µs each. Here a partition is one
``struct`` pack.

Layout (Kafka's ``DescribeShareGroupOffsetsResponse.json``, v0-1, flexible: compact strings and arrays, an empty
tagged-field section ending each struct): group = group_id string, [topic = topic_name string, topic_id uuid,
[partition_index int32, start_offset int64, leader_epoch int32, lag int64 (v1+), error_code int16,
error_message nullable string]], error_code int16, error_message nullable string. The fields around the groups
array are kio's (``encoded.splice_pieces``); the tests hold the bytes to kio's encoding of the straightforward
entity.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any

from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces
from regroup.server.offset_answers import Pacer, pause, string

__all__ = ["LAG_FROM", "ShareOffsetRow", "ShareOffsetsGroup", "ShareOffsetsTopic", "share_offsets_answer"]

#: the first version whose partitions carry their lag (KIP-1226)
LAG_FROM = 1

#: (partition, start offset, leader epoch, lag, error code)
ShareOffsetRow = tuple[int, int, int, int, int]
#: (topic name, topic id or None, its partitions)
ShareOffsetsTopic = tuple[str, uuid.UUID | None, Sequence[ShareOffsetRow]]
#: (group id, its topics, error code)
ShareOffsetsGroup = tuple[str, Sequence[ShareOffsetsTopic], int]

_WITH_LAG = struct.Struct(">iqiqhBB")  # ..., error code, a null message, the tagged fields
_WITHOUT_LAG = struct.Struct(">iqihBB")
_GROUP_TAIL = struct.Struct(">hBB")
_NO_ID = bytes(16)


async def share_offsets_answer(empty: Any, groups: Sequence[ShareOffsetsGroup], version: int) -> PreEncoded:
    """The DescribeShareGroupOffsets answer ``empty`` (the response entity of ``version``, ``groups`` empty) with
    ``groups``."""
    lag = version >= LAG_FROM
    pack = _WITH_LAG.pack if lag else _WITHOUT_LAG.pack
    parts: list[bytes] = []
    errors: list[int] = []
    pacer = Pacer()
    for group_id, topics, group_code in groups:
        parts.append(string(group_id, True) + array_header(len(topics), True))
        for name, topic_id, partitions in topics:
            parts.append(string(name, True) + (_NO_ID if topic_id is None else topic_id.bytes))
            parts.append(array_header(len(partitions), True))
            for index, start, epoch, partition_lag, code in partitions:
                if pacer.due():
                    await pause()
                if lag:
                    parts.append(pack(index, start, epoch, partition_lag, code, 0, 0))
                else:
                    parts.append(pack(index, start, epoch, code, 0, 0))
                if code:
                    errors.append(code)
            parts.append(b"\x00")
        parts.append(_GROUP_TAIL.pack(group_code, 0, 0))
        if group_code:
            errors.append(group_code)
    return PreEncoded(response_type(empty), splice_pieces(empty, "groups", len(groups), parts), tuple(errors))
