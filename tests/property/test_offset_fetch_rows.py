"""OffsetFetch's rows against a straightforward reference.

``offsets.offset_fetch`` builds each partition's row with ``tuple.__new__`` (a ``FetchedOffset`` is a named tuple,
10,000 of them in one step for a fetch of a large assignment) and groups an all-partitions fetch by topic with
``groupby`` over the sorted keys. For random committed and pending (transactional) offsets, and fetches of every
partition or of named ones (unknown topics and partitions among them), with and without ``require_stable``, the
answer equals one built partition by partition with the keyword constructor from the store's tables."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.errors import ErrorCode
from regroup.protocol.offsets import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommit,
    TxnOffsetCommitRequest,
)

TOPICS = ("a", "b", "c")
PARTITION = st.integers(0, 5)
COMMIT = st.tuples(
    st.just("commit"),
    st.lists(
        st.tuples(st.sampled_from(TOPICS), PARTITION, st.integers(0, 99), st.sampled_from(["", "m", None])), max_size=12
    ),
)
TXN = st.tuples(st.just("txn"), st.lists(st.tuples(st.sampled_from(TOPICS), PARTITION, st.integers(0, 99)), max_size=4))
FETCH = st.tuples(
    st.just("fetch"),
    st.one_of(
        st.none(),
        st.lists(st.tuples(st.sampled_from((*TOPICS, "unknown")), st.lists(PARTITION, max_size=4)), max_size=3),
    ),
    st.booleans(),
)


def reference(coordinator: GroupCoordinator, req: OffsetFetchRequest) -> OffsetFetchResponse:
    committed = coordinator.offsets.of(req.group_id)
    pending = {where for by_group in coordinator.offsets.pending.values() for where in by_group.get(req.group_id, {})}
    if req.topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            wanted.setdefault(topic, []).append(partition)
        asked = list(wanted.items())
    else:
        merged: dict[str, list[int]] = {}
        for topic, partitions in req.topics:
            merged.setdefault(topic, []).extend(partitions)
        asked = list(merged.items())
    unstable = req.require_stable and bool(pending)
    topics = []
    for topic, numbers in asked:
        rows = []
        for p in numbers:
            value = committed.get((topic, p))
            if unstable and (topic, p) in pending:
                rows.append(FetchedOffset(partition=p, error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                rows.append(FetchedOffset(partition=p))
            else:
                rows.append(
                    FetchedOffset(
                        partition=p, offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata
                    )
                )
        topics.append((topic, tuple(rows)))
    return OffsetFetchResponse(group_id=req.group_id, topics=tuple(topics))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.one_of(COMMIT, TXN, FETCH, FETCH), min_size=1, max_size=12))
def test_fetched_rows_are_the_reference_rows(ops: list[Any]) -> None:
    coordinator = GroupCoordinator()
    now = 1_000
    for key, op in enumerate(ops):
        now += 10
        if op[0] == "commit":
            topics: dict[str, list[PartitionCommit]] = {}
            for topic, partition, offset, metadata in op[1]:
                topics.setdefault(topic, []).append(PartitionCommit(partition, offset, -1, metadata))
            req = OffsetCommitRequest(group_id="g", topics=tuple((t, tuple(ps)) for t, ps in topics.items()))
            coordinator.offset_commit(req, key, now)
        elif op[0] == "txn":
            rows = tuple((t, (PartitionCommit(p, o),)) for t, p, o in op[1])
            txn = TxnOffsetCommitRequest(
                transactional_id="t", group_id="g", producer_id=9, producer_epoch=0, topics=rows
            )
            coordinator.txn_offset_commit(txn, key, now)
        else:
            _, asked, stable = op
            topics_asked = None if asked is None else tuple((t, tuple(ps)) for t, ps in asked)
            fetch = OffsetFetchRequest(group_id="g", topics=topics_asked, require_stable=stable)
            response = coordinator.offset_fetch(fetch, key, now).response_for(key)
            assert response == reference(coordinator, fetch)
            for _, rows in response.topics:
                assert all(type(row) is FetchedOffset and len(row) == 5 for row in rows)
