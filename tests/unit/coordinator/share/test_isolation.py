"""``share.isolation.level=read_committed`` in the core, scenario by scenario (Kafka 4.2's ``SharePartition``):
which batches of a read belong to aborted transactions, a share partition acquiring only below the last stable
offset, archiving the records of aborted transactions it acquires instead of delivering them, and, through the
coordinator, what that writes and what a restart makes of it."""

from __future__ import annotations

import uuid
from pathlib import Path

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.share.group import ShareGroup
from regroup.coordinator.share.isolation import LogBatch, aborted_batches
from regroup.coordinator.share.partition import (
    ACCEPT,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    RELEASE,
    AckBatch,
    Acquired,
    ShareError,
    SharePartition,
    StateBatch,
)
from regroup.model.cluster import ClusterImage, TopicImage
from regroup.protocol.share import ShareAcquisition, ShareGroupHeartbeatRequest, ShareRead
from regroup.records.model import Record
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy

LOCK = 30_000
T = uuid.UUID(int=21)
TP = (T, 0)
P, Q = 7, 8  # two transactional producers


def states(p: SharePartition) -> dict[int, tuple[int, int]]:
    """offset -> (state, delivery count) over the window"""
    return {r.offset: (r.state, r.delivery_count) for r in p.in_flight()}


def data(first: int, last: int, producer: int = -1) -> LogBatch:
    """A data batch: transactional when it has a producer."""
    return LogBatch(first, last, producer, transactional=producer >= 0)


def marker(offset: int, producer: int, *, aborts: bool) -> LogBatch:
    return LogBatch(offset, offset, producer, transactional=True, abort_marker=aborts)


# --- the batches of aborted transactions ---


def test_given_committed_aborted_and_plain_batches_when_walked_then_only_the_aborted_ones_are_named() -> None:
    read = [
        data(0, 1),  # no producer
        data(2, 4, P),  # committed
        marker(5, P, aborts=False),
        data(6, 6, P),  # aborted
        data(7, 9, P),  # aborted
        marker(10, P, aborts=True),
        data(11, 12, P),  # the producer's next transaction, not aborted
    ]
    assert aborted_batches(read, [(P, 6)]) == ((6, 6), (7, 9))


def test_given_no_aborted_transaction_when_walked_then_nothing_is_named() -> None:
    assert aborted_batches([data(0, 4, P), marker(5, P, aborts=False)], []) == ()


def test_given_interleaved_producers_when_one_aborts_then_only_its_batches_are_named() -> None:
    read = [data(0, 1, P), data(2, 3, Q), data(4, 5, P), data(6, 7, Q), marker(8, P, aborts=False)]
    read += [marker(9, Q, aborts=True), data(10, 10, Q)]
    assert aborted_batches(read, [(Q, 2)]) == ((2, 3), (6, 7))


def test_given_a_read_starting_inside_an_aborted_transaction_when_walked_then_its_batches_are_named() -> None:
    # the transaction began at 0, before the read's first batch; the log's index still names it
    assert aborted_batches([data(3, 5, P), marker(6, P, aborts=True), data(7, 7)], [(P, 0)]) == ((3, 5),)


def test_given_the_same_producer_aborting_twice_when_walked_then_each_takes_effect_at_its_first_offset() -> None:
    read = [data(0, 0, P), marker(1, P, aborts=True), data(2, 2, P), marker(3, P, aborts=False)]
    read += [data(4, 4, P), marker(5, P, aborts=True)]
    assert aborted_batches(read, [(P, 4), (P, 0)]) == ((0, 0), (4, 4))


def test_given_a_non_transactional_batch_of_the_producer_when_walked_then_it_is_not_named() -> None:
    plain = LogBatch(1, 1, P, transactional=False)
    assert aborted_batches([data(0, 0, P), plain, marker(2, P, aborts=True)], [(P, 0)]) == ((0, 0),)


# --- acquiring below the last stable offset ---


def test_given_the_last_stable_offset_when_acquiring_then_nothing_at_or_past_it_is_taken() -> None:
    p = SharePartition(0)
    lso = 4  # an open transaction's first record is offset 4; the log ends at 10
    assert p.next_available(lso) == 0
    assert p.acquire("a", lso, 100, 0, LOCK) == [Acquired(0, 3, 1)]
    assert p.next_available(lso) is None
    assert p.acquire("b", lso, 100, 0, LOCK) == []
    assert p.end_offset == 4
    # the transaction commits: its marker is offset 10, the last stable offset the log end 11
    assert p.next_available(11) == 4
    assert p.acquire("b", 11, 100, 0, LOCK) == [Acquired(4, 10, 1)]


def test_given_a_window_past_the_last_stable_offset_when_acquiring_then_released_records_above_it_wait() -> None:
    # read_uncommitted fetches took 0..9; then the group switched to read_committed with a transaction open at 6
    p = SharePartition(0)
    p.acquire("a", 10, 10, 0, LOCK)
    assert p.acknowledge("a", [AckBatch(0, 9, (RELEASE,))], 0, LOCK) is ShareError.NONE
    assert p.next_available(6) == 0
    assert p.acquire("b", 6, 100, 0, LOCK) == [Acquired(0, 5, 2)]
    assert p.next_available(6) is None
    assert states(p)[6] == (AVAILABLE, 1)
    assert p.acquire("b", 10, 100, 0, LOCK, min_offset=6) == [Acquired(6, 9, 2)]


# --- archiving the records of aborted transactions ---


def test_given_acquired_records_of_an_aborted_transaction_when_archived_then_only_the_others_are_delivered() -> None:
    # 0-1 plain, 2-4 aborted, 5 its ABORT marker, 6-7 plain
    p = SharePartition(0)
    acquired = p.acquire("a", 8, 100, 0, LOCK)
    assert acquired == [Acquired(0, 7, 1)]
    assert p.archive_acquired(acquired, [(2, 4)]) == [Acquired(0, 1, 1), Acquired(5, 7, 1)]
    assert states(p) == {
        0: (ACQUIRED, 1),
        1: (ACQUIRED, 1),
        2: (ARCHIVED, 1),
        3: (ARCHIVED, 1),
        4: (ARCHIVED, 1),
        5: (ACQUIRED, 1),
        6: (ACQUIRED, 1),
        7: (ACQUIRED, 1),
    }
    assert p.held_by("a") == 5
    # the marker is the member's to acknowledge as a gap; then everything up to 8 is done
    done = [AckBatch(0, 1, (ACCEPT,)), AckBatch(5, 5, (GAP,)), AckBatch(6, 7, (ACCEPT,))]
    assert p.acknowledge("a", done, 0, LOCK) is ShareError.NONE
    assert (p.start_offset, p.end_offset, states(p)) == (8, 8, {})


def test_given_aborted_records_at_the_start_when_archived_then_the_start_moves_past_them() -> None:
    p = SharePartition(10)
    acquired = p.acquire("a", 16, 100, 0, LOCK)
    assert p.archive_acquired(acquired, [(8, 12)]) == [Acquired(13, 15, 1)]
    assert (p.start_offset, p.end_offset) == (13, 16)
    assert p.next_deadline() == LOCK


def test_given_only_aborted_records_when_archived_then_nothing_is_delivered_and_the_window_is_done() -> None:
    p = SharePartition(0)
    acquired = p.acquire("a", 3, 100, 0, LOCK)
    assert p.archive_acquired(acquired, [(0, 2)]) == []
    assert (p.start_offset, p.end_offset, p.acquired_count(), p.next_deadline()) == (3, 3, 0, None)


def test_given_redelivered_records_when_archived_then_they_keep_the_delivery_their_acquisition_counted() -> None:
    # acquired under read_uncommitted and released: under read_committed their next acquisition archives them
    p = SharePartition(0)
    p.acquire("a", 4, 100, 0, LOCK)
    p.acknowledge("a", [AckBatch(0, 0, (ACCEPT,)), AckBatch(1, 3, (RELEASE,))], 0, LOCK)
    acquired = p.acquire("b", 4, 100, 0, LOCK)
    assert acquired == [Acquired(1, 3, 2)]
    assert p.archive_acquired(acquired, [(2, 2)]) == [Acquired(1, 1, 2), Acquired(3, 3, 2)]
    assert states(p) == {1: (ACQUIRED, 2), 2: (ARCHIVED, 2), 3: (ACQUIRED, 2)}
    assert p.state_batches() == (
        StateBatch(1, 1, AVAILABLE, 2),
        StateBatch(2, 2, ARCHIVED, 2),
        StateBatch(3, 3, AVAILABLE, 2),
    )


def test_given_records_held_by_another_member_when_archiving_then_they_are_left_alone() -> None:
    p = SharePartition(0)
    p.acquire("a", 2, 100, 0, LOCK)  # a holds 0-1
    mine = p.acquire("b", 4, 100, 0, LOCK)  # b takes 2-3
    assert p.archive_acquired(mine, [(0, 3)]) == []
    assert states(p) == {0: (ACQUIRED, 1), 1: (ACQUIRED, 1), 2: (ARCHIVED, 1), 3: (ARCHIVED, 1)}
    assert p.held_by("a") == 2


# --- through the coordinator ---


def share_group() -> tuple[GroupCoordinator, list[Record]]:
    """A share group "q" with member m1 and partition TP started at offset 0."""
    c = GroupCoordinator()
    c.update_metadata(ClusterImage.of([TopicImage(topic_id=T, name="jobs", partitions=1)]), 0)
    req = ShareGroupHeartbeatRequest(group_id="q", member_id="m1", subscribed_topic_names=("jobs",))
    records = list(c.share_group_heartbeat(req, ("hb", 0), 10).records)
    records += c.initialize_share_partitions("q", {TP: 0}, None, 20).records
    return c, records


def partition_of(c: GroupCoordinator) -> SharePartition:
    group = c.groups.typed("q", ShareGroup)
    assert group is not None
    return group.partitions[TP]


def test_given_a_read_with_aborted_batches_when_the_coordinator_acquires_then_it_counts_them_and_writes_nothing() -> (
    None
):
    c, _ = share_group()
    # 0-2 aborted, 3 the ABORT marker, 4-5 committed, 6 the COMMIT marker
    result = c.share_acquire("q", "m1", {TP: ShareRead(0, 7, ((0, 2),))}, 100, ("acq", 0), 30)
    assert result.response_for(("acq", 0)) == ShareAcquisition(acquired={TP: ((3, 6, 1),)}, lock_ms=LOCK, archived=3)
    assert result.records == []  # as in Kafka, the archive is not written by the acquisition
    assert (partition_of(c).start_offset, partition_of(c).held_by("m1")) == (3, 4)


def test_given_max_records_when_aborted_records_are_archived_then_they_count_against_the_acquisition() -> None:
    c, _ = share_group()
    result = c.share_acquire("q", "m1", {TP: ShareRead(0, 7, ((0, 2),))}, 4, ("acq", 0), 30)
    assert result.response_for(("acq", 0)) == ShareAcquisition(acquired={TP: ((3, 3, 1),)}, lock_ms=LOCK, archived=3)


def test_given_an_archive_not_yet_written_when_the_server_restarts_then_the_next_acquisition_archives_again(
    tmp_path: Path,
) -> None:
    c, records = share_group()
    c.share_acquire("q", "m1", {TP: ShareRead(0, 4, ((0, 2),))}, 100, ("acq", 0), 30)
    log = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    log.append(records)
    log.close()
    reopened = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    rebuilt = reopened.load(1_000)
    reopened.close()
    assert (partition_of(rebuilt).start_offset, partition_of(rebuilt).end_offset) == (0, 0)
    again = rebuilt.share_acquire("q", "m1", {TP: ShareRead(0, 4, ((0, 2),))}, 100, ("acq", 1), 2_000)
    assert again.response_for(("acq", 1)) == ShareAcquisition(acquired={TP: ((3, 3, 1),)}, lock_ms=LOCK, archived=3)


def test_given_an_archive_when_the_next_acknowledgement_is_written_then_it_carries_the_archive(tmp_path: Path) -> None:
    c, records = share_group()
    c.share_acquire("q", "m1", {TP: ShareRead(0, 5, ((1, 2),))}, 100, ("acq", 0), 30)
    acked = c.share_acknowledge("q", "m1", {TP: (AckBatch(0, 0, (ACCEPT,)),)}, ("ack", 0), 40)
    records += acked.records
    log = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    log.append(records)
    log.close()
    reopened = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    rebuilt = reopened.load(1_000)
    reopened.close()
    assert partition_of(rebuilt).start_offset == 3  # 0 accepted, 1-2 archived: done for good
    assert states(partition_of(rebuilt)) == {3: (AVAILABLE, 1), 4: (AVAILABLE, 1)}
    # a read without aborted batches (read_uncommitted from now on) still never gets 1-2
    later = rebuilt.share_acquire("q", "m1", {TP: (0, 5)}, 100, ("acq", 1), 2_000)
    assert later.response_for(("acq", 1)) == ShareAcquisition(acquired={TP: ((3, 4, 2),)}, lock_ms=LOCK)
