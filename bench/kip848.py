"""KIP-848 benchmarks, side by side in one run (the machine is shared and noisy: compare ratios).

Usage::

    .venv/bin/python bench/kip848.py                          # everything, default sizes
    .venv/bin/python bench/kip848.py --hb-members 10000 --join-members 1000 --profile
    .venv/bin/python bench/kip848.py --json /tmp/bench-kip848.json

**Core heartbeats** (``--hb-members``, default 10,000): a ``GroupCoordinator`` driven directly. The members
join one by one (epoch 0, full requests) while the cluster image has no topics, so building the group does
not run the assignor 10,000 times; then the topics appear (10 topics x 1,000 partitions), one heartbeat
computes the target for the whole group (timed: ``target_ms``), and every member heartbeats until it owns
its assignment. The measured window is steady state: ``--hb-rounds`` rounds of one non-full heartbeat per
member (epoch, no changed field) through ``consumer_group_heartbeat``; each call is timed, giving calls per
second and p50/p99/max latency. ``--profile`` prints where the target computation spends its time.

**Joining a 1,000-member group** (``--join-members``), classic cooperative vs KIP-848, on the simulator
(virtual time): the group forms (cooperative-sticky members, or consumer-protocol members with the uniform
assignor), then one more member joins. Reported: simulated milliseconds from its ``join`` action until it
runs ``onPartitionsAssigned`` with a non-empty set, and the rebalance rounds (classic: JoinGroup
generations; KIP-848: group epochs) the group went through, plus the wall time the simulation took.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from typing import Any

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from regroup.sim.engine import Simulator
from regroup.sim.scenario import LinkSpec, MemberSpec, Scenario, ScenarioEvent

GROUP = "bench"
TOPICS = {f"topic-{i}": 1_000 for i in range(10)}


def _image(topics: dict[str, int]) -> ClusterImage:
    return ClusterImage.of(TopicImage(topic_id=topic_id_for(t), name=t, partitions=n) for t, n in topics.items())


def _heartbeat(c: GroupCoordinator, key: int, now: int, **fields: Any) -> ConsumerGroupHeartbeatResponse:
    result = c.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(group_id=GROUP, **fields), key, now)
    response = result.response_for(key)
    assert isinstance(response, ConsumerGroupHeartbeatResponse)
    return response


def core_heartbeats(members: int, rounds: int, profile: bool) -> dict[str, Any]:
    config = CoordinatorConfig(consumer_group_session_timeout_ms=3_600_000, consumer_group_heartbeat_interval_ms=5_000)
    c = GroupCoordinator(config)
    c.update_metadata(ClusterImage(), 0)
    now, key = 0, 0
    epochs: dict[str, int] = {}
    owned: dict[str, Any] = {}
    started = time.perf_counter()
    for i in range(members):
        key += 1
        member_id = f"m{i:05d}"
        r = _heartbeat(
            c, key, now, member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
            subscribed_topic_names=tuple(TOPICS), topic_partitions=(),
        )  # fmt: skip
        epochs[member_id] = r.member_epoch
        owned[member_id] = ()
    join_s = time.perf_counter() - started
    now += 1
    c.update_metadata(_image(TOPICS), now)
    profiler = cProfile.Profile() if profile else None
    first = next(iter(epochs))
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    key += 1
    r = _heartbeat(c, key, now, member_id=first, member_epoch=epochs[first])  # computes the target
    if profiler is not None:
        profiler.disable()
    target_ms = (time.perf_counter() - started) * 1_000
    epochs[first] = r.member_epoch
    if r.assignment is not None:
        owned[first] = r.assignment
    # everyone picks up its assignment and reports it (two heartbeats each: receive, acknowledge)
    for _ in range(2):
        for member_id in epochs:
            key += 1
            r = _heartbeat(
                c, key, now, member_id=member_id, member_epoch=epochs[member_id], topic_partitions=owned[member_id]
            )
            epochs[member_id] = r.member_epoch
            if r.assignment is not None:
                owned[member_id] = r.assignment
    group = c.consumer_groups[GROUP]
    assert group.state().value == "Stable", group.state()
    latencies: list[float] = []
    started = time.perf_counter()
    for _ in range(rounds):
        now += 1
        for member_id, epoch in epochs.items():
            key += 1
            t0 = time.perf_counter()
            r = c.consumer_group_heartbeat(
                ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id=member_id, member_epoch=epoch), key, now
            ).response_for(key)
            latencies.append(time.perf_counter() - t0)
            assert r.error.value == 0
    window = time.perf_counter() - started
    latencies.sort()
    out: dict[str, Any] = {
        "members": members,
        "partitions": sum(TOPICS.values()),
        "join_all_s": round(join_s, 2),
        "target_ms": round(target_ms, 1),
        "heartbeats": len(latencies),
        "heartbeats_per_s": round(len(latencies) / window),
        "p50_us": round(latencies[len(latencies) // 2] * 1e6, 1),
        "p99_us": round(latencies[int(len(latencies) * 0.99)] * 1e6, 1),
        "max_us": round(latencies[-1] * 1e6, 1),
    }
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(18)
        out["target_profile"] = text.getvalue()
    return out


def join_scenario(protocol: str, members: int) -> Scenario:
    names = [f"c{i:04d}" for i in range(members + 1)]
    join_at = 60_000
    specs = tuple(
        MemberSpec(
            name=name,
            topics=tuple(TOPICS),
            strategies=("cooperative-sticky",),
            protocol=protocol,
            assignor="uniform",
            session_timeout_ms=45_000,
            heartbeat_interval_ms=3_000,
            rebalance_timeout_ms=60_000,
            request_timeout_ms=30_000,
            auto_commit=False,
        )
        for name in names
    )
    events = [ScenarioEvent(at_ms=i * 10, action="join", member=name) for i, name in enumerate(names[:-1])]
    events.append(ScenarioEvent(at_ms=join_at, action="join", member=names[-1]))
    return Scenario(
        name=f"join-{protocol}-{members}",
        duration_ms=join_at + 60_000,
        measure_from_ms=join_at,
        topics={t: 100 for t in TOPICS},  # 1,000 partitions: one per member
        members=specs,
        events=tuple(events),
        network=LinkSpec(latency_ms=1),
        coordinator={
            "group_initial_rebalance_delay_ms": 0,
            "consumer_group_heartbeat_interval_ms": 3_000,
            "consumer_group_session_timeout_ms": 45_000,
        },
    )


def sim_join(protocol: str, members: int) -> dict[str, Any]:
    scenario = join_scenario(protocol, members)
    started = time.perf_counter()
    sim = Simulator(scenario, 0)
    sim.run()
    sim.finish()
    wall = time.perf_counter() - started
    joiner = scenario.members[-1].name
    join_at = scenario.events[-1].at_ms
    got = next(
        (e["t"] for e in sim.log.events if e["type"] == "assigned" and e["member"] == joiner and e["t"] >= join_at),
        None,
    )
    states = [e for e in sim.log.events if e["type"] == "group_state"]
    generations = {e["generation"] for e in states if e["t"] >= join_at and (got is None or e["t"] <= got)}
    before = max((e["generation"] for e in states if e["t"] < join_at), default=0)
    return {
        "protocol": "classic cooperative" if protocol == "classic" else "KIP-848 consumer",
        "members_before": members,
        "time_to_partitions_ms": None if got is None else got - join_at,
        "rounds": len([g for g in generations if g > before]),
        "violations": len(sim.checker.violations),
        "quiescent_at_end": sim.quiescent(),
        "sim_wall_s": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hb-members", type=int, default=10_000)
    parser.add_argument("--hb-rounds", type=int, default=3)
    parser.add_argument("--join-members", type=int, default=1_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"python": sys.version.split()[0]}
    core = core_heartbeats(args.hb_members, args.hb_rounds, args.profile)
    profile = core.pop("target_profile", None)
    results["core_heartbeats"] = core
    print("core heartbeats:", json.dumps(core), flush=True)
    if profile:
        print(profile, flush=True)
    joins = [sim_join(protocol, args.join_members) for protocol in ("classic", "consumer")]
    results["sim_join"] = joins
    for row in joins:
        print("simulator join:", json.dumps(row), flush=True)
    classic, consumer = joins
    if classic["time_to_partitions_ms"] and consumer["time_to_partitions_ms"]:
        ratio = classic["time_to_partitions_ms"] / consumer["time_to_partitions_ms"]
        results["sim_join_ratio_classic_over_kip848"] = round(ratio, 2)
        print(f"simulated time to partitions, classic / KIP-848: {ratio:.2f}x", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
