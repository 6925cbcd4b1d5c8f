"""OffsetCommit's one-pass path against a straightforward reference.

``offsets.offset_commit`` builds each partition's value and record in one loop (keys and answer rows shared
from the store's memo), the server hands it columns (``PartitionCommits``) rather than ``PartitionCommit``
rows, and ``OffsetStore.apply_commits`` applies a run of offset records in a loop of its own. Random sequences
of commits (both forms, several groups and topics, repeated partitions, metadata around the UTF-16 limit,
retention), transactional commits and their ends, and deleted groups are checked, after every step, against:

* a reference commit: each partition checked and its record built on its own, with the keyword constructors
  and ``new_offset_commit_record``: the same answer, the same records in the same order, the same
  ``OffsetsCommitted`` event;
* a reference store (the plain per-record ``apply``, stamps in one dict by full key) fed every record written:
  the same committed and pending offsets, the same snapshot records in the same order, the same answer to
  which pending offsets are newer than the committed ones;
* at the end, coordinators rebuilt from the records written and from a snapshot: the same hard state.

Commits in columns are also handed plans made ahead (``offsets.plan_topic``, as the server makes them on its
decoding thread) for all or some of their topics, and plans that must not be used (made from other columns of the
same content, for another group, or against another metadata limit, all stamped at another time): the same
answers, records, events and state either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import OffsetsCommitted
from regroup.coordinator.offsets import PlannedTopic, plan_topic
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    PartitionCommit,
    PartitionCommits,
    TxnOffsetCommitRequest,
)
from regroup.records.builders import (
    new_offset_commit_record,
    new_pending_offset_record,
)
from regroup.records.model import (
    OffsetCommitKey,
    OffsetCommitValue,
    PendingOffsetCommitKey,
    Record,
    TxnMarkerKey,
    TxnMarkerValue,
)

LIMIT = 6  # offset.metadata.max.bytes: small, so metadata is often over it
GROUPS = ("g1", "g2")
TOPICS = ("a", "b")
PRODUCERS = (7, 8)
#: strings around the limit, in UTF-16 code units: an emoji is one character and two code units
METADATA = st.one_of(
    st.none(),
    st.sampled_from(["", "m", "abcdef", "abcdefg", "ab😀cd", "abc😀d", "😀😀😀", "😀😀😀😀", "ééééééé"]),
    st.text(alphabet="x😀é", max_size=8),
)

Partition = tuple[str, int]


class ReferenceStore:
    """Offsets as the records say, applied one record at a time; each entry's stamp is kept in one dict keyed
    by the full key: (group, topic, partition) or (producer, group, topic, partition)."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[Partition, OffsetCommitValue]] = {}
        self.pending: dict[int, dict[str, dict[Partition, OffsetCommitValue]]] = {}
        self.applied = 0
        self.when: dict[tuple[object, ...], int] = {}

    def apply(self, record: Record) -> None:
        key, value = record.key, record.value
        if isinstance(key, TxnMarkerKey):
            assert isinstance(value, TxnMarkerValue)
            self.complete(key.producer_id, key.group_id, value.committed)
            return
        assert value is None or isinstance(value, OffsetCommitValue)
        if isinstance(key, OffsetCommitKey):
            per_group = self.offsets.setdefault(key.group_id, {})
            where: tuple[object, ...] = (key.group_id, key.topic, key.partition)
        elif isinstance(key, PendingOffsetCommitKey):
            per_group = self.pending.setdefault(key.producer_id, {}).setdefault(key.group_id, {})
            where = (key.producer_id, key.group_id, key.topic, key.partition)
        else:
            return
        if value is None:
            per_group.pop((key.topic, key.partition), None)
            self.when.pop(where, None)
        else:
            per_group[(key.topic, key.partition)] = value
            self.applied += 1
            self.when[where] = self.applied
        # drop what is left empty
        self.offsets = {g: o for g, o in self.offsets.items() if o}
        self.pending = {p: {g: o for g, o in by.items() if o} for p, by in self.pending.items()}
        self.pending = {p: by for p, by in self.pending.items() if by}

    def complete(self, producer_id: int, group_id: str, committed: bool) -> None:
        """A transaction marker: each pending offset of the producer for the group, in the order it became
        pending, becomes the committed one when newer (applied as a commit record would be), then goes."""
        pending = self.pending.get(producer_id, {}).get(group_id, {})
        for (topic, partition), value in list(pending.items()):
            if committed and self.newer_than_committed(producer_id, group_id, (topic, partition)):
                self.apply(new_offset_commit_record(group_id, topic, partition, value))
            self.apply(
                Record(
                    PendingOffsetCommitKey(
                        producer_id=producer_id, group_id=group_id, topic=topic, partition=partition
                    ),
                    None,
                )
            )

    def records(self) -> list[Record]:
        entries: list[tuple[int, Record]] = []
        for group_id, offsets in self.offsets.items():
            for (topic, partition), value in offsets.items():
                record = new_offset_commit_record(group_id, topic, partition, value)
                entries.append((self.when[(group_id, topic, partition)], record))
        for producer_id, by_group in self.pending.items():
            for group_id, offsets in by_group.items():
                for (topic, partition), value in offsets.items():
                    record = new_pending_offset_record(producer_id, group_id, topic, partition, value)
                    entries.append((self.when[(producer_id, group_id, topic, partition)], record))
        return [record for _, record in sorted(entries, key=lambda entry: entry[0])]

    def newer_than_committed(self, producer_id: int, group_id: str, partition: Partition) -> bool:
        committed = self.when.get((group_id, *partition))
        return committed is None or self.when[(producer_id, group_id, *partition)] > committed


def reference_commit(
    req: OffsetCommitRequest, rows: list[tuple[str, list[PartitionCommit]]], now_ms: int
) -> tuple[OffsetCommitResponse, list[Record], list[OffsetsCommitted]]:
    """What an accepted commit answers, writes and says, partition by partition."""
    expire = now_ms + req.retention_ms if req.retention_ms != -1 else None
    topics = []
    records = []
    committed = []
    for topic, partitions in rows:
        codes = []
        for p in partitions:
            metadata = p.metadata or ""
            if len(metadata.encode("utf-16-le")) // 2 > LIMIT:
                codes.append((p.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            value = OffsetCommitValue(
                offset=p.offset,
                leader_epoch=p.leader_epoch,
                metadata=metadata,
                commit_timestamp_ms=now_ms,
                expire_timestamp_ms=expire,
            )
            records.append(new_offset_commit_record(req.group_id, topic, p.partition, value))
            committed.append((topic, p.partition, p.offset))
            codes.append((p.partition, ErrorCode.NONE))
        topics.append((topic, tuple(codes)))
    events = [OffsetsCommitted(req.group_id, tuple(committed))] if committed else []
    return OffsetCommitResponse(topics=tuple(topics)), records, events


PARTITION = st.builds(
    PartitionCommit,
    # (numbers past those whose answer rows are shared, and negative ones, answered all the same)
    partition=st.one_of(st.integers(0, 4), st.sampled_from([-1, 1 << 16, 1 << 20])),
    offset=st.integers(0, 1000),
    leader_epoch=st.integers(-1, 3),
    metadata=METADATA,
)
COMMIT = st.tuples(
    st.just("commit"),
    st.sampled_from(GROUPS),
    st.lists(st.tuples(st.sampled_from(TOPICS), st.lists(PARTITION, max_size=6)), max_size=3),
    st.booleans(),  # as columns (the server's form) or as rows
    st.sampled_from([-1, -1, 60_000]),  # retention
    st.sampled_from(["none", "all", "some", "other-columns", "other-group", "other-limit"]),  # plans made ahead
)
TXN = st.tuples(
    st.just("txn"),
    st.sampled_from(GROUPS),
    st.sampled_from(PRODUCERS),
    st.lists(st.tuples(st.sampled_from(TOPICS), st.lists(PARTITION, max_size=3)), max_size=2),
    st.booleans(),  # as columns or as rows
    st.sampled_from(["none", "all", "some", "other-columns", "other-group", "other-limit", "other-producer"]),
)
END = st.tuples(st.just("end"), st.sampled_from(PRODUCERS), st.booleans())
DELETE = st.tuples(st.just("delete"), st.sampled_from(GROUPS))
OPS = st.lists(st.one_of(COMMIT, COMMIT, COMMIT, TXN, END, DELETE), min_size=1, max_size=25)


def _plans(
    group_id: str,
    topics: tuple[tuple[str, Any], ...],
    retention_ms: int,
    planning: str,
    now_ms: int,
    producer_id: int | None = None,
) -> list[PlannedTopic | None]:
    """Plans for the topics (all in columns) of a commit (``producer_id``: a transactional one): usable ones
    (``all``; ``some``: every other topic), or ones the core must not use, stamped at another time so that using
    one would show in the records."""
    expire = now_ms + retention_ms if retention_ms != -1 else None
    plans: list[PlannedTopic | None] = []
    for index, (topic, columns) in enumerate(topics):
        assert isinstance(columns, PartitionCommits)
        if planning == "none" or (planning == "some" and index % 2):
            plans.append(None)
        elif planning in ("all", "some"):
            plans.append(plan_topic(group_id, topic, columns, now_ms, expire, LIMIT, producer_id))
        else:
            group, limit, producer = group_id, LIMIT, producer_id
            if planning == "other-columns":
                columns = PartitionCommits(*(tuple(column) for column in dataclasses.astuple(columns)))
            elif planning == "other-group":
                group += "-other"
            elif planning == "other-producer":
                producer = None if producer_id is not None else 99  # (a plain commit's plan, or another's)
            else:
                limit += 1
            plans.append(plan_topic(group, topic, columns, now_ms - 5, expire, limit, producer))
    return plans


def _as_columns(rows: list[tuple[str, list[PartitionCommit]]], as_columns: bool) -> tuple[tuple[str, Any], ...]:
    return tuple(
        (
            topic,
            PartitionCommits(
                tuple(p.partition for p in partitions),
                tuple(p.offset for p in partitions),
                tuple(p.leader_epoch for p in partitions),
                tuple(p.metadata for p in partitions),
            )
            if as_columns
            else tuple(partitions),
        )
        for topic, partitions in rows
    )


def _pending(producer_id: int, record: Record) -> Record:
    key = record.key
    assert isinstance(key, OffsetCommitKey)
    pending = PendingOffsetCommitKey(
        producer_id=producer_id, group_id=key.group_id, topic=key.topic, partition=key.partition
    )
    return Record(pending, record.value)


def _check_store(coordinator: GroupCoordinator, reference: ReferenceStore) -> None:
    store = coordinator.offsets
    assert store.offsets == reference.offsets
    assert set(store._memos) <= set(store.offsets)  # the memo goes with the offsets
    assert store.pending == reference.pending
    assert store.records() == reference.records()
    for producer_id, by_group in reference.pending.items():
        for group_id, offsets in by_group.items():
            for partition in offsets:
                expected = reference.newer_than_committed(producer_id, group_id, partition)
                assert store.newer_than_committed(producer_id, group_id, partition) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_offset_commit_writes_what_the_reference_writes(ops: list[Any]) -> None:
    coordinator = GroupCoordinator(CoordinatorConfig(offset_metadata_max_bytes=LIMIT))
    reference = ReferenceStore()
    written: list[Record] = []
    now_ms = 1_000
    for n, op in enumerate(ops):
        now_ms += 10
        if op[0] == "commit":
            _, group_id, rows, as_columns, retention_ms, planning = op
            topics = _as_columns(rows, as_columns)
            req = OffsetCommitRequest(group_id=group_id, retention_ms=retention_ms, topics=topics)
            planned = _plans(group_id, topics, retention_ms, planning, now_ms) if as_columns else []
            result = coordinator.offset_commit(req, n, now_ms, planned)
            response, records, events = reference_commit(req, rows, now_ms)
            assert result.refused is None
            assert result.response_for(n) == response
            assert result.records == records
            assert [e for e in result.events if isinstance(e, OffsetsCommitted)] == events
        elif op[0] == "txn":
            _, group_id, producer_id, rows, as_columns, planning = op
            topics = _as_columns(rows, as_columns)
            txn = TxnOffsetCommitRequest(
                transactional_id=f"t{producer_id}",
                group_id=group_id,
                producer_id=producer_id,
                producer_epoch=0,
                topics=topics,
            )
            planned = _plans(group_id, topics, -1, planning, now_ms, producer_id) if as_columns else []
            result = coordinator.txn_offset_commit(txn, n, now_ms, planned)
            # what a plain commit of the same partitions answers and writes, its records pending ones
            response, records, _ = reference_commit(OffsetCommitRequest(group_id=group_id, topics=topics), rows, now_ms)
            assert result.response_for(n) == response
            assert result.records == [_pending(producer_id, record) for record in records]
            assert not [e for e in result.events if isinstance(e, OffsetsCommitted)]
        elif op[0] == "end":
            _, producer_id, committed = op
            before = {g: set(o) for g, o in reference.pending.get(producer_id, {}).items()}
            result = coordinator.complete_transaction(producer_id, committed, now_ms)
            # one marker per group with pending offsets; a commit says which offsets it made the group's
            assert result.records == [
                Record(TxnMarkerKey(producer_id=producer_id, group_id=g), TxnMarkerValue(committed=committed))
                for g in sorted(before)
            ]
            expected_events = [
                OffsetsCommitted(
                    g,
                    tuple(
                        (t, p, reference.pending[producer_id][g][(t, p)].offset)
                        for (t, p) in reference.pending[producer_id][g]
                        if reference.newer_than_committed(producer_id, g, (t, p))
                    ),
                )
                for g in sorted(before)
            ]
            expected_events = [e for e in expected_events if e.offsets] if committed else []
            assert [e for e in result.events if isinstance(e, OffsetsCommitted)] == expected_events
        else:
            result = coordinator.delete_groups([op[1]], n, now_ms)
        for record in result.records:
            reference.apply(record)
        written.extend(result.records)
        _check_store(coordinator, reference)
    for rebuilt in (
        GroupCoordinator.from_records(written, now_ms, CoordinatorConfig(offset_metadata_max_bytes=LIMIT)),
        GroupCoordinator.from_records(coordinator.snapshot_records(), now_ms),
    ):
        assert rebuilt.hard_state() == coordinator.hard_state()
        _check_store(rebuilt, reference)


def test_columns_are_the_rows() -> None:
    rows = (PartitionCommit(partition=3, offset=9, leader_epoch=2, metadata=None), PartitionCommit(1, 5))
    columns = PartitionCommits((3, 1), (9, 5), (2, -1), (None, ""))
    assert columns.rows() == rows
    assert len(columns) == 2


VALUE = st.builds(
    OffsetCommitValue,
    offset=st.integers(0, 100),
    leader_epoch=st.just(-1),
    metadata=st.just(""),
    commit_timestamp_ms=st.integers(0, 10),
    expire_timestamp_ms=st.none(),
)
#: few partitions, so runs often empty a group and commit to it again
WHERE = st.tuples(st.sampled_from(GROUPS), st.sampled_from(TOPICS), st.integers(0, 1))
RECORD = st.one_of(
    st.builds(lambda w, v: Record(OffsetCommitKey(*w), v), WHERE, st.one_of(st.none(), VALUE, VALUE, VALUE)),
    st.builds(
        lambda p, w, v: Record(PendingOffsetCommitKey(producer_id=p, group_id=w[0], topic=w[1], partition=w[2]), v),
        st.sampled_from(PRODUCERS),
        WHERE,
        st.one_of(st.none(), VALUE),
    ),
)


@settings(max_examples=200, deadline=None)
@given(writes=st.lists(st.lists(RECORD, max_size=12), max_size=6))
def test_apply_commits_is_apply_record_by_record(writes: list[list[Record]]) -> None:
    """Runs of offset records of several groups, with tombstones and pending records between them."""
    coordinator = GroupCoordinator()
    reference = ReferenceStore()
    store = coordinator.offsets
    for records in writes:
        i = 0
        while i < len(records):
            i = store.apply_commits(records, i)
            if i < len(records):
                record = records[i]
                assert isinstance(record.key, PendingOffsetCommitKey)
                assert record.value is None or isinstance(record.value, OffsetCommitValue)
                store.apply_pending(record.key, record.value)
                i += 1
        for record in records:
            reference.apply(record)
        _check_store(coordinator, reference)


def test_a_run_that_empties_a_group_and_commits_to_it_again() -> None:
    value = OffsetCommitValue(5, -1, "", 0, None)
    runs = [
        Record(OffsetCommitKey("g1", "a", 0), value),
        Record(OffsetCommitKey("g1", "a", 0), None),
        Record(OffsetCommitKey("g1", "a", 1), value),
        Record(OffsetCommitKey("g2", "a", 1), value),
        Record(OffsetCommitKey("g1", "b", 0), value),
    ]
    coordinator = GroupCoordinator()
    reference = ReferenceStore()
    assert coordinator.offsets.apply_commits(runs) == len(runs)
    for record in runs:
        reference.apply(record)
    _check_store(coordinator, reference)
