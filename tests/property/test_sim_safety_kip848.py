"""Randomized safety of KIP-848 consumer groups and of mixed groups (classic and consumer-protocol members,
members bounced from one protocol to the other: rolling upgrades and downgrades, so the group converts both
ways), as the simulator runs them.

Chaotic schedules (joins, leaves, crashes, restarts, bounces with a protocol switch, partition growth,
delay, jitter, loss, duplication, isolation). At every step the simulator checks that no partition is
processed by two members at once, that a quiescent group has exactly one owner per subscribed partition,
that epochs/generations never go back (the group's, each member's, and the epoch the coordinator holds for
each member) and that no commit from a fenced member is accepted. After the chaos the network heals and
the group must settle. Members pick their protocols on their own; their classic assignor lists all hold the
schedule's shared strategy (some list a second one), so the classic members always agree on one. A member
may still stop on an error Kafka's client also treats as fatal, in a race across a conversion
(``FATAL_IN_SCHEDULES``); when no member process is left running, settling means the group has no members.

Calm schedules (no loss, no isolation, no crash; latency at most ``L`` one way) also bound how long a
partition may stay unowned after a member revoked it (a hand-off). For a KIP-848 group:

    gap <= H + 2 D + 6 L

where H is the heartbeat interval and D the longest callback delay. The revoking member acknowledges at once
(at most 2 L to wait for a heartbeat in flight, L to arrive). The receiving member learns of its new target
on its next heartbeat (at most H, back 2 L later), but the coordinator hands it a partition only once it has
acknowledged revoking whatever its new target takes away from it (Kafka's CurrentAssignmentBuilder keeps such
a member at its epoch with only the partitions it keeps): its revocation callbacks run D later, the
acknowledgement takes up to 3 L, the answer carrying the partition L, and the assignment callbacks another
D. So the receiver may spend two callback delays, not one. A mixed group hands partitions to classic members
through a rejoin (a heartbeat answered REBALANCE_IN_PROGRESS, JoinGroup, SyncGroup), and a conversion back to
classic runs a classic rebalance whose join phase waits for every member's next heartbeat, so there the bound
is two rounds: ``gap <= 2 H + 2 D + 12 L`` (H the longest heartbeat interval of either protocol).

A hand-off is measured from the revocation, or from the last change to the group (a member joining,
leaving, restarting or bounced, or a topic growing; plus L for the change to reach the coordinator) that
happened before the hand-off was due: such a change gives the group a new target, and the partition may then
go to another member (or to the receiver's next process) along a new chain of the same length. A change
that comes only after the deadline restarts nothing: a hand-off still pending then is late.

Some members are static (``group.instance.id``). A static member's process that leaves is not removed from
the group: a KIP-848 one sends epoch -2 and the coordinator keeps it, with its assignment and target, without
bumping the group epoch; a classic one sends no LeaveGroup. Its partitions, and any partition its target gets
while it is away, wait for it: until a process with the same instance id comes back (and takes the place and
the assignment, without a rebalance) or until the coordinator's session timer for it expires and fences or
removes it. That timer is not restarted by the epoch -2 leave; it is restarted by every other request the
coordinator handles for it (and a parked JoinGroup completing) and, as in Kafka, by both conversions between
the protocols, which arm every member's session afresh. So a static member's absence ends at

    min(return + L, last contact + S)

(S: ``consumer_group_session_timeout_ms`` for a KIP-848 process, its own session timeout for a classic one;
last contact: the last ``request_received``/``response_sent`` of the process, or a later conversion while it
is away; ``static_absences``), and a hand-off pending during the absence may restart its clock there: the
usual chain then follows (a new process takes the partitions back, or the expiry gives the group a new target
or a classic rebalance). In a KIP-848 group this applies only to the topics the absent member subscribes to
(its target holds nothing else); in a mixed group to every topic, since a classic join phase waits for the
absent static member whatever its topics (a static member that does not rejoin is left to its session
timeout, as Kafka's join timer does). Mixed calm schedules grow topics only before the first static member
leaves: a classic leader that never learnt it leads (a downgrade by static replacement answers its JoinGroup
as a consumer group does, without a leader) and a static leader back with SkipAssignment after the topic grew
both miss the new partitions until the next rebalance, in Kafka as here.

CI runs a bounded number of schedules; ``REGROUP_SOAK=1`` (``make soak``) runs ``REGROUP_SOAK_RUNS``.
"""

from __future__ import annotations

import os
import random

import pytest

from regroup.coordinator.config import CoordinatorConfig
from regroup.sim.engine import Simulator
from regroup.sim.eventlog import Event, EventLog
from regroup.sim.scenario import LinkSpec, MemberSpec, Scenario, ScenarioEvent
from tests.group_views import classic_groups, consumer_groups
from tests.property.test_sim_safety import end_the_chaos, grow_a_topic

SOAK = os.environ.get("REGROUP_SOAK") == "1"
RUNS = int(os.environ.get("REGROUP_SOAK_RUNS", "500")) if SOAK else 40
CALM_RUNS = int(os.environ.get("REGROUP_SOAK_RUNS", "500")) if SOAK else 25
ASSIGNORS = [None, "uniform", "range"]
CLASSIC_ASSIGNORS = ["cooperative-sticky", "range", "roundrobin", "sticky"]


def _classic_strategies(r: random.Random, count: int) -> list[tuple[str, ...]]:
    """Each member's ``partition.assignment.strategy`` for one schedule: every list holds the schedule's
    shared strategy (so the classic members always have one in common, as a configured group has), most
    lists only that one, some another one before or after it: the group votes, and members with different
    lists look like a rolling change of strategy (a list with an eager-only assignor makes that member
    eager)."""
    shared = "cooperative-sticky" if r.random() < 0.7 else r.choice(CLASSIC_ASSIGNORS[1:])
    lists: list[tuple[str, ...]] = []
    for _ in range(count):
        roll = r.random()
        other = r.choice([a for a in CLASSIC_ASSIGNORS if a != shared])
        lists.append((shared,) if roll < 0.6 else (shared, other) if roll < 0.8 else (other, shared))
    return lists


def _members(
    r: random.Random, topics: dict[str, int], names: list[str], mixed: bool, calm: bool
) -> tuple[MemberSpec, ...]:
    strategies = _classic_strategies(r, len(names))
    return tuple(
        MemberSpec(
            name=name,
            topics=tuple(sorted(r.sample(sorted(topics), r.randint(1, len(topics))))),
            strategies=strategies[i],
            protocol="consumer" if not mixed or r.random() < 0.5 else "classic",
            assignor=r.choice(ASSIGNORS),
            callback_delay_ms=r.choice([0, 0, 200, 1_000]),
            # calm schedules bound a static member's hand-offs with its absence (``static_absences``)
            group_instance_id=f"i-{name}" if r.random() < 0.2 else None,
            session_timeout_ms=r.choice([6_000, 10_000]),
            heartbeat_interval_ms=r.choice([1_000, 2_000]),
            rebalance_timeout_ms=r.choice([8_000, 15_000, 30_000]),
            request_timeout_ms=r.choice([2_000, 4_000]),
            auto_commit_interval_ms=r.choice([1_000, 5_000]),
        )
        for i, name in enumerate(names)
    )


def random_scenario(seed: int, mixed: bool, calm: bool = False) -> Scenario:
    r = random.Random(seed * 7919 + (1 if mixed else 0) + (2 if calm else 0))
    topics = {"t0": r.randint(1, 8)}
    if r.random() < 0.4:
        topics["t1"] = r.randint(1, 4)
    names = [f"c{i}" for i in range(r.randint(2, 5))]
    members = _members(r, topics, names, mixed, calm)
    has_static = any(m.group_instance_id for m in members)
    coordinator = {
        "group_initial_rebalance_delay_ms": 0,
        "consumer_group_heartbeat_interval_ms": r.choice([1_000, 2_000]),
        "consumer_group_session_timeout_ms": r.choice([6_000, 10_000]),
    }
    events: list[ScenarioEvent] = []
    status = dict.fromkeys(names, "idle")
    stopped_at = dict.fromkeys(names, 0)
    static_left = False
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
        spec = next(m for m in members if m.name == name)
        if roll < 0.5:
            state = status[name]
            # a static member back before its session expired is refused (KIP-848: UNRELEASED_INSTANCE_ID)
            # or strands partitions (classic, see test_sim_safety): restart static members later. Calm schedules
            # have no crash, and a static member that left (epoch -2, or no LeaveGroup) may come back at any time
            if (
                spec.group_instance_id
                and not calm
                and state in ("left", "crashed")
                and t < stopped_at[name] + 10_000 + spec.session_timeout_ms
            ):
                continue
            protocol = r.choice(["classic", "consumer"]) if mixed else None
            if state in ("idle", "left"):
                action, status[name] = "join", "running"
            elif state == "crashed":
                action, status[name] = "restart", "running"
            else:
                choices = ["leave", "bounce"] if calm or spec.group_instance_id else ["leave", "crash", "bounce"]
                action = r.choice(choices)
                if action == "bounce" and spec.group_instance_id:
                    action = "leave"  # a static bounce needs the old session gone first (see above)
                status[name] = {"leave": "left", "crash": "crashed", "bounce": "running"}[action]
                stopped_at[name] = t
                static_left = static_left or bool(spec.group_instance_id)
            events.append(
                ScenarioEvent(at_ms=t, action=action, member=name, protocol=protocol if action != "leave" else None)
            )
        elif roll < 0.65 and not calm:
            events.append(ScenarioEvent(at_ms=t, action="isolate", member=name))
            events.append(ScenarioEvent(at_ms=min(t + r.randint(500, 20_000), chaos_end), action="heal", member=name))
        elif roll < 0.9:
            link = {
                "latency_ms": float(r.choice([1, 5, 20, 100] if calm else [1, 5, 20, 100, 400])),
                "jitter_ms": float(r.choice([0, 5, 50] if calm else [0, 5, 50, 300])),
                "loss": 0.0 if calm else r.choice([0.0, 0.02, 0.1, 0.3]),
                "duplicate": 0.0 if has_static or calm else r.choice([0.0, 0.0, 0.05]),
            }
            events.append(ScenarioEvent(at_ms=t, action="network", member=r.choice([None, name]), link=link))
        elif calm and mixed and static_left:
            # a classic leader that never learnt it leads (after a downgrade by static replacement), or a static
            # leader back with SkipAssignment after the topic grew, never notices new partitions, as in Kafka
            # (docs/simulator.md): mixed calm schedules grow topics only before any static member left
            continue
        else:
            grow_a_topic(r, events, topics, t)
    end_the_chaos(events, names, status, chaos_end)
    return Scenario(
        name=f"random-{'mixed' if mixed else 'consumer'}{'-calm' if calm else ''}-{seed}",
        duration_ms=chaos_end + 80_000,
        topics=topics,
        members=members,
        events=tuple(sorted(events, key=lambda e: e.at_ms)),
        network=LinkSpec(latency_ms=5, jitter_ms=2),
        coordinator=coordinator,
    )


#: errors that end a member process, as they end Kafka's consumer. A KIP-848 member whose heartbeat reaches a
#: classic group (it was cut off while its group turned classic again). A classic member whose SyncGroup
#: crosses a conversion: it names the protocol its JoinGroup response selected (a classic group's vote, or in
#: a consumer group the member's first one), and the group on the other side of the conversion expects the
#: other choice (a consumer group: the member's first protocol; a classic group: the vote), so a member whose
#: first protocol is not the vote's winner meets INCONSISTENT_GROUP_PROTOCOL, as in Kafka (docs/protocol.md, X08). A
#: JoinGroup never does: every member of a schedule lists the schedule's shared strategy.
FATAL_IN_SCHEDULES = ("ConsumerGroupHeartbeat: GROUP_ID_NOT_FOUND", "SyncGroup: INCONSISTENT_GROUP_PROTOCOL")


def settled(sim: Simulator) -> bool:
    """The group is quiescent; or no member process is left running (each one left, crashed, or stopped on
    an error Kafka's client also treats as fatal) and the group has no members: nothing is left to settle."""
    failures = [e["detail"] for e in sim.log.of_type("member_failed")]
    assert all(f in FATAL_IN_SCHEDULES for f in failures), f"unexpected member failures: {failures}"
    if sim.quiescent():
        return True
    if any(slot.machine is not None and slot.machine.state.running for slot in sim.slots.values()):
        return False
    consumer_group = consumer_groups(sim.coordinator).get(sim.group_id)
    classic_group = classic_groups(sim.coordinator).get(sim.group_id)
    members = consumer_group.members if consumer_group is not None else classic_group.members if classic_group else {}
    return not members


def run(scenario: Scenario, seed: int) -> Simulator:
    sim = Simulator(scenario, seed)
    sim.run()
    sim.finish()
    return sim


def handoff_gaps(events: list[Event]) -> list[tuple[int, str, int]]:
    """(revoked at, partition, unowned ms) for every partition revoked by a member (a hand-off, not a crash
    or a loss) and then owned again by someone, while some running member subscribed to its topic all along
    (a partition nobody subscribes to has nobody to go to)."""
    owners: dict[str, int] = {}
    revoked_at: dict[tuple[str, int], int] = {}
    topics_of: dict[str, list[str]] = {}
    running: set[str] = set()
    gaps: list[tuple[int, str, int]] = []
    for e in events:
        kind = e["type"]
        if kind == "subscription":
            topics_of[e["member"]] = e["detail"].split(",")
        elif kind == "member_state":
            (running.discard if e["state"] in ("Left", "Crashed", "Failed") else running.add)(e["member"])
            subscribed = {t for m in running for t in topics_of.get(m, [])}
            revoked_at = {tp: t for tp, t in revoked_at.items() if tp[0] in subscribed}
        if kind not in ("assigned", "revoked", "lost", "stopped"):
            continue
        tp = (e["topic"], e["partition"])
        name = f"{tp[0]}-{tp[1]}"
        if kind == "assigned":
            if owners.get(name, 0) == 0 and tp in revoked_at:
                gaps.append((revoked_at[tp], name, e["t"] - revoked_at.pop(tp)))
            owners[name] = owners.get(name, 0) + 1
        else:
            owners[name] = max(owners.get(name, 0) - 1, 0)
            if owners[name] == 0:
                if kind == "revoked":
                    revoked_at[tp] = e["t"]
                else:
                    revoked_at.pop(tp, None)
    return gaps


def one_way_latency(scenario: Scenario) -> int:
    """The longest one-way latency any link had (latency plus jitter)."""
    latencies = [e.link.get("latency_ms", 0) + e.link.get("jitter_ms", 0) for e in scenario.events if e.link]
    return int(max([scenario.network.latency_ms + scenario.network.jitter_ms, *latencies]))


def gap_bound(scenario: Scenario, mixed: bool) -> int:
    one_way = one_way_latency(scenario)
    delay = max(m.callback_delay_ms for m in scenario.members)
    consumer_interval = int(scenario.coordinator["consumer_group_heartbeat_interval_ms"])
    if not mixed:
        return consumer_interval + 2 * delay + 6 * one_way
    interval = max(consumer_interval, *(m.heartbeat_interval_ms for m in scenario.members))
    return 2 * interval + 2 * delay + 12 * one_way


#: scenario actions that change the group's membership or topics, and so its target assignment
GROUP_CHANGES = frozenset({"join", "leave", "crash", "restart", "bounce", "partitions"})


def static_absences(scenario: Scenario, events: list[Event]) -> list[tuple[int, int, frozenset[str]]]:
    """(left at, absence ends, topics) for every static member's process that left: the coordinator keeps
    the member and its assignment (KIP-848: epoch -2; classic: no LeaveGroup) until a new process with the
    same instance id takes its place, or until its session expires. The absence ends at the earlier of the
    return (the new process starts, plus L for its first request to arrive) and the session expiry: the
    coordinator restarts a member's session timer only when it handles one of its requests or completes a
    parked one (a static leave, epoch -2, does not restart it), and when the group converts to the other
    protocol (both conversions arm every member's session timer afresh, as Kafka's do), so the expiry comes
    at most the session timeout (KIP-848: ``consumer_group_session_timeout_ms``; a classic process: its own)
    after the last ``request_received`` or ``response_sent`` of the process or the last conversion."""
    one_way = one_way_latency(scenario)
    static = {m.name for m in scenario.members if m.group_instance_id}
    classic_timeout = {m.name: m.session_timeout_ms for m in scenario.members}
    default_timeout = CoordinatorConfig().consumer_group_session_timeout_ms
    consumer_timeout = int(scenario.coordinator.get("consumer_group_session_timeout_ms", default_timeout))
    protocol: dict[str, str] = {}
    topics_of: dict[str, frozenset[str]] = {}
    contact: dict[str, int] = {}
    left: dict[str, int] = {}
    kind_now = ""
    absences: list[tuple[int, int, frozenset[str]]] = []

    def expiry(name: str) -> int:
        timeout = consumer_timeout if protocol[name] == "consumer" else classic_timeout[name]
        return contact.get(name, left[name]) + timeout

    def end(name: str, returns: int | None) -> None:
        expires = expiry(name)
        absences.append((left[name], expires if returns is None else min(returns + one_way, expires), topics_of[name]))
        del left[name]

    for e in events:
        name, kind = e["member"], e["type"]
        for gone in [n for n in sorted(left) if expiry(n) < e["t"]]:
            end(gone, None)  # expired: later conversions no longer concern it
        if kind == "group_state":
            group_kind = "consumer" if "type=consumer" in (e["detail"] or "") else "classic"
            if kind_now and group_kind != kind_now:
                contact.update(dict.fromkeys(left, e["t"]))
            kind_now = group_kind
        if name not in static:
            continue
        if kind == "subscription":
            if name in left:
                end(name, e["t"])
            protocol[name], topics_of[name] = e["state"], frozenset(e["detail"].split(","))
            contact.pop(name, None)
        elif kind in ("request_received", "response_sent"):
            contact[name] = e["t"]
        elif kind == "member_state" and e["state"] == "Left":
            left[name] = e["t"]
    for name in sorted(left):
        end(name, None)
    return absences


def late_handoffs(scenario: Scenario, events: list[Event], mixed: bool) -> list[tuple[int, str, int]]:
    """(revoked at, partition, unowned ms) for every hand-off that took longer than ``gap_bound`` from its
    start: the revocation, moved to the arrival of each group change that came before the hand-off was due,
    and to the end of each static member's absence that began before the hand-off was due (in a KIP-848 group
    only for the topics that member subscribes to: only those can be waiting for it; a classic join phase
    waits for the absent member whatever the topic)."""
    bound = gap_bound(scenario, mixed)
    one_way = one_way_latency(scenario)
    changes = [(e.at_ms + one_way, e.at_ms + one_way, None) for e in scenario.events if e.action in GROUP_CHANGES]
    changes += [(left, ends, None if mixed else topics) for left, ends, topics in static_absences(scenario, events)]
    changes.sort(key=lambda c: c[0])
    late: list[tuple[int, str, int]] = []
    for revoked, tp, gap in handoff_gaps(events):
        topic = tp.rsplit("-", 1)[0]
        start = revoked
        for arrives, releases, topics in changes:
            if arrives > start + bound:
                break
            if topics is None or topic in topics:
                start = max(start, releases)
        if revoked + gap - start > bound:
            late.append((revoked, tp, gap))
    return late


@pytest.mark.parametrize("mixed", [False, True], ids=["consumer", "mixed"])
@pytest.mark.parametrize("seed", range(RUNS))
def test_random_schedule_is_safe_and_settles(seed: int, mixed: bool) -> None:
    sim = run(random_scenario(seed, mixed), seed)
    assert sim.checker.violations == []
    assert settled(sim), f"the group did not settle after the network healed (seed {seed})"


@pytest.mark.parametrize("mixed", [False, True], ids=["consumer", "mixed"])
@pytest.mark.parametrize("seed", range(CALM_RUNS))
def test_calm_schedule_hands_partitions_over_within_the_bound(seed: int, mixed: bool) -> None:
    scenario = random_scenario(seed, mixed, calm=True)
    sim = run(scenario, seed)
    assert sim.checker.violations == []
    assert sim.quiescent(), f"the group did not settle (seed {seed})"
    late = late_handoffs(scenario, sim.log.events, mixed)
    bound = gap_bound(scenario, mixed)
    assert late == [], f"partitions unowned longer than {bound} ms after a revocation or group change: {late[:5]}"


def test_the_handoff_bound_restarts_only_at_group_changes_before_the_deadline() -> None:
    """``late_handoffs`` on hand-written logs: H = 1000, D = 1000, L = 5, so the bound is 3030 ms."""
    members = (MemberSpec(name="a", topics=("t",), callback_delay_ms=1_000), MemberSpec(name="b", topics=("t",)))

    def late(gap: int, *changes: int) -> bool:
        scenario = Scenario(
            name="bound",
            duration_ms=60_000,
            topics={"t": 1},
            members=members,
            events=tuple(ScenarioEvent(at_ms=t, action="join", member="b") for t in changes),
            network=LinkSpec(latency_ms=5, jitter_ms=0),
            coordinator={"consumer_group_heartbeat_interval_ms": 1_000},
        )
        log = EventLog()
        for name in ("a", "b"):
            log.emit(0, "subscription", member=name, detail="t")
            log.emit(0, "member_state", member=name, state="Stable")
        log.emit(0, "assigned", member="a", topic="t", partition=0)
        log.emit(10_000, "revoked", member="a", topic="t", partition=0)
        log.emit(10_000 + gap, "assigned", member="b", topic="t", partition=0)
        return late_handoffs(scenario, log.events, mixed=False) != []

    assert gap_bound(Scenario(name="x", duration_ms=1, topics={"t": 1}, members=members, events=(),
                              network=LinkSpec(latency_ms=5, jitter_ms=0),
                              coordinator={"consumer_group_heartbeat_interval_ms": 1_000}), False) == 3_030  # fmt: skip
    assert not late(3_030) and late(3_031)
    assert not late(5_000, 12_000)  # a change at 12 s (arriving 12,005) before the deadline: 2,995 ms after it
    assert late(5_000, 13_500)  # the change came after the deadline (13,030): the hand-off was already late
    assert not late(7_000, 12_000, 14_500)  # two changes, each before the (moved) deadline
