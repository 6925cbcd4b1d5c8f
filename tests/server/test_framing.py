"""``FrameBuffer``: frames cut from arbitrary chunks, oversized and negative sizes refused at the prefix,
a stream ending inside a frame reported as truncated."""

from __future__ import annotations

import struct

import pytest

from regroup.network.errors import FrameTooLarge, TruncatedFrame
from regroup.network.framing import FrameBuffer, frame


def test_frames_come_out_whole_and_in_order_whatever_the_chunks() -> None:
    payloads = [b"", b"a", b"hello" * 100, bytes(range(256))]
    stream = b"".join(frame(p) for p in payloads)
    for chunk in (1, 3, 7, len(stream)):
        buffer, out = FrameBuffer(), []
        for i in range(0, len(stream), chunk):
            buffer.feed(stream[i : i + chunk])
            while (payload := buffer.next_frame()) is not None:
                out.append(payload)
        assert out == payloads
        buffer.check_complete()


@pytest.mark.parametrize("size", [11, -1])
def test_a_size_outside_the_limit_is_refused_before_the_frame_arrives(size: int) -> None:
    buffer = FrameBuffer(max_bytes=10)
    buffer.feed(struct.pack(">i", size))
    with pytest.raises(FrameTooLarge):
        buffer.next_frame()


def test_end_of_stream_inside_a_frame_is_truncation() -> None:
    buffer = FrameBuffer()
    buffer.feed(b"\x00\x00")
    with pytest.raises(TruncatedFrame, match="size prefix"):
        buffer.check_complete()
    buffer = FrameBuffer()
    buffer.feed(struct.pack(">i", 5) + b"abc")
    assert buffer.next_frame() is None
    with pytest.raises(TruncatedFrame, match="3 of 5"):
        buffer.check_complete()


def test_the_next_api_key_is_read_once_its_two_bytes_are_in() -> None:
    payloads = [struct.pack(">hh", 11, 9) + b"rest", struct.pack(">h", -1), b"\x00", struct.pack(">hh", 68, 1)]
    stream = b"".join(frame(p) for p in payloads)
    for chunk in (1, 3, len(stream)):
        buffer, seen = FrameBuffer(), []
        for i in range(0, len(stream), chunk):
            buffer.feed(stream[i : i + chunk])
            while True:
                head = payloads[len(seen)] if len(seen) < len(payloads) else b""
                expected = struct.unpack(">h", head[:2])[0] if len(head) >= 2 and buffer.buffered >= 6 else None
                assert buffer.next_api_key() == expected  # (a frame too short to hold one has none)
                payload = buffer.next_frame()
                if payload is None:
                    break
                seen.append(payload)
        assert seen == payloads and buffer.next_api_key() is None
