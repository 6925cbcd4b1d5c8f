"""The transaction coordinator over random operation sequences: InitProducerId (fresh sessions, KIP-360
sessions, bad timeouts), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (commit and abort), markers reported
written (of pending jobs, of stale and duplicate ones), and time passing (timeouts, expiration), with the
producer id and epoch drawn from the current session, an older one or nowhere, so that many are refused.
After every step:

* an operation that wrote no record left the coordinator's state and its next deadline as they were;
* the live coordinator equals one rebuilt from every record written so far (and from its snapshot records);
* Kafka's invariants hold: only an ongoing or preparing transaction has partitions or groups, epochs stay
  within int16, and a transaction is preparing exactly while the markers of a job are outstanding.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.model.errors import ErrorCode
from regroup.transactions.coordinator import TransactionCoordinator
from regroup.transactions.records import TxnRecord
from regroup.transactions.results import CountingProducerIds, MarkerJob, TxnConfig, TxnResult
from regroup.transactions.serde import decode, encode
from regroup.transactions.state import MAX_EPOCH, TxnState

IDS = ("a", "a", "a", "b", "b", "")
SESSIONS = ("current", "current", "current", "current", "stale", "random")
PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
CONFIG = TxnConfig(max_timeout_ms=10_000, id_expiration_ms=50_000)

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("init"),
            st.sampled_from(IDS),
            st.sampled_from((1, 5_000, 10_000, 10_000, 10_000, 0, 10_001)),
            st.sampled_from(("none", "none", *SESSIONS)),
        ),
        st.tuples(
            st.just("add"),
            st.sampled_from(IDS),
            st.sampled_from(SESSIONS),
            st.lists(st.sampled_from(PARTITIONS), max_size=3),
        ),
        st.tuples(st.just("offsets"), st.sampled_from(IDS), st.sampled_from(SESSIONS), st.sampled_from(("g", "h"))),
        st.tuples(st.just("end"), st.sampled_from(IDS), st.sampled_from(SESSIONS), st.booleans()),
        st.tuples(st.just("markers"), st.integers(0, 5)),
        st.tuples(st.just("time"), st.sampled_from((1, 100, 4_000, 10_001, 60_000))),
    ),
    max_size=60,
)


def _session(c: TransactionCoordinator, tid: str, how: str, seen: dict[str, tuple[int, int]]) -> tuple[int, int]:
    m = c.get(tid)
    if how == "current" and m is not None:
        return m.producer_id, m.producer_epoch
    if how == "stale" and tid in seen:
        return seen[tid]
    if how == "none":
        return -1, -1
    return 1234, 3


@settings(max_examples=300, deadline=None)
@given(ops)
def test_refused_changes_nothing_and_replay_rebuilds(sequence: list[tuple[Any, ...]]) -> None:
    c = TransactionCoordinator(CONFIG, CountingProducerIds(7))
    records: list[TxnRecord] = []
    jobs: list[MarkerJob] = []  # every job ever asked for (written again, some stale)
    seen: dict[str, tuple[int, int]] = {}
    now = 0
    for tid in ("a", "b"):  # most operations then find a session to act on
        records.extend(c.init_producer_id(tid, 10_000, -1, -1, now).records)
    for op in sequence:
        before, deadline_before = c.hard_state(), c.next_deadline()
        kind = op[0]
        result: TxnResult
        if kind == "init":
            pid, epoch = _session(c, op[1], op[3], seen)
            result = c.init_producer_id(op[1], op[2], pid, epoch, now)
        elif kind == "add":
            pid, epoch = _session(c, op[1], op[2], seen)
            result = c.add_partitions(op[1], pid, epoch, op[3], now)
        elif kind == "offsets":
            pid, epoch = _session(c, op[1], op[2], seen)
            result = c.add_offsets(op[1], pid, epoch, op[3], now)
        elif kind == "end":
            pid, epoch = _session(c, op[1], op[2], seen)
            result = c.end_txn(op[1], pid, epoch, op[3], now)
        elif kind == "markers":
            if not jobs:
                continue
            result = c.markers_written(jobs[op[1] % len(jobs)], now)
        else:
            now += op[1]
            result = c.advance(now)
        for m in before.values():
            seen[m.transactional_id] = (m.producer_id, m.producer_epoch)
        jobs.extend(result.markers)
        records.extend(result.records)
        if not result.records:
            assert c.hard_state() == before and c.next_deadline() == deadline_before, op
            assert not result.markers
        if result.error is not ErrorCode.NONE and result.error is not ErrorCode.CONCURRENT_TRANSACTIONS:
            assert not result.records, (op, result)
        rebuilt = TransactionCoordinator.from_records(records, CONFIG)
        assert rebuilt.hard_state() == c.hard_state()
        assert rebuilt.next_deadline() == c.next_deadline()
        assert TransactionCoordinator.from_records(c.snapshot_records(), CONFIG).hard_state() == c.hard_state()
        for m in c.hard_state().values():
            assert 0 <= m.producer_epoch <= MAX_EPOCH
            if m.state.completed:
                assert not m.partitions and not m.groups
            if m.state is not TxnState.EMPTY:
                assert m.start_ms >= 0
            assert m.state not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)
        pending = {(j.transactional_id, j.producer_id, j.producer_epoch) for j in c.pending_markers()}
        preparing = {
            (m.transactional_id, m.producer_id, m.producer_epoch) for m in c.hard_state().values() if m.state.preparing
        }
        assert pending == preparing
    assert [decode(encode(r)) for r in records] == records
