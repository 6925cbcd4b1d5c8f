"""What the server's background work costs the event loop at many partitions and topics (docs/benchmarks.md).

Usage::

    .venv/bin/python bench/cleaner.py pass      # one cleaning pass over 10 topics x 1,000 partitions
    .venv/bin/python bench/cleaner.py image     # the cluster image rebuilt after one topic change
    .venv/bin/python bench/cleaner.py recovery  # opening a data dir of 10,000 partitions with segments

``pass`` builds a topic store (``--fsync never``) of ``--topics`` topics of ``--partitions`` partitions, each
partition ``--segments`` rolled segments of one small batch plus an active one: the first topic compacted, the
next ``--expiring`` with ``retention.ms`` small enough that every rolled segment is deleted, the others keeping
everything. It then runs :meth:`LogCleaner.run_async` on an event loop beside a task that yields back to back
and reports the whole pass, the longest time the loop was held (the longest gap between two of that task's
turns) and the time spent before the pass first yields. ``image`` times ``_feed_image``'s work (the image
and the coordinator's ``update_metadata``) after one topic is created among ``--topics`` topics.
``recovery`` times ``TopicStore.open`` over a store ``pass`` built (``--keep DIR``; ``--reuse`` runs ``pass``
again on a copy of that store instead of building it anew).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

from crc32c import crc32c

from regroup.server.log_cleaner import LogCleaner
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy

BASE_TS = 1_700_000_000_000


def _batch(key: bytes, value: bytes, ts: int) -> bytes:
    def zz(v: int) -> bytes:
        v = (v << 1) ^ (v >> 63)
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                out.append(b | 0x80)
            else:
                out.append(b)
                return bytes(out)

    body = b"\x00" + zz(0) + zz(0) + zz(len(key)) + key + zz(len(value)) + value + b"\x00"
    records = zz(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, ts, ts, -1, -1, -1, 1) + records
    return struct.pack(">qiibI", 0, len(after_crc) + 9, -1, 2, crc32c(after_crc)) + after_crc


def build(directory: Path, topics: int, partitions: int, segments: int, expiring: int) -> None:
    store = TopicStore.open(directory, fsync=FsyncPolicy.NEVER, max_partitions=1_000_000)
    try:
        for t in range(topics):
            if t == 0:
                configs = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
            elif t <= expiring:
                configs = {"retention.ms": "60000"}
            else:
                configs = {"retention.ms": "-1", "retention.bytes": "-1"}
            name = f"t{t}"
            store.create_topic(name, partitions, configs)
            for p in range(partitions):
                plog = store.partition(name, p)
                assert plog is not None
                for s in range(segments + 1):
                    plog.append(_batch(b"k%d" % (s % 2), b"v" * 32, BASE_TS + s), sync=False)
                    if s < segments:
                        plog.roll_active()
    finally:
        store.close()


async def _timed_pass(cleaner: LogCleaner, now_ms: int) -> dict[str, float]:
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = time.perf_counter()
    report = await cleaner.run_async(lambda: now_ms)
    total = time.perf_counter() - start
    done = True
    await tick
    print(f"  report: rolled={report.rolled} deleted={report.segments_deleted} compacted={report.compacted} "
          f"failures={len(report.failures)}")  # fmt: skip
    return {
        "pass_ms": total * 1000,
        "longest_turn_ms": max(gaps) * 1000,
        "p99_turn_ms": statistics.quantiles(gaps, n=100)[98] * 1000 if len(gaps) > 100 else max(gaps) * 1000,
        "turns": len(gaps),
    }


def cmd_pass(args: argparse.Namespace) -> None:
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cleaner-"))
    try:
        if root.exists():
            shutil.rmtree(root)
        pristine = Path(str(root) + ".pristine")
        if args.keep and args.reuse and pristine.exists():
            shutil.copytree(pristine, root)
            print(f"reusing {pristine}")
        else:
            t0 = time.perf_counter()
            build(root, args.topics, args.partitions, args.segments, args.expiring)
            print(f"built {args.topics} x {args.partitions} partitions in {time.perf_counter() - t0:.1f} s")
            if args.keep:
                shutil.rmtree(pristine, ignore_errors=True)
                shutil.copytree(root, pristine)
        store = TopicStore.open(root, fsync=FsyncPolicy.NEVER, max_partitions=1_000_000)
        try:
            cleaner = LogCleaner(store, store.configs.policy)
            now = BASE_TS + 10_000_000
            for label in ("first pass (deletes, compacts)", "second pass (nothing to do)"):
                result = asyncio.run(_timed_pass(cleaner, now))
                print(f"{label}: " + ", ".join(f"{k}={v:.2f}" for k, v in result.items()))
        finally:
            store.close()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def cmd_recovery(args: argparse.Namespace) -> None:
    source = Path(args.keep + ".pristine")
    target = Path(tempfile.mkdtemp(prefix="recovery-")) / "d"
    shutil.copytree(source, target)
    try:
        t0 = time.perf_counter()
        store = TopicStore.open(target, fsync=FsyncPolicy.NEVER, max_partitions=1_000_000)
        opened = time.perf_counter() - t0
        n = sum(1 for _ in store.loaded_partitions())
        t1 = time.perf_counter()
        LogCleaner(store, store.configs.policy).run_once(BASE_TS + 10_000_000)
        first = time.perf_counter() - t1
        store.close()
        print(f"open: {opened * 1000:.0f} ms for {n} partitions; startup pass (run_once): {first * 1000:.0f} ms")
    finally:
        shutil.rmtree(target.parent, ignore_errors=True)


def cmd_image(args: argparse.Namespace) -> None:
    from regroup.coordinator.coordinator import GroupCoordinator
    from regroup.server.api import TopicInfo
    from regroup.server.image import ImageFeed, cluster_image

    for n in (int(x) for x in args.sizes.split(",")):
        topics = {f"topic-{i}": TopicInfo(f"topic-{i}", uuid.uuid4(), 1 + i % 7) for i in range(n)}
        scratch_core, feed_core = GroupCoordinator(), GroupCoordinator()
        scratch_core.update_metadata(cluster_image(topics, "r1"), 0)
        feed = ImageFeed("r1")
        feed_core.update_metadata(feed.image(topics), 0)
        times: dict[str, list[float]] = {"copy": [], "scratch": [], "scratch_core": [], "feed": [], "feed_core": []}
        for r in range(args.rounds):
            name = f"new-{r}"
            topics[name] = TopicInfo(name, uuid.uuid4(), 3)
            marks = [time.perf_counter()]
            current = dict(topics)  # TopicStore.topics() is a copy
            marks.append(time.perf_counter())
            image = cluster_image(current, "r1")
            marks.append(time.perf_counter())
            scratch_core.update_metadata(image, r)
            marks.append(time.perf_counter())
            incremental = feed.image(current)
            marks.append(time.perf_counter())
            feed_core.update_metadata(incremental, r)
            marks.append(time.perf_counter())
            assert incremental == image
            for key, a, b in zip(times, marks[:-1], marks[1:], strict=True):
                times[key].append((b - a) * 1000)
        med = {key: statistics.median(v) for key, v in times.items()}
        print(f"{n} topics, one created (medians of {args.rounds}, ms): topics() copy {med['copy']:.2f}; "
              f"from scratch: image {med['scratch']:.2f} + coordinator {med['scratch_core']:.2f} = "
              f"{med['copy'] + med['scratch'] + med['scratch_core']:.2f}; ImageFeed: image {med['feed']:.2f} + "
              f"coordinator {med['feed_core']:.2f} = {med['copy'] + med['feed'] + med['feed_core']:.2f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["pass", "image", "recovery"])
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=3)
    parser.add_argument("--expiring", type=int, default=3)
    parser.add_argument("--keep", help="build the store here (and a .pristine copy for recovery)")
    parser.add_argument("--reuse", action="store_true", help="with --keep: start from the .pristine copy")
    parser.add_argument("--sizes", default="3000,10000")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    {"pass": cmd_pass, "image": cmd_image, "recovery": cmd_recovery}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
