"""Transaction markers as stored in a partition log: the control batch the coordinator's shell appends to end
a transaction (Kafka's ``EndTransactionMarker``), and reading one back.

A marker is a magic v2 batch with the control and transactional attributes set, the producer id and epoch of
the transaction, base sequence -1 and exactly one record: key ``version int16 (0) | type int16`` (0 ABORT,
1 COMMIT), value ``version int16 (0) | coordinator epoch int32``, no headers. Clients skip control batches and
read_committed consumers use them (with the aborted-transactions list of the fetch) to drop aborted data."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from regroup.storage.batches import CRC_FROM, HEADER, LOG_OVERHEAD, BatchHeader, varint

__all__ = ["CONTROL", "TRANSACTIONAL", "Marker", "marker_batch", "read_marker"]

TRANSACTIONAL = 0x10
CONTROL = 0x20
ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class Marker:
    committed: bool
    coordinator_epoch: int


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def marker_batch(
    producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """The control batch ending a transaction (base offset 0: the log assigns it)."""
    key = _KEY.pack(0, COMMIT if committed else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    body = (
        b"\x00"  # record attributes
        + _zigzag(0)  # timestamp delta
        + _zigzag(0)  # offset delta
        + _zigzag(len(key))
        + key
        + _zigzag(len(value))
        + value
        + _zigzag(0)  # no headers
    )
    record = _zigzag(len(body)) + body
    batch_length = HEADER.size - LOG_OVERHEAD + len(record)
    data = bytearray(
        HEADER.pack(
            0,
            batch_length,
            -1,
            2,
            0,
            CONTROL | TRANSACTIONAL,
            0,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            -1,
            1,
        )
        + record
    )
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[CRC_FROM:]))
    return bytes(data)


def read_marker(data: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> Marker | None:
    """The marker of the control batch ``h`` at ``pos`` in ``data`` (whole and CRC-checked), or ``None`` if
    its record is not one (a control type other than ABORT/COMMIT, or not decodable)."""
    try:
        at = pos + HEADER.size
        _, at = varint(data, at)  # record length
        at += 1  # record attributes
        _, at = varint(data, at)  # timestamp delta
        _, at = varint(data, at)  # offset delta
        key_length, at = varint(data, at)
        if key_length < _KEY.size:
            return None
        _, kind = _KEY.unpack_from(data, at)
        at += key_length
        value_length, at = varint(data, at)
        epoch = _VALUE.unpack_from(data, at)[1] if value_length >= _VALUE.size else 0
    except (IndexError, struct.error):
        return None
    if kind not in (ABORT, COMMIT) or at > pos + h.size:
        return None
    return Marker(committed=kind == COMMIT, coordinator_epoch=epoch)
