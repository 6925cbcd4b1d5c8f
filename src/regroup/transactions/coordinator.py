"""``TransactionCoordinator``: the facade the shells drive (Kafka's ``TransactionCoordinator`` with
transaction version 1: one producer epoch per producer session, bumped by InitProducerId and by fencing).

Each operation is ``op(..., now_ms) -> TxnResult``. It checks the request and either refuses it (an error
and no records: nothing changed) or builds the transactional id's next metadata, emits it as a record and
applies the record through ``replay.Transactions`` at once — so the live coordinator is what replaying its
records gives. A result may ask for markers (``MarkerJob``): the shell writes them once the result's
records are durable, then reports with ``markers_written``. Error codes are Kafka's, before the per-version
translation the shell does (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for old versions).

Transitions (Kafka's ``TransactionState.validPreviousStates``): Empty/CompleteCommit/CompleteAbort →
Empty (InitProducerId) or Ongoing (AddPartitionsToTxn, AddOffsetsToTxn); Ongoing → PrepareCommit or
PrepareAbort (EndTxn), or PrepareAbort with the epoch bumped (fencing: InitProducerId of a new producer
session, or the transaction timeout); PrepareCommit → CompleteCommit, PrepareAbort → CompleteAbort once the
markers are written. ``advance(now_ms)`` runs the timers: timed-out transactions are aborted (fencing their
producer), idle ids expire (a tombstone)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from regroup.model.errors import ApiError, ErrorCode
from regroup.transactions.records import TxnRecord, new_txn_record, new_txn_tombstone
from regroup.transactions.replay import Transactions
from regroup.transactions.results import CountingProducerIds, MarkerJob, ProducerIdSource, TxnConfig, TxnResult
from regroup.transactions.state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    is_epoch_exhausted,
)

__all__ = ["TransactionCoordinator"]

E = ErrorCode
_Op = Callable[[], TxnResult]
_Member = Callable[[TransactionMetadata], bool]


class TransactionCoordinator:
    def __init__(self, config: TxnConfig | None = None, producer_ids: ProducerIdSource | None = None) -> None:
        self.config = config or TxnConfig()
        self._producer_ids = producer_ids or CountingProducerIds()
        self.transactions = Transactions(self.config.id_expiration_ms)

    @classmethod
    def from_records(
        cls,
        records: Iterable[TxnRecord],
        config: TxnConfig | None = None,
        producer_ids: ProducerIdSource | None = None,
    ) -> TransactionCoordinator:
        """The coordinator that wrote ``records`` (timers rebuilt from the state the records leave)."""
        coordinator = cls(config, producer_ids)
        coordinator.transactions.apply_all(records)
        return coordinator

    def hard_state(self) -> dict[str, TransactionMetadata]:
        """What the records say: equal for a live coordinator and one rebuilt from its records."""
        return self.transactions.as_dict()

    def snapshot_records(self) -> list[TxnRecord]:
        """Records that rebuild the current state (a compacted log)."""
        return [new_txn_record(m) for m in self.transactions]

    def snapshot_records_later(self) -> Callable[[], list[TxnRecord]]:
        """``snapshot_records`` as of now (taken now: one record per transactional id), for a function to return
        on any thread."""
        records = self.snapshot_records()
        return lambda: records

    # ------------------------------------------------------------------------------------------ operations
    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int, now_ms: int
    ) -> TxnResult:
        """InitProducerId with a transactional id. ``producer_id``/``producer_epoch``: the session the
        producer had (KIP-360), or -1/-1."""
        return self._run(lambda: self._init(transactional_id, timeout_ms, producer_id, producer_epoch, now_ms))

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> TxnResult:
        """AddPartitionsToTxn: ``partitions`` (which exist; the shell checked) join the transaction."""
        parts = frozenset(partitions)
        return self._run(lambda: self._add(transactional_id, producer_id, producer_epoch, parts, frozenset(), now_ms))

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, now_ms: int
    ) -> TxnResult:
        """AddOffsetsToTxn: the transaction will commit offsets of ``group_id``."""
        groups = frozenset((group_id,))
        return self._run(lambda: self._add(transactional_id, producer_id, producer_epoch, frozenset(), groups, now_ms))

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool, now_ms: int
    ) -> TxnResult:
        """EndTxn: commit or abort the ongoing transaction (markers follow), or answer a retry."""
        return self._run(lambda: self._end(transactional_id, producer_id, producer_epoch, committed, now_ms))

    def markers_written(self, job: MarkerJob, now_ms: int) -> TxnResult:
        """Every marker of ``job`` is durable (and its groups completed): the transaction completes. Anything
        else — a job for a transaction since completed, an orphan's job — changes nothing."""
        tid = job.transactional_id
        m = self.transactions.get(tid) if tid is not None else None
        wanted = TxnState.PREPARE_COMMIT if job.committed else TxnState.PREPARE_ABORT
        session = (job.producer_id, job.producer_epoch)
        if m is None or m.state is not wanted or (m.producer_id, m.producer_epoch) != session:
            return TxnResult()
        done = TxnState.COMPLETE_COMMIT if job.committed else TxnState.COMPLETE_ABORT
        record = self._write(m.evolve(state=done, partitions=frozenset(), groups=frozenset(), last_update_ms=now_ms))
        return TxnResult(E.NONE, m.producer_id, m.producer_epoch, (record,))

    def advance(self, now_ms: int) -> TxnResult:
        """Fire the timers due by ``now_ms``: abort transactions past their timeout (bumping the epoch, so
        their producer is fenced, as Kafka) and forget ids idle past the expiration time."""
        records: list[TxnRecord] = []
        markers: list[MarkerJob] = []
        for tid in self.transactions.deadlines.due(now_ms):
            m = self.transactions.get(tid)
            if m is None:
                continue
            if m.state is TxnState.ONGOING:
                record, job = self._fence_and_abort(m, now_ms)
                records.append(record)
                markers.append(job)
            elif m.state.completed:
                tombstone = new_txn_tombstone(tid)
                self.transactions.apply(tombstone)
                records.append(tombstone)
        return TxnResult(records=tuple(records), markers=tuple(markers))

    def next_deadline(self) -> int | None:
        """When the shell should call ``advance`` next."""
        return self.transactions.deadlines.next()

    # ------------------------------------------------------------------------------------------- queries
    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def check_produce(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partition: TopicPartition
    ) -> ErrorCode:
        """May this transactional batch be appended to ``partition`` (Kafka's verification of KIP-890 part
        1)? TRANSACTION_ABORTABLE: the partition was not added to an ongoing transaction."""
        return self._check_member(transactional_id, producer_id, producer_epoch, lambda m: partition in m.partitions)

    def check_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> ErrorCode:
        """May TxnOffsetCommit stage offsets of ``group_id`` in this transaction (was the group added)?"""
        return self._check_member(transactional_id, producer_id, producer_epoch, lambda m: group_id in m.groups)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn with ``verify_only`` (v4+): per partition, is it in the ongoing transaction?"""
        parts = list(partitions)
        m = self.transactions.get(transactional_id)
        error = self._session_error(m, producer_id, producer_epoch)
        if error is None and m is not None and m.state.preparing:
            error = E.CONCURRENT_TRANSACTIONS
        if error is not None or m is None:
            return dict.fromkeys(parts, error or E.INVALID_PRODUCER_ID_MAPPING)
        return {tp: E.NONE if tp in m.partitions else E.TRANSACTION_ABORTABLE for tp in parts}

    def pending_markers(self) -> list[MarkerJob]:
        """Jobs of every transaction whose outcome is decided but not complete (after a restart: all of them
        are written again; duplicate markers are harmless)."""
        return [self._job(m, m.state is TxnState.PREPARE_COMMIT) for m in self.transactions if m.state.preparing]

    def orphans(self, open_in_partitions: Mapping[TopicPartition, Sequence[tuple[int, int]]]) -> list[MarkerJob]:
        """ABORT markers for transactions open in a partition log (``partition -> [(producer id, epoch)]``)
        that no ongoing or preparing transaction of the coordinator covers — possible only when a crash
        lost records that were not yet fsynced (``--fsync interval`` or ``never``). Without them the last
        stable offset of those partitions could never pass the open transaction."""
        jobs: list[MarkerJob] = []
        for tp, producers in sorted(open_in_partitions.items()):
            for pid, epoch in producers:
                m = self.transactions.by_producer_id(pid)
                if m is not None and (m.state is TxnState.ONGOING or m.state.preparing) and tp in m.partitions:
                    continue
                marker_epoch = max(epoch, m.producer_epoch) if m is not None else epoch
                jobs.append(
                    MarkerJob(
                        transactional_id=None,
                        producer_id=pid,
                        producer_epoch=marker_epoch,
                        committed=False,
                        partitions=frozenset((tp,)),
                        groups=frozenset(),
                        coordinator_epoch=self.config.coordinator_epoch,
                    )
                )
        return jobs

    # ------------------------------------------------------------------------------------------ internals
    def _run(self, op: _Op) -> TxnResult:
        try:
            return op()
        except ApiError as exc:
            return TxnResult(exc.code)

    def _write(self, metadata: TransactionMetadata) -> TxnRecord:
        record = new_txn_record(metadata)
        self.transactions.apply(record)
        return record

    def _job(self, m: TransactionMetadata, committed: bool) -> MarkerJob:
        return MarkerJob(
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            producer_epoch=m.producer_epoch,
            committed=committed,
            partitions=m.partitions,
            groups=m.groups,
            coordinator_epoch=self.config.coordinator_epoch,
        )

    def _fence_and_abort(self, m: TransactionMetadata, now_ms: int) -> tuple[TxnRecord, MarkerJob]:
        """Kafka's PrepareEpochFence then PrepareAbort: the epoch is bumped (never past the int16 maximum),
        so the markers fence the producer that ran the transaction."""
        fenced = m.evolve(
            producer_epoch=min(m.producer_epoch + 1, MAX_EPOCH),
            last_producer_epoch=NO_PRODUCER_EPOCH,
            state=TxnState.PREPARE_ABORT,
            last_update_ms=now_ms,
        )
        return self._write(fenced), self._job(fenced, committed=False)

    @staticmethod
    def _session_error(m: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return None

    def _check_member(self, transactional_id: str, producer_id: int, producer_epoch: int, member: _Member) -> ErrorCode:
        m = self.transactions.get(transactional_id)
        error = self._session_error(m, producer_id, producer_epoch)
        if error is not None or m is None:
            return error or E.INVALID_PRODUCER_ID_MAPPING
        if m.state.preparing:
            return E.CONCURRENT_TRANSACTIONS
        return E.NONE if m.state is TxnState.ONGOING and member(m) else E.TRANSACTION_ABORTABLE

    def _init(self, tid: str, timeout_ms: int, producer_id: int, producer_epoch: int, now_ms: int) -> TxnResult:
        if not tid:
            raise ApiError(E.INVALID_REQUEST, "an empty transactional id")
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            raise ApiError(E.INVALID_REQUEST, "a producer id without an epoch, or an epoch without an id")
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            raise ApiError(E.INVALID_TRANSACTION_TIMEOUT)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        m = self.transactions.get(tid)
        if m is None:
            created = TransactionMetadata(
                transactional_id=tid,
                producer_id=self._producer_ids.next_producer_id(),
                producer_epoch=0,
                timeout_ms=timeout_ms,
                state=TxnState.EMPTY,
                last_update_ms=now_ms,
            )
            return self._answer(self._write(created))
        if expected is not None and not (
            expected[0] == m.producer_id or (expected[0] == m.previous_producer_id and is_epoch_exhausted(expected[1]))
        ):
            raise ApiError(E.PRODUCER_FENCED)
        if m.state.preparing:
            raise ApiError(E.CONCURRENT_TRANSACTIONS)
        if m.state is TxnState.ONGOING:
            # abort the transaction of the producer being replaced, fencing it; the new producer retries
            record, job = self._fence_and_abort(m, now_ms)
            return TxnResult(E.CONCURRENT_TRANSACTIONS, records=(record,), markers=(job,))
        expected_epoch = None if expected is None else expected[1]
        fresh = dict(
            timeout_ms=timeout_ms,
            state=TxnState.EMPTY,
            partitions=frozenset(),
            groups=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
            previous_producer_id=m.producer_id,
        )
        retry = expected_epoch is not None and expected_epoch == m.last_producer_epoch
        if retry and expected_epoch != m.producer_epoch:
            # a retry of the bump this producer did not hear about: the same answer again
            return self._answer(self._write(m.evolve(**fresh)))
        if expected_epoch is not None and expected_epoch != m.producer_epoch:
            raise ApiError(E.PRODUCER_FENCED)
        if is_epoch_exhausted(m.producer_epoch):
            rotated = m.evolve(
                **fresh,
                producer_id=self._producer_ids.next_producer_id(),
                producer_epoch=0,
                last_producer_epoch=m.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
            )
            return self._answer(self._write(rotated))
        last = m.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
        bumped = m.evolve(**fresh, producer_epoch=m.producer_epoch + 1, last_producer_epoch=last)
        return self._answer(self._write(bumped))

    def _add(
        self,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        groups: frozenset[str],
        now_ms: int,
    ) -> TxnResult:
        if not tid:
            raise ApiError(E.INVALID_REQUEST, "an empty transactional id")
        m = self.transactions.get(tid)
        error = self._session_error(m, producer_id, producer_epoch)
        if error is not None or m is None:
            raise ApiError(error or E.INVALID_PRODUCER_ID_MAPPING)
        if m.state.preparing:
            raise ApiError(E.CONCURRENT_TRANSACTIONS)
        if m.state is TxnState.ONGOING and partitions <= m.partitions and groups <= m.groups:
            return TxnResult(E.NONE, m.producer_id, m.producer_epoch)
        started = now_ms if m.state.completed else m.start_ms
        ongoing = m.evolve(
            state=TxnState.ONGOING,
            partitions=m.partitions | partitions,
            groups=m.groups | groups,
            start_ms=started,
            last_update_ms=now_ms,
        )
        return self._answer(self._write(ongoing))

    def _end(self, tid: str, producer_id: int, producer_epoch: int, committed: bool, now_ms: int) -> TxnResult:
        if not tid:
            raise ApiError(E.INVALID_REQUEST, "an empty transactional id")
        m = self.transactions.get(tid)
        error = self._session_error(m, producer_id, producer_epoch)
        if error is not None or m is None:
            raise ApiError(error or E.INVALID_PRODUCER_ID_MAPPING)
        state = m.state
        if state is TxnState.ONGOING:
            prepared = m.evolve(
                state=TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT, last_update_ms=now_ms
            )
            record = self._write(prepared)
            return TxnResult(E.NONE, m.producer_id, m.producer_epoch, (record,), (self._job(prepared, committed),))
        same = committed == (state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT))
        if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and same:
            return TxnResult(E.NONE, m.producer_id, m.producer_epoch)  # a retry of the EndTxn that completed it
        if state.preparing and same:
            raise ApiError(E.CONCURRENT_TRANSACTIONS)
        raise ApiError(E.INVALID_TXN_STATE, f"{state.value} cannot {'commit' if committed else 'abort'}")

    @staticmethod
    def _answer(record: TxnRecord) -> TxnResult:
        m = record.value
        assert m is not None
        return TxnResult(E.NONE, m.producer_id, m.producer_epoch, (record,))
