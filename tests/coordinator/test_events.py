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
* E09 offsets committed: the committed partitions and offsets.
"""

from __future__ import annotations

from typing import Any

from regroup.coordinator.events import (
    AssignmentStored,
    Event,
    GroupCreated,
    GroupStateChanged,
    MemberJoined,
    MemberLeft,
    OffsetsCommitted,
    PartitionsAssigned,
    PartitionsRevoked,
    TargetComputed,
)
from regroup.model.cluster import topic_id_for
from regroup.model.errors import ErrorCode

from .consumer_harness import ConsumerHarness
from .harness import GroupHarness

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
            out.append(("target", e.assignment_epoch, e.assignor, tuple((m, t) for m, _, t in e.targets)))
        elif isinstance(e, (PartitionsAssigned, PartitionsRevoked)):
            kind = "assigned" if isinstance(e, PartitionsAssigned) else "revoked"
            out.append((kind, e.member_id, e.member_epoch, e.partitions))
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
        ("state", "consumer", "Stable", 1, "uniform", 1),
    ]
    # E06
    mark = len(c.events)
    second = c.join_cg().member_id
    assert brief(c.last.events) == [
        ("joined", second),
        ("target", 2, "uniform", ((first, ((FOO, (0, 1)),)), (second, ((FOO, (2,)),)))),
        ("state", "consumer", "Reconciling", 2, "uniform", 2),
    ]
    c.settle([first, second])
    assert brief(c.events[mark + 3 :]) == [
        ("revoked", first, 2, ((FOO, (2,)),)),
        ("assigned", second, 2, ((FOO, (2,)),)),
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
