"""The transaction coordinator core, scenario by scenario, with Kafka's answers (transaction version 1):
sessions and epochs, the state machine, fencing, timeouts, expiration, KIP-360 retries and epoch exhaustion."""

from __future__ import annotations

import pytest

from regroup.model.errors import ErrorCode as E
from regroup.transactions.coordinator import TransactionCoordinator
from regroup.transactions.results import CountingProducerIds, MarkerJob, TxnConfig, TxnResult
from regroup.transactions.state import MAX_EPOCH, TxnState

T0 = 1_000_000
TIMEOUT = 60_000


def make(**config: int) -> TransactionCoordinator:
    return TransactionCoordinator(TxnConfig(**config), CountingProducerIds(100))


def replayed(c: TransactionCoordinator, records: list[object]) -> TransactionCoordinator:
    return TransactionCoordinator.from_records(records, c.config)  # type: ignore[arg-type]


class Log:
    """A coordinator and every record it wrote, checked against its replay after each call."""

    def __init__(self, c: TransactionCoordinator) -> None:
        self.c = c
        self.records: list[object] = []

    def __call__(self, result: TxnResult) -> TxnResult:
        self.records.extend(result.records)
        assert replayed(self.c, self.records).hard_state() == self.c.hard_state()
        return result


def test_a_new_id_gets_a_producer_id_and_epoch_0_and_each_init_bumps_the_epoch() -> None:
    c = make()
    log = Log(c)
    first = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0))
    assert (first.error, first.producer_id, first.producer_epoch) == (E.NONE, 100, 0)
    again = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0 + 1))
    assert (again.error, again.producer_id, again.producer_epoch) == (E.NONE, 100, 1)
    other = log(c.init_producer_id("other", TIMEOUT, -1, -1, T0))
    assert (other.producer_id, other.producer_epoch) == (101, 0)
    m = c.get("tx")
    assert m is not None and m.state is TxnState.EMPTY and m.timeout_ms == TIMEOUT


@pytest.mark.parametrize(
    ("tid", "timeout", "pid", "epoch", "error"),
    [
        ("", TIMEOUT, -1, -1, E.INVALID_REQUEST),
        ("tx", 0, -1, -1, E.INVALID_TRANSACTION_TIMEOUT),
        ("tx", -5, -1, -1, E.INVALID_TRANSACTION_TIMEOUT),
        ("tx", 900_001, -1, -1, E.INVALID_TRANSACTION_TIMEOUT),
        ("tx", TIMEOUT, 5, -1, E.INVALID_REQUEST),
        ("tx", TIMEOUT, -1, 3, E.INVALID_REQUEST),
    ],
)
def test_init_refusals_write_nothing(tid: str, timeout: int, pid: int, epoch: int, error: E) -> None:
    c = make()
    result = c.init_producer_id(tid, timeout, pid, epoch, T0)
    assert (result.error, result.records, c.hard_state()) == (error, (), {})


def test_the_maximum_timeout_is_accepted() -> None:
    assert make().init_producer_id("tx", 900_000, -1, -1, T0).error is E.NONE


def test_commit_prepares_writes_markers_then_completes() -> None:
    c = make()
    log = Log(c)
    s = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0))
    pid, epoch = s.producer_id, s.producer_epoch
    assert log(c.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)], T0 + 1)).error is E.NONE
    assert log(c.add_offsets("tx", pid, epoch, "g", T0 + 2)).error is E.NONE
    m = c.get("tx")
    assert m is not None and m.state is TxnState.ONGOING and m.start_ms == T0 + 1
    again = log(c.add_partitions("tx", pid, epoch, [("t", 1)], T0 + 3))
    assert again.error is E.NONE and again.records == ()  # already in: nothing to write
    end = log(c.end_txn("tx", pid, epoch, True, T0 + 4))
    assert end.error is E.NONE and c.get("tx").state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    assert end.markers == (
        MarkerJob(
            transactional_id="tx",
            producer_id=pid,
            producer_epoch=epoch,
            committed=True,
            partitions=frozenset({("t", 0), ("t", 1)}),
            groups=frozenset({"g"}),
            coordinator_epoch=0,
        ),
    )
    assert c.pending_markers() == list(end.markers)
    # while markers are written: retries and new work wait
    assert c.end_txn("tx", pid, epoch, True, T0 + 5).error is E.CONCURRENT_TRANSACTIONS
    assert c.end_txn("tx", pid, epoch, False, T0 + 5).error is E.INVALID_TXN_STATE
    assert c.add_partitions("tx", pid, epoch, [("t", 2)], T0 + 5).error is E.CONCURRENT_TRANSACTIONS
    assert c.init_producer_id("tx", TIMEOUT, -1, -1, T0 + 5).error is E.CONCURRENT_TRANSACTIONS
    assert c.check_produce("tx", pid, epoch, ("t", 0)) is E.CONCURRENT_TRANSACTIONS
    done = log(c.markers_written(end.markers[0], T0 + 6))
    m = c.get("tx")
    assert done.error is E.NONE and m is not None
    assert (m.state, m.partitions, m.groups) == (TxnState.COMPLETE_COMMIT, frozenset(), frozenset())
    assert m.producer_epoch == 0
    assert log(c.markers_written(end.markers[0], T0 + 7)).records == ()  # idempotent
    assert c.pending_markers() == []
    # a retried EndTxn(commit) is answered NONE, an abort now is refused
    assert c.end_txn("tx", pid, epoch, True, T0 + 8).error is E.NONE
    assert c.end_txn("tx", pid, epoch, False, T0 + 8).error is E.INVALID_TXN_STATE
    # the next transaction starts afresh
    assert log(c.add_partitions("tx", pid, epoch, [("t", 5)], T0 + 9)).error is E.NONE
    m = c.get("tx")
    assert m is not None and m.partitions == {("t", 5)} and m.start_ms == T0 + 9


def test_end_txn_errors() -> None:
    c = make()
    s = c.init_producer_id("tx", TIMEOUT, -1, -1, T0)
    pid, epoch = s.producer_id, s.producer_epoch
    assert c.end_txn("tx", pid, epoch, True, T0).error is E.INVALID_TXN_STATE  # Empty
    assert c.end_txn("nope", pid, epoch, True, T0).error is E.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn("tx", pid + 1, epoch, True, T0).error is E.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn("tx", pid, epoch + 1, True, T0).error is E.PRODUCER_FENCED
    assert c.end_txn("", pid, epoch, True, T0).error is E.INVALID_REQUEST
    assert c.add_partitions("tx", pid, epoch - 1, [("t", 0)], T0).error is E.PRODUCER_FENCED
    assert c.add_offsets("nope", pid, epoch, "g", T0).error is E.INVALID_PRODUCER_ID_MAPPING
    c.add_partitions("tx", pid, epoch, [("t", 0)], T0)
    aborted = c.end_txn("tx", pid, epoch, False, T0 + 1)
    assert aborted.error is E.NONE and aborted.markers[0].committed is False
    c.markers_written(aborted.markers[0], T0 + 2)
    assert c.end_txn("tx", pid, epoch, False, T0 + 3).error is E.NONE
    assert c.end_txn("tx", pid, epoch, True, T0 + 3).error is E.INVALID_TXN_STATE


def test_a_new_session_fences_the_old_one_and_aborts_its_transaction() -> None:
    c = make()
    log = Log(c)
    old = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0))
    pid = old.producer_id
    log(c.add_partitions("tx", pid, 0, [("t", 0)], T0))
    fence = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0 + 1))
    assert fence.error is E.CONCURRENT_TRANSACTIONS and len(fence.records) == 1
    (job,) = fence.markers
    assert (job.producer_epoch, job.committed, job.partitions) == (1, False, {("t", 0)})
    m = c.get("tx")
    assert m is not None and (m.state, m.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    # the old producer is fenced everywhere
    assert c.end_txn("tx", pid, 0, True, T0 + 2).error is E.PRODUCER_FENCED
    assert c.add_partitions("tx", pid, 0, [("t", 1)], T0 + 2).error is E.PRODUCER_FENCED
    assert c.check_produce("tx", pid, 0, ("t", 0)) is E.PRODUCER_FENCED
    # the new producer retries until the markers are written
    assert c.init_producer_id("tx", TIMEOUT, -1, -1, T0 + 2).error is E.CONCURRENT_TRANSACTIONS
    log(c.markers_written(job, T0 + 3))
    new = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0 + 4))
    assert (new.error, new.producer_id, new.producer_epoch) == (E.NONE, pid, 2)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    c = make()
    log = Log(c)
    s = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0))
    pid = s.producer_id
    log(c.add_partitions("tx", pid, 0, [("t", 0)], T0 + 10))
    assert c.next_deadline() == T0 + 10 + TIMEOUT + 1
    assert log(c.advance(T0 + 10 + TIMEOUT)).records == ()  # Kafka: start + timeout < now
    later = log(c.add_partitions("tx", pid, 0, [("t", 1)], T0 + 20))  # more partitions: the start stays
    assert later.error is E.NONE and c.next_deadline() == T0 + 10 + TIMEOUT + 1
    fired = log(c.advance(T0 + 10 + TIMEOUT + 1))
    (job,) = fired.markers
    assert (job.producer_epoch, job.committed, job.partitions) == (1, False, {("t", 0), ("t", 1)})
    assert c.check_produce("tx", pid, 0, ("t", 0)) is E.PRODUCER_FENCED
    assert c.end_txn("tx", pid, 0, False, T0 + 70_000).error is E.PRODUCER_FENCED
    assert c.next_deadline() is None  # preparing: the markers are the shell's to write
    log(c.markers_written(job, T0 + 70_001))
    m = c.get("tx")
    assert m is not None and (m.state, m.producer_epoch) == (TxnState.COMPLETE_ABORT, 1)


def test_idle_ids_expire() -> None:
    c = make(id_expiration_ms=1000)
    log = Log(c)
    log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0))
    assert c.next_deadline() == T0 + 1000
    assert log(c.advance(T0 + 999)).records == ()
    log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0 + 500))  # activity pushes it back
    assert log(c.advance(T0 + 1000)).records == ()
    gone = log(c.advance(T0 + 1500))
    assert [r.value for r in gone.records] == [None] and c.get("tx") is None
    again = log(c.init_producer_id("tx", TIMEOUT, -1, -1, T0 + 2000))
    assert (again.producer_id, again.producer_epoch) == (101, 0)  # a new producer id


def test_an_ongoing_transaction_never_expires() -> None:
    c = make(id_expiration_ms=10)
    s = c.init_producer_id("tx", TIMEOUT, -1, -1, T0)
    c.add_partitions("tx", s.producer_id, 0, [("t", 0)], T0)
    assert c.advance(T0 + TIMEOUT).records == ()
    assert c.get("tx") is not None


def test_kip_360_session_retry_and_fencing() -> None:
    c = make()
    s = c.init_producer_id("tx", TIMEOUT, -1, -1, T0)
    pid = s.producer_id
    bumped = c.init_producer_id("tx", TIMEOUT, pid, 0, T0 + 1)  # the producer names its session
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (E.NONE, pid, 1)
    retry = c.init_producer_id("tx", TIMEOUT, pid, 0, T0 + 2)  # it never heard the answer
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, 1)
    assert c.init_producer_id("tx", TIMEOUT, pid, 7, T0 + 3).error is E.PRODUCER_FENCED
    assert c.init_producer_id("tx", TIMEOUT, pid + 50, 1, T0 + 3).error is E.PRODUCER_FENCED


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    c = make()
    s = c.init_producer_id("tx", TIMEOUT, -1, -1, T0)
    pid = s.producer_id
    for epoch in range(1, MAX_EPOCH):  # up to 32766, the last epoch handed out
        assert c.init_producer_id("tx", TIMEOUT, -1, -1, T0).producer_epoch == epoch
    rotated = c.init_producer_id("tx", TIMEOUT, pid, MAX_EPOCH - 1, T0)
    assert (rotated.error, rotated.producer_epoch) == (E.NONE, 0) and rotated.producer_id != pid
    retry = c.init_producer_id("tx", TIMEOUT, pid, MAX_EPOCH - 1, T0)  # a retry of the rotation
    assert (retry.producer_id, retry.producer_epoch) == (rotated.producer_id, 0)


def test_verify_and_offsets_checks() -> None:
    c = make()
    s = c.init_producer_id("tx", TIMEOUT, -1, -1, T0)
    pid = s.producer_id
    assert c.check_produce("tx", pid, 0, ("t", 0)) is E.TRANSACTION_ABORTABLE
    assert c.check_produce("nope", pid, 0, ("t", 0)) is E.INVALID_PRODUCER_ID_MAPPING
    c.add_partitions("tx", pid, 0, [("t", 0)], T0)
    assert c.check_produce("tx", pid, 0, ("t", 0)) is E.NONE
    assert c.check_produce("tx", pid, 0, ("t", 1)) is E.TRANSACTION_ABORTABLE
    assert c.check_offsets("tx", pid, 0, "g") is E.TRANSACTION_ABORTABLE
    c.add_offsets("tx", pid, 0, "g", T0)
    assert c.check_offsets("tx", pid, 0, "g") is E.NONE
    assert c.verify_partitions("tx", pid, 0, [("t", 0), ("t", 9)]) == {
        ("t", 0): E.NONE,
        ("t", 9): E.TRANSACTION_ABORTABLE,
    }
    assert c.verify_partitions("tx", pid, 3, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}


def test_orphans_get_abort_markers() -> None:
    c = make()
    s = c.init_producer_id("tx", TIMEOUT, -1, -1, T0)
    pid = s.producer_id
    c.add_partitions("tx", pid, 0, [("t", 0)], T0)
    jobs = c.orphans({("t", 0): [(pid, 0), (999, 4)], ("t", 1): [(pid, 0)]})
    assert [(j.transactional_id, j.producer_id, j.producer_epoch, j.committed, j.partitions) for j in jobs] == [
        (None, 999, 4, False, {("t", 0)}),
        (None, pid, 0, False, {("t", 1)}),
    ]
