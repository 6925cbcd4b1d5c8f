"""A large classic group with ``classic_members_per_call``: a completed join phase lists the members for the
leader's JoinGroup answer a chunk a call, then answers the JoinGroups as one call would have (a rebalance meanwhile
leaves them to the next completion); the leader's SyncGroup stores the assignment of a
chunk of members in its own call and the others a chunk a millisecond; the call after the last chunk writes the
group's record, makes the group Stable and answers the parked SyncGroups, everything as one call would have left
it (records, answers, assignments, what a reload rebuilds). A rebalance meanwhile abandons the assignment: the leader's
SyncGroup is answered REBALANCE_IN_PROGRESS and nothing of it is written; a leader's retry meanwhile waits for
the assignment being stored."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.classic.group import ClassicGroupState
from regroup.coordinator.config import CoordinatorConfig
from regroup.model.errors import ErrorCode
from regroup.records.model import GroupMetadataKey, Record
from tests.coordinator.harness import GroupHarness
from tests.coordinator.test_classic_join_answers import answers, parked, synced_parked, ticks


def harness(assignments: int | None, answered: int | None = None) -> GroupHarness:
    return GroupHarness(
        CoordinatorConfig(
            group_initial_rebalance_delay_ms=0,
            classic_answers_per_call=answered,
            classic_members_per_call=assignments,
        )
    )


def group_records(records: list[Record]) -> list[Record]:
    return [r for r in records if isinstance(r.key, GroupMetadataKey)]


def test_a_large_leaders_assignment_is_stored_a_chunk_a_millisecond() -> None:
    h = harness(100)
    syncs, given = synced_parked(h, 350, leader_at=120)
    leader = h.group().leader_id
    assert leader is not None
    before = {m: h.member(m).assignment for m in given}
    mark = h.mark()
    own = h.sync(leader, assignments=given)
    for _ in range(4):  # the leader's call stored 100, each millisecond 100 more, the record a millisecond later
        assert not own.done and h.state is ClassicGroupState.COMPLETING_REBALANCE
        assert group_records(h.records_since(mark)) == [] and not answers(h, list(syncs.values()))
        assert {m: h.member(m).assignment for m in given} == before  # (the members hold theirs once all is)
        h.sleep(1)
    assert h.state is ClassicGroupState.STABLE and own.response.assignment == given[leader]
    (record,) = group_records(h.records_since(mark))
    assert record.value is not None and [m.assignment for m in record.value.members] == list(given.values())
    assert all(h.responses[key].assignment == given[m] for m, key in syncs.items())
    assert all(h.member(m).assignment == given[m] for m in given) and h.group().assigning is None


@settings(max_examples=25, deadline=None)
@given(
    members=st.integers(2, 40),
    chunk=st.integers(1, 15),
    answered=st.none() | st.integers(1, 15),
    leader_at=st.integers(0, 39),
)
def test_a_leaders_assignment_stored_in_chunks_is_the_one_call_stores(
    members: int, chunk: int, answered: int | None, leader_at: int
) -> None:
    """The records written, every SyncGroup's answer, the group's state and members' assignments once all is
    done, and the group a reload rebuilds from the records: the same as without chunks."""
    outcomes = []
    for per_call in (None, chunk):
        h = harness(per_call, answered)
        syncs, assignments = synced_parked(h, members, leader_at=leader_at % members)
        leader = h.group().leader_id
        assert leader is not None
        mark = h.mark()
        # (every third member left out of the leader's assignment: it is stored with none)
        own = h.sync(leader, assignments={m: a for i, (m, a) in enumerate(assignments.items()) if i % 3})
        ticks(h, 2 * members + 2)
        group = h.group()
        written = group_records(h.records_since(mark))
        state = (group.state, group.generation, {m.member_id: m.assignment for m in group.members.values()})
        h.reload()
        reloaded = h.group()
        assert (reloaded.state, reloaded.generation) == state[:2]
        assert {m.member_id: m.assignment for m in reloaded.members.values()} == state[2]
        outcomes.append((written, own.response, answers(h, list(syncs.values())), state))
    assert outcomes[0][3][0] is ClassicGroupState.STABLE and len(outcomes[0][0]) == 1
    assert outcomes[0] == outcomes[1]


def test_a_rebalance_while_the_assignment_is_stored_abandons_it() -> None:
    """A newcomer joins before the last chunk: the group rebalances as if the leader's SyncGroup had come after
    the newcomer; the leader's SyncGroup and the parked ones are answered REBALANCE_IN_PROGRESS, nothing of the
    assignment is written or kept, and the timer's next chunk does nothing."""
    h = harness(10)
    syncs, given = synced_parked(h, 40)
    leader = h.group().leader_id
    assert leader is not None
    mark = h.mark()
    own = h.sync(leader, assignments=given)
    h.sleep(1)
    assert h.group().assigning is not None
    h.join_new()
    assert h.state is ClassicGroupState.PREPARING_REBALANCE and h.group().assigning is None
    assert own.response.error is ErrorCode.REBALANCE_IN_PROGRESS
    assert {h.responses[key].error for key in syncs.values()} == {ErrorCode.REBALANCE_IN_PROGRESS}
    ticks(h, 10)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE
    assert group_records(h.records_since(mark)) == []
    assert all(m.assignment == b"" for m in h.group().members.values())  # (cleared, as any rebalance from here)


def test_a_member_leaving_while_the_assignment_is_stored_abandons_it() -> None:
    h = harness(10)
    syncs, given = synced_parked(h, 40)
    leader = h.group().leader_id
    assert leader is not None
    own = h.sync(leader, assignments=given)
    gone = next(iter(syncs))
    h.leave(gone)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE and h.group().assigning is None
    assert own.response.error is ErrorCode.REBALANCE_IN_PROGRESS
    ticks(h, 10)
    assert h.state is ClassicGroupState.PREPARING_REBALANCE


def test_a_leaders_retry_while_the_assignment_is_stored_waits_for_it() -> None:
    """The leader sends its SyncGroup again (a retry) before the last chunk: the first is superseded, as any
    parked SyncGroup a retry replaces; the retry is answered with the assignment first stored, once stored."""
    h = harness(10)
    syncs, given = synced_parked(h, 40)
    leader = h.group().leader_id
    assert leader is not None
    first = h.sync(leader, assignments=given)
    h.sleep(1)
    retry = h.sync(leader, assignments={m: b"other" for m in given})
    assert first.dropped and not retry.done
    ticks(h, 5)
    assert h.state is ClassicGroupState.STABLE and retry.response.assignment == given[leader]
    assert all(h.responses[key].assignment == given[m] for m, key in syncs.items())


# ------------------------------------------------------------------------ the leader's JoinGroup answer, listed
def test_a_large_groups_members_are_listed_for_the_leader_a_chunk_a_millisecond() -> None:
    """The join phase of 350 members completes: they are listed for the leader's answer 100 a call, and the call
    after the last chunk answers the leader (with all 350) and the other JoinGroups; until then none is."""
    h = harness(100)
    ids, keys = parked(h, 350)
    keys.append(h.join(ids[-1]).key)
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE
    for _ in range(4):  # 100 listed in the completing call, 100 more each millisecond, the answers after
        assert not answers(h, keys) and h.group().listing is not None
        h.sleep(1)
    answered = answers(h, keys)
    assert len(answered) == 350 and h.group().listing is None
    leader = answered[keys[0]]
    assert leader.leader == ids[0] and [m.member_id for m in leader.members] == ids
    assert {r.generation_id for r in answered.values()} == {h.group().generation}


@settings(max_examples=25, deadline=None)
@given(members=st.integers(2, 40), chunk=st.integers(1, 15), answered=st.none() | st.integers(1, 15))
def test_members_listed_in_chunks_get_the_answers_of_one_call(members: int, chunk: int, answered: int | None) -> None:
    outcomes = []
    for per_call in (None, chunk):
        h = harness(per_call, answered)
        ids, keys = parked(h, members)
        keys.append(h.join(ids[-1]).key)
        ticks(h, 2 * members + 2)
        group = h.group()
        outcomes.append(
            (answers(h, keys), group.state, group.generation, group.leader_id, sorted(group.pending_sync_members))
        )
    assert len(outcomes[0][0]) == members and outcomes[0] == outcomes[1]


def test_a_rebalance_while_the_members_are_listed_leaves_them_to_the_next_completion() -> None:
    """A newcomer joins before the leader's answer: the group rebalances, and since every member is still parked
    in its JoinGroup the join phase completes again at once; no JoinGroup is answered with the generation
    nobody was told of, and the new completion answers every parked one, the newcomer's too, with its own."""
    h = harness(10)
    ids, keys = parked(h, 40)
    keys.append(h.join(ids[-1]).key)
    completed = h.group().generation
    h.sleep(1)
    newcomer = h.join_new()
    assert h.state is ClassicGroupState.COMPLETING_REBALANCE and h.group().generation == completed + 1
    assert not answers(h, keys) and not newcomer.done
    ticks(h, 10)
    later = answers(h, [*keys, newcomer.key])
    assert len(later) == 41 and {r.generation_id for r in later.values()} == {completed + 1}
    assert len(later[keys[0]].members) == 41  # (the leader's answer lists the newcomer)
