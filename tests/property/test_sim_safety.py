"""Randomized safety of the classic protocol as the simulator runs it: many seeded schedules of joins,
leaves, crashes, restarts, partition-count growth and network trouble (delay, jitter, loss, duplication,
member isolation), for eager and cooperative groups. At every step the simulator checks that no partition
is processed by two members at once, that a quiescent group has exactly one owner per subscribed
partition, that generations never go back and that no commit from a fenced member is accepted. After the
chaos the network heals and the group must settle (liveness).

CI runs a bounded number of schedules; ``REGROUP_SOAK=1`` (``make soak``) runs many more
(``REGROUP_SOAK_RUNS`` per protocol, default 500).
"""

from __future__ import annotations

import os
import random

import pytest

from regroup.sim.engine import Simulator
from regroup.sim.scenario import LinkSpec, MemberSpec, Scenario, ScenarioEvent

SOAK = os.environ.get("REGROUP_SOAK") == "1"
RUNS = int(os.environ.get("REGROUP_SOAK_RUNS", "500")) if SOAK else 100
EAGER_STRATEGIES = [("range",), ("roundrobin",), ("sticky",), ("range", "cooperative-sticky")]


def grow_a_topic(r: random.Random, events: list[ScenarioEvent], topics: dict[str, int], t: int) -> None:
    """A random topic gains 1-3 partitions at ``t``."""
    topic = r.choice(sorted(topics))
    topics_now = max([e.count or 0 for e in events if e.topic == topic] + [topics[topic]])
    events.append(ScenarioEvent(at_ms=t, action="partitions", topic=topic, count=topics_now + r.randint(1, 3)))


def end_the_chaos(events: list[ScenarioEvent], names: list[str], status: dict[str, str], chaos_end: int) -> None:
    """At ``chaos_end`` the network calms down and heals, and someone is running."""
    calm = {"latency_ms": 5.0, "jitter_ms": 2.0, "loss": 0.0, "duplicate": 0.0}
    events.append(ScenarioEvent(at_ms=chaos_end, action="network", link=calm))
    for name in names:
        events.append(ScenarioEvent(at_ms=chaos_end, action="heal", member=name))
    if "running" not in status.values():
        events.append(ScenarioEvent(at_ms=chaos_end, action="join", member=names[0]))


def random_scenario(seed: int, cooperative: bool) -> Scenario:
    r = random.Random(seed)
    topics = {"t0": r.randint(1, 8)}
    if r.random() < 0.4:
        topics["t1"] = r.randint(1, 4)
    strategies = ("cooperative-sticky",) if cooperative else r.choice(EAGER_STRATEGIES)
    names = [f"c{i}" for i in range(r.randint(2, 5))]
    members = tuple(
        MemberSpec(
            name=name,
            topics=tuple(sorted(r.sample(sorted(topics), r.randint(1, len(topics))))),
            strategies=strategies,
            group_instance_id=f"i-{name}" if r.random() < 0.2 else None,
            session_timeout_ms=r.choice([6_000, 10_000]),
            heartbeat_interval_ms=r.choice([1_000, 2_000]),
            rebalance_timeout_ms=r.choice([8_000, 15_000, 30_000]),
            request_timeout_ms=r.choice([2_000, 4_000]),
            auto_commit_interval_ms=r.choice([1_000, 5_000]),
        )
        for name in names
    )
    has_static = any(m.group_instance_id for m in members)
    events: list[ScenarioEvent] = []
    status = dict.fromkeys(names, "idle")
    stopped_at = dict.fromkeys(names, 0)
    for name in names[: r.randint(1, len(names))]:
        events.append(ScenarioEvent(at_ms=r.randint(0, 3_000), action="join", member=name))
        status[name] = "running"
    chaos_end = r.randint(30_000, 90_000)
    t = 3_000
    while True:
        t += r.randint(200, 8_000)
        if t >= chaos_end:
            break
        roll = r.random()
        name = r.choice(names)
        if roll < 0.45:
            state = status[name]
            spec = next(m for m in members if m.name == name)
            # A static member back within its session timeout rejoins without a rebalance (KIP-345), which can
            # strand partitions: see tests/unit/sim/test_static_edge_cases.py. Wait until it has been removed.
            if (
                spec.group_instance_id
                and state in ("left", "crashed")
                and t < stopped_at[name] + spec.session_timeout_ms + 1_000
            ):
                continue
            if state in ("idle", "left"):
                action, status[name] = "join", "running"
            elif state == "crashed":
                action, status[name] = "restart", "running"
            else:
                action = r.choice(["leave", "crash", "crash"])
                status[name] = "left" if action == "leave" else "crashed"
                stopped_at[name] = t
            events.append(ScenarioEvent(at_ms=t, action=action, member=name))
        elif roll < 0.6:
            events.append(ScenarioEvent(at_ms=t, action="isolate", member=name))
            events.append(ScenarioEvent(at_ms=min(t + r.randint(500, 20_000), chaos_end), action="heal", member=name))
        elif roll < 0.9:
            link = {
                "latency_ms": float(r.choice([1, 5, 20, 100, 400])),
                "jitter_ms": float(r.choice([0, 5, 50, 300])),
                "loss": r.choice([0.0, 0.02, 0.1, 0.3]),
                # a duplicated static JoinGroup fences its own first copy (FENCED_INSTANCE_ID is fatal)
                "duplicate": 0.0 if has_static else r.choice([0.0, 0.0, 0.05]),
            }
            events.append(ScenarioEvent(at_ms=t, action="network", member=r.choice([None, name]), link=link))
        else:
            grow_a_topic(r, events, topics, t)
    end_the_chaos(events, names, status, chaos_end)
    return Scenario(
        name=f"random-{'cooperative' if cooperative else 'eager'}-{seed}",
        duration_ms=chaos_end + 80_000,
        topics=topics,
        members=members,
        events=tuple(sorted(events, key=lambda e: e.at_ms)),
        network=LinkSpec(latency_ms=5, jitter_ms=2),
    )


def run_schedule(seed: int, cooperative: bool) -> Simulator:
    scenario = random_scenario(seed, cooperative)
    sim = Simulator(scenario, seed)
    sim.run()
    sim.finish()
    return sim


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
@pytest.mark.parametrize("seed", range(RUNS))
def test_random_schedule_is_safe_and_settles(seed: int, cooperative: bool) -> None:
    sim = run_schedule(seed, cooperative)
    assert sim.checker.violations == []
    assert sim.quiescent(), f"the group did not settle after the network healed (seed {seed})"
