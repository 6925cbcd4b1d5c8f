"""Kafka record batches (magic v2) as the partition log sees them: the fixed header, what makes a batch
acceptable for appending (structure, CRC, Kafka's producer-idempotence rules) and per-record timestamps.

The format (https://kafka.apache.org/documentation/#recordbatch), all big-endian::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2) | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
    producerEpoch int16 | baseSequence int32 | recordCount int32 | records...

``batchLength`` counts the bytes after itself; the CRC-32C covers ``attributes`` to the end, so the broker may
rewrite ``baseOffset`` and ``partitionLeaderEpoch`` without recomputing it.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from crc32c import crc32c

from regroup.storage.format import StorageError

__all__ = [
    "CRC_FROM",
    "HEADER",
    "LOG_OVERHEAD",
    "AppendRejected",
    "BatchHeader",
    "ProducerStates",
    "Reject",
    "check_header",
    "parse_header",
    "record_times",
    "split_batches",
]

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header, baseOffset .. recordCount
LOG_OVERHEAD = 12  # baseOffset (8) + batchLength (4): the bytes not counted by batchLength
CRC_FROM = 21  # the CRC-32C covers attributes (byte 21) to the end of the batch
MAX_SEQUENCE = 2**31 - 1
KEPT_PRODUCER_BATCHES = 5


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of a magic v2 record batch."""

    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        seq = self.base_sequence + self.last_offset_delta
        return seq - MAX_SEQUENCE - 1 if seq > MAX_SEQUENCE else seq


def parse_header(data: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header at ``pos`` (the caller checked that 61 bytes are there)."""
    return BatchHeader(*HEADER.unpack_from(data, pos))


def check_header(h: BatchHeader, available: int) -> str | None:
    """Why the header ``h``, with ``available`` bytes from its start, is not a sound stored batch; ``None`` if it
    is. A compacted batch keeps its offsets but may hold fewer records (none, for one that only covers offsets
    whose records were cleaned away); a produced batch must hold exactly one record per offset
    (:func:`split_batches`)."""
    if h.magic != 2:
        return f"magic {h.magic} (only v2 record batches are supported)"
    if h.batch_length < HEADER.size - LOG_OVERHEAD or h.size > available:
        return f"batch length {h.batch_length} does not fit the {available} bytes left"
    if h.record_count < 0 or h.last_offset_delta < 0 or h.record_count > h.last_offset_delta + 1:
        return f"record count {h.record_count} does not match last offset delta {h.last_offset_delta}"
    return None


def check_batch(data: bytes | bytearray | memoryview, pos: int) -> BatchHeader | str:
    """The header of the CRC-valid batch at ``pos``, or why it is not one."""
    if len(data) - pos < HEADER.size:
        return "incomplete batch header"
    h = parse_header(data, pos)
    problem = check_header(h, len(data) - pos)
    if problem is None and crc32c(memoryview(data)[pos + CRC_FROM : pos + h.size]) != h.crc:
        problem = "CRC-32C mismatch"
    return problem or h


class Reject(enum.Enum):
    """Why an append was refused; named after the Kafka error code the Produce handler answers with."""

    CORRUPT_MESSAGE = "corrupt_message"
    INVALID_RECORD = "invalid_record"
    MESSAGE_TOO_LARGE = "message_too_large"
    OUT_OF_ORDER_SEQUENCE_NUMBER = "out_of_order_sequence_number"
    DUPLICATE_SEQUENCE_NUMBER = "duplicate_sequence_number"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    INVALID_TXN_STATE = "invalid_txn_state"


class AppendRejected(StorageError):
    """The records were not appended (nothing was written)."""

    def __init__(self, reason: Reject, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def split_batches(records: bytes, max_batch_bytes: int) -> list[tuple[int, BatchHeader]]:
    """``(position, header)`` of each batch of a producer's records, all checked like Kafka's LogValidator
    (a client may not write control batches); raises :class:`AppendRejected`."""
    found: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < len(records):
        checked = check_batch(records, pos)
        if isinstance(checked, str):
            invalid = checked.startswith(("magic", "record count"))
            reason = Reject.INVALID_RECORD if invalid else Reject.CORRUPT_MESSAGE
            raise AppendRejected(reason, f"batch at byte {pos}: {checked}")
        if checked.record_count < 1 or checked.last_offset_delta != checked.record_count - 1:
            # (a stored batch may hold fewer records than its offsets once compacted; a produced one may not)
            count, delta = checked.record_count, checked.last_offset_delta
            raise AppendRejected(
                Reject.INVALID_RECORD,
                f"batch at byte {pos}: record count {count} does not match last offset delta {delta}",
            )
        if checked.size > max_batch_bytes:
            raise AppendRejected(Reject.MESSAGE_TOO_LARGE, f"a batch of {checked.size} bytes (max {max_batch_bytes})")
        if checked.attributes & 0x20:
            raise AppendRejected(Reject.INVALID_RECORD, "clients may not write control batches")
        if checked.attributes & 0x10 and checked.producer_id < 0:
            raise AppendRejected(Reject.INVALID_RECORD, "a transactional batch without a producer id")
        if checked.producer_id >= 0 and checked.base_sequence < 0:
            raise AppendRejected(
                Reject.INVALID_RECORD, f"producer {checked.producer_id}: sequence {checked.base_sequence}"
            )
        found.append((pos, checked))
        pos += checked.size
    if not found:
        raise AppendRejected(Reject.INVALID_RECORD, "no record batch in the produce data")
    return found


@dataclass(slots=True)
class _Producer:
    epoch: int
    #: the last batches: (first sequence, last sequence, base offset, last offset)
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=KEPT_PRODUCER_BATCHES))

    def add(self, h: BatchHeader, base_offset: int) -> None:
        self.batches.append((h.base_sequence, h.last_sequence, base_offset, base_offset + h.last_offset_delta))


class ProducerStates:
    """One partition's idempotent-producer state: epoch and last five batches per producer id, checked with
    Kafka's rules (ProducerAppendInfo.checkSequence). A producer id not seen before (or whose state was lost)
    may start at any sequence."""

    def __init__(self) -> None:
        self._by_id: dict[int, _Producer] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def observe(self, h: BatchHeader) -> None:
        """Take a batch already in the log into account (recovery)."""
        if h.producer_id >= 0 and h.attributes & 0x20:
            self.mark(h.producer_id, h.producer_epoch)
        elif h.producer_id >= 0:
            state = self._by_id.get(h.producer_id)
            if state is None or state.epoch != h.producer_epoch:
                state = self._by_id[h.producer_id] = _Producer(h.producer_epoch)
            state.add(h, h.base_offset)

    def mark(self, producer_id: int, producer_epoch: int) -> None:
        """A transaction marker of ``producer_id`` at ``producer_epoch``: a new epoch starts with no batches
        (Kafka's ``ProducerStateEntry.update``); sequences go on after a marker of the same epoch."""
        state = self._by_id.get(producer_id)
        if state is None or state.epoch != producer_epoch:
            self._by_id[producer_id] = _Producer(producer_epoch)

    def epoch_of(self, producer_id: int) -> int | None:
        state = self._by_id.get(producer_id)
        return None if state is None else state.epoch

    def last_sequences(self) -> dict[int, tuple[int, int]]:
        """Producer id → (epoch, last sequence written, -1 if none since its epoch began)."""
        return {pid: (p.epoch, p.batches[-1][1] if p.batches else -1) for pid, p in self._by_id.items()}

    def plan(
        self, batches: Sequence[BatchHeader], first_offset: int
    ) -> tuple[dict[int, _Producer], tuple[int, int] | None]:
        """Check batches to be appended from ``first_offset``: the states to :meth:`commit` once written, and —
        for a lone batch repeating one of its producer's last five — the offsets it got the first time."""
        staged: dict[int, _Producer] = {}
        offset = first_offset
        for h in batches:
            if h.producer_id >= 0:
                duplicate = self._check(h, staged)
                if duplicate is not None:
                    if len(batches) == 1:
                        return {}, duplicate
                    raise AppendRejected(Reject.DUPLICATE_SEQUENCE_NUMBER, "a duplicate batch in a multi-batch append")
                staged[h.producer_id].add(h, offset)
            offset += h.record_count
        return staged, None

    def commit(self, staged: dict[int, _Producer]) -> None:
        self._by_id.update(staged)

    def _check(self, h: BatchHeader, staged: dict[int, _Producer]) -> tuple[int, int] | None:
        current = staged.get(h.producer_id) or self._by_id.get(h.producer_id)
        if current is None:
            staged[h.producer_id] = _Producer(h.producer_epoch)
            return None
        if h.producer_epoch < current.epoch:
            raise AppendRejected(Reject.INVALID_PRODUCER_EPOCH, f"epoch {h.producer_epoch} < {current.epoch}")
        if h.producer_epoch > current.epoch:
            if h.base_sequence != 0:
                raise AppendRejected(
                    Reject.OUT_OF_ORDER_SEQUENCE_NUMBER, f"a new epoch starts at sequence 0, not {h.base_sequence}"
                )
            staged[h.producer_id] = _Producer(h.producer_epoch)
            return None
        for first_seq, last_seq, base, last in current.batches:
            if first_seq == h.base_sequence and last_seq == h.last_sequence:
                return base, last
        last_seq = current.batches[-1][1] if current.batches else -1
        if not (h.base_sequence == last_seq + 1 or (h.base_sequence == 0 and last_seq == MAX_SEQUENCE)):
            raise AppendRejected(Reject.OUT_OF_ORDER_SEQUENCE_NUMBER, f"sequence {h.base_sequence} after {last_seq}")
        staged[h.producer_id] = _Producer(current.epoch, deque(current.batches, maxlen=KEPT_PRODUCER_BATCHES))
        return None


def record_times(h: BatchHeader, body: bytes) -> list[tuple[int, int]]:
    """``(offset, timestamp)`` of each record; ``[]`` when the records cannot be decoded here (snappy, lz4 and
    zstd need libraries regroup does not depend on — callers then fall back to the batch's own fields)."""
    if h.attributes & 0x08:  # LogAppendTime: every record carries the batch's max timestamp
        return [(h.base_offset + i, h.max_timestamp) for i in range(h.record_count)]
    try:
        codec = h.attributes & 0x07
        if codec == 1:
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        elif codec != 0:
            return []
        out, pos = [], 0
        for _ in range(h.record_count):
            length, pos = varint(body, pos)
            end = pos + length
            ts_delta, pos = varint(body, pos + 1)  # skip the record's attributes byte
            offset_delta, pos = varint(body, pos)
            out.append((h.base_offset + offset_delta, h.base_timestamp + ts_delta))
            pos = end
        return out
    except (IndexError, zlib.error):
        return []


def varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint (Kafka's record fields) at ``pos``: ``(value, next position)``."""
    shift = raw = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
