"""What a large consumer group's new target costs the server's group events, in process: the ``group_assignment``
rows of one target (one per partition of every member's target) made and handed to the rebalance history
(``HistoryFeed``: the timeline's fold and its segment files) and the console's stream (``EventHub``, nobody
subscribed), with and without an ``--events`` file, as ``regroup serve --http-port`` wires them.

Usage::

    .venv/bin/python bench/event_rows.py                          # this tree
    .venv/bin/python bench/event_rows.py --before /tmp/base/src   # and another tree's, alternated

A group of ``--members`` members, each target one partition per member over ten topics (``--partitions`` per
member for more). The same target is handed in ``--targets`` times in a row (an unchanged member's target is
the very same object each time, as the coordinator hands it), each as a new assignment epoch: the first
target of the group is reported apart from the median of the ones after it. Each figure is wall time in ms
for one target, all its rows handed out, the history flushed to its file. The
collector runs as it would: a figure includes the collections the rows cause. A group of the same size goes
first, unmeasured (the heap's growth, paid once by a process). Each tree runs in a subprocess of its own;
rounds alternate before, after, after, before, ... and the summary gives the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _measure(members: int, partitions: int, targets: int, with_file: bool) -> tuple[float, float]:
    from regroup.console.sse import EventHub
    from regroup.coordinator.coordinator import GroupCoordinator
    from regroup.coordinator.events import GroupStateChanged, TargetComputed
    from regroup.coordinator.result import Result
    from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
    from regroup.server.events import GroupEvents
    from regroup.server.history_feed import HistoryFeed

    topics = 10
    per_topic = members * partitions // topics + 1
    coordinator = GroupCoordinator()
    coordinator.update_metadata(
        ClusterImage.of(
            TopicImage(topic_id=topic_id_for(f"t{i}"), name=f"t{i}", partitions=per_topic) for i in range(topics)
        ),
        0,
    )
    first = [j // topics * partitions for j in range(members)]
    held = tuple(
        (f"member-{j:06d}", f"client-{j}", {topic_id_for(f"t{j % topics}"): frozenset(range(p, p + partitions))})
        for j, p in enumerate(first)
    )

    def result(*events: Any) -> Result:
        out = Result()
        out.events.extend(events)
        return out

    with tempfile.TemporaryDirectory(prefix="regroup-bench-rows-") as tmp:
        directory = Path(tmp)
        events = GroupEvents(directory / "events.jsonl" if with_file else None)
        feed = HistoryFeed(directory, 86_400_000, lambda: int(time.time() * 1000))
        hub = EventHub()
        if hasattr(feed, "sink_run"):  # (a tree whose sinks take a run's pieces)
            events.add_sink(feed.sink, feed.sink_run)  # type: ignore[call-arg]
            events.add_sink(hub.publish, lambda piece: hub.publish_lines(piece.lines))  # type: ignore[call-arg]
        else:
            events.add_sink(feed.sink)
            events.add_sink(hub.publish)
        state = GroupStateChanged("g", "consumer", "Reconciling", 2, "uniform", None, None, 1, members)
        events(coordinator, result(state), 1)
        figures = []
        for k in range(targets):
            began = time.perf_counter()
            events(coordinator, result(TargetComputed("g", 2 + k, "uniform", held)), 2 + k)
            events._drain_all()  # (no event loop here: every row handed out within the call anyway)
            feed.flush()
            figures.append((time.perf_counter() - began) * 1e3)
        events.close()
        return figures[0], statistics.median(figures[1:])


def child(members: int, partitions: int, targets: int) -> int:
    _measure(members, partitions, 2, False)  # (warming up: the heap's growth, paid once by a process)
    out = [_measure(members, partitions, targets, with_file) for with_file in (False, True)]
    print(json.dumps(out))
    return 0


def run_tree(source: str | None, members: int, partitions: int, targets: int) -> list[list[float]]:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, __file__, "--child", "--members", str(members), "--partitions", str(partitions)]
    out = subprocess.run([*argv, "--targets", str(targets)], env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"event_rows: a run failed: {out.stderr.strip().splitlines()[-1:]}")
    figures: list[list[float]] = json.loads(out.stdout)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--before", metavar="DIR", help="also measure the regroup package under DIR")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--members", type=int, default=10_000, help="members of the group (default 10000)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions per member (default 1)")
    parser.add_argument("--targets", type=int, default=8, help="targets handed in per run (default 8)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.members < 1 or args.partitions < 1 or args.targets < 2 or args.rounds < 1:
        parser.error("--members and --partitions must be at least 1, --targets at least 2, --rounds at least 1")
    if args.child:
        return child(args.members, args.partitions, args.targets)
    trees: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        trees = [("before", args.before), ("after", None)]
    figures: dict[str, list[list[list[float]]]] = {name: [] for name, _ in trees}
    for round_ in range(args.rounds):
        order = trees if round_ % 2 == 0 else list(reversed(trees))
        for name, source in order:
            result = run_tree(source, args.members, args.partitions, args.targets)
            figures[name].append(result)
            (bare_first, bare_next), (file_first, file_next) = result
            print(
                f"round {round_ + 1} {name}: history+stream first {bare_first:.1f} ms, next {bare_next:.1f} ms; "
                f"with the events file first {file_first:.1f} ms, next {file_next:.1f} ms",
                flush=True,
            )
    rows = args.members * args.partitions
    print(f"\n{rows:,} rows a target, median over {args.rounds} rounds (ms per target)\n")
    print("| tree | first target | next targets | first, events file | next, events file |")
    print("|---|---|---|---|---|")
    medians: dict[str, list[float]] = {}
    for name, _ in trees:
        runs = figures[name]
        medians[name] = [statistics.median(r[w][k] for r in runs) for w in (0, 1) for k in (0, 1)]
        print(f"| {name} | " + " | ".join(f"{m:.1f}" for m in medians[name]) + " |")
    if args.before:
        ratios = [b / a for b, a in zip(medians["before"], medians["after"], strict=True)]
        print("| before / after | " + " | ".join(f"{r:.1f}x" for r in ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
