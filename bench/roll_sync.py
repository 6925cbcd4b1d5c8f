"""Segment rolls and handle-cache evictions on the event loop: how long does the owner's thread spend in an
append that rolls its partition's segment (or that closes another partition's unsynced segment), with a slow
disk and with this machine's?

Usage::

    .venv/bin/python bench/roll_sync.py                                # this tree, fsync slowed to 20 ms and real
    .venv/bin/python bench/roll_sync.py --before /tmp/rollbase/src     # and another tree's, side by side
    .venv/bin/python bench/roll_sync.py --delays 50 --appends 4000 --json /tmp/roll-sync.json

For each tree (``--before DIR`` first, then this tree), each fsync delay (``--delays``, ms added to every
fsync of a segment or a directory the partition logs make; 0: the real disk only), each policy (``always``,
``interval``) and each case, a child process running that tree's ``regroup`` opens a topic store in a
temporary directory (``--dir``, default the system's; it should be on the disk to measure) and drives it on an
asyncio loop as the produce handler does: ``--producers`` coroutines, each appending one batch of
``--batch-bytes`` at a time to a partition (round robin) and, under ``always``, waiting for the group commit
to have it on disk; under ``interval`` (``--interval-ms``) pausing 1 ms between appends. Cases:

- ``roll``: 4 partitions with ``segment.bytes`` ``--segment-bytes``: every so many appends one rolls;
- ``evict``: 32 partitions, a handle cache of 4 files (``open_files``): most appends close another partition's
  active segment, often with appends not yet fsynced.

Each append is timed on the loop's thread (``time.perf_counter`` around ``PartitionLog.append``). Reported: the
appends and rolls, the longest append that rolled, the longest other append, the 99th percentile of all, and
the appends per second. Bounds: a case stops after ``--appends`` appends or 120 s; only temporary directories
are written, and removed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import group_commit

CASES = ("roll", "evict")
POLICIES = ("always", "interval")


def record_batch(value_bytes: int) -> bytes:
    """One uncompressed v2 record batch of one record without key, stamped now."""
    return group_commit.record_batch(1, value_bytes, int(time.time() * 1000))


def child(src: str, delay_ms: float, policy: str, case: str, opts: dict[str, int]) -> dict[str, object]:
    """Run one case with the ``regroup`` under ``src`` (in this process); its numbers."""
    sys.path.insert(0, src)
    import asyncio

    import regroup
    from regroup.server.topics import TopicStore
    from regroup.storage import partition_log
    from regroup.storage.record_log import FsyncPolicy

    assert os.path.realpath(regroup.__file__).startswith(os.path.realpath(src)), regroup.__file__
    if delay_ms > 0:
        real_file, real_dir = partition_log._fsync_file, partition_log._fsync_dir

        def slow_file(fd: int) -> None:
            time.sleep(delay_ms / 1000)
            real_file(fd)

        def slow_dir(directory: Path) -> None:
            time.sleep(delay_ms / 1000)
            real_dir(directory)

        partition_log._fsync_file = slow_file  # type: ignore[assignment]
        partition_log._fsync_dir = slow_dir  # type: ignore[assignment]
    batch = record_batch(opts["batch_bytes"])
    fsync = FsyncPolicy.ALWAYS if policy == "always" else FsyncPolicy.INTERVAL
    partitions, open_files = (4, 256) if case == "roll" else (32, 4)
    segment = opts["segment_bytes"] if case == "roll" else 1 << 30
    times: list[tuple[float, bool]] = []
    with tempfile.TemporaryDirectory(dir=opts.get("dir") or None) as tmp:
        store = TopicStore.open(
            Path(tmp) / "d", fsync=fsync, fsync_interval_ms=opts["interval_ms"], open_files=open_files
        )
        store.create_topic("t", partitions, {"segment.bytes": str(segment)})
        logs = []
        for p in range(partitions):
            plog = store.partition("t", p)
            assert plog is not None
            plog.append(batch)  # (the partition's directory is created by its first append)
            plog.sync()
            logs.append(plog)
        deadline = time.monotonic() + 120
        count = [0]

        async def producer(i: int) -> None:
            while count[0] < opts["appends"] and time.monotonic() < deadline:
                plog = logs[count[0] % partitions]
                count[0] += 1
                segments = plog.segment_count
                started = time.perf_counter()
                plog.append(batch, sync=fsync is not FsyncPolicy.ALWAYS)
                took = time.perf_counter() - started
                times.append((took, plog.segment_count != segments))
                if fsync is FsyncPolicy.ALWAYS:
                    await store.group_sync.wait({plog: plog.written_end})
                else:
                    await asyncio.sleep(0.001)

        async def main() -> float:
            started = time.perf_counter()
            await asyncio.gather(*(producer(i) for i in range(opts["producers"])))
            elapsed = time.perf_counter() - started
            store.sync()
            await asyncio.sleep(0.5)
            return elapsed

        elapsed = asyncio.run(main())
        store.close()
    rolled = [t for t, r in times if r]
    other = sorted(t for t, r in times if not r)
    every = sorted(t for t, _ in times)
    return {
        "appends": len(times),
        "rolls": len(rolled),
        "max_roll_ms": max(rolled, default=0.0) * 1000,
        "max_other_ms": max(other, default=0.0) * 1000,
        "p99_ms": every[int(len(every) * 0.99)] * 1000 if every else 0.0,
        "per_s": len(times) / elapsed if elapsed else 0.0,
    }


def run_child(src: str, delay_ms: float, policy: str, case: str, opts: dict[str, int]) -> dict[str, object]:
    args = [sys.executable, __file__, "--child", json.dumps([src, delay_ms, policy, case, opts])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{src} {case} {policy}: the child failed:\n{done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--before", metavar="DIR", help="also run the regroup package under DIR (another tree's src)")
    parser.add_argument("--delays", default="20,0", help="ms added to each fsync, comma-separated (20,0; 0: real)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--appends", type=int, default=2000, help="appends per case (2000)")
    parser.add_argument("--producers", type=int, default=8, help="concurrent producers (8)")
    parser.add_argument("--batch-bytes", type=int, default=1000, help="record value bytes per batch (1000)")
    parser.add_argument("--segment-bytes", type=int, default=256 * 1024, help="segment.bytes of case roll (262144)")
    parser.add_argument("--interval-ms", type=int, default=100, help="--fsync interval's interval (100)")
    parser.add_argument("--dir", default="", help="where the temporary stores go (the system's temp directory)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        src, delay, policy, case, opts = json.loads(args.child)
        print(json.dumps(child(src, delay, policy, case, opts)))
        return
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = [("after", here)]
    if args.before:
        trees.insert(0, ("before", args.before))
    opts = {
        "appends": args.appends,
        "producers": args.producers,
        "batch_bytes": args.batch_bytes,
        "segment_bytes": args.segment_bytes,
        "interval_ms": args.interval_ms,
        "dir": args.dir,
    }
    rows = []
    print(f"{'case':6} {'fsync':9} {'delay':>6} {'tree':7} {'appends':>8} {'rolls':>6} {'max roll':>9} "
          f"{'max other':>10} {'p99':>8} {'appends/s':>10}")  # fmt: skip
    for case in args.cases.split(","):
        for policy in POLICIES:
            for delay in (float(d) for d in args.delays.split(",")):
                for tree, src in trees:
                    r = run_child(src, delay, policy, case, opts)
                    rows.append({"case": case, "policy": policy, "delay_ms": delay, "tree": tree, **r})
                    print(f"{case:6} {policy:9} {delay:>4.0f}ms {tree:7} {r['appends']:>8} {r['rolls']:>6} "
                          f"{r['max_roll_ms']:>7.1f}ms {r['max_other_ms']:>8.1f}ms {r['p99_ms']:>6.1f}ms "
                          f"{r['per_s']:>10.0f}", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
