"""The group coordinator core's requests that name thousands of things at once, side by side with another tree.

Usage::

    .venv/bin/python bench/core_bulk.py                                 # this tree, 10,000 of each
    .venv/bin/python bench/core_bulk.py --before /tmp/old/src --rounds 2

Cases (each timed in process, one core call, the collector's work included; a fresh coordinator per sample):

* ``offset-delete``: OffsetDelete of the 10,000 partitions of a topic the cluster has, every one committed by
  an empty group (10,000 tombstones);
* ``delete-groups``: DeleteGroups of 10,000 empty groups, each with one committed offset (20,000 records: the
  offsets' tombstones and the groups').

Each tree runs in a child process of its own (``PYTHONPATH`` its ``src``); reported: the best and the median
of ``--runs`` samples in milliseconds, and the ratio before / after.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
THIS_SRC = HERE.parent.parent / "src"
CASES = ("offset-delete", "delete-groups")


def _offset_delete(n: int) -> Callable[[], Any]:
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.coordinator.coordinator import GroupCoordinator
    from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
    from regroup.protocol import offsets as po

    coordinator = GroupCoordinator(CoordinatorConfig())
    coordinator.update_metadata(ClusterImage.of([TopicImage(topic_id=topic_id_for("t"), name="t", partitions=n)]), 0)
    commits = tuple(po.PartitionCommit(partition=p, offset=p) for p in range(n))
    coordinator.offset_commit(po.OffsetCommitRequest(group_id="g", topics=(("t", commits),)), "c", 0)
    request = po.OffsetDeleteRequest(group_id="g", topics=(("t", tuple(range(n))),))

    def run() -> Any:
        result = coordinator.offset_delete(request, "d", 1)
        assert len(result.records) == n, len(result.records)
        return result

    return run


def _delete_groups(n: int) -> Callable[[], Any]:
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.coordinator.coordinator import GroupCoordinator
    from regroup.protocol import offsets as po

    coordinator = GroupCoordinator(CoordinatorConfig())
    one = (("t", (po.PartitionCommit(partition=0, offset=1),)),)
    names = [f"g{i}" for i in range(n)]
    for name in names:
        coordinator.offset_commit(po.OffsetCommitRequest(group_id=name, topics=one), name, 0)

    def run() -> Any:
        result = coordinator.delete_groups(names, "d", 1)
        assert len(result.records) == 2 * n, len(result.records)
        return result

    return run


SETUPS: dict[str, Callable[[int], Callable[[], Any]]] = {
    "offset-delete": _offset_delete,
    "delete-groups": _delete_groups,
}


def measure(n: int, runs: int, cases: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {case: [] for case in cases}
    for case in cases:
        for _ in range(runs):
            run = SETUPS[case](n)
            started = time.perf_counter()
            run()
            out[case].append(time.perf_counter() - started)
    return out


def _subprocess(src: Path, n: int, runs: int, cases: list[str]) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, str(HERE), "--worker", "-n", str(n), "--runs", str(runs), "--cases", ",".join(cases)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    result: dict[str, list[float]] = json.loads(done.stdout)
    return result


def _table(trees: dict[str, dict[str, list[float]]], cases: list[str]) -> str:
    lines = ["| case | tree | best ms | median ms |", "|---|---|---|---|"]
    for case in cases:
        for tree, samples in trees.items():
            values = samples[case]
            lines.append(f"| {case} | {tree} | {min(values) * 1e3:.1f} | {statistics.median(values) * 1e3:.1f} |")
        if len(trees) == 2:
            before, after = trees["before"][case], trees["after"][case]
            ratio = statistics.median(before) / statistics.median(after)
            lines.append(f"| {case} | before / after | | {ratio:.1f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="partitions, groups")
    parser.add_argument("--runs", type=int, default=3, help="samples per tree and round")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    parser.add_argument("--before", type=Path, help="the src directory of the tree to compare with")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds with --before")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in SETUPS]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    if args.worker:
        print(json.dumps(measure(args.n, args.runs, cases)))
        return
    print(f"core bulk requests, n={args.n}, {datetime.datetime.now():%Y-%m-%d %H:%M}")
    trees: dict[str, dict[str, list[float]]] = {}
    sources = [("before", args.before), ("after", THIS_SRC)] if args.before else [("after", THIS_SRC)]
    for _ in range(args.rounds):
        for tree, src in sources:
            for case, samples in _subprocess(src, args.n, args.runs, cases).items():
                trees.setdefault(tree, {}).setdefault(case, []).extend(samples)
    print(_table(trees, cases))


if __name__ == "__main__":
    main()
