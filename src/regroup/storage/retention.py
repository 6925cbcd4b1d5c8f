"""Retention (``cleanup.policy=delete``): whole old segments are deleted when their newest record is older
than ``retention.ms`` or while the partition is bigger than ``retention.bytes`` — oldest first, never the active
segment, as Kafka does — and the log start offset moves to the first segment left. ``segment.ms`` rolls an
active segment that has held records that long, so that retention can reach them.

A shell (docs/architecture.md): it deletes files through :meth:`PartitionLog.delete_oldest_segment`. A crash
part-way leaves the newer segments complete (the oldest go first), and the next pass goes on.
"""

from __future__ import annotations

from dataclasses import dataclass

from regroup.storage.partition_log import PartitionLog

__all__ = ["RetentionResult", "enforce_retention", "maybe_roll"]


@dataclass(frozen=True, slots=True)
class RetentionResult:
    segments_deleted: int
    bytes_deleted: int
    log_start_offset: int


def enforce_retention(plog: PartitionLog, now_ms: int, *, retention_ms: int, retention_bytes: int) -> RetentionResult:
    """Delete the oldest segments breaching ``retention_ms`` (by their newest timestamp; -1: none) or
    ``retention_bytes`` (the partition's bytes, active segment included; -1: none). A repair's gap marker
    has no timestamp: time retention takes it as old."""
    deleted = freed = 0
    excess = plog.size_bytes - retention_bytes if retention_bytes >= 0 else -1
    for span in plog.older_segments():
        expired = retention_ms >= 0 and now_ms - span.max_timestamp > retention_ms
        too_big = excess >= 0 and excess - span.size >= 0
        if not (expired or too_big):
            break
        plog.delete_oldest_segment()
        deleted += 1
        freed += span.size
        if excess >= 0:
            excess -= span.size
    return RetentionResult(deleted, freed, plog.log_start_offset)


def maybe_roll(plog: PartitionLog, now_ms: int, segment_ms: int) -> bool:
    """Roll the active segment once it has held records for ``segment_ms``; ``True`` if it rolled. The age
    counts, by the wall clock, from the first pass that saw it hold any (after a restart, from the first pass
    then): producers' timestamps may be anything, and a restart must not roll and expire at once."""
    if plog.active_segment_bytes == 0:
        plog.active_since_ms = None
        return False
    if plog.active_since_ms is None:
        plog.active_since_ms = now_ms
        return False
    if now_ms - plog.active_since_ms < segment_ms:
        return False
    return plog.roll_active()
