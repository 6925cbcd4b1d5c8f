"""Scenarios T01-T07 of docs/protocol.md: offsets committed inside a transaction (TxnOffsetCommit, KIP-98 and
KIP-447). They are pending per producer — a fetch asking for stable offsets gets UNSTABLE_OFFSET_COMMIT —
until the transaction's marker reaches the group coordinator (``complete_transaction``): a commit
materialises them, an abort drops them."""

from __future__ import annotations

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import FetchedOffset
from tests.coordinator.consumer_harness import ConsumerHarness
from tests.coordinator.test_migration import classic_group

E = ErrorCode
PRODUCER = 7


def _fetch(h: ConsumerHarness, partitions: list[int], *, stable: bool = False) -> tuple[FetchedOffset, ...]:
    ((_, rows),) = h.fetch({"foo": partitions}, require_stable=stable).topics
    return rows


def test_T01_a_member_commits_inside_a_transaction_and_the_offset_stays_pending() -> None:
    """Given a Stable classic group of consumers with foo-0 committed at 1;
    when a member sends TxnOffsetCommit foo-0 = 5 with its generation, as producer 7;
    then NONE, one pending-offset record is written (nothing else); a plain fetch still shows 1, a fetch
    asking for stable offsets gets UNSTABLE_OFFSET_COMMIT for foo-0 and the value of foo-1."""
    h = ConsumerHarness()
    formed = classic_group(h)
    h.commit(formed.leader, formed.generation, {("foo", 0): 1, ("foo", 1): 2})
    response = h.txn_commit(PRODUCER, {("foo", 0): 5}, member_id=formed.leader, generation=formed.generation)
    assert response.topics == (("foo", ((0, E.NONE),)),)
    assert h.written() == ["pending offset foo-0 of producer 7=5"]
    assert _fetch(h, [0]) == (FetchedOffset(partition=0, offset=1),)
    assert _fetch(h, [0, 1], stable=True) == (
        FetchedOffset(partition=0, error=E.UNSTABLE_OFFSET_COMMIT),
        FetchedOffset(partition=1, offset=2),
    )


def test_T02_the_transaction_commits_and_its_offsets_become_the_groups() -> None:
    """Given a pending transactional offset foo-0 = 5 of producer 7;
    when the transaction's commit marker arrives, and then again;
    then the first writes the commit marker (the pending offset becomes the committed one), the second writes
    nothing; a stable fetch now shows 5."""
    h = ConsumerHarness()
    h.topics(foo=2)
    h.txn_commit(PRODUCER, {("foo", 0): 5})
    h.end_txn(PRODUCER, committed=True)
    assert h.written() == ["commit marker of producer 7"]
    h.end_txn(PRODUCER, committed=True)
    assert h.written() == []
    assert _fetch(h, [0], stable=True) == (FetchedOffset(partition=0, offset=5),)


def test_T03_an_aborted_transaction_leaves_the_committed_offsets_alone() -> None:
    """Given foo-0 committed at 1 and a pending transactional offset foo-0 = 5;
    when the transaction aborts;
    then the abort marker is written (the pending offset goes) and every fetch shows 1."""
    h = ConsumerHarness()
    h.topics(foo=1)
    h.commit("", -1, {("foo", 0): 1})
    h.txn_commit(PRODUCER, {("foo", 0): 5})
    h.end_txn(PRODUCER, committed=False)
    assert h.written() == ["abort marker of producer 7"]
    assert _fetch(h, [0], stable=True) == _fetch(h, [0]) == (FetchedOffset(partition=0, offset=1),)


def test_T04_an_offset_committed_after_the_transactional_one_is_kept() -> None:
    """Given a pending transactional offset foo-0 = 5, then a plain commit foo-0 = 9 (after it), and a
    pending foo-1 = 6;
    when the transaction commits (also after a reload from the log's snapshot);
    then foo-0 stays 9 (Kafka compares the records' positions) and foo-1 becomes 6."""
    for reload in (False, True):
        h = ConsumerHarness()
        h.topics(foo=2)
        h.txn_commit(PRODUCER, {("foo", 0): 5})
        h.commit("", -1, {("foo", 0): 9})
        h.txn_commit(PRODUCER, {("foo", 1): 6})
        if reload:
            snapshot = h.coordinator.snapshot_records()
            h.coordinator = GroupCoordinator.from_records(snapshot, h.now_ms, h.config)
        h.end_txn(PRODUCER, committed=True)
        assert h.written() == ["commit marker of producer 7"], reload
        assert _fetch(h, [0, 1]) == (FetchedOffset(partition=0, offset=9), FetchedOffset(partition=1, offset=6))


def test_T05_validation_of_a_transactional_commit() -> None:
    """Given no group "new", a classic group in CompletingRebalance and a KIP-848 consumer group;
    when transactional commits arrive: to "new" with generation 1 and with -1; to the classic group
    anonymously and from its member with the new generation; to the consumer group with a stale epoch and
    from an unknown member;
    then ILLEGAL_GENERATION; accepted (a simple group is created); both accepted (no member or rebalance
    check for a transaction's commit, Kafka); ILLEGAL_GENERATION (not STALE_MEMBER_EPOCH);
    UNKNOWN_MEMBER_ID. Refused ones write nothing."""
    h = ConsumerHarness()
    h.topics(foo=2)
    assert h.txn_commit(PRODUCER, {("foo", 0): 1}, generation=1, group_id="new").topics == (
        ("foo", ((0, E.ILLEGAL_GENERATION),)),
    )
    assert h.written() == [] and "new" not in h.coordinator.groups
    assert h.txn_commit(PRODUCER, {("foo", 0): 1}, group_id="new").topics == (("foo", ((0, E.NONE),)),)
    assert "new" in h.coordinator.groups

    formed = classic_group(h)
    h.join(formed.leader)
    for m in formed.followers:
        h.join(m)
    assert h.group().state.value == "CompletingRebalance"
    generation = h.group().generation
    assert h.txn_commit(8, {("foo", 0): 2}).topics == (("foo", ((0, E.NONE),)),)
    assert h.txn_commit(9, {("foo", 0): 3}, member_id=formed.leader, generation=generation).topics == (
        ("foo", ((0, E.NONE),)),
    )

    joined = h.hb("", 0, topics=["foo"], group_id="kip848")
    stale = h.txn_commit(10, {("foo", 0): 4}, member_id=joined.member_id, generation=0, group_id="kip848")
    assert stale.topics == (("foo", ((0, E.ILLEGAL_GENERATION),)),)
    unknown = h.txn_commit(10, {("foo", 0): 4}, member_id="nobody", generation=1, group_id="kip848")
    assert unknown.topics == (("foo", ((0, E.UNKNOWN_MEMBER_ID),)),)
    assert h.written() == []
    ok = h.txn_commit(
        10, {("foo", 0): 4}, member_id=joined.member_id, generation=joined.member_epoch, group_id="kip848"
    )
    assert ok.topics == (("foo", ((0, E.NONE),)),)


def test_T06_pending_offsets_survive_a_reload_and_keep_their_group() -> None:
    """Given a simple group whose only offset is pending in producer 7's transaction;
    when the coordinator is rebuilt from its records and the offsets cleanup runs long after retention;
    then the pending offset is still there (a stable fetch is UNSTABLE_OFFSET_COMMIT), the group is not
    deleted, and the rebuilt coordinator equals the live one."""
    h = ConsumerHarness()
    h.topics(foo=1)
    h.txn_commit(PRODUCER, {("foo", 0): 5})
    live = h.coordinator.hard_state()
    h.reload()
    assert h.coordinator.hard_state() == live
    h.sleep(h.config.offsets_retention_ms + 2 * h.config.offsets_retention_check_interval_ms)
    assert "group" in h.coordinator.groups
    assert _fetch(h, [0], stable=True) == (FetchedOffset(partition=0, error=E.UNSTABLE_OFFSET_COMMIT),)


def test_T07_offset_delete_also_removes_what_a_pending_transaction_would_not_overwrite() -> None:
    """Given an empty group with foo-0 committed at 1 and pending at 5 in producer 7's transaction;
    when OffsetDelete names foo-0, then the transaction commits;
    then the committed offset is deleted (a tombstone is written because an offset is pending, as Kafka
    does), and the commit then materialises 5."""
    h = ConsumerHarness()
    h.topics(foo=1)
    h.commit("", -1, {("foo", 0): 1})
    h.txn_commit(PRODUCER, {("foo", 0): 5})
    assert h.delete_offsets({"foo": [0]}).topics == (("foo", ((0, E.NONE),)),)
    assert h.written() == ["delete offset foo-0"]
    h.end_txn(PRODUCER, committed=True)
    assert _fetch(h, [0]) == (FetchedOffset(partition=0, offset=5),)
