"""Retention (``cleanup.policy=delete``): whole old segments are deleted when their newest record is older
than ``retention.ms`` or while the partition is bigger than ``retention.bytes`` — oldest first, never the active
segment, as Kafka does — and the log start offset moves to the first segment left. ``segment.ms`` rolls an
active segment that has held records that long, so that retention can reach them.

A shell (docs/architecture.md): it takes segments out of the log with :meth:`PartitionLog.drop_oldest_segment`
and removes their files, oldest first — at once, or (``remove=False``) left to the caller, who removes them on
another thread (:class:`~regroup.storage.partition_log.DroppedSegments`) once the log no longer shows them. A
crash part-way leaves the newer segments complete (the oldest go first): a file dropped but not yet removed is
an older segment again at the next start, whole and continuing into the rest, and the next pass deletes it —
also one that a DeleteRecords dropped, which lies below the persisted log start offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from regroup.storage.partition_log import PartitionLog

__all__ = ["RetentionResult", "enforce_retention", "maybe_roll"]


@dataclass(frozen=True, slots=True)
class RetentionResult:
    segments_deleted: int
    bytes_deleted: int
    log_start_offset: int
    #: with ``remove=False``: the files of the segments taken out of the log, oldest first, still to remove
    dropped: list[Path] = field(default_factory=list)


def enforce_retention(
    plog: PartitionLog, now_ms: int, *, retention_ms: int, retention_bytes: int, remove: bool = True
) -> RetentionResult:
    """Delete the oldest segments breaching ``retention_ms`` (by their newest timestamp; -1: none) or
    ``retention_bytes`` (the partition's bytes, active segment included; -1: none), and those wholly below the
    log start offset (a DeleteRecords' files a crash left), up to a compaction's segment still being swapped
    in. A repair's gap marker has no timestamp: time retention takes it as old. ``remove=False`` only takes
    them out of the log: their files are in the result's ``dropped``, for the caller to remove in that order."""
    deleted = freed = 0
    dropped: list[Path] = []
    excess = plog.size_bytes - retention_bytes if retention_bytes >= 0 else -1
    for span in plog.older_segments():
        expired = retention_ms >= 0 and now_ms - span.max_timestamp > retention_ms
        too_big = excess >= 0 and excess - span.size >= 0
        below_start = span.end <= plog.log_start_offset  # left by a crash before a DeleteRecords removed it
        if not (expired or too_big or below_start) or not plog.can_drop_oldest:
            break
        path = plog.drop_oldest_segment()
        if remove:
            path.unlink(missing_ok=True)
        else:
            dropped.append(path)
        deleted += 1
        freed += span.size
        if excess >= 0:
            excess -= span.size
    return RetentionResult(deleted, freed, plog.log_start_offset, dropped)


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
