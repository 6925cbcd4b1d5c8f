"""Records encoded ahead of their write (``storage/encoded_ahead.py``): a batch's payloads are always exactly its
records' encodings, in order, whether they were encoded ahead, forgotten or never added; those encoded ahead are
not encoded again; the store stays within its capacity, forgetting the oldest first; and a coordinator log
written from records encoded ahead reads back the very records."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.records.builders import new_offset_commit_record
from regroup.records.model import OffsetCommitValue
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.encoded_ahead import EncodedAhead
from regroup.storage.record_log import FsyncPolicy


@dataclass(eq=False)
class Item:
    value: int


class CountingEncoder:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, item: Item) -> bytes:
        self.calls += 1
        return b"%d" % item.value


def test_records_encoded_ahead_are_taken_not_encoded_again() -> None:
    encoder = CountingEncoder()
    ahead = EncodedAhead(encoder)
    planned = [Item(i) for i in range(5)]
    ahead.add(planned)
    assert encoder.calls == 5 and len(ahead) == 5
    other = Item(99)  # never encoded ahead
    assert ahead.payloads([planned[3], other, planned[0]]) == [b"3", b"99", b"0"]
    assert encoder.calls == 6 and len(ahead) == 3  # (taken ones are forgotten)
    # an equal record that is not the same object is encoded on its own
    assert ahead.payloads([Item(1)]) == [b"1"] and encoder.calls == 7 and len(ahead) == 3


def test_past_its_capacity_the_oldest_are_forgotten_and_encoded_when_written() -> None:
    encoder = CountingEncoder()
    ahead = EncodedAhead(encoder, capacity=3)
    items = [Item(i) for i in range(5)]
    ahead.add(items[:2])
    ahead.add(items[2:])
    assert len(ahead) == 3
    calls = encoder.calls
    assert ahead.payloads(items) == [b"0", b"1", b"2", b"3", b"4"]
    assert encoder.calls == calls + 2  # items 0 and 1 were forgotten
    assert len(ahead) == 0


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.booleans(), st.lists(st.integers(0, 30), max_size=8)),
        max_size=20,
    ),
    capacity=st.integers(1, 12),
)
def test_payloads_are_always_the_records_encodings(steps: list[tuple[bool, list[int]]], capacity: int) -> None:
    pool = [Item(i) for i in range(31)]
    ahead = EncodedAhead(CountingEncoder(), capacity=capacity)
    for is_add, picks in steps:
        records = [pool[i] for i in picks]
        if is_add:
            ahead.add(records)
        else:
            assert ahead.payloads(records) == [b"%d" % r.value for r in records]
        assert len(ahead) <= capacity


def test_threads_adding_beside_the_writer() -> None:
    """Planners add on their threads while the writer takes: every batch's payloads are its encodings."""
    ahead = EncodedAhead(CountingEncoder(), capacity=500)
    batches = [[Item(b * 1000 + i) for i in range(200)] for b in range(40)]
    ready = [threading.Event() for _ in batches]

    def plan(first: int) -> None:
        for index in range(first, len(batches), 2):
            ahead.add(batches[index])
            ready[index].set()

    planners = [threading.Thread(target=plan, args=(first,)) for first in (0, 1)]
    for planner in planners:
        planner.start()
    for index, batch in enumerate(batches):
        assert ready[index].wait(10)
        assert ahead.payloads(batch) == [b"%d" % item.value for item in batch]
    for planner in planners:
        planner.join(10)
    assert len(ahead) <= 500


def test_a_log_written_from_records_encoded_ahead_reads_them_back(tmp_path: Path) -> None:
    value = OffsetCommitValue(offset=7, leader_epoch=-1, metadata="m", commit_timestamp_ms=1, expire_timestamp_ms=None)
    planned = [new_offset_commit_record("g", "t", p, value) for p in range(50)]
    log = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    log.encode_ahead(planned[10:])
    assert len(log.ahead) == 40
    log.write(planned)
    log.append(planned[:3])
    assert len(log.ahead) == 0
    log.close()
    reopened = CoordinatorLog.open(tmp_path, fsync=FsyncPolicy.NEVER)
    assert list(reopened.records()) == [*planned, *planned[:3]]
    reopened.close()
