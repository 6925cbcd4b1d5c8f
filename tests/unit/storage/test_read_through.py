"""``PartitionLog.read(..., through_offset=)``: a share fetch reads the batches the records it may acquire
need, and no more; ``max_bytes`` and ``min_one`` still apply."""

from __future__ import annotations

from pathlib import Path

from regroup.storage.partition_log import PartitionLog
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch


def batch_bases(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        out.append(int.from_bytes(data[pos : pos + 8], "big", signed=True))
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    return out


def test_the_read_stops_after_the_batch_holding_the_offset(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    for _ in range(10):
        plog.append(make_batch([b"x" * 20] * 10))  # batches at 0, 10, ..., 90
    assert batch_bases(plog.read(0, 1 << 20)) == list(range(0, 100, 10))
    assert batch_bases(plog.read(0, 1 << 20, through_offset=0)) == [0]
    assert batch_bases(plog.read(5, 1 << 20, through_offset=24)) == [0, 10, 20]
    assert batch_bases(plog.read(30, 1 << 20, through_offset=30)) == [30]
    assert batch_bases(plog.read(0, 1, through_offset=50)) == [0]  # min_one: the first batch even past max_bytes
    assert plog.read(0, 1, min_one=False, through_offset=50) == b""
    plog.close()
