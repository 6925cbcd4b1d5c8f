"""A large classic group with ``classic_answers_per_call``: the join phase completing answers the leader and a chunk
of members in the call that completes it, the others a chunk a millisecond, each answer (and each restarted
session) the same as one call would have given; a member gone meanwhile is answered as it leaves, and a newer
rebalance answers the members still parked with its own generation. The leader's SyncGroup likewise answers
itself and a chunk of the parked SyncGroups, the others a chunk a millisecond, or all at once when the group is
about to rebalance."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.coordinator.classic.rebalance import session_key
from regroup.coordinator.config import CoordinatorConfig
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupResponse
from tests.coordinator.harness import GroupHarness


def parked(h: GroupHarness, n: int) -> tuple[list[str], list[int]]:
    """A group of one Stable member, ``n - 1`` more parked in its next join phase, the last one's JoinGroup not
    sent: (every member id, the keys of the parked JoinGroups, the last one's to come)."""
    seed = h.join_new().key
    h.sleep(0)
    first = h.responses[seed].member_id
    h.sync(first, assignments={first: b"x"})
    ids = [first, *(h.new_member_id() for _ in range(n - 1))]
    keys = [h.join(member_id).key for member_id in ids[:-1]]
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    return ids, keys


def answers(h: GroupHarness, keys: list[int]) -> dict[int, Any]:
    return {key: h.responses[key] for key in keys if key in h.responses}


def ticks(h: GroupHarness, ms: int) -> None:
    """``ms`` milliseconds, one at a time (the chunks' timer is due a millisecond after the last one)."""
    for _ in range(ms):
        h.sleep(1)


def harness(chunk: int | None) -> GroupHarness:
    return GroupHarness(CoordinatorConfig(group_initial_rebalance_delay_ms=0, classic_answers_per_call=chunk))


def test_the_leader_and_a_chunk_are_answered_at_once_the_others_a_chunk_a_millisecond() -> None:
    h = harness(100)
    ids, keys = parked(h, 350)
    keys.append(h.join(ids[-1]).key)  # the last member: the join phase completes
    group = h.group()
    answered = answers(h, keys)
    assert len(answered) == 100 and keys[0] in answered  # (the first member leads: it was there first)
    leader = answered[keys[0]]
    assert leader.leader == ids[0] and len(leader.members) == 350
    for count in (200, 300, 350):
        h.sleep(1)
        assert len(answers(h, keys)) == count
        assert all(group.members[m].awaiting_join_key is None for m in ids) is (count == 350)
    ticks(h, 5)
    assert len(answers(h, keys)) == 350
    generations = {r.generation_id for r in answers(h, keys).values()}
    assert generations == {group.generation} and sorted(group.pending_sync_members) == sorted(ids)
    for member_id in ids:  # every session restarted as its member was answered: none has expired
        assert h.coordinator.timers.deadline(session_key(group.group_id, member_id)) is not None


def test_the_next_chunk_waits_for_the_coordinators_own_timer_not_a_request() -> None:
    """The chunks are paced: a request arriving once the next chunk is due does not answer it (a server handling a
    hundred requests in one turn of its loop would answer a hundred chunks in that turn), only ``advance`` does, one
    chunk a call however late it comes (the next is due a millisecond after the call that answered one)."""
    h = harness(100)
    ids, keys = parked(h, 350)
    keys.append(h.join(ids[-1]).key)
    assert len(answers(h, keys)) == 100
    h.now_ms += 5  # (the next chunk is due since 4 ms)
    for member_id in ids[:3]:
        h.heartbeat(member_id)
        h.commit(member_id, generation=h.group().generation)
    h.describe()
    assert len(answers(h, keys)) == 100
    h.sleep(0)
    assert len(answers(h, keys)) == 200
    h.sleep(0)  # (the next is due a millisecond after that call)
    assert len(answers(h, keys)) == 200
    h.now_ms += 1
    h.describe()
    assert len(answers(h, keys)) == 200
    for count in (300, 350):
        h.sleep(1)
        assert len(answers(h, keys)) == count


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 60), st.integers(1, 25))
def test_the_answers_in_chunks_equal_those_of_one_call(members: int, chunk: int) -> None:
    """Every member's answer and the group's state once all are out: the same as without chunks; each session
    restarted when its member was answered, a millisecond a chunk."""
    outcomes, sessions = [], []
    for per_call in (None, chunk):
        h = harness(per_call)
        ids, keys = parked(h, members)
        keys.append(h.join(ids[-1]).key)
        completed_at = h.now_ms
        ticks(h, members)  # (a chunk a millisecond: all out by then)
        group = h.group()
        outcomes.append(
            (answers(h, keys), group.state, group.generation, group.leader_id, sorted(group.pending_sync_members))
        )
        restarted = []
        for m in ids:
            deadline = h.coordinator.timers.deadline(session_key(group.group_id, m))
            assert deadline is not None
            restarted.append(deadline - completed_at - group.members[m].session_timeout_ms)
        sessions.append(restarted)
    assert outcomes[0][0] and outcomes[0] == outcomes[1]
    assert len(outcomes[1][0]) == members and all(isinstance(r, JoinGroupResponse) for r in outcomes[1][0].values())
    assert set(sessions[0]) == {0}  # (all restarted by the call that completed the join phase)
    chunks = -(-members // chunk)
    assert sessions[1].count(0) == min(chunk, members) and all(0 <= s < chunks for s in sessions[1])


def test_a_leader_later_in_the_group_is_answered_in_the_first_chunk() -> None:
    h = harness(50)
    ids, keys = parked(h, 300)
    h.group().leader_id = ids[200]  # (as after its static member was replaced: the leader need not come first)
    keys.append(h.join(ids[-1]).key)
    leader = h.responses[keys[200]]
    assert leader.leader == ids[200] and len(leader.members) == 300
    assert len(answers(h, keys)) == 50 and all(not r.members for k, r in answers(h, keys).items() if k != keys[200])


def test_a_member_leaving_before_its_answer_is_answered_as_it_leaves_and_not_again() -> None:
    """It leaves a group in CompletingRebalance: the group rebalances again, and the members still parked stay
    parked for that rebalance (nobody answers them with the generation they were not told of)."""
    h = harness(10)
    ids, keys = parked(h, 30)
    keys.append(h.join(ids[-1]).key)
    waiting = next(i for i, key in enumerate(keys) if key not in h.responses)
    left = h.leave(ids[waiting])
    assert [m.error for m in left.members] == [ErrorCode.NONE]
    assert h.responses[keys[waiting]].error is ErrorCode.UNKNOWN_MEMBER_ID  # (its JoinGroup, answered as it left)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    ticks(h, 10)
    assert h.responses[keys[waiting]].error is ErrorCode.UNKNOWN_MEMBER_ID
    still = [i for i, key in enumerate(keys) if key not in h.responses]
    assert len(still) == 19 and all(h.member(ids[i]).awaiting_join_key is not None for i in still)
    assert not h.dropped and h.group().join_answers_left == []


def test_a_newer_rebalance_answers_the_members_still_parked_with_its_generation() -> None:
    h = harness(10)
    ids, keys = parked(h, 30)
    keys.append(h.join(ids[-1]).key)
    group = h.group()
    first_generation = group.generation
    answered = [i for i, key in enumerate(keys) if key in h.responses]
    h.leave(ids[answered[-1]])  # CompletingRebalance: the group rebalances again, the others still parked
    assert group.state is ClassicGroupState.PREPARING_REBALANCE
    rejoined = {ids[i]: h.join(ids[i]).key for i in answered[:-1]}  # the members answered rejoin
    assert group.state is ClassicGroupState.COMPLETING_REBALANCE and group.generation == first_generation + 1
    ticks(h, 10)
    parked_then = [keys[i] for i in range(30) if i not in answered]
    later = answers(h, [*parked_then, *rejoined.values()])
    assert len(later) == 29 and {r.generation_id for r in later.values()} == {first_generation + 1}
    assert all(key not in h.dropped for key in keys)


def synced_parked(h: GroupHarness, n: int, leader_at: int = 0) -> tuple[dict[str, int], dict[str, bytes]]:
    """A group of ``n`` members whose join phase completed (led by member ``leader_at``), every follower's
    SyncGroup parked: (the keys of the parked SyncGroups by member, the leader's assignments to come)."""
    ids, keys = parked(h, n)
    h.group().leader_id = ids[leader_at]  # (as after a static leader was replaced: it need not come first)
    keys.append(h.join(ids[-1]).key)
    ticks(h, 2 * n + 2)  # (enough for the members listed and answered a chunk a millisecond, if they are)
    assert len(answers(h, keys)) == n
    leader = h.group().leader_id
    assert leader is not None
    syncs = {m: h.sync(m).key for m in ids if m != leader}
    assert not any(key in h.responses for key in syncs.values())
    return syncs, {m: f"assignment-of-{m}".encode() for m in ids}


def test_the_leaders_sync_answers_itself_and_a_chunk_the_others_a_chunk_a_millisecond() -> None:
    h = harness(100)
    syncs, given = synced_parked(h, 350, leader_at=200)
    leader = h.group().leader_id
    assert leader is not None
    own = h.sync(leader, assignments=given)
    assert own.response.assignment == given[leader] and h.state is ClassicGroupState.STABLE
    for count in (99, 199, 299, 349):
        assert len(answers(h, list(syncs.values()))) == count
        h.sleep(1)
    for member_id, key in syncs.items():
        assert h.responses[key].assignment == given[member_id]
        assert h.member(member_id).awaiting_sync_key is None
    assert h.group().sync_answers_left == []


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 40), st.integers(1, 15))
def test_the_sync_answers_in_chunks_equal_those_of_one_call(members: int, chunk: int) -> None:
    outcomes = []
    for per_call in (None, chunk):
        h = harness(per_call)
        syncs, given = synced_parked(h, members)
        leader = h.group().leader_id
        assert leader is not None
        h.sync(leader, assignments=given)
        ticks(h, members)
        group = h.group()
        outcomes.append((answers(h, list(syncs.values())), group.state, sorted(group.pending_sync_members)))
    assert len(outcomes[0][0]) == members - 1 and outcomes[0] == outcomes[1]


def test_a_rebalance_starting_answers_every_sync_left_first() -> None:
    h = harness(10)
    syncs, given = synced_parked(h, 40)
    leader = h.group().leader_id
    assert leader is not None
    h.sync(leader, assignments=given)
    assert len(answers(h, list(syncs.values()))) == 9
    h.join_new()  # a newcomer: the Stable group rebalances, the parked SyncGroups told their assignments first
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert all(h.responses[key].assignment == given[m] for m, key in syncs.items())
    assert h.group().sync_answers_left == []
    ticks(h, 5)
    assert all(h.responses[key].assignment == given[m] for m, key in syncs.items())
