"""Kafka's framing: every request and response is an int32 big-endian size followed by that many bytes.

A size above the configured maximum (Kafka's ``socket.request.max.bytes``, 100 MiB by default here) or a
negative size is refused before anything is buffered; a connection that ends mid-frame is truncated. Both
are ``ProtocolError``s: the caller closes that connection.
"""

from __future__ import annotations

import asyncio
import struct

from regroup.server.errors import FrameTooLarge, TruncatedFrame

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes | None:
    """The next frame's payload, or None on a clean end of stream (between frames)."""
    try:
        prefix = await reader.readexactly(_SIZE.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise TruncatedFrame(f"connection closed inside a size prefix ({len(exc.partial)} of 4 bytes)") from None
    (size,) = _SIZE.unpack(prefix)
    if size < 0 or size > max_bytes:
        raise FrameTooLarge(f"frame size {size} outside 0..{max_bytes}")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise TruncatedFrame(f"connection closed after {len(exc.partial)} of {size} frame bytes") from None


def frame(payload: bytes) -> bytes:
    """``payload`` with its size prefix."""
    return _SIZE.pack(len(payload)) + payload
