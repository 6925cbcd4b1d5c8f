"""The events a result carries (``coordinator/events.py``): what happened, in order, as the core says it.

Scenarios (Given / When / Then), each checked against the exact sequence of events:

* E01 a classic group forms: created Empty, the member joins, PreparingRebalance, generation 1
  CompletingRebalance with the selected protocol, Stable, then the generation's stored assignments;
* E02 a heartbeat that changes nothing has no events (the hot path creates no event objects);
* E03 a classic member leaves: it left for ``leave``, then the group rebalances;
* E04 a classic member's session expires: its events are in the result of the call that fired the timer;
* E05 a consumer group: the first member's heartbeat creates it, the member joins, the target is computed,
  its partitions are assigned and the group is Stable, all in one write;
* E06 a second consumer member: a new target, the group Reconciling; the first member's revocation and the
  second member's assignment as reconciliation proceeds; one state event per write;
* E07 a consumer member leaving with epoch -1: what it held is revoked, it left, the group epoch moves;
* E08 a refused request has no events, even when its handler got as far as creating the group;
* E09 offsets committed: the committed partitions and offsets;
* E10 a consumer member's epoch bumped with nothing to move: its new current assignment, no partition events;
* E11 a classic member's protocols: named when it joins, again only when a rejoin lists other ones;
* E12 a consumer group's member moving between the protocols (a static member's replacement);
* E13 a coordinator rebuilt from its records says how its groups stand: every member joined (a consumer
  member with its current assignment), the states, a stable classic generation's assignments;
* E14 the read-only views: a consumer group's summary, and the metadata refresh no event says.
"""

from __future__ import annotations

from typing import Any

from regroup.coordinator.consumer.group import to_tuple
from regroup.coordinator.consumer.report import ConsumerGroupSummary
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import (
    AssignmentStored,
    Event,
    GroupCreated,
    GroupDeleted,
    GroupStateChanged,
    MemberAssignmentChanged,
    MemberJoined,
    MemberLeft,
    MemberProtocolsChanged,
    OffsetsCommitted,
    PartitionsAssigned,
    PartitionsRevoked,
    TargetComputed,
)
from regroup.model.cluster import topic_id_for
from regroup.model.errors import ErrorCode

from .consumer_harness import ConsumerHarness
from .harness import GroupHarness
from .test_migration import classic_group

FOO = topic_id_for("foo")


def brief(events: list[Event]) -> list[tuple[Any, ...]]:
    """Each event as a short tuple: its type and what matters for the scenario."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, GroupCreated):
            out.append(("created", e.group_type))
        elif isinstance(e, GroupStateChanged):
            out.append(("state", e.group_type, e.state, e.generation, e.protocol, e.assignment_epoch))
        elif isinstance(e, MemberJoined):
            out.append(("joined", e.member_id))
        elif isinstance(e, MemberLeft):
            out.append(("left", e.member_id, e.reason))
        elif isinstance(e, AssignmentStored):
            out.append(("stored", e.generation, tuple((m, a) for m, _, a in e.assignments)))
        elif isinstance(e, TargetComputed):
            out.append(("target", e.assignment_epoch, e.assignor, tuple((m, to_tuple(t)) for m, _, t in e.targets)))
        elif isinstance(e, (PartitionsAssigned, PartitionsRevoked)):
            kind = "assigned" if isinstance(e, PartitionsAssigned) else "revoked"
            out.append((kind, e.member_id, e.member_epoch, e.partitions))
        elif isinstance(e, MemberAssignmentChanged):
            out.append(("current", e.member_id, e.member_epoch, e.state, e.assigned, e.pending_revocation))
        elif isinstance(e, MemberProtocolsChanged):
            out.append(("protocols", e.group_type, e.member_id, e.protocols))
        else:
            out.append((type(e).__name__, e))
    return out


def test_e01_a_classic_group_forms() -> None:
    # Given no group; When one member joins (v9: member id first) and the leader syncs
    h = GroupHarness()
    formed = h.form_group(1)
    m = formed.members[0]
    # Then
    assert brief(h.events) == [
        ("created", "classic"),
        ("state", "classic", "Empty", 0, None, None),
        ("joined", m),
        ("state", "classic", "PreparingRebalance", 0, None, None),
        ("state", "classic", "CompletingRebalance", 1, "range", None),
        ("state", "classic", "Stable", 1, "range", None),
        ("stored", 1, ((m, formed.assignments[m]),)),
    ]
    stable = h.events[-2]
    assert isinstance(stable, GroupStateChanged) and (stable.leader, stable.protocol_type, stable.members) == (
        m,
        "consumer",
        1,
    )


def test_e02_a_heartbeat_that_changes_nothing_has_no_events() -> None:
    h = GroupHarness()
    formed = h.form_group(2)
    assert h.heartbeat(formed.members[1]) is ErrorCode.NONE
    assert h.last.events == []
    c = ConsumerHarness()
    c.topics(foo=2)
    member = c.join_cg().member_id
    c.settle([member])
    c.hb(member, c.cmember(member).member_epoch)
    assert c.last.events == []


def test_e03_a_classic_member_leaves() -> None:
    h = GroupHarness()
    formed = h.form_group(2)
    follower = formed.followers[0]
    h.leave(follower)
    assert brief(h.last.events) == [
        ("left", follower, "leave"),
        ("state", "classic", "PreparingRebalance", formed.generation, "range", None),
    ]


def test_e04_a_session_expiry_is_in_the_result_of_the_call_that_fired_it() -> None:
    h = GroupHarness()
    formed = h.form_group(2)
    follower = formed.followers[0]
    h.now_ms += 5_000
    assert h.heartbeat(formed.leader) is ErrorCode.NONE
    h.now_ms += 6_000  # the follower's session (10 s) ran out; the leader's has not
    assert h.heartbeat(formed.leader) is ErrorCode.REBALANCE_IN_PROGRESS
    assert brief(h.last.events) == [
        ("left", follower, "session timeout"),
        ("state", "classic", "PreparingRebalance", formed.generation, "range", None),
    ]


def test_e05_to_e07_a_consumer_group_forms_grows_and_shrinks() -> None:
    c = ConsumerHarness()
    c.topics(foo=3)
    first = c.join_cg().member_id
    # E05: one write
    assert brief(c.last.events) == [
        ("created", "consumer"),
        ("joined", first),
        ("target", 1, "uniform", ((first, ((FOO, (0, 1, 2)),)),)),
        ("assigned", first, 1, ((FOO, (0, 1, 2)),)),
        ("current", first, 1, "stable", ((FOO, (0, 1, 2)),), ()),
        ("state", "consumer", "Stable", 1, "uniform", 1),
    ]
    # E06: the second member waits at epoch 2 for partition 2, which the first still has to revoke
    second = c.join_cg().member_id
    assert brief(c.last.events) == [
        ("joined", second),
        ("target", 2, "uniform", ((first, ((FOO, (0, 1)),)), (second, ((FOO, (2,)),)))),
        ("current", second, 2, "unreleased_partitions", (), ()),
        ("state", "consumer", "Reconciling", 2, "uniform", 2),
    ]
    mark = len(c.events)
    c.settle([first, second])
    # (each member's heartbeat: the first is told to revoke 2, keeping its epoch until it has; the second's
    # previous epoch moves to its current one; the first's revocation; the second takes 2)
    assert brief(c.events[mark:]) == [
        ("current", first, 1, "unrevoked_partitions", ((FOO, (0, 1)),), ((FOO, (2,)),)),
        ("current", second, 2, "unreleased_partitions", (), ()),
        ("revoked", first, 2, ((FOO, (2,)),)),
        ("current", first, 2, "stable", ((FOO, (0, 1)),), ()),
        ("assigned", second, 2, ((FOO, (2,)),)),
        ("current", second, 2, "stable", ((FOO, (2,)),), ()),
        ("state", "consumer", "Stable", 2, "uniform", 2),
    ]
    # E07
    c.hb(second, -1)
    assert brief(c.last.events) == [
        ("revoked", second, 2, ((FOO, (2,)),)),
        ("left", second, "leave"),
        ("state", "consumer", "Assigning", 3, "uniform", 2),
    ]


def test_e08_a_refused_request_has_no_events() -> None:
    # Given no group; When a JoinGroup without a protocol type arrives: its handler creates the group, then
    # refuses the member (INCONSISTENT_GROUP_PROTOCOL)
    h = GroupHarness()
    response = h.join("", protocol_type="").response
    # Then nothing happened: no group, no records, no events
    assert response.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.last.refused is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (h.last.events, h.last.records, h.has_group()) == ([], [], False)
    # and the same join with a protocol type creates the group (the events were there to drop)
    h.join("")
    assert brief(h.last.events) == [("created", "classic"), ("state", "classic", "Empty", 0, None, None)]


def test_e09_offsets_committed() -> None:
    h = GroupHarness()
    formed = h.form_group(1)
    h.commit(formed.members[0], formed.generation, {("foo", 0): 5, ("foo", 1): 7})
    assert h.last.events == [OffsetsCommitted(h.group_id, (("foo", 0, 5), ("foo", 1, 7)))]


def test_e10_an_epoch_bump_with_nothing_to_move() -> None:
    # Given a Stable group of one member subscribing to foo
    c = ConsumerHarness()
    c.topics(foo=2, bar=1)
    first = c.join_cg().member_id
    # When a member subscribing to bar only joins: a new target (epoch 2) that leaves the first member's alone
    second = c.join_cg(["bar"]).member_id
    assert brief(c.last.events)[-2:] == [
        ("current", second, 2, "stable", ((topic_id_for("bar"), (0,)),), ()),
        ("state", "consumer", "Reconciling", 2, "uniform", 2),
    ]
    c.hb(first, 1)
    # Then the first member's next heartbeat moves it to epoch 2, and nothing else: no partition changes hands
    assert brief(c.last.events) == [
        ("current", first, 2, "stable", ((FOO, (0, 1)),), ()),
        ("state", "consumer", "Stable", 2, "uniform", 2),
    ]


def test_e11_a_classic_member_names_its_protocols_when_they_change() -> None:
    h = GroupHarness()
    member_id = h.new_member_id()
    two = (("range", b"r"), ("roundrobin", b"rr"))
    h.join(member_id, protocols=two)
    joined = [e for e in h.last.events if isinstance(e, MemberJoined)]
    assert [(e.member_id, e.protocols) for e in joined] == [(member_id, ("range", "roundrobin"))]
    generation = h.group().generation
    h.sync(member_id, generation, assignments={member_id: b""})
    # a rejoin listing the same protocols (with other metadata) says nothing of them
    h.join(member_id, protocols=(("range", b"r2"), ("roundrobin", b"rr2")))
    assert not [e for e in h.last.events if isinstance(e, MemberProtocolsChanged)]
    # one listing others (here only one of them) does, before the rebalance it starts
    generation = h.group().generation
    h.sync(member_id, generation, assignments={member_id: b""})
    h.join(member_id, protocols=(("roundrobin", b"rr3"),))
    assert brief(h.last.events) == [
        ("protocols", "classic", member_id, ("roundrobin",)),
        ("state", "classic", "PreparingRebalance", generation, "range", None),
        ("state", "classic", "CompletingRebalance", generation + 1, "roundrobin", None),
    ]


def test_e12_a_member_moving_between_the_protocols_in_a_consumer_group() -> None:
    # Given a classic group whose static member C0 (instance i0) speaks the classic protocol
    # (cooperative-sticky), its other member gone
    h = ConsumerHarness()
    formed = classic_group(h, instance_ids=["i0", None])
    assert h.leave(formed.members[1]).error is ErrorCode.NONE
    c0 = formed.members[0]
    # When a consumer-protocol process takes i0's place
    a = h.hb("", 0, topics=["foo"], instance_id="i0").member_id or ""
    # Then the group converts (C0 joins the consumer group as a classic member), A replaces C0 as a copy of it
    # (epoch 0, C0's partitions) and moves to the consumer protocol, and the target is computed anew
    foo = ((FOO, (0, 1, 2)),)
    assert brief(h.last.events) == [
        ("left", c0, "converted"),
        ("state", "classic", "Dead", 3, "cooperative-sticky", None),
        ("GroupDeleted", GroupDeleted(h.group_id, "classic")),
        ("created", "consumer"),
        ("joined", c0),
        ("target", 3, "uniform", ((c0, foo),)),
        ("assigned", c0, 3, foo),
        ("current", c0, 3, "stable", foo, ()),
        ("revoked", c0, 3, foo),
        ("left", c0, "replaced"),
        ("joined", a),
        ("assigned", a, 0, foo),
        ("current", a, 0, "stable", foo, ()),
        ("protocols", "consumer", a, ()),
        ("target", 4, "uniform", ((a, ((FOO, (0, 1, 2, 3, 4, 5)),)),)),
        ("assigned", a, 4, ((FOO, (3, 4, 5)),)),
        ("current", a, 4, "stable", ((FOO, (0, 1, 2, 3, 4, 5)),), ()),
        ("state", "consumer", "Stable", 4, "uniform", 4),
    ]
    joined = [(e.member_id, e.protocols) for e in h.last.events if isinstance(e, MemberJoined)]
    assert joined == [(c0, ("cooperative-sticky",)), (a, ("cooperative-sticky",))]


def test_e13_a_reloaded_coordinator_says_how_its_groups_stand() -> None:
    # Given a Stable consumer group of two members and a Stable classic group of one
    c = ConsumerHarness()
    c.topics(foo=3)
    first = c.join_cg().member_id
    second = c.join_cg().member_id
    c.settle([first, second])
    formed = c.form_group(1, group_id="classic")
    # When the coordinator is rebuilt from the records
    c.reload()
    # Then its loaded events say, group by group, each member joined (with its current assignment), the state
    loaded = brief(c.coordinator.loaded_events)
    assert loaded[:6] == [
        ("joined", first),
        ("current", first, 2, "stable", ((FOO, (0, 1)),), ()),
        ("joined", second),
        ("current", second, 2, "stable", ((FOO, (2,)),), ()),
        ("state", "consumer", "Stable", 2, "uniform", 2),
        ("joined", formed.members[0]),
    ]
    assert loaded[6:] == [
        ("state", "classic", "Stable", 1, "range", None),
        ("stored", 1, ((formed.members[0], formed.assignments[formed.members[0]]),)),
    ]
    joined = [e for e in c.coordinator.loaded_events if isinstance(e, MemberJoined)]
    assert [e.protocols for e in joined] == [(), (), ("range",)]


def test_e14_the_read_only_views() -> None:
    c = ConsumerHarness()
    c.topics(foo=3)
    assert c.coordinator.consumer_group_summary(c.group_id) is None
    first = c.join_cg(assignor="range").member_id
    assert c.coordinator.consumer_group_summary(c.group_id) == ConsumerGroupSummary(
        group_id=c.group_id,
        state="Stable",
        group_epoch=1,
        assignment_epoch=1,
        assignor="range",
        members=1,
        classic_members=0,
    )
    # a subscribed topic grows: the group refreshes its subscription metadata at its next heartbeat, which no
    # event says (nothing is written until then)
    assert not c.coordinator.awaits_metadata_refresh(c.group_id)
    c.topics(foo=4)
    assert c.last.events == []
    assert c.coordinator.awaits_metadata_refresh(c.group_id)
    c.hb(first, 1)
    assert not c.coordinator.awaits_metadata_refresh(c.group_id)
    assert not GroupCoordinator().awaits_metadata_refresh(c.group_id)
