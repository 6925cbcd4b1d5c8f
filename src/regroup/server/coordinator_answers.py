"""The body of a batched FindCoordinator answer (v4+), encoded by hand, a chunk of keys at a time with the event
loop given back between chunks.

A client looking up the coordinators of many groups at once (an admin tool listing every group's offsets
batches them into one request) names thousands of keys; a kio entity per key held the loop about 8 µs each.
Here a key is its string and one ``struct`` pack, the node's part shared by every key answered alike.

Layout (Kafka's ``FindCoordinatorResponse.json``, v4, flexible: compact strings and arrays, an empty
tagged-field section ending each struct): coordinator = key string, node_id int32, host string, port int32,
error_code int16, error_message nullable string. The fields around the array are kio's
(``encoded.splice_pieces``); the tests hold the bytes to kio's encoding of the straightforward entity.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from regroup.server.encoded import PreEncoded, response_type, splice_pieces
from regroup.server.offset_answers import Pacer, pause, string

__all__ = ["FoundCoordinator", "coordinators_answer"]

#: (key, error code, node id, host, port)
FoundCoordinator = tuple[str, int, int, str, int]

_NODE = struct.Struct(">i")
_PORT_AND_CODE = struct.Struct(">ih")
_NULL_AND_TAGS = b"\x00\x00"  # a null compact string (the message), then the empty tagged-field section


async def coordinators_answer(empty: Any, found: Sequence[FoundCoordinator]) -> PreEncoded:
    """The FindCoordinator answer ``empty`` (v4+, ``coordinators`` empty) with ``found``, in order."""
    parts: list[bytes] = []
    errors: list[int] = []
    nodes: dict[tuple[int, int, str, int], bytes] = {}  # (code, node, host, port) -> its bytes after the key
    pacer = Pacer()
    for key, code, node, host, port in found:
        if pacer.due():
            await pause()
        tail = nodes.get((code, node, host, port))
        if tail is None:
            tail = _NODE.pack(node) + string(host, True) + _PORT_AND_CODE.pack(port, code) + _NULL_AND_TAGS
            nodes[(code, node, host, port)] = tail
        parts.append(string(key, True))
        parts.append(tail)
        if code:
            errors.append(code)
    return PreEncoded(response_type(empty), splice_pieces(empty, "coordinators", len(found), parts), tuple(errors))
