"""``message.timestamp.type=LogAppendTime``: the broker stamps each appended batch with its own clock.

A shell module without I/O. As Kafka's ``LogValidator`` does for v2 batches: the batch's max timestamp becomes
the append time, the timestamp-type bit (attributes bit 3) is set, and the CRC-32C is computed again; the
records inside are untouched (a reader takes every record's timestamp from the batch under LogAppendTime). A
batch whose CRC does not match is left as it is, so the append still refuses it as corrupt.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from regroup.storage.batches import CRC_FROM, check_batch

__all__ = ["LOG_APPEND_TIME", "stamp_log_append_time"]

LOG_APPEND_TIME = 0x08
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_CRC_AT = 17


def stamp_log_append_time(records: bytes, now_ms: int) -> bytes:
    """``records`` (concatenated v2 batches) with every sound batch stamped at ``now_ms``."""
    data = bytearray(records)
    pos = 0
    while pos < len(data):
        checked = check_batch(data, pos)
        if isinstance(checked, str):
            break  # the append refuses it; nothing after it is touched either
        struct.pack_into(">h", data, pos + _ATTRIBUTES_AT, checked.attributes | LOG_APPEND_TIME)
        struct.pack_into(">q", data, pos + _MAX_TIMESTAMP_AT, now_ms)
        struct.pack_into(">I", data, pos + _CRC_AT, crc32c(memoryview(data)[pos + CRC_FROM : pos + checked.size]))
        pos += checked.size
    return bytes(data)
