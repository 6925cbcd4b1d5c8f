"""Build Kafka v2 record batches byte by byte (independent of the code under test), for the storage and
data-handler tests. kio's reader checks them in ``test_batch_builder_matches_kio``."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence

from crc32c import crc32c

BASE_TS = 1_700_000_000_000


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def zigzag(value: int) -> bytes:
    return uvarint((value << 1) ^ (value >> 63))


def _nullable(data: bytes | None) -> bytes:
    return zigzag(-1) if data is None else zigzag(len(data)) + data


def make_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamps: Sequence[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    gzip_records: bool = False,
    attributes: int = 0,
    base_offset: int = 0,
    magic: int = 2,
) -> bytes:
    """One batch of ``len(values)`` records; ``timestamps`` are absolute (default: BASE_TS + i)."""
    timestamps = list(timestamps) if timestamps is not None else [BASE_TS + i for i in range(len(values))]
    keys = list(keys) if keys is not None else [None] * len(values)
    base_ts = timestamps[0] if timestamps else BASE_TS
    records = bytearray()
    for i, value in enumerate(values):
        body = b"\x00" + zigzag(timestamps[i] - base_ts) + zigzag(i) + _nullable(keys[i]) + _nullable(value) + zigzag(0)
        records += zigzag(len(body)) + body
    payload = bytes(records)
    if gzip_records:
        payload = gzip.compress(payload, mtime=0)  # (no timestamp in the header: the same records, the same bytes)
        attributes |= 1
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            len(values) - 1,
            base_ts,
            max(timestamps, default=BASE_TS),
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
        + payload
    )
    head = struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), -1, magic, crc32c(after_crc))
    return head + after_crc


def batch_sizes(data: bytes) -> list[int]:
    """Sizes of the batches concatenated in ``data``."""
    sizes, pos = [], 0
    while pos < len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        sizes.append(size)
        pos += size
    return sizes
