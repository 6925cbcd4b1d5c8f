"""Committed offsets, for every group type: OffsetCommit (validated by the group's type), transactional
offsets (TxnOffsetCommit, pending per producer until the transaction ends), OffsetFetch, OffsetDelete and
the retention expiry.

The store changes only by replaying offset records (``apply``); handlers validate, then emit records."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, groupby, repeat
from operator import attrgetter, gt, itemgetter

from regroup.coordinator.classic.group import ClassicGroup
from regroup.coordinator.classic.rebalance import announce_group
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import OffsetsCommitted, OffsetsDeleted
from regroup.coordinator.group_types import type_of
from regroup.coordinator.groups import Groups
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.offsets import (
    NO_LEADER_EPOCH,
    NO_OFFSET,
    CommitPartitions,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommits,
    TxnOffsetCommitRequest,
    commit_offsets,
    commit_rows,
    partition_numbers,
)
from regroup.records.builders import (
    new_offset_commit_record,
    new_offset_tombstone,
    new_pending_offset_record,
    new_txn_marker_record,
)
from regroup.records.model import OffsetCommitKey, OffsetCommitValue, PendingOffsetCommitKey, Record

Partition = tuple[str, int]

#: ``(partition, NONE)`` for partition 0, 1, ...: the answer row of an accepted commit, one tuple per partition
#: number for every commit of every group, grown on demand up to partition ``_SHARED_ROWS``
_ACCEPTED_ROWS: list[tuple[int, ErrorCode]] = []
_SHARED_ROWS = 1 << 16


class OffsetStore:
    """Committed offsets per group, and the offsets transactions committed that are still pending, per
    producer id (materialised when the transaction commits, dropped when it aborts). Each entry remembers
    when it was applied (a count of offset records), so a transaction that commits does not overwrite an
    offset committed after its own (Kafka compares the records' log offsets).

    Besides, the store keeps ``memo``: the key each committed partition's records share (a value, built at the
    partition's first commit; not state: dropped with its offset)."""

    __slots__ = ("_applied", "_memos", "_stamps", "_when", "offsets", "pending")

    def __init__(self) -> None:
        self.offsets: dict[str, dict[Partition, OffsetCommitValue]] = {}
        #: producer id -> group id -> partition -> the offset its open transaction committed
        self.pending: dict[int, dict[str, dict[Partition, OffsetCommitValue]]] = {}
        self._applied = 0
        #: group -> partition -> when its committed offset was applied (shaped as ``offsets``, so applying a
        #: commit looks up the same ``(topic, partition)`` in both)
        self._stamps: dict[str, dict[Partition, int]] = {}
        #: producer -> group -> partition -> when its pending offset was applied (shaped as ``pending``)
        self._when: dict[int, dict[str, dict[Partition, int]]] = {}
        #: group -> topic -> partition -> the key of its records (``memo``)
        self._memos: dict[str, dict[str, dict[int, OffsetCommitKey]]] = {}

    def memo(self, group_id: str, topic: str) -> dict[int, OffsetCommitKey]:
        """The group's topic's partition -> the key its offset records have: immutable, so every commit of the
        partition can share it rather than build one per partition and commit (a consumer commits its whole
        assignment again and again). The caller adds the keys of partitions it writes an offset for, and hands a
        new dict (there was none) back with ``keep_memo``; an entry goes with the partition's offset (a
        tombstone), the group's with its last one."""
        memos = self._memos.get(group_id)
        found = None if memos is None else memos.get(topic)
        return {} if found is None else found

    def keep_memo(self, group_id: str, topic: str, memo: dict[int, OffsetCommitKey]) -> None:
        if memo:  # (an empty one is not kept: a group whose commits were all refused has no offset to drop it with)
            self._memos.setdefault(group_id, {})[topic] = memo

    def apply(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        group_id = key.group_id
        where = (key.topic, key.partition)
        if value is None:
            per_group = self.offsets.get(group_id)
            if per_group is not None:
                per_group.pop(where, None)
                if not per_group:
                    del self.offsets[group_id]
            stamps = self._stamps.get(group_id)
            if stamps is not None:
                stamps.pop(where, None)
                if not stamps:
                    del self._stamps[group_id]
            memos = self._memos.get(group_id)
            if memos is not None:
                if group_id not in self.offsets:
                    del self._memos[group_id]
                elif key.topic in memos:
                    memos[key.topic].pop(key.partition, None)
        else:
            per_group = self.offsets.get(group_id)
            if per_group is None:
                per_group = self.offsets[group_id] = {}
                self._stamps[group_id] = {}
            per_group[where] = value
            self._applied += 1
            self._stamps[group_id][where] = self._applied

    def apply_commits(self, records: Sequence[Record], start: int = 0) -> int:
        """``apply`` each of ``records`` from ``start`` on, up to the first whose key is not an ``OffsetCommitKey``:
        its index (``len(records)``: there is none). The records of one OffsetCommit are a run of these, for one
        group: the group's dicts are looked up once for the run, and each record costs two dict stores."""
        offsets, stamps_of = self.offsets, self._stamps
        commit_key, commit_value = OffsetCommitKey, OffsetCommitValue
        applied = first = self._applied
        tombstones = 0
        group_id: str | None = None
        per_group: dict[Partition, OffsetCommitValue] = {}
        stamps: dict[Partition, int] = {}
        for i in range(start, len(records)):  # (not islice: that walks the first ``start`` records every call)
            record = records[i]
            key = record.key
            if type(key) is not commit_key:
                break
            value = record.value
            if not isinstance(value, commit_value):  # a tombstone: the general way
                self._applied = applied
                self.apply(key, None)
                tombstones += 1
                group_id = None  # the group's dicts may be gone
                continue
            if key.group_id != group_id:
                group_id = key.group_id
                found = offsets.get(group_id)
                if found is None:
                    found = offsets[group_id] = {}
                    stamps_of[group_id] = {}
                per_group, stamps = found, stamps_of[group_id]
            where = (key.topic, key.partition)
            per_group[where] = value
            applied += 1
            stamps[where] = applied
        else:
            self._applied = applied
            return len(records)
        self._applied = applied
        return start + (applied - first) + tombstones

    def apply_pending(self, key: PendingOffsetCommitKey, value: OffsetCommitValue | None) -> None:
        producer_id, group_id, where = key.producer_id, key.group_id, (key.topic, key.partition)
        if value is not None:
            self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[where] = value
            self._applied += 1
            self._when.setdefault(producer_id, {}).setdefault(group_id, {})[where] = self._applied
            return
        by_group = self.pending.get(producer_id)
        per_group = None if by_group is None else by_group.get(group_id)
        if by_group is None or per_group is None:
            return
        when_by_group = self._when[producer_id]
        per_group.pop(where, None)
        when_by_group[group_id].pop(where, None)
        if not per_group:
            del by_group[group_id], when_by_group[group_id]
        if not by_group:
            del self.pending[producer_id], self._when[producer_id]

    def apply_pendings(self, records: Sequence[Record], start: int = 0) -> int:
        """``apply_pending`` each of ``records`` from ``start`` on, up to the first whose key is not a
        ``PendingOffsetCommitKey``: its index (``len(records)``: there is none). A TxnOffsetCommit's records are a
        run of these for one producer and group, whose dicts are looked up once for the run."""
        pending_key = PendingOffsetCommitKey
        current: tuple[int, str] | None = None
        per_group: dict[Partition, OffsetCommitValue] = {}
        stamps: dict[Partition, int] = {}
        end = len(records)
        i = start
        while i < end:
            record = records[i]
            key, value = record.key, record.value
            if type(key) is not pending_key:
                break
            assert isinstance(key, PendingOffsetCommitKey)
            i += 1
            if value is None:
                self.apply_pending(key, None)  # (rare: its group's dicts may go)
                current = None
                continue
            assert isinstance(value, OffsetCommitValue)
            who = (key.producer_id, key.group_id)
            if who != current:
                per_group = self.pending.setdefault(who[0], {}).setdefault(who[1], {})
                stamps = self._when.setdefault(who[0], {}).setdefault(who[1], {})
                current = who
            where = (key.topic, key.partition)
            per_group[where] = value
            self._applied += 1
            stamps[where] = self._applied
        return i

    def materialised(self, producer_id: int, group_id: str) -> list[Partition]:
        """The partitions of ``group_id`` whose pending offset of ``producer_id`` a commit marker makes committed
        now: those without a committed offset or whose committed one was applied before the pending one (Kafka
        compares the records' log offsets), in the order they became pending. In C, a ``map`` per column: a
        transaction may have committed offsets for 10,000 partitions."""
        offsets = self.pending.get(producer_id, {}).get(group_id)
        if not offsets:
            return []
        parts = list(offsets)
        committed = self._stamps.get(group_id)
        if not committed:
            return parts
        mine = map(self._when[producer_id][group_id].__getitem__, parts)
        return list(compress(parts, map(gt, mine, map(committed.get, parts, repeat(0)))))

    def apply_marker(self, producer_id: int, group_id: str, committed: bool) -> list[Partition]:
        """The producer's transaction ended for the group (a ``TxnMarkerKey`` record): on commit its pending
        offsets that are ``materialised`` become the group's committed offsets (stamped now, in that order), and
        every pending offset of the producer for the group goes. The partitions materialised (none for an abort
        or a producer with nothing pending). A few operations of C per offset."""
        chosen = self.materialised(producer_id, group_id) if committed else []
        by_group = self.pending.get(producer_id)
        offsets = None if by_group is None else by_group.pop(group_id, None)
        if by_group is None or offsets is None:
            return []
        del self._when[producer_id][group_id]
        if not by_group:
            del self.pending[producer_id], self._when[producer_id]
        if chosen:
            per_group = self.offsets.get(group_id)
            if per_group is None:
                per_group = self.offsets[group_id] = {}
                self._stamps[group_id] = {}
            per_group.update(zip(chosen, map(offsets.__getitem__, chosen), strict=True))
            first = self._applied + 1
            self._applied += len(chosen)
            self._stamps[group_id].update(zip(chosen, range(first, self._applied + 1), strict=True))
        return chosen

    def of(self, group_id: str) -> dict[Partition, OffsetCommitValue]:
        return self.offsets.get(group_id, {})

    def is_pending(self, group_id: str, partition: Partition) -> bool:
        """Some open transaction committed an offset for ``partition`` of the group."""
        return any(partition in by_group.get(group_id, {}) for by_group in self.pending.values())

    def has_pending(self, group_id: str) -> bool:
        return any(group_id in by_group for by_group in self.pending.values())

    def newer_than_committed(self, producer_id: int, group_id: str, partition: Partition) -> bool:
        """The producer's pending offset was written after the partition's committed one (or there is none)."""
        committed = self._stamps.get(group_id, {}).get(partition)
        return committed is None or self._when[producer_id][group_id][partition] > committed

    def records(self) -> list[Record]:
        """Records that rebuild the store, committed and pending, in the order they were applied."""
        return self.records_later()()

    def records_later(self) -> Callable[[], list[Record]]:
        """``records``, in two parts: copies of the store's tables, taken now (a dictionary copy per group: about
        0.05 µs an offset), and the function that builds the records from those copies, on any thread (about
        0.6 µs an offset): a snapshot of 100,000 offsets holds the event loop 5-6 ms, not the whole build."""
        offsets = {group_id: dict(by_partition) for group_id, by_partition in self.offsets.items()}
        stamps = {group_id: dict(self._stamps[group_id]) for group_id in offsets}
        pending = {p: {g: dict(o) for g, o in by_group.items()} for p, by_group in self.pending.items()}
        when = {p: {g: dict(w) for g, w in by_group.items()} for p, by_group in self._when.items()}
        return functools.partial(_store_records, offsets, stamps, pending, when)


def _store_records(
    offsets: dict[str, dict[Partition, OffsetCommitValue]],
    stamps: dict[str, dict[Partition, int]],
    pending: dict[int, dict[str, dict[Partition, OffsetCommitValue]]],
    when: dict[int, dict[str, dict[Partition, int]]],
) -> list[Record]:
    """The records of ``OffsetStore.records_later``'s copies, in the order they were applied."""
    entries: list[tuple[int, Record]] = []
    for group_id, by_partition in offsets.items():
        stamped = stamps[group_id]
        for (topic, partition), value in by_partition.items():
            record = new_offset_commit_record(group_id, topic, partition, value)
            entries.append((stamped[(topic, partition)], record))
    for producer_id, by_group in pending.items():
        for group_id, by_partition in by_group.items():
            for (topic, partition), value in by_partition.items():
                record = new_pending_offset_record(producer_id, group_id, topic, partition, value)
                entries.append((when[producer_id][group_id][(topic, partition)], record))
    return [record for _, record in sorted(entries, key=lambda entry: entry[0])]


def _group_for_commit(ctx: Ctx, groups: Groups, req: OffsetCommitRequest) -> None:
    """Validate the commit against the group it names (its type's rules). A commit from outside any group
    (generation -1: an admin client, a consumer with manual assignment) creates a simple classic group."""
    group = groups.get(req.group_id)
    if group is None:
        if req.generation_id < 0:
            created = ClassicGroup(group_id=req.group_id, state_timestamp_ms=ctx.now_ms)
            groups.add(ctx.journal, created)
            announce_group(ctx, created)
            return
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND if req.version >= 9 else ErrorCode.ILLEGAL_GENERATION)
    type_of(group).validate_offset_commit(ctx, group, req)


@dataclass(frozen=True, slots=True)
class PlannedTopic:
    """One topic's part of an OffsetCommit worked out ahead, from the request alone (``plan_topic``): what
    ``offset_commit`` would build for it once the group accepts the commit. It reads no state, so a shell may make
    it anywhere (the server does, on the thread that decodes a large request), and the core's step is left with
    the group's check and the apply. ``offset_commit`` uses it only for the very ``columns`` it was made from,
    for the same group and metadata limit."""

    group_id: str
    topic: str
    columns: PartitionCommits
    #: the ``offset.metadata.max.bytes`` it was measured against
    limit: int
    records: tuple[Record, ...]
    codes: tuple[tuple[int, ErrorCode], ...]
    #: ``(topic, partition, offset)`` of each partition answered NONE, for the event
    committed: tuple[tuple[str, int, int], ...]
    #: the producer whose transaction commits (TxnOffsetCommit: its records are pending offsets), or None
    producer_id: int | None = None

    def fits(self, group_id: str, topic: str, columns: CommitPartitions, limit: int, producer_id: int | None) -> bool:
        """Made for this very commit of ``columns`` (the same object) of ``topic`` by ``group_id`` (and
        ``producer_id``) against ``limit``."""
        return (
            self.columns is columns
            and self.topic == topic
            and self.group_id == group_id
            and self.limit == limit
            and self.producer_id == producer_id
        )


def plan_topic(
    group_id: str,
    topic: str,
    columns: PartitionCommits,
    now_ms: int,
    expire_ms: int | None,
    limit: int,
    producer_id: int | None = None,
) -> PlannedTopic:
    """``topic``'s records, answer rows and committed offsets for a commit of ``columns`` by ``group_id`` at
    ``now_ms``, as ``offset_commit`` builds them (keys built fresh: the store's memo is not read, as this may run
    beside the core); with ``producer_id``, a transactional commit's, as ``txn_offset_commit`` builds them (its
    records pending offsets). Safe on any thread."""
    records: list[Record] = []
    keys = {} if producer_id is None else _pending_keys(producer_id, group_id, topic, columns)
    codes, refused = _commit_topic(group_id, topic, columns, now_ms, expire_ms, limit, keys, records.append, False)
    committed = tuple(_committed(topic, columns, codes, refused))
    return PlannedTopic(group_id, topic, columns, limit, tuple(records), codes, committed, producer_id)


def _pending_keys(
    producer_id: int, group_id: str, topic: str, partitions: CommitPartitions
) -> dict[int, OffsetCommitKey | PendingOffsetCommitKey]:
    """The key of each partition's pending offset record, for ``_commit_topic`` to find as its memo."""
    return {
        p: PendingOffsetCommitKey(producer_id=producer_id, group_id=group_id, topic=topic, partition=p)
        for p in partition_numbers(partitions)
    }


def narrow_plan(plan: PlannedTopic, count: int) -> PlannedTopic:
    """``plan`` for only its partitions numbered below ``count`` (the topic's partitions: a shell refuses those
    out of range before the core sees the commit), its columns, answer rows, records and committed offsets
    filtered alike: what ``plan_topic`` makes of the narrowed columns, as each partition's part depends on that
    partition alone. Filtering costs the loop a fraction of building them."""
    columns = plan.columns
    keep = tuple(0 <= p < count for p in columns.partitions)
    narrowed = PartitionCommits(
        tuple(compress(columns.partitions, keep)),
        tuple(compress(columns.offsets, keep)),
        tuple(compress(columns.leader_epochs, keep)),
        tuple(compress(columns.metadata, keep)),
    )
    codes = tuple(row for row in plan.codes if 0 <= row[0] < count)
    # (a record per committed offset, in the same order: the partitions answered NONE)
    assert len(plan.records) == len(plan.committed)
    kept = tuple(0 <= entry[1] < count for entry in plan.committed)
    records = tuple(compress(plan.records, kept))
    committed = tuple(compress(plan.committed, kept))
    return PlannedTopic(plan.group_id, plan.topic, narrowed, plan.limit, records, codes, committed, plan.producer_id)


def offset_commit(
    ctx: Ctx,
    groups: Groups,
    req: OffsetCommitRequest,
    store: OffsetStore | None = None,
    planned: Sequence[PlannedTopic | None] = (),
) -> OffsetCommitResponse:
    """The answer: NONE for each partition, or OFFSET_METADATA_TOO_LARGE for metadata over
    ``offset.metadata.max.bytes``; a record (``new_offset_commit_record``) per partition answered NONE, and one
    ``OffsetsCommitted`` for them all.

    A consumer committing every partition of a large assignment is one call, all of it one step of the core:
    each partition is visited once, its value and record are built there (positionally) and appended straight
    to the result, with no intermediate list of what was accepted; its key comes from the ``store``'s memo from
    the partition's second commit on (``store`` None: built every time), its answer row is shared
    (``_accepted_row``). ``planned``: topic ``i``'s ``PlannedTopic``, when one was made for it (``plan_topic``);
    its records and rows are taken as they are, stamped with the time it was made."""
    try:
        _group_for_commit(ctx, groups, req)
    except ApiError as exc:
        return _refused(req.topics, exc.code)
    expire = ctx.now_ms + req.retention_ms if req.retention_ms != -1 else None
    group_id = req.group_id
    limit, now_ms = ctx.config.offset_metadata_max_bytes, ctx.now_ms
    records = ctx.result.records
    committed: list[tuple[str, int, int]] = []
    out: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    for index, (topic, partitions) in enumerate(req.topics):
        plan = planned[index] if index < len(planned) else None
        if plan is not None and plan.fits(group_id, topic, partitions, limit, None):
            records.extend(plan.records)
            committed.extend(plan.committed)
            out.append((topic, plan.codes))
            continue
        memo = {} if store is None else store.memo(group_id, topic)
        codes, refused = _commit_topic(group_id, topic, partitions, now_ms, expire, limit, memo, records.append, True)
        if store is not None:
            store.keep_memo(group_id, topic, memo)
        committed.extend(_committed(topic, partitions, codes, refused))
        out.append((topic, codes))
    if committed:
        ctx.event(OffsetsCommitted(group_id, tuple(committed)))
    return OffsetCommitResponse(topics=tuple(out))


def _commit_topic(
    group_id: str,
    topic: str,
    partitions: CommitPartitions,
    now_ms: int,
    expire: int | None,
    limit: int,
    memo: dict[int, OffsetCommitKey] | dict[int, OffsetCommitKey | PendingOffsetCommitKey],
    emit: Callable[[Record], None],
    share_rows: bool,
) -> tuple[tuple[tuple[int, ErrorCode], ...], bool]:
    """(the topic's answer rows, whether any partition was refused): each partition's record handed to ``emit``
    in order. ``memo``: the keys known for the topic's partitions (new ones, committed offsets' keys, are added
    to it; a transactional commit's has every partition's pending key, ``_pending_keys``). ``share_rows``:
    accepted rows may come from ``_ACCEPTED_ROWS``, grown as needed (only from the core's thread; otherwise only
    the rows it already has are shared)."""
    # metadata of at most this many characters is short enough (at most two UTF-16 code units each)
    short = limit // 2
    too_large = ErrorCode.OFFSET_METADATA_TOO_LARGE
    rows, shared = _ACCEPTED_ROWS, len(_ACCEPTED_ROWS)
    codes: list[tuple[int, ErrorCode]] = []
    answer = codes.append
    recall = memo.get
    refused = False
    for partition, offset, leader_epoch, given in commit_rows(partitions):
        metadata = given or ""
        if len(metadata) > short and _utf16_length(metadata) > limit:
            answer((partition, too_large))
            refused = True
            continue
        key = recall(partition)
        if key is None:
            key = OffsetCommitKey(group_id, topic, partition)
            memo[partition] = key
        emit(Record(key, OffsetCommitValue(offset, leader_epoch, metadata, now_ms, expire)))
        if 0 <= partition < shared:
            answer(rows[partition])
        elif share_rows:
            answer(_accepted_row(partition))
            shared = len(rows)
        else:
            answer((partition, ErrorCode.NONE))
    return tuple(codes), refused


def _committed(
    topic: str, partitions: CommitPartitions, codes: tuple[tuple[int, ErrorCode], ...], refused: bool
) -> Iterable[tuple[str, int, int]]:
    """The event's ``(topic, partition, offset)`` of each partition accepted, for the caller to collect (made in C
    when all were)."""
    if refused:
        ok = ErrorCode.NONE
        accepted = zip(commit_rows(partitions), codes, strict=True)
        return ((topic, row[0], row[1]) for row, (_, code) in accepted if code is ok)
    return zip(repeat(topic), *commit_offsets(partitions))


def _accepted_row(partition: int) -> tuple[int, ErrorCode]:
    """``(partition, NONE)``, from ``_ACCEPTED_ROWS`` (grown to it first) when the partition number is small enough
    to be shared."""
    rows = _ACCEPTED_ROWS
    if not 0 <= partition < _SHARED_ROWS:
        return (partition, ErrorCode.NONE)
    if partition >= len(rows):
        rows.extend((p, ErrorCode.NONE) for p in range(len(rows), partition + 1))
    return rows[partition]


def _utf16_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units, which Kafka compares with ``offset.metadata.max.bytes``
    despite the setting's name. At most two per character, so a caller asks only when ``2 * len(text)`` is over
    the limit."""
    return len(text.encode("utf-16-le")) // 2


def _refused(topics: tuple[tuple[str, CommitPartitions], ...], code: ErrorCode) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=tuple((t, tuple((p, code) for p in partition_numbers(parts))) for t, parts in topics)
    )


def txn_offset_commit(
    ctx: Ctx, groups: Groups, req: TxnOffsetCommitRequest, planned: Sequence[PlannedTopic | None] = ()
) -> OffsetCommitResponse:
    """TxnOffsetCommit: the offsets are validated like a commit (KIP-447: the member's generation or epoch,
    from version 3) and written pending, per producer, until ``complete_transaction``. Kafka's differences
    for a transactional commit: a group that does not exist and a generation >= 0 is ILLEGAL_GENERATION, a
    stale member epoch is ILLEGAL_GENERATION too, and neither an anonymous commit to a group with members
    nor one during CompletingRebalance is refused. Each partition is checked and its pending record built as
    ``offset_commit`` does; ``planned``: topic ``i``'s ``PlannedTopic`` made ahead for this producer, if any."""
    as_commit = OffsetCommitRequest(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id,
        topics=req.topics,
        transactional=True,
    )
    try:
        group = groups.get(req.group_id)
        if group is None and req.generation_id >= 0:
            raise ApiError(ErrorCode.ILLEGAL_GENERATION)
        try:
            _group_for_commit(ctx, groups, as_commit)
        except ApiError as exc:
            if exc.code is ErrorCode.STALE_MEMBER_EPOCH:
                raise ApiError(ErrorCode.ILLEGAL_GENERATION) from None
            raise
    except ApiError as exc:
        return _refused(req.topics, exc.code)
    group_id, producer_id = req.group_id, req.producer_id
    limit, now_ms = ctx.config.offset_metadata_max_bytes, ctx.now_ms
    records = ctx.result.records
    out: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    for index, (topic, partitions) in enumerate(req.topics):
        plan = planned[index] if index < len(planned) else None
        if plan is not None and plan.fits(group_id, topic, partitions, limit, producer_id):
            records.extend(plan.records)
            out.append((topic, plan.codes))
            continue
        keys = _pending_keys(producer_id, group_id, topic, partitions)
        codes, _ = _commit_topic(group_id, topic, partitions, now_ms, None, limit, keys, records.append, True)
        out.append((topic, codes))
    return OffsetCommitResponse(topics=tuple(out))


def complete_transaction(ctx: Ctx, store: OffsetStore, producer_id: int, committed: bool) -> None:
    """The producer's transaction ended (its marker reached the group coordinator): one marker record per group
    it committed offsets for (``new_txn_marker_record``), which on commit makes its pending offsets the
    group's committed offsets — except where an offset was committed after the transactional one —, and on
    abort drops them (``OffsetStore.apply_marker``). A producer with nothing pending writes nothing (a marker
    delivered twice changes nothing). A transaction's offsets for 10,000 partitions are one record, applied in a
    few operations of C per offset."""
    for group_id in sorted(store.pending.get(producer_id, {})):
        if committed:
            chosen = store.materialised(producer_id, group_id)
            if chosen:
                values = map(store.pending[producer_id][group_id].__getitem__, chosen)
                offsets = map(_OFFSET_OF, values)
                rows = zip(map(_TOPIC, chosen), map(_PARTITION, chosen), offsets, strict=True)
                ctx.event(OffsetsCommitted(group_id, tuple(rows)))
        ctx.emit(new_txn_marker_record(producer_id, group_id, committed))


_TOPIC, _PARTITION, _OFFSET_OF = itemgetter(0), itemgetter(1), attrgetter("offset")


def offset_fetch(groups: Groups, store: OffsetStore, req: OffsetFetchRequest) -> OffsetFetchResponse:
    group = groups.get(req.group_id)
    committed = store.of(req.group_id)
    if group is not None:
        try:
            type_of(group).validate_offset_fetch(group, req)
        except ApiError as exc:
            if exc.code is not ErrorCode.GROUP_ID_NOT_FOUND:
                raise
            committed = {}  # the group has no offsets to show (Kafka: a dead group)
    else:
        committed = {}
    wanted: dict[str, list[int]] = {}
    if req.topics is None:
        for topic, keys in groupby(sorted(committed), itemgetter(0)):
            wanted[topic] = [partition for _, partition in keys]
    else:
        for topic, partitions in req.topics:
            wanted.setdefault(topic, []).extend(partitions)
    topics = []
    unstable = req.require_stable and store.has_pending(req.group_id)
    # each row made by ``tuple.__new__`` (in C: the named tuple's own constructor is a Python function), as the
    # answer to a fetch of every partition of a large assignment is 10,000 of them in one step
    row, none = tuple.__new__, ErrorCode.NONE
    get = committed.get
    for topic, numbers in wanted.items():
        rows: list[FetchedOffset] = []
        add = rows.append
        for p in numbers:
            value = get((topic, p))
            if unstable and store.is_pending(req.group_id, (topic, p)):
                add(FetchedOffset(partition=p, error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                add(row(FetchedOffset, (p, NO_OFFSET, NO_LEADER_EPOCH, "", none)))
            else:
                add(row(FetchedOffset, (p, value.offset, value.leader_epoch, value.metadata, none)))
        topics.append((topic, tuple(rows)))
    return OffsetFetchResponse(group_id=req.group_id, topics=tuple(topics))


def offset_delete(ctx: Ctx, groups: Groups, store: OffsetStore, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    """OffsetDelete (KIP-496): the offsets of topics the group does not subscribe to are deleted; those of
    a subscribed topic are refused with GROUP_SUBSCRIBED_TO_TOPIC, a partition the cluster does not have
    with UNKNOWN_TOPIC_OR_PARTITION. A partition with no committed offset is answered NONE (Kafka)."""
    if not req.group_id:
        raise ApiError(ErrorCode.INVALID_GROUP_ID)
    group = groups.get(req.group_id)
    if group is None:
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND)
    kind = type_of(group)
    kind.validate_offset_delete(group)
    subscribed = kind.subscribed_topics(group, groups.image)
    committed = store.of(req.group_id)
    image = groups.image
    topics: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    deleted: dict[tuple[str, int], None] = {}  # (in order; a partition named twice is deleted once)
    unknown, refused, done = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.NONE
    for topic, partitions in req.topics:
        known = image.by_name.get(topic)
        codes: list[tuple[int, ErrorCode]] = []
        for partition in partitions:
            if known is None or not 0 <= partition < known.partitions:
                codes.append((partition, unknown))
            elif subscribed is None or topic in subscribed:
                codes.append((partition, refused))
            else:
                where = (topic, partition)
                if (where in committed or store.is_pending(req.group_id, where)) and where not in deleted:
                    ctx.emit(new_offset_tombstone(req.group_id, topic, partition))
                    deleted[where] = None
                codes.append((partition, done))
        topics.append((topic, tuple(codes)))
    if deleted:
        ctx.event(OffsetsDeleted(req.group_id, tuple(deleted)))
    return OffsetDeleteResponse(topics=tuple(topics))


def expire_offsets(ctx: Ctx, groups: Groups, store: OffsetStore, retention_ms: int) -> None:
    """Kafka's periodic cleanup: tombstones for expired offsets (never those of a topic the group
    subscribes to; when an offset starts ageing is its group type's rule), then the empty groups left
    with no offsets are deleted."""
    now_ms = ctx.now_ms
    image = groups.image
    for group_id in sorted(set(store.offsets) | set(groups)):
        group = groups.get(group_id)
        kind = type_of(group) if group is not None else None
        keep = kind.subscribed_topics(group, image) if kind is not None else frozenset()
        remaining = 0
        for (topic, partition), value in sorted(store.of(group_id).items()):
            base = kind.offset_expiry_base(group, value) if kind is not None else value.commit_timestamp_ms
            if base is None or keep is None or topic in keep:
                remaining += 1
                continue
            deadline = value.expire_timestamp_ms if value.expire_timestamp_ms is not None else base + retention_ms
            if now_ms >= deadline:
                ctx.emit(new_offset_tombstone(group_id, topic, partition))
            else:
                remaining += 1
        if kind is not None and remaining == 0 and kind.is_empty(group) and not store.has_pending(group_id):
            kind.delete(ctx, groups, group)
