"""Log compaction (``cleanup.policy=compact``): in the segments before the active one, keep only the latest
record of each key, drop tombstones older than ``delete.retention.ms``, keep every offset where it was.

A shell (docs/architecture.md): it reads segment files; :meth:`PartitionLog.start_rewrite` and what follows it
write the result (crash-safely, :mod:`regroup.storage.segment_swap`). Like Kafka's cleaner, in two steps:

1. :func:`plan` — may run on a worker thread, as it only reads older segments, which never change in place —
   builds the map *key → offset of its latest record* over the cleanable segments (every older segment, up
   to the first one holding a record younger than ``min.compaction.lag.ms``, and as far as ``max_keys``
   distinct keys allow), then rewrites each group of consecutive segments (at most ``segment.bytes`` of them
   together) into one run of batches: a record stays if it has no key, if it is its key's latest — and, for a
   tombstone (null value), if its timestamp is less than ``delete.retention.ms`` old;
2. :func:`apply` — on the log's owner thread — swaps each rewritten group in, unless the log changed under it
   (a DeleteRecords removed one of its segments meanwhile: that group waits for the next pass).
   :func:`apply_steps` does it in steps, handing the owner the file work (writing and fsyncing the new
   segment, removing the ones it replaces) to run on another thread, while the changes to the log in memory,
   with the renames that go with them, stay on the owner's thread.

**The rewritten batches.** A batch keeps its base offset, its last offset delta, its producer fields and
its attributes, and holds the records kept, byte for byte (their offset and timestamp deltas are relative
to the same base), with its record count, its max timestamp (the newest record kept, or the batch's own under
LogAppendTime) and its CRC-32C recomputed; gzip batches are compressed again. A batch left with no record
disappears, and the offsets it covered are covered instead by one *empty batch* (record count 0, no
producer, timestamps -1) — one for each run of such batches — so the segment's batches still cover every
offset from its base to the next file's without a hole: recovery, repair and readers see a contiguous log,
and a consumer steps over an empty batch to its last offset + 1, as over one of Kafka's. Batches whose
records cannot be read here (snappy, lz4, zstd; transactional and control batches) are kept whole and their
keys do not count.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from crc32c import crc32c

from regroup.storage.batches import HEADER, BatchHeader, check_batch
from regroup.storage.files import read_file
from regroup.storage.partition_log import PartitionLog, SegmentSpan

__all__ = [
    "DEFAULT_MAX_KEYS",
    "CompactionPlan",
    "CompactionResult",
    "FileWork",
    "apply",
    "apply_steps",
    "compact",
    "empty_batch",
    "has_keyless_record",
    "plan",
]

DEFAULT_MAX_KEYS = 4_000_000
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
GZIP = 1
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount


@dataclass(frozen=True, slots=True)
class _Record:
    start: int  # byte range of the whole record (length prefix included) in the decompressed body
    end: int
    offset: int
    timestamp: int
    key: bytes | None
    tombstone: bool


@dataclass(slots=True)
class CompactionPlan:
    """Rewritten groups: ``(bases of the segments replaced, the new segment's bytes)``, and the figures."""

    groups: list[tuple[list[int], bytes]] = field(default_factory=list)
    records_before: int = 0
    records_after: int = 0
    tombstones_dropped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    #: the earliest time a tombstone still kept expires (the next pass worth running), or None
    next_deadline_ms: int | None = None
    #: the offset up to which segments were cleanable this time
    cleaned_to: int = 0


@dataclass(frozen=True, slots=True)
class CompactionResult:
    segments_replaced: int
    segments_written: int
    bytes_before: int
    bytes_after: int
    records_removed: int


def empty_batch(base_offset: int, count: int) -> bytes:
    """A batch with no records covering offsets ``base_offset .. base_offset + count - 1``."""
    after_crc = _AFTER_CRC.pack(0, count - 1, -1, -1, -1, -1, -1, 0)
    head = struct.pack(">qiib", base_offset, len(after_crc) + 9, -1, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _records(h: BatchHeader, body: bytes) -> list[_Record]:
    """The records of a batch whose body (after the 61-byte header) is ``body`` (decompressed already)."""
    out: list[_Record] = []
    pos = 0
    log_append = h.attributes & LOG_APPEND_TIME
    for _ in range(h.record_count):
        start = pos
        length, pos = _varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise ValueError("record runs past its batch")
        ts_delta, pos = _varint(body, pos + 1)
        offset_delta, pos = _varint(body, pos)
        key_len, pos = _varint(body, pos)
        key = None
        if key_len >= 0:
            key = body[pos : pos + key_len]
            pos += key_len
        value_len, pos = _varint(body, pos)
        if pos > end:
            raise ValueError("record fields run past the record")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(_Record(start, end, h.base_offset + offset_delta, ts, key, value_len < 0))
        pos = end
    if pos != len(body):
        raise ValueError("bytes left after the last record")
    return out


def _decoded(data: bytes, pos: int, h: BatchHeader) -> tuple[bytes, list[_Record]] | None:
    """``(decompressed body, records)`` of the batch at ``pos``, or ``None`` if it is kept whole unread."""
    if h.attributes & (TRANSACTIONAL | CONTROL) or h.record_count == 0:
        return None
    codec = h.attributes & 0x07
    body = data[pos + HEADER.size : pos + h.size]
    try:
        if codec == GZIP:
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        elif codec != 0:
            return None
        return body, _records(h, body)
    except (ValueError, IndexError, zlib.error):
        return None


def has_keyless_record(records: bytes) -> bool:
    """Whether produce data holds a record without a key (Kafka refuses those in a compacted topic). Batches
    that are not sound or not readable here are not looked into (the append judges the former)."""
    pos = 0
    while pos < len(records):
        checked = check_batch(records, pos)
        if isinstance(checked, str):
            return False
        decoded = _decoded(records, pos, checked)
        if decoded is not None and any(r.key is None for r in decoded[1]):
            return True
        pos += checked.size
    return False


def _batches(data: bytes) -> Iterator[tuple[int, BatchHeader]]:
    pos = 0
    while pos < len(data):
        checked = check_batch(data, pos)
        if isinstance(checked, str):
            raise ValueError(f"{checked} at byte {pos}")
        yield pos, checked
        pos += checked.size


def _rebuild(data: bytes, pos: int, h: BatchHeader, body: bytes, kept: list[_Record]) -> bytes:
    """The batch at ``pos`` holding only ``kept`` of its records."""
    records = b"".join(body[r.start : r.end] for r in kept)
    if h.attributes & 0x07 == GZIP:
        records = gzip.compress(records, mtime=0)
    max_ts = h.max_timestamp if h.attributes & LOG_APPEND_TIME else max(r.timestamp for r in kept)
    after_crc = (
        _AFTER_CRC.pack(
            h.attributes,
            h.last_offset_delta,
            h.base_timestamp,
            max_ts,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            len(kept),
        )
        + records
    )
    head = struct.pack(">qiib", h.base_offset, len(after_crc) + 9, -1, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def plan(
    spans: list[SegmentSpan],
    now_ms: int,
    *,
    delete_retention_ms: int,
    min_lag_ms: int = 0,
    group_bytes: int = 64 * 1024 * 1024,
    max_keys: int = DEFAULT_MAX_KEYS,
) -> CompactionPlan:
    """What compacting the older segments ``spans`` (oldest first) would write; reads only their files."""
    result = CompactionPlan()
    cleanable: list[SegmentSpan] = []
    latest: dict[bytes, int] = {}
    for span in spans:
        if span.gap:
            if cleanable:
                break  # a repair's gap marker ends the run
            continue
        if min_lag_ms > 0 and span.max_timestamp > now_ms - min_lag_ms:
            break
        data = read_file(span.path)
        keys: dict[bytes, int] = {}
        for pos, h in _batches(data):
            decoded = _decoded(data, pos, h)
            if decoded is not None:
                for r in decoded[1]:
                    if r.key is not None:
                        keys[r.key] = r.offset
        if cleanable and len(latest) + len(keys) > max_keys:
            break
        latest.update(keys)
        cleanable.append(span)
    if not cleanable:
        return result
    result.cleaned_to = cleanable[-1].end
    groups: list[list[SegmentSpan]] = [[]]
    size = 0
    for span in cleanable:
        if groups[-1] and size + span.size > group_bytes:
            groups.append([])
            size = 0
        groups[-1].append(span)
        size += span.size
    for group in groups:
        written = _clean_group(group, latest, now_ms, delete_retention_ms, result)
        if written is not None:
            result.groups.append(([span.base for span in group], written))
    return result


def _clean_group(
    group: list[SegmentSpan],
    latest: dict[bytes, int],
    now_ms: int,
    delete_retention_ms: int,
    result: CompactionPlan,
) -> bytes | None:
    """The group's segments (read again) rewritten as one, or ``None`` when nothing would change."""
    out: list[bytes] = []
    hole: tuple[int, int] | None = None  # (first offset, count) covered by batches that vanished
    changed = len(group) > 1
    for span in group:
        data = read_file(span.path)
        result.bytes_before += len(data)
        for pos, h in _batches(data):
            if h.record_count == 0:  # an empty batch from an earlier pass: it joins the hole it is part of
                count = h.last_offset_delta + 1
                changed |= hole is not None
                hole = (h.base_offset, count) if hole is None else (hole[0], hole[1] + count)
                continue
            decoded = _decoded(data, pos, h)
            if decoded is None:
                kept_batch: bytes | None = data[pos : pos + h.size]
                result.records_before += h.record_count
                result.records_after += h.record_count
            else:
                body, records = decoded
                kept = []
                for r in records:
                    if r.key is not None and latest.get(r.key, r.offset) != r.offset:
                        continue
                    if r.tombstone and r.key is not None:
                        expires = r.timestamp + delete_retention_ms
                        if now_ms >= expires:
                            result.tombstones_dropped += 1
                            continue
                        if result.next_deadline_ms is None or expires < result.next_deadline_ms:
                            result.next_deadline_ms = expires
                    kept.append(r)
                result.records_before += len(records)
                result.records_after += len(kept)
                if len(kept) == len(records):
                    kept_batch = data[pos : pos + h.size]
                else:
                    changed = True
                    kept_batch = _rebuild(data, pos, h, body, kept) if kept else None
            if kept_batch is None:
                count = h.last_offset_delta + 1
                changed |= hole is not None
                hole = (h.base_offset, count) if hole is None else (hole[0], hole[1] + count)
                continue
            if hole is not None:
                out.append(empty_batch(*hole))
                hole = None
            out.append(kept_batch)
    if hole is not None:
        out.append(empty_batch(*hole))
    if not changed:
        return None
    written = b"".join(out)
    result.bytes_after += len(written)
    return written


#: a piece of file work :func:`apply_steps` hands its caller, to run on any thread before asking for the next
FileWork = Callable[[], object]


def apply(plog: PartitionLog, compaction: CompactionPlan) -> CompactionResult:
    """Swap the planned groups into ``plog`` (newest group first, so earlier positions stay valid); a group
    whose segments are no longer all there is skipped. The file work runs here."""
    steps = apply_steps(plog, compaction)
    try:
        work = next(steps)
        while True:
            try:
                work()
            except Exception as exc:  # the steps decide (a log closed meanwhile ends quietly)
                work = steps.throw(exc)
            else:
                work = next(steps)
    except StopIteration as done:
        result: CompactionResult = done.value
        return result


def apply_steps(plog: PartitionLog, compaction: CompactionPlan) -> Generator[FileWork, None, CompactionResult]:
    """:func:`apply` in steps: the generator yields each piece of file work — the new segment's writing,
    fsync and indexing (:meth:`~regroup.storage.partition_log.Rewrite.write`); once it is swapped in, the
    directory's fsync and the removal of the segments it replaced — for the caller to run (the server's event
    loop runs them on a worker thread and serves requests meanwhile) before asking for the next step, and
    returns the result. A piece that fails is thrown back into the generator (``throw``): it ends quietly if
    the log was closed meanwhile (its topic deleted), else raises it again — a new segment already swapped in
    then stays in its ``.swap`` file, which the next open finishes. The log is only changed between two
    pieces, on the caller's thread. Each group finds its segments again when its turn comes and once more
    after its new segment is written (a DeleteRecords meanwhile may have removed some: that group is skipped,
    as by :func:`apply`, and its file discarded); a log closed meanwhile ends it."""
    replaced = written = before = after = 0
    for bases, data in reversed(compaction.groups):
        if plog.closed:
            break
        if _locate(plog, bases) is None:
            continue
        rewrite = plog.start_rewrite(bases, data)
        if not (yield from _work(plog, rewrite.write)):
            break
        found = None if plog.closed else _locate(plog, bases)
        if found is None:
            yield rewrite.discard
            continue
        first, size = found
        try:
            removal = plog.swap_rewrite(first, rewrite)
        except BaseException:
            rewrite.discard()
            raise
        before += size
        if not (yield from _work(plog, removal.remove)):
            break
        plog.settle_rewrite(rewrite)
        replaced += len(bases)
        written += 1
        after += len(data)
    removed = compaction.records_before - compaction.records_after
    return CompactionResult(replaced, written, before, after, removed)


def _work(plog: PartitionLog, work: FileWork) -> Generator[FileWork, None, bool]:
    """Hand ``work`` to the caller; ``False`` if it failed because ``plog`` was closed meanwhile."""
    try:
        yield work
    except OSError:
        if plog.closed:
            return False
        raise
    return True


def _locate(plog: PartitionLog, bases: list[int]) -> tuple[int, int] | None:
    """``(index, bytes)`` of the run of older segments ``bases`` in ``plog``, or ``None`` if it is not all there."""
    spans = plog.older_segments()
    current = [span.base for span in spans]
    if bases[0] not in current:
        return None
    first = current.index(bases[0])
    if current[first : first + len(bases)] != bases:
        return None
    return first, sum(span.size for span in spans[first : first + len(bases)])


def compact(
    plog: PartitionLog,
    now_ms: int,
    *,
    delete_retention_ms: int,
    min_lag_ms: int = 0,
    group_bytes: int = 64 * 1024 * 1024,
    max_keys: int = DEFAULT_MAX_KEYS,
) -> tuple[CompactionPlan, CompactionResult]:
    """Plan and apply in one go (tests, benchmarks, the startup pass)."""
    planned = plan(
        plog.older_segments(),
        now_ms,
        delete_retention_ms=delete_retention_ms,
        min_lag_ms=min_lag_ms,
        group_bytes=group_bytes,
        max_keys=max_keys,
    )
    return planned, apply(plog, planned)
