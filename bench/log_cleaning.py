"""The cost of retention and of compaction on one partition of many records (docs/benchmarks.md).

Usage::

    .venv/bin/python bench/log_cleaning.py                          # 10 million records
    .venv/bin/python bench/log_cleaning.py --records 1000000 --keys 10000 --json /tmp/cleaning.json

Builds a partition log (``--fsync never``, 64 MiB segments) of ``--records`` uncompressed records in batches of
``--batch`` records (8-byte keys drawn round-robin from ``--keys`` distinct keys, 32-byte values, one
tombstone in every ``--tombstone-every`` records), then times on copies of it:

1. **retention**: ``enforce_retention`` with ``retention.bytes`` set to keep a tenth of the partition (whole
   old segments are deleted: time, segments and bytes deleted);
2. **compaction**: ``compaction.plan`` (reads every older segment twice: the key map, then the rewrite) and
   ``compaction.apply`` (the crash-safe swap of each group, fsyncs skipped as under ``--fsync never``), with
   tombstones past ``delete.retention.ms``; records and bytes before and after, throughput in records/s;
3. **a second compaction** with nothing new: what a pass costs when the cleaned range is already clean.

Everything runs in this process on one core; the build itself is not timed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from regroup.storage import compaction
from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.retention import enforce_retention

BASE_TS = 1_700_000_000_000


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _zigzag(value: int) -> bytes:
    return _uvarint((value << 1) ^ (value >> 63))


def _batch(first: int, count: int, keys: int, tombstone_every: int) -> bytes:
    records = bytearray()
    for i in range(count):
        n = first + i
        key = b"%08d" % (n % keys)
        tail = (
            _zigzag(-1)
            if tombstone_every and n % tombstone_every == tombstone_every - 1
            else _zigzag(32) + b"%032d" % n
        )
        body = b"\x00" + _zigzag(i) + _zigzag(i) + _zigzag(8) + key + tail + b"\x00"
        records += _zigzag(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, count - 1, BASE_TS, BASE_TS + count - 1, -1, -1, -1, count) + records
    return struct.pack(">qiibI", 0, len(after_crc) + 9, -1, 2, crc32c(after_crc)) + after_crc


def build(directory: Path, records: int, batch: int, keys: int, tombstone_every: int, segment_bytes: int) -> None:
    plog = PartitionLog.open(directory, fsync=FsyncPolicy.NEVER, segment_bytes=segment_bytes)
    try:
        for first in range(0, records, batch):
            plog.append(_batch(first, min(batch, records - first), keys, tombstone_every), sync=False)
    finally:
        plog.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=100, help="records per batch (default 100)")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys (default 100000)")
    parser.add_argument("--tombstone-every", type=int, default=1000, help="a tombstone every N records (0: none)")
    parser.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024, help="segment size (default 64 MiB)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="regroup-bench-cleaning-"))
    results: dict[str, object] = {"records": args.records, "batch": args.batch, "keys": args.keys}
    try:
        source = work / "source"
        started = time.perf_counter()
        build(source, args.records, args.batch, args.keys, args.tombstone_every, args.segment_bytes)
        results["build_s"] = round(time.perf_counter() - started, 1)

        retained = work / "retention"
        shutil.copytree(source, retained)
        plog = PartitionLog.open(retained, fsync=FsyncPolicy.NEVER)
        before, segments = plog.size_bytes, plog.segment_count
        started = time.perf_counter()
        done = enforce_retention(plog, BASE_TS, retention_ms=-1, retention_bytes=before // 10)
        elapsed = time.perf_counter() - started
        results["retention"] = {
            "seconds": round(elapsed, 4),
            "bytes_per_s": round(done.bytes_deleted / max(elapsed, 1e-9)),
            "segments_before": segments,
            "segments_deleted": done.segments_deleted,
            "bytes_before": before,
            "bytes_after": plog.size_bytes,
            "log_start_offset": done.log_start_offset,
        }
        plog.close()
        shutil.rmtree(retained)

        compacted = work / "compaction"
        shutil.copytree(source, compacted)
        plog = PartitionLog.open(compacted, fsync=FsyncPolicy.NEVER)
        before, segments = plog.size_bytes, plog.segment_count
        started = time.perf_counter()
        planned = compaction.plan(
            plog.older_segments(), BASE_TS + 10**9, delete_retention_ms=1000, group_bytes=args.segment_bytes
        )
        planned_s = time.perf_counter() - started
        applied = compaction.apply(plog, planned)
        total_s = time.perf_counter() - started
        results["compaction"] = {
            "plan_s": round(planned_s, 2),
            "apply_s": round(total_s - planned_s, 2),
            "seconds": round(total_s, 2),
            "records_per_s": round(planned.records_before / max(total_s, 1e-9)),
            "records_before": planned.records_before,
            "records_after": planned.records_after,
            "tombstones_dropped": planned.tombstones_dropped,
            "segments_before": segments,
            "segments_after": plog.segment_count,
            "bytes_before": before,
            "bytes_after": plog.size_bytes,
            "segments_replaced": applied.segments_replaced,
        }
        started = time.perf_counter()
        again = compaction.plan(
            plog.older_segments(), BASE_TS + 10**9, delete_retention_ms=1000, group_bytes=args.segment_bytes
        )
        results["compaction_again"] = {
            "seconds": round(time.perf_counter() - started, 2),
            "groups_rewritten": len(again.groups),
        }
        plog.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
