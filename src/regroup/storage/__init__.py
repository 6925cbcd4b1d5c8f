"""Durable storage for the coordinator (a shell): an append-only log of opaque byte records with snapshots.

The core serialises its records to ``bytes`` elsewhere; this package stores and returns them in order. The
on-disk format, the fsync policies and the recovery rules are described in ``docs/storage.md``.
"""

from regroup.storage.format import CorruptLogError, StorageError
from regroup.storage.record_log import RECORD_LOG_SEGMENT_BYTES, FsyncPolicy, LogLockedError, RecordLog

__all__ = [
    "RECORD_LOG_SEGMENT_BYTES",
    "CorruptLogError",
    "FsyncPolicy",
    "LogLockedError",
    "RecordLog",
    "StorageError",
]
