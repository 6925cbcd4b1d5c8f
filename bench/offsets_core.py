"""OffsetCommit of many partitions, measured in process: the server handler's synchronous part (checks, and the
core's request built from kio's decoded entity) and the core's ``GroupCoordinator.offset_commit`` (validation,
records, their application to the offset store, the event). Together they are the request's first step on the
event loop; encoding the answer (paced, ``server/offset_answers.py``) and decoding the frame (off the loop) are
not counted.

The group is a classic group with one member at generation 1 (``--group member``) or a commit from outside
any group (``--group anonymous``: generation -1, the group exists after the warm-up commit). Each sample commits
every partition again with new offsets, so the store replaces entries as a consumer's steady state does.

``--before DIR`` measures the tree whose ``src`` is ``DIR`` too (``git worktree add /tmp/offsets-before HEAD``,
then ``--before /tmp/offsets-before/src``): both trees run in subprocesses, in alternating rounds, and a table
gives best and median per tree and their ratio::

    .venv/bin/python bench/offsets_core.py                       # this tree only, in process
    .venv/bin/python bench/offsets_core.py --before /tmp/offsets-before/src
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
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
TOPIC, GROUP = "offsets-core", "offsets-core-group"
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def _coordinator(group: str) -> tuple[Any, int, str]:
    """A coordinator with the group formed: (coordinator, generation, member id)."""
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.coordinator.coordinator import GroupCoordinator
    from regroup.protocol.classic import JoinGroupRequest, SyncGroupRequest

    coordinator = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    if group == "anonymous":
        return coordinator, -1, ""
    join: dict[str, Any] = {
        "group_id": GROUP,
        "session_timeout_ms": 3_600_000,
        "rebalance_timeout_ms": 60_000,
        "protocol_type": "consumer",
        "protocols": (("range", b""),),
    }
    first = coordinator.join_group(JoinGroupRequest(**join), "j0", 0).response_for("j0")
    joined = coordinator.join_group(JoinGroupRequest(member_id=first.member_id, **join), "j1", 0)
    response = joined.response_for("j1")
    if response is None:  # the join phase ends on its (zero) delay timer
        response = coordinator.advance(1).response_for("j1")
    member, generation = response.member_id, response.generation_id
    sync = SyncGroupRequest(group_id=GROUP, generation_id=generation, member_id=member, assignments=((member, b""),))
    coordinator.sync_group(sync, "s", 1)
    return coordinator, generation, member


def _kio_request(n: int, generation: int, member: str, offset: int) -> Any:
    """The kio entity the server decodes for an OffsetCommit v9 of partitions 0..n-1 of one topic."""
    from kio.schema.offset_commit.v9.request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kio.static.primitive import i32, i64

    partitions = tuple(
        OffsetCommitRequestPartition(
            partition_index=i32(p),
            committed_offset=i64(offset + p),
            committed_leader_epoch=i32(3),
            committed_metadata="",
        )
        for p in range(n)
    )
    return OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=i32(generation),
        member_id=member,
        group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=TOPIC, partitions=partitions),),
    )


class _Topics:
    def __init__(self, n: int) -> None:
        import uuid

        from regroup.server.api import TopicInfo

        self._topics = {TOPIC: TopicInfo(name=TOPIC, topic_id=uuid.uuid4(), partitions=n)}

    def topics(self) -> dict[str, Any]:
        return self._topics


class _Service:
    """The broker's coordinator as the handler sees it: ``call`` notes when the handler reached it (the end of
    its synchronous part) and times the core's operation on its own."""

    def __init__(self, coordinator: Any, clock: Callable[[], float]) -> None:
        self.coordinator = coordinator
        self.clock = clock
        self.now_ms = 1_000
        self.reached = 0.0
        self.core_s = 0.0

    async def call(self, op: Any, *, may_park: bool = False) -> Any:
        self.reached = self.clock()
        self.now_ms += 1
        start = self.clock()
        result = op(self.coordinator, "k", self.now_ms)
        self.core_s = self.clock() - start
        return result.response_for("k")


class _Broker:
    def __init__(self, n: int, service: _Service) -> None:
        self.topic_store = _Topics(n)
        self.coordinator = service
        self.authorizer = None


def measure(n: int, runs: int, group: str, clock_name: str = "cpu", cold: bool = False) -> dict[str, list[float]]:
    """Seconds per sample of: the handler's synchronous part, the core's call, and their sum (``clock_name``:
    ``cpu``, the process's CPU time, steady on a shared machine; ``wall``, elapsed time). ``cold``: each sample
    is the first commit of the partitions, to a coordinator of its own."""
    clock = CLOCKS[clock_name]
    from regroup.server.api import RequestContext
    from regroup.server.handlers.offsets import offset_commit as handle

    coordinator, generation, member = _coordinator(group)
    service = _Service(coordinator, clock)
    broker = _Broker(n, service)
    ctx = RequestContext(
        api_key=8, api_version=9, correlation_id=1, client_id="bench", client_host="127.0.0.1", connection_id=1
    )
    requests = [_kio_request(n, generation, member, 1_000 * i) for i in range(2)]
    out: dict[str, list[float]] = {"handler": [], "core": [], "total": []}
    loop = asyncio.new_event_loop()
    try:
        for i in range(runs + 1):  # the first one warms up (and creates the anonymous group)
            request = requests[i % 2]
            if cold and i:
                coordinator, generation, member = _coordinator(group)
                service.coordinator = coordinator
                request = _kio_request(n, generation, member, i)
            gc.collect()  # each sample starts with the collector's young generations empty (not timed)
            start = clock()
            response = loop.run_until_complete(handle(broker, ctx, request))
            assert response is not None
            handler = service.reached - start
            if i:
                out["handler"].append(handler)
                out["core"].append(service.core_s)
                out["total"].append(handler + service.core_s)
    finally:
        loop.close()
    committed = coordinator.offsets.of(GROUP)
    assert len(committed) == n, f"{len(committed)} offsets committed, {n} expected"
    return out


def _subprocess(src: Path, n: int, runs: int, group: str, clock: str, cold: bool) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, str(HERE), "--worker", "-n", str(n), "--runs", str(runs), "--group", group]
    command += ["--clock", clock] + (["--cold"] if cold else [])
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    result: dict[str, list[float]] = json.loads(done.stdout)
    return result


def _ms(values: list[float]) -> tuple[float, float]:
    return min(values) * 1e3, statistics.median(values) * 1e3


def _table(trees: dict[str, dict[str, list[float]]]) -> str:
    lines = [f"{'step':<9} {'tree':<7} {'best ms':>9} {'median ms':>10}"]
    for step in ("handler", "core", "total"):
        for tree, samples in trees.items():
            best, median = _ms(samples[step])
            lines.append(f"{step:<9} {tree:<7} {best:>9.2f} {median:>10.2f}")
        if len(trees) == 2:
            (before, after) = (trees["before"][step], trees["after"][step])
            ratio_best = min(before) / min(after)
            ratio_median = statistics.median(before) / statistics.median(after)
            lines.append(f"{step:<9} {'ratio':<7} {ratio_best:>8.2f}x {ratio_median:>9.2f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="partitions per commit")
    parser.add_argument("--runs", type=int, default=15, help="samples per tree")
    parser.add_argument("--group", choices=("member", "anonymous"), default="member")
    parser.add_argument("--before", type=Path, help="the src directory of the tree to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds with --before")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="what a sample measures")
    parser.add_argument("--cold", action="store_true", help="time each group's first commit of the partitions")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.n, args.runs, args.group, args.clock, args.cold)))
        return
    when = f"{datetime.datetime.now():%Y-%m-%d %H:%M}"
    kind = f"{args.group}, {args.clock} time" + (", first commit" if args.cold else "")
    print(f"OffsetCommit of {args.n} partitions ({kind}), {when}")
    if args.before is None:
        print(_table({"after": measure(args.n, args.runs, args.group, args.clock, args.cold)}))
        return
    per_round = max(1, args.runs // args.rounds)
    trees: dict[str, dict[str, list[float]]] = {
        "before": {"handler": [], "core": [], "total": []},
        "after": {"handler": [], "core": [], "total": []},
    }
    for _ in range(args.rounds):
        for tree, src in (("before", args.before), ("after", THIS_SRC)):
            samples_by_step = _subprocess(src, args.n, per_round, args.group, args.clock, args.cold)
            for step, samples in samples_by_step.items():
                trees[tree][step].extend(samples)
    print(_table(trees))


if __name__ == "__main__":
    main()
