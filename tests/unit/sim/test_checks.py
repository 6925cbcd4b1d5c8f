"""The safety checker catches what it is there to catch: overlapping ownership, generations going back,
commits accepted from fenced members, and an unowned partition in a quiescent group."""

from __future__ import annotations

import pytest

from regroup.client import ClassicClientMember, OutgoingRequest
from regroup.coordinator import offsets as coordinator_offsets
from regroup.protocol.offsets import OffsetCommitRequest, PartitionCommit
from regroup.sim import Scenario, Simulator, simulate
from regroup.sim.checks import SafetyChecker
from regroup.sim.eventlog import EventLog
from regroup.sim.scenario import LinkSpec, MemberSpec, ScenarioEvent

T0, T1 = ("t", 0), ("t", 1)


def test_overlapping_ownership_is_reported_once_per_episode() -> None:
    checker = SafetyChecker(EventLog())
    checker.set_owned(0, "a", frozenset({T0, T1}))
    checker.set_owned(5, "b", frozenset({T1}))
    checker.set_owned(6, "b", frozenset({T1}))
    assert checker.violations == ["5 ms: t-1 processed by a and b at the same time"]
    checker.set_owned(7, "a", frozenset({T0}))
    checker.set_owned(9, "a", frozenset({T0, T1}))
    assert len(checker.violations) == 2
    assert checker.log.events[-1]["type"] == "violation"


def test_generations_going_back_and_fenced_commits() -> None:
    checker = SafetyChecker(EventLog())
    checker.group_generation(1, 3)
    checker.group_generation(2, 2)
    checker.joined(3, "a", 4)
    checker.joined(4, "a", 3)
    checker.commit(5, "a", "generation 1 is not the group's 4", [])  # rejected: fine
    checker.commit(6, "a", "generation 1 is not the group's 4", [T0])
    assert checker.violations == [
        "2 ms: group generation went back to 2",
        "4 ms: a joined generation 3 after 4",
        "6 ms: offsets of t-0 accepted from a, generation 1 is not the group's 4",
    ]


def test_quiescent_group_must_own_every_partition() -> None:
    checker = SafetyChecker(EventLog())
    checker.set_owned(0, "a", frozenset({T0}))
    checker.quiescent(1, {T0, T1})
    checker.quiescent(2, {T0, T1})
    checker.quiescent(3, None)
    checker.quiescent(4, {T0, T1})
    assert checker.violations == [
        "1 ms: group is stable but t-1 is processed by nobody",
        "4 ms: group is stable but t-1 is processed by nobody",
    ]


def two_members(*events: ScenarioEvent, duration_ms: int = 60_000) -> Scenario:
    members = tuple(
        MemberSpec(name=n, topics=("t",), strategies=("cooperative-sticky",), request_timeout_ms=3_000) for n in "ab"
    )
    joins = (ScenarioEvent(at_ms=0, action="join", member="a"), ScenarioEvent(at_ms=100, action="join", member="b"))
    return Scenario(
        name="two",
        duration_ms=duration_ms,
        topics={"t": 4},
        members=members,
        events=(*joins, *events),
        network=LinkSpec(latency_ms=5),
    )


def test_a_coordinator_accepting_stale_commits_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = Simulator(two_members(), seed=0)
    sim.run(20_000)
    a = sim.slots["a"]
    assert a.machine is not None
    stale = OffsetCommitRequest(
        group_id="g",
        generation_id=a.machine.generation - 1,
        member_id=a.machine.member_id,
        topics=(("t", (PartitionCommit(partition=0, offset=1),)),),
    )
    sim.endpoint.handle("a", a.incarnation, OutgoingRequest(request_id=900, request=stale), sim.now)
    assert sim.checker.violations == []  # the real coordinator answers ILLEGAL_GENERATION
    monkeypatch.setattr(coordinator_offsets, "_group_for_commit", lambda ctx, groups, req: None)
    sim.endpoint.handle("a", a.incarnation, OutgoingRequest(request_id=901, request=stale), sim.now)
    assert len(sim.checker.violations) == 1
    assert "offsets of t-0 accepted from a, generation" in sim.checker.violations[0]


def test_without_the_session_lease_an_isolated_member_becomes_a_zombie(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = two_members(
        ScenarioEvent(at_ms=20_000, action="isolate", member="a"),
        ScenarioEvent(at_ms=50_000, action="heal", member="a"),
        duration_ms=90_000,
    )
    safe = simulate(scenario)
    assert safe.checker.violations == [] and safe.quiescent()
    monkeypatch.setattr(ClassicClientMember, "extend_lease", lambda self, sent_ms: setattr(self, "lease_ms", 10**12))
    unsafe = simulate(scenario)
    assert any("processed by a and b at the same time" in v for v in unsafe.checker.violations)
