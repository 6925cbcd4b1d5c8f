"""Kafka's framing: every request and response is an int32 big-endian size followed by that many bytes.

``FrameBuffer`` splits the bytes a connection receives into frames. A size above the configured maximum
(Kafka's ``socket.request.max.bytes``, 100 MiB by default here) or a negative size is refused as soon as
its prefix arrives, before the frame is buffered (``FrameTooLarge``); a connection that ends mid-frame is
truncated (``TruncatedFrame``). Both are ``ProtocolError``s: the caller closes that connection.
``FramedPieces`` is a framed response kept in pieces, for large answers.
"""

from __future__ import annotations

import struct

from regroup.network.errors import FrameTooLarge, TruncatedFrame

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FrameBuffer:
    """Received bytes in, complete frame payloads out, in order."""

    __slots__ = ("_buffer", "_offset", "max_bytes")

    def __init__(self, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._offset = 0  # start of the first unconsumed byte (consumed bytes are dropped in batches)

    def feed(self, data: bytes) -> None:
        if self._offset:
            del self._buffer[: self._offset]
            self._offset = 0
        self._buffer += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as a frame."""
        return len(self._buffer) - self._offset

    def next_api_key(self) -> int | None:
        """The API key of the next request, when the first bytes of its frame are in (None before)."""
        buffer, offset = self._buffer, self._offset
        if len(buffer) - offset < _SIZE.size + 2 or _SIZE.unpack_from(buffer, offset)[0] < 2:
            return None
        start = offset + _SIZE.size
        return int.from_bytes(buffer[start : start + 2], "big", signed=True)

    def next_frame(self) -> bytes | None:
        """The next complete frame's payload, or None until more bytes arrive. Raises ``FrameTooLarge``."""
        buffer, offset = self._buffer, self._offset
        if len(buffer) - offset < _SIZE.size:
            return None
        (size,) = _SIZE.unpack_from(buffer, offset)
        if size < 0 or size > self.max_bytes:
            raise FrameTooLarge(f"frame size {size} outside 0..{self.max_bytes}")
        end = offset + _SIZE.size + size
        if end > len(buffer):
            return None
        self._offset = end
        return bytes(buffer[offset + _SIZE.size : end])

    def unread(self, payload: bytes) -> None:
        """Put back ``payload``, the frame ``next_frame`` just returned: it is the next frame again."""
        self._offset -= _SIZE.size + len(payload)

    def check_complete(self) -> None:
        """At end of stream: raises ``TruncatedFrame`` if it ended inside a frame."""
        left = len(self._buffer) - self._offset
        if left == 0:
            return
        if left < _SIZE.size:
            raise TruncatedFrame(f"connection closed inside a size prefix ({left} of 4 bytes)")
        (size,) = _SIZE.unpack_from(self._buffer, self._offset)
        raise TruncatedFrame(f"connection closed after {left - _SIZE.size} of {size} frame bytes")


class FramedPieces:
    """A framed response as its pieces in order (the size prefix in the first), written to the socket as they are
    (``Connection``: the transport's ``writelines``) rather than joined into one bytes object: a large answer
    whose body is kept between requests (an all-topics Metadata of 100,000 partitions, about 3 MB) is not copied
    for each of them. ``len`` is its size in bytes (``size``: the pieces' together), as for a framed response of one
    piece."""

    __slots__ = ("pieces", "size")

    def __init__(self, pieces: tuple[bytes, ...], size: int) -> None:
        self.pieces = pieces
        self.size = size

    def __len__(self) -> int:
        return self.size

    def joined(self) -> bytes:
        return b"".join(self.pieces)


def frame(payload: bytes) -> bytes:
    """``payload`` with its size prefix."""
    return _SIZE.pack(len(payload)) + payload
